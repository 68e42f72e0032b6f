#!/usr/bin/env python3
"""tests/eu_stack_compare.py EU_STACK_OUT LUASPY_JSON

Compare `eu-stack -p PID` with `luaspy dump --native-only --json -p PID`
thread by thread: the function names, innermost first, must be equal
(unnamed frames compare as '?', symbol versions like @GLIBC_2.34 are
dropped). Prints the first difference and exits 1; exits 0 when equal; exits 2
when eu-stack gave up early at an unnamed frame and luaspy's stack
extends it (the caller retries)."""
import json
import re
import sys


def parse_eu(text):
    threads, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"TID (\d+):", line)
        if m:
            cur = threads.setdefault(int(m.group(1)), [])
            continue
        m = re.match(r"#\d+\s+0x[0-9a-f]+\s*(.*)$", line)
        if m and cur is not None:
            name = m.group(1).strip() or "?"
            name = name.split("@")[0] if not name.startswith("@") else name
            name = name.split(" - ")[0].strip()
            cur.append(name)
    return threads


def parse_ls(text):
    d = json.loads(text)
    out = {}
    for t in d["threads"]:
        names = []
        for f in t["frames"]:
            n = f["name"]
            mod = f.get("module")
            if n.startswith("[") or (mod and n.startswith(mod + "+0x")):
                n = "?"  # unnamed: "[jit]", "module+0xoffset"
            names.append(n)
        out[t["tid"]] = names
    return out


def main():
    eu = parse_eu(open(sys.argv[1]).read())
    ls = parse_ls(open(sys.argv[2]).read())
    if not eu:
        print("eu-stack printed no threads")
        return 1
    if set(eu) != set(ls):
        print("thread sets differ: eu-stack %s, luaspy %s" % (sorted(eu), sorted(ls)))
        return 1
    for tid in sorted(eu):
        a, b = eu[tid], ls[tid]
        if a != b and len(a) < len(b) and b[:len(a)] == a and a[-1] == "?":
            print("thread %d: eu-stack stopped after %d frames at an unnamed frame; luaspy went on: %s"
                  % (tid, len(a), " <- ".join(b[:8])))
            return 2
        if a != b:
            print("thread %d differs:\n  eu-stack: %s\n  luaspy:   %s" % (tid, a, b))
            return 1
        print("thread %d: %d frames equal (%s)" % (tid, len(a), " <- ".join(a[:6])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
