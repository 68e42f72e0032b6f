#!/usr/bin/env python3
# host_check.py: the record check of tests/host-*.test over folded
# stacks (root first): at least MIN samples whose innermost three frames
# are leaf <- middle <- outer of CHUNK (a file name ending), and the line
# of leaf with the most samples is LINE (the hot line).
#
#   host_check.py FOLDED CHUNK LINE [MIN]     (exit 0 pass, 1 fail)
import collections, re, sys

def main(fn, chunk, want, least):
    lines, chain = collections.Counter(), 0
    leaf = re.compile(r'leaf \(.*' + re.escape(chunk) + r':(\d+)\)$')
    for l in open(fn):
        st, _, n = l.rstrip('\n').rpartition(' ')
        fr = st.split(';')
        m = leaf.match(fr[-1])
        if not m:
            continue
        lines[int(m.group(1))] += int(n)
        if len(fr) >= 3 and fr[-2].startswith('middle (') and fr[-3].startswith('outer ('):
            chain += int(n)
    if chain < least or not lines:
        sys.exit('%d samples in leaf <- middle <- outer of %s (need %d)' % (chain, chunk, least))
    line, n = lines.most_common(1)[0]
    print('leaf <- middle <- outer: %d samples; hot line %d (%d of %d)'
          % (chain, line, n, sum(lines.values())))
    if line != want:
        sys.exit('hot line %d, expected %d' % (line, want))

if __name__ == '__main__':
    if len(sys.argv) < 4:
        sys.exit('usage: host_check.py FOLDED CHUNK LINE [MIN]')
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 30)
