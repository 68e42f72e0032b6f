#!/usr/bin/env python3
"""perf_compare.py: compare a profile taken by the perf sampler with one
taken by --blocking (ground truth) of the same target, for the
perf-sampler-*.test scripts.

  perf_compare.py PERF.folded BLOCKING.folded [--max-bad PCT] [--need NAME...]
                  [--noise BLOCKING2.folded]

Each stack is reduced to its Lua frames ("name (chunk:line)" or
"name (chunk)") and the C functions between them that are named after a
module file (cfib.so...): the shape a Lua programmer reads. A shape's
edges, caller (with the line of its call) -> callee (its name, the line
it runs left out: that is where the sample fell), must each occur in the
blocking profile; the samples of perf stacks holding an edge never seen
with --blocking are "bad".
With --noise, a second --blocking profile is judged the same way against
the first: the share of its samples with an unseen edge is what sampling
alone gives (rare stacks, a reference of few samples on a loaded
machine), and is added to PCT. Prints counts; exits 1 when bad samples
exceed PCT percent (default 0.5) of the perf samples or a --need name is
missing from the perf profile."""
import re, sys

def frames(stack):
    out = []
    for f in stack.split(';'):
        m = re.match(r'^(.*) \(([^()]*)\)$', f)
        if not m:
            continue
        name, where = m.group(1), m.group(2)
        if re.search(r'\.lua(:\d+)?$', where) or where.endswith('.so'):
            out.append(f)
    return out

def load(path):
    prof = []
    for line in open(path):
        line = line.rstrip('\n')
        if not line:
            continue
        stack, n = line.rsplit(' ', 1)
        prof.append((frames(stack), int(n), stack))
    return prof

def callee(f):
    """a frame as a callee: its name and where, without its current line
    (a leaf's line is wherever the sample fell; a caller's is its call site)"""
    return re.sub(r':\d+\)$', ')', f)

def edges(fr):
    return {(a, callee(b)) for a, b in zip(fr, fr[1:])} | ({('ROOT', callee(fr[0]))} if fr else set())

args = sys.argv[1:]
maxbad, need, noise = 0.5, [], None
while len(args) > 2:
    a = args.pop(2)
    if a == '--max-bad':
        maxbad = float(args.pop(2))
    elif a == '--need':
        need.append(args.pop(2))
    elif a == '--noise':
        noise = args.pop(2)
perf, blk = load(args[0]), load(args[1])
known = set()
for fr, n, _ in blk:
    known |= edges(fr)

def judge(prof):
    total, bad, worst = sum(n for _, n, _ in prof), 0, {}
    for fr, n, st in prof:
        unk = edges(fr) - known
        if unk:
            bad += n
            e = sorted(unk)[0]
            worst[e] = worst.get(e, 0) + n
    return total, bad, worst

if noise:
    nt, nb, _ = judge(load(noise))
    npct = 100.0 * nb / nt if nt else 0.0
    print('noise: a second --blocking profile, %d samples, %d (%.2f%%) with an unseen edge' % (nt, nb, npct))
    maxbad += npct
total, bad, worst = judge(perf)
names = set()
for fr, n, _ in perf:
    names |= {re.sub(r' \(.*', '', f) for f in fr}
pct = 100.0 * bad / total if total else 0.0
print('perf samples %d, blocking samples %d, bad %d (%.2f%%, allowed %.2f%%)' %
      (total, sum(n for _, n, _ in blk), bad, pct, maxbad))
for e, n in sorted(worst.items(), key=lambda x: -x[1])[:5]:
    print('  unseen edge %s -> %s: %d' % (e[0], e[1], n))
missing = [x for x in need if x not in names]
if missing:
    print('missing names:', ', '.join(missing))
sys.exit(1 if (total and pct > maxbad) or missing or (total == 0 and need) else 0)
