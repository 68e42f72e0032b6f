#!/usr/bin/env python3
"""luajit_dumps.py: take several `luaspy dump --json` of a running target and
check the shapes found (used by tests/luajit-*.test).

  luajit_dumps.py --pid PID --count N [--script FILE.lua] [--expect SHAPE]...
                  [--forbid NAME]... [--max-errors PCT] [--tid-any] [--show]

SHAPE is a comma-separated list of frame names, innermost first, that must
appear as a contiguous run (after collapsing repeats of the same name) in at
least one dump; a name "a|b" accepts either; "*" accepts one frame of any
name; names are shell patterns ("function <*t.lua:3>"); "name@LINE" also
requires that line. Every dump must satisfy: each Lua
frame from FILE.lua has its line inside the function's range (`local
function NAME` / `function NAME` up to its `end` at the same indent), and its
firstline equals the definition line. Exit 0 ok, 1 failure (reason printed).
"""
import argparse
import fnmatch
import random
import time
import json
import re
import subprocess
import sys
import time


def func_ranges(path):
    """name -> (first, last) for functions defined at line starts."""
    rng = {}
    lines = open(path).read().split("\n")
    for i, l in enumerate(lines):
        m = re.match(r"^(\s*)(?:local\s+)?function\s+([\w.:]+)\s*\(", l)
        if not m:
            continue
        ind, name = m.group(1), m.group(2)
        if re.search(r"\bend\s*$", l) and l.strip().startswith(("function", "local function")) and l.count("end") and i + 1 < len(lines) and not lines[i + 1].startswith(ind + " "):
            rng[name] = (i + 1, i + 1)
            continue
        for j in range(i + 1, len(lines)):
            if lines[j].rstrip() == ind + "end":
                rng[name] = (i + 1, j + 1)
                break
    return rng


def collapse(names):
    out = []
    for n in names:
        if not out or out[-1] != n:
            out.append(n)
    return out


def match_at(frames, shape, i):
    for k, want in enumerate(shape):
        if i + k >= len(frames):
            return False
        name, line = frames[i + k]
        w, _, wl = want.partition("@")
        if not any(fnmatch.fnmatchcase(name or "", alt) for alt in w.split("|")):
            return False
        if wl and str(line) != wl:
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--luaspy", default="./luaspy")
    ap.add_argument("--pid", required=True)
    ap.add_argument("--count", type=int, default=20,
                    help="dumps to take (with --expect: at most, stopping once every shape was seen)")
    ap.add_argument("--min-count", type=int, default=20)
    ap.add_argument("--script")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--forbid", action="append", default=[])
    ap.add_argument("--max-errors", type=float, default=5.0)
    ap.add_argument("--show", action="store_true")
    ap.add_argument("--max-noline", type=float, default=10.0,
                    help="percent of dumps whose innermost Lua frame may lack a line")
    ap.add_argument("--lua-only", action="store_true",
                    help="match shapes over Lua and C-function frames only")
    ap.add_argument("--all-threads", action="store_true")
    ap.add_argument("--no-lua-ok", action="store_true",
                    help="dumps without Lua frames are fine (idle workers)")
    ap.add_argument("--need-lua", type=int, default=1,
                    help="minimum number of dumps with Lua frames")
    a = ap.parse_args()
    rng = func_ranges(a.script) if a.script else {}
    base = a.script.rsplit("/", 1)[-1] if a.script else None
    found = {s: 0 for s in a.expect}
    noline = [0]
    errors = 0
    with_lua = 0
    bad = []
    taken = 0
    for n in range(a.count):
        # stop early only when the dumps so far pass every check: one
        # torn dump in the first four is not a 25 % error rate
        if (a.expect and n >= a.min_count and all(found.values()) and
                errors * 100 <= a.max_errors * n and with_lua >= a.need_lua):
            break
        taken += 1
        # a random pause between dumps, so that they do not alias with a
        # target that changes phase at a fixed period
        time.sleep(random.random() * 0.05)
        p = subprocess.run([a.luaspy, "dump", "--pid", str(a.pid), "--json"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            errors += 1
            if a.show:
                print("dump failed:", p.returncode, p.stderr.strip())
            continue
        try:
            d = json.loads(p.stdout)
        except ValueError:
            errors += 1
            continue
        for t in d.get("threads", []):
            if t.get("error"):
                errors += 1
                if a.show:
                    print("error:", t["error"])
                continue
            fr = t.get("frames", [])
            lua = [f for f in fr if f.get("kind") == "lua"]
            if lua:
                with_lua += 1
            names = collapse([(f.get("name"), f.get("line", 0)) for f in fr
                              if f.get("kind") in ("lua", "c", "native")])
            if a.show:
                print(" < ".join("%s:%s" % x if x[1] else x[0] for x in names
                                 if not x[0].startswith("__libc")))
            for idx, f in enumerate(lua):
                # the innermost Lua frame may have no line: stopped between
                # setting BASE and PC of a call or return (counted, rare)
                if idx == 0 and not f.get("line"):
                    noline[0] += 1
                    continue
                if base and (f.get("file") or "").endswith(base):
                    # the function is the one defined at its firstline (a
                    # tail-called function carries its caller's name)
                    nm, fl, ln = f.get("name"), f.get("firstline", 0), f.get("line", 0)
                    byfirst = {lo: (lo, hi) for lo, hi in rng.values()}
                    if fl in byfirst:
                        lo, hi = byfirst[fl]
                        if not (lo <= ln <= hi):
                            bad.append("%s at line %s, function defined at %d-%d"
                                       % (nm, ln, lo, hi))
                    elif nm in rng and not fl:
                        bad.append("%s without firstline" % nm)
            for f in fr:
                if f.get("name") in a.forbid:
                    bad.append("forbidden frame %s" % f.get("name"))
            flat = [(f.get("name"), f.get("line", 0)) for f in fr
                    if not a.lua_only or f.get("kind") in ("lua", "c")]
            names_only = collapse([x[0] for x in flat])
            # collapse runs of one name, keeping the outermost frame's line
            runs = []
            for x in flat:
                if runs and runs[-1][0] == x[0]:
                    runs[-1] = x
                else:
                    runs.append(x)
            for s in a.expect:
                shape = s.split(",")
                if any(match_at(runs, shape, i) for i in range(len(runs))):
                    found[s] += 1
        if not a.all_threads:
            pass
    total = taken
    pct = 100.0 * errors / max(total, 1)
    print("dumps %d, errors %d (%.1f%%), with Lua frames %d" % (total, errors, pct, with_lua))
    for s, c in found.items():
        print("shape %-60s found %d times" % (s, c))
    rc = 0
    if noline[0] * 100 > a.max_noline * max(total, 1):
        print("FAIL: %d of %d dumps have an innermost Lua frame without a line" % (noline[0], total))
        rc = 1
    if bad:
        print("FAIL: %d bad frames, e.g. %s" % (len(bad), "; ".join(sorted(set(bad))[:5])))
        rc = 1
    if pct > a.max_errors:
        print("FAIL: error rate %.1f%% > %.1f%%" % (pct, a.max_errors))
        rc = 1
    for s, c in found.items():
        if c == 0:
            print("FAIL: shape never seen: %s" % s)
            rc = 1
    if with_lua < a.need_lua:
        print("FAIL: only %d dumps with Lua frames" % with_lua)
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
