#!/usr/bin/env python3
# puc_check.py: assertions over `luaspy dump --json` outputs for the PUC
# Lua tests (tests/puc-*.test).
#
#   puc_check.py [--file NAME] [--ranges A-B,...] [--need PAT [--min N]]... DUMP.json...
#
# PAT is a chain of frame matchers, leaf to root, separated by '|', that
# must appear contiguously among the non-native (Lua and C) frames of one
# thread: "lua:NAME@LINE", "lua:NAME", "c:NAME" (NAME: fnmatch globs
# separated by ',', any may match). --seq PAT: the matchers (also "native:NAME") must appear in
# order, not necessarily adjacent, among all frames of one thread. Each --need must hold in at least --min dumps (the --min given
# after it; default 1). With --file, every Lua frame of that chunk must
# lie inside its function: a frame with firstline F needs a range F-B in
# --ranges with F <= line <= B; main chunk frames need 1 <= line <= B of
# the range 0-B.
# Unparsable dumps count as failures. Exit 0 pass, 1 fail (reasons on stderr).
import fnmatch, json, sys

def matcher(s):
    kind, _, rest = s.partition(':')
    name, _, line = rest.rpartition('@') if '@' in rest else (rest, '', '')
    return kind, name, int(line) if line else None

def frame_ok(m, f):
    kind, name, line = m
    if f.get('kind') != kind or not any(fnmatch.fnmatchcase(f.get('name', ''), n)
                                        for n in name.split(',')):
        return False
    return line is None or f.get('line') == line

def main(argv):
    needs, ranges, chunk, files = [], {}, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ('--need', '--seq'):
            needs.append([[matcher(x) for x in argv[i + 1].split('|')], 1, argv[i + 1],
                          a == '--seq'])
            i += 2
        elif a == '--min':
            needs[-1][1] = int(argv[i + 1])
            i += 2
        elif a == '--ranges':
            for r in argv[i + 1].split(','):
                lo, hi = r.split('-')
                ranges[int(lo)] = int(hi)
            i += 2
        elif a == '--file':
            chunk = argv[i + 1]
            i += 2
        else:
            files.append(a)
            i += 1
    ok = True
    dumps = []
    for fn in files:
        try:
            with open(fn) as fh:
                dumps.append(json.load(fh))
        except Exception as e:
            print('%s: unparsable dump: %s' % (fn, e), file=sys.stderr)
            ok = False
    maxline = ranges.get(0, 10**9)
    hits = [0] * len(needs)
    for d in dumps:
        for t in d.get('threads', []):
            frames = t.get('frames', [])
            nn = [f for f in frames if f.get('kind') in ('lua', 'c')]
            for f in frames:
                if chunk and f.get('kind') == 'lua' and f.get('file', '').endswith(chunk):
                    fl, ln = f.get('firstline', 0), f.get('line', 0)
                    hi = ranges.get(fl, -1) if fl else maxline
                    if not (max(fl, 1) <= ln <= hi):
                        print('line %s of %s outside its function (firstline %s)'
                              % (ln, f.get('name'), fl), file=sys.stderr)
                        ok = False
            for k, (pat, _, _, seq) in enumerate(needs):
                if seq:
                    j = 0
                    for f in frames:
                        if j < len(pat) and frame_ok(pat[j], f):
                            j += 1
                    hits[k] += j == len(pat)
                    continue
                for s in range(0, len(nn) - len(pat) + 1):
                    if all(frame_ok(pat[j], nn[s + j]) for j in range(len(pat))):
                        hits[k] += 1
                        break
    for k, (pat, mn, text, _) in enumerate(needs):
        if hits[k] < mn:
            print('needed in >= %d of %d dumps, found in %d: %s' % (mn, len(dumps), hits[k], text),
                  file=sys.stderr)
            ok = False
    if not ok and dumps:
        d = dumps[-1]
        for t in d.get('threads', [])[:1]:
            print('last dump, thread %s:' % t.get('tid'), file=sys.stderr)
            for f in t.get('frames', []):
                if f.get('kind') != 'native' or f.get('name') not in ('fib_rec',):
                    print('   %s %s %s:%s' % (f.get('kind'), f.get('name'), f.get('file', ''),
                                             f.get('line', '')), file=sys.stderr)
    return 0 if ok else 1

sys.exit(main(sys.argv[1:]))
