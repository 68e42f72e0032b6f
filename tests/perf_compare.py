#!/usr/bin/env python3
"""perf_compare.py: compare a profile taken by the perf sampler with one
taken by --blocking (ground truth) of the same target, for the
perf-sampler-*.test scripts.

  perf_compare.py PERF.folded BLOCKING.folded [--max-bad PCT] [--need NAME...]

Each stack is reduced to its Lua frames ("name (chunk:line)" or
"name (chunk)") and the C functions between them that are named after a
module file (cfib.so...): the shape a Lua programmer reads. A shape's
caller->callee edges must each occur in the blocking profile; the samples
of perf stacks holding an edge never seen with --blocking are "bad".
Prints counts; exits 1 when bad samples exceed PCT percent (default 0.5)
of the perf samples or a --need name is missing from the perf profile."""
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

def edges(fr):
    return {(a, b) for a, b in zip(fr, fr[1:])} | ({('ROOT', fr[0])} if fr else set())

args = sys.argv[1:]
maxbad, need = 0.5, []
while len(args) > 2:
    a = args.pop(2)
    if a == '--max-bad':
        maxbad = float(args.pop(2))
    elif a == '--need':
        need.append(args.pop(2))
perf, blk = load(args[0]), load(args[1])
known = set()
for fr, n, _ in blk:
    known |= edges(fr)
total = sum(n for _, n, _ in perf)
bad = 0
worst = {}
for fr, n, st in perf:
    unk = edges(fr) - known
    if unk:
        bad += n
        e = sorted(unk)[0]
        worst[e] = worst.get(e, 0) + n
names = set()
for fr, n, _ in perf:
    names |= {re.sub(r' \(.*', '', f) for f in fr}
pct = 100.0 * bad / total if total else 100.0
print('perf samples %d, blocking samples %d, bad %d (%.2f%%)' %
      (total, sum(n for _, n, _ in blk), bad, pct))
for e, n in sorted(worst.items(), key=lambda x: -x[1])[:5]:
    print('  unseen edge %s -> %s: %d' % (e[0], e[1], n))
missing = [x for x in need if x not in names]
if missing:
    print('missing names:', ', '.join(missing))
sys.exit(1 if pct > maxbad or missing or total == 0 else 0)
