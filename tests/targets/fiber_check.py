#!/usr/bin/env python3
# fiber_check.py: assertions for tests/native-fiber-*.test over `luaspy
# dump --json` outputs and `luaspy record -f folded` stacks of a host
# that runs tests/targets/fiber_work.lua on fiber stacks.
#
#   fiber_check.py dump BODY DUMP.json...   (exit 0 pass, 1 fail)
#   fiber_check.py folded BODY FOLDED
#
# BODY is the host's native function that runs the chunk on the fiber
# (it calls lua_pcall). dump: every thread stack holding BODY ends with
# the root "[fiber stack]" at most 3 frames below BODY (the fiber's entry
# code, nothing invented past the base), with native_truncated false; in
# at least 3 dumps its Lua frames are leaf <- middle <- outer <- main
# chunk on the lines of fiber_work.lua. folded: every stack through BODY
# starts with "[fiber stack]" and at least 20 samples hold the Lua chain.
import json, sys

CHAIN = [('leaf', 8), ('middle', 13), ('outer', 18), ('main chunk', 23)]

def check_dumps(body, files):
    good = 0
    for fn in files:
        try:
            d = json.load(open(fn))
        except Exception as e:
            sys.exit('%s: unparsable dump: %s' % (fn, e))
        for t in d.get('threads', []):
            fr = t.get('frames', [])
            names = [f.get('name') for f in fr]
            if body not in names:
                continue
            b = names.index(body)
            if fr[-1].get('kind') != 'root' or names[-1] != '[fiber stack]':
                sys.exit('%s: thread %d: stack through %s ends in %s, not [fiber stack]: %s'
                         % (fn, t['tid'], body, names[-1], names))
            if len(fr) - 1 - b > 3:
                sys.exit('%s: %d frames between %s and [fiber stack]: %s'
                         % (fn, len(fr) - 2 - b, body, names[b:]))
            if t.get('native_truncated'):
                sys.exit('%s: a fiber stack marked cut: %s' % (fn, names))
            lua = [(f['name'], f.get('line')) for f in fr if f.get('kind') == 'lua']
            if lua == CHAIN:
                good += 1
    if good < 3:
        sys.exit('the Lua chain on a clean fiber stack in only %d of %d dumps' % (good, len(files)))
    print('fiber stacks end at [fiber stack]; Lua chain whole in %d of %d dumps' % (good, len(files)))

def check_folded(body, fn):
    n = bad = 0
    for line in open(fn):
        stack, _, cnt = line.rstrip('\n').rpartition(' ')
        fr = stack.split(';')
        if not any(f == body or f.startswith(body + ' ') for f in fr):
            continue
        if fr[0] != '[fiber stack]':
            bad += int(cnt)
            print('not rooted at [fiber stack]: %s' % line.strip(), file=sys.stderr)
            continue
        want = [c[0] for c in reversed(CHAIN)]
        lua = [f.split(' (')[0] for f in fr if '(' in f and 'fiber_work.lua' in f]
        if lua[-4:] == want or lua == want:
            n += int(cnt)
    if bad:
        sys.exit('%d samples through %s not rooted at [fiber stack]' % (bad, body))
    if n < 20:
        sys.exit('only %d samples with the Lua chain on the fiber stack' % n)
    print('%d samples with the Lua chain under [fiber stack]' % n)

if __name__ == '__main__':
    if len(sys.argv) < 4 or sys.argv[1] not in ('dump', 'folded'):
        sys.exit('usage: fiber_check.py dump|folded BODY FILE...')
    if sys.argv[1] == 'dump':
        check_dumps(sys.argv[2], sys.argv[3:])
    else:
        check_folded(sys.argv[2], sys.argv[3])
