#!/usr/bin/env python3
"""run.py: the differential stack fuzzer's harness (tests/stackgen).

For each runtime found it builds the C module sgmod (sgmod.c) against that
runtime's headers, generates programs with gen.py (seed S, S+1, ...), runs
each under the runtime and, at every stop, compares the true stack the
program recorded (lua_getstack/lua_getinfo, across resuming coroutines)
with `luaspy dump --pid N --json`, frame by frame:

  a Lua function is keyed by its prototype, chunk + linedefined; a C
  function by its address (lua_tocfunction against the dump's addr) or,
  where the dump has none, its name. The keyed sequences are aligned;
  frames only in the truth are "missing-*", only in the dump "extra-*";
  aligned Lua frames must agree on the current line ("line"). Names are
  compared apart and reported as data, never as mismatches. A kind gets
  "@coroutine" when it touches a coroutine boundary and "ffi-" when the
  stop sat in a JIT-compiled hot loop (FFI stop).

Output: per runtime programs, stops, clean stops, mismatches by kind, and
for every mismatch the seed and how to replay it:
  run.py --seed S --runtime lua5.4 --keep
Exit status: 0 when every mismatch is in the allow-list (--known), 1 when
not, 77 when no runtime could be run, 99 on a harness error.
"""
import argparse
import collections
import difflib
import fnmatch
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name, argv, pkg-config package for the headers, gen.py family
RUNTIMES = [
    ("luajit", ["luajit"], "luajit", "luajit"),
    ("luajit-joff", ["luajit", "-joff"], "luajit", "luajit"),
    ("lua5.1", ["lua5.1"], "lua5.1", "puc"),
    ("lua5.2", ["lua5.2"], "lua5.2", "puc"),
    ("lua5.3", ["lua5.3"], "lua5.3", "puc"),
    ("lua5.4", ["lua5.4"], "lua5.4", "puc"),
    ("tarantool", ["tarantool"], "luajit", "luajit"),
]


class HarnessError(Exception):
    pass


def log(*a):
    print(*a, flush=True)


def build_module(pc, outdir, modules=None):
    """sgmod.so for the headers of pkg-config package PC: the one make
    built (MODULES/PC/sgmod.so, see Makefile.am) when there is one, else
    one built here under OUTDIR; returns its path or raises HarnessError
    with the reason"""
    if modules:
        built = os.path.join(modules, pc, "sgmod.so")
        if os.path.exists(built):
            return os.path.abspath(built)
    so = os.path.join(outdir, "sgmod.so")
    if os.path.exists(so):
        return so
    try:
        cflags = subprocess.run(["pkg-config", "--cflags", pc], check=True,
                                capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        raise HarnessError("no headers for %s (pkg-config %s)" % (pc, pc))
    os.makedirs(outdir, exist_ok=True)
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-O1", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls",
           "-fno-inline", "-shared", "-fPIC"] + cflags + \
          ["-o", so, os.path.join(HERE, "sgmod.c")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise HarnessError("cannot build sgmod for %s: %s" % (pc, r.stderr.strip()[-300:]))
    return so


# ---- truth and dump parsing

class Frame:
    __slots__ = ("kind", "chunk", "linedefined", "line", "name", "addr", "tno", "tail")

    def __init__(self, kind, chunk=None, linedefined=0, line=0, name=None, addr=0,
                 tno=0, tail=False):
        self.kind, self.chunk, self.linedefined, self.line = kind, chunk, linedefined, line
        self.name, self.addr, self.tno, self.tail = name, addr, tno, tail

    def key(self):
        # C frames align with any C frame; their identity is checked after
        if self.kind == "lua":
            return ("lua", self.chunk, self.linedefined)
        return ("c",)

    def __str__(self):
        if self.kind == "lua":
            return "%s@%s:%d line %d" % (self.name, self.chunk, self.linedefined, self.line)
        return "[C %s 0x%x]" % (self.name, self.addr or 0)


def parse_truth(lines, ffistops):
    """the recorded levels as Frames, innermost first; 5.1-style "tail"
    pseudo levels are dropped (noted on the next frame)"""
    head = lines[0].split()
    frames = []
    tail_pending = False
    for ln in lines[1:]:
        p = ln.split("\t")
        if len(p) != 9:
            raise HarnessError("bad truth line %r" % ln)
        tno, what, namewhat, name, src, ld, cur, cf, tail = p
        if what == "tail":
            tail_pending = True
            continue
        name = None if name == "-" else name
        if what == "C":
            addr = int(cf, 16) if cf not in ("(nil)", "0", "0x0") else 0
            f = Frame("c", name=name, addr=addr, tno=int(tno))
        else:
            f = Frame("lua", chunk=src, linedefined=int(ld), line=int(cur), name=name,
                      tno=int(tno), tail=tail == "1")
            if what == "main":
                f.name = "main chunk"
        if frames and tail_pending:
            frames[-1].tail = True
        tail_pending = False
        frames.append(f)
    ffi = None
    if head[0] == "FFISTOP":
        ffi = ffistops.get(head[2])
        if ffi is None or not frames:
            raise HarnessError("FFI stop %s unknown" % head[2])
        frames[0].line = ffi["line"]
        top = [Frame("lua", chunk=t["chunk"], linedefined=t["linedefined"],
                     line=t["line"]) for t in ffi["top"]]
        frames = top + frames
    return frames, ffi is not None


def parse_dump(d, pid):
    """(frames, error) of the thread tid == pid: Lua and C frames only,
    innermost first"""
    th = [t for t in d.get("threads", []) if t.get("tid") == pid]
    if not th:
        return [], "no thread %d in the dump" % pid
    t = th[0]
    out = []
    for f in t.get("frames", []):
        k = f.get("kind")
        if k == "lua":
            out.append(Frame("lua", chunk=f.get("file"), linedefined=f.get("firstline", 0),
                             line=f.get("line", 0), name=f.get("name")))
        elif k == "c":
            a = f.get("addr")
            out.append(Frame("c", name=f.get("name"), addr=int(a, 16) if a else 0))
    return out, t.get("error")


class Symbols:
    """address -> (module basename, function symbol) of one stopped
    process, from /proc/PID/maps and nm (symtab, else dynsym)"""
    cache = {}

    def __init__(self, pid):
        self.maps = []
        try:
            for ln in open("/proc/%d/maps" % pid):
                p = ln.split()
                if len(p) >= 6 and "x" in p[1] and p[5].startswith("/"):
                    lo, hi = (int(x, 16) for x in p[0].split("-"))
                    self.maps.append((lo, hi, int(p[2], 16), p[5]))
        except OSError:
            pass

    @staticmethod
    def is_exec(path):
        try:
            with open(path, "rb") as f:
                h = f.read(18)
            return len(h) == 18 and h[16] == 2 and h[17] == 0
        except OSError:
            return False

    @classmethod
    def syms(cls, path):
        if path not in cls.cache:
            out = []
            for opt in ([], ["-D"]):
                r = subprocess.run(["nm", "--defined-only"] + opt + [path],
                                   capture_output=True, text=True)
                for ln in r.stdout.splitlines():
                    p = ln.split()
                    if len(p) == 3 and p[1] in "tTwW":
                        out.append((int(p[0], 16), p[2]))
                if out:
                    break
            out.sort()
            cls.cache[path] = out
        return cls.cache[path]

    def lookup(self, addr):
        if not addr:
            return None
        for lo, hi, off, path in self.maps:
            if lo <= addr < hi:
                # a non-PIE executable (ET_EXEC) is linked at its addresses;
                # PIE and shared objects map text at p_vaddr == p_offset
                va = addr if self.is_exec(path) else addr - lo + off
                best = None
                for a, n in self.syms(path):
                    if a > va:
                        break
                    best = n
                return (os.path.basename(path), best) if best else None
        return None


def same_c(t, s, syms, names):
    """is dump C frame S the truth's C frame T? name notes go to NAMES"""
    if t.addr and s.addr == t.addr:
        return True
    ts = syms.lookup(t.addr)
    if ts and (s.name == ts[1] or syms.lookup(s.addr) == ts):
        return True
    if t.addr and s.name and ("0x%x" % t.addr) in s.name:
        names.append(("C %s" % (ts[1] if ts else t.name), s.name, "C function 0x%x" % t.addr))
        return True
    if not t.addr:
        # a LuaJIT fast function: lua_tocfunction gives no address
        if s.name != t.name:
            names.append(("fast function %s" % t.name, s.name, "builtin"))
        return True
    return False


def compare(truth, spy, is_ffi, syms, protos):
    """list of (kind, detail) mismatches and list of name differences;
    appends ((chunk, linedefined), truth name, dump name) of every aligned
    Lua frame to PROTOS"""
    kinds = []
    names = []
    pre = "ffi-" if is_ffi else ""
    if is_ffi and spy and spy[0].kind == "c" and (not truth or truth[0].kind == "lua"):
        # the interpreter's frame for the FFI call itself (no trace): it has
        # no level in the truth, which was recorded before the call
        names.append(("FFI call", spy[0].name, "ffi"))
        spy = spy[1:]
    tk = [f.key() for f in truth]
    sk = [f.key() for f in spy]

    def boundary(i1, i2):
        # does truth range [i1, i2) touch a change of coroutine?
        lo, hi = max(i1 - 1, 0), min(i2, len(truth) - 1)
        return any(truth[j].tno != truth[j + 1].tno for j in range(lo, hi))

    def what(fs):
        return "+".join(sorted(set(f.kind for f in fs)))

    sm = difflib.SequenceMatcher(None, tk, sk, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            for i, (a, b) in enumerate(zip(truth[i1:i2], spy[j1:j2])):
                if a.kind == "lua":
                    if a.line > 0 and a.line != b.line:
                        bad = not b.line or b.line < a.linedefined or b.line > 1000000
                        kinds.append((pre + ("line-zero" if not b.line else
                                             "line-garbage" if bad else "line"),
                                      "%s: dump says line %s" % (a, b.line)))
                    if a.name and b.name and a.name != b.name:
                        names.append((a.name, b.name, "%s:%d" % (a.chunk, a.linedefined)))
                    protos.append(((a.chunk, a.linedefined), a.name, b.name))
                elif not same_c(a, b, syms, names):
                    co = "@coroutine" if boundary(i1 + i, i1 + i + 1) else ""
                    kinds.append((pre + "wrong-c" + co, "truth %s (%s), dump %s" % (
                        a, syms.lookup(a.addr), b)))
            continue
        co = "@coroutine" if boundary(i1, i2) else ""
        t, s = truth[i1:i2], spy[j1:j2]
        if op == "replace" and all(x.kind == "lua" and y.kind == "lua" and x.chunk == y.chunk
                                   for x, y in zip(t, s)) and len(t) == len(s):
            kinds.append((pre + "wrong-function" + co, "truth %s, dump %s" % (
                " ".join(map(str, t)), " ".join(map(str, s)))))
            continue
        if t:
            kinds.append((pre + "missing-" + what(t) + co,
                          "truth frames %d..%d not in dump: %s" % (
                              i1, i2 - 1, " ".join(map(str, t[:6])))))
        if s:
            kinds.append((pre + "extra-" + what(s) + co,
                          "dump frames %d..%d not in truth: %s" % (
                              j1, j2 - 1, " ".join(map(str, s[:6])))))
    if len(truth) > 1000 and len(spy) < len(truth):
        # the dump keeps ~1024 frames: what it lacks is "truncated-deep";
        # anything else it got wrong is still reported
        kinds = [k for k in kinds if "missing-" not in k[0]]
        kinds.append((pre + "truncated-deep", "truth %d frames, dump %d" % (
            len(truth), len(spy))))
    return kinds, names


# ---- running one program

def read_record(fd, buf, deadline):
    """one record (list of lines, without END) from FD; None at EOF"""
    while True:
        if b"END\n" in buf[0]:
            rec, rest = buf[0].split(b"END\n", 1)
            buf[0] = rest
            return rec.decode("utf-8", "replace").rstrip("\n").split("\n")
        left = deadline - time.monotonic()
        if left <= 0:
            raise HarnessError("timed out waiting for a stop")
        r, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not r:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            return None
        buf[0] += chunk


class Stats:
    def __init__(self):
        self.programs = 0
        self.stops = 0
        self.clean = 0
        self.kinds = collections.Counter()
        self.names = collections.Counter()
        self.failures = []      # (seed, kind, detail, stopno, dir)
        self.errors = []        # harness-level problems
        # (seed, chunk, linedefined) -> (truth names, dump names) counters
        self.protos = collections.defaultdict(
            lambda: (collections.Counter(), collections.Counter()))


def run_program(rt, seed, args, so, workdir, st):
    name, argv, _pc, family = rt
    pdir = os.path.join(workdir, name, "seed%d" % seed)
    shutil.rmtree(pdir, ignore_errors=True)
    if args.prog:
        # a hand-written reproducer: it requires sgmod itself (see README)
        os.makedirs(pdir)
        shutil.copy(args.prog, os.path.join(pdir, "prog.lua"))
        side = os.path.splitext(args.prog)[0] + ".ffistops.json"
        if os.path.exists(side):
            shutil.copy(side, os.path.join(pdir, "ffistops.json"))
        else:
            with open(os.path.join(pdir, "ffistops.json"), "w") as f:
                f.write("{}\n")
    else:
        subprocess.run([sys.executable, os.path.join(HERE, "gen.py"), "--seed", str(seed),
                        "--family", family, "--out", pdir, "--nodes", str(args.nodes)],
                       check=True)
    ffistops = json.load(open(os.path.join(pdir, "ffistops.json")))
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    env = dict(os.environ, SG_OUT_FD=str(out_w), SG_IN_FD=str(in_r),
               SG_MAX_STOPS=str(args.stops), SG_CPATH=os.path.dirname(so) + "/?.so",
               SG_SO=so)
    errf = open(os.path.join(pdir, "stderr.txt"), "w")
    p = subprocess.Popen(argv + ["prog.lua"], cwd=pdir, env=env, pass_fds=(out_w, in_r),
                         stdin=subprocess.DEVNULL, stdout=errf, stderr=errf)
    os.close(out_w)
    os.close(in_r)
    st.programs += 1
    buf = [b""]
    deadline = time.monotonic() + args.program_timeout
    nstop = 0
    try:
        while True:
            rec = read_record(out_r, buf, deadline)
            if rec is None:
                break
            nstop += 1
            truth, is_ffi = parse_truth(rec, ffistops)
            vg = ["valgrind", "-q", "--error-exitcode=42"] if args.valgrind else []
            dump = subprocess.run(vg + [args.luaspy, "dump", "--pid", str(p.pid), "--json"],
                                  capture_output=True, text=True, timeout=300)
            st.stops += 1
            if vg and dump.returncode == 42:
                kinds = [("valgrind-error", dump.stderr.strip()[-1500:])]
                names = []
            elif dump.returncode < 0:
                kinds = [("dump-crash(%s)" % signal.Signals(-dump.returncode).name,
                          "luaspy killed by signal %d" % -dump.returncode)]
                names = []
            elif dump.returncode != 0:
                kinds = [("dump-failed", "exit %d: %s" % (dump.returncode,
                                                          dump.stderr.strip()[:200]))]
                names = []
            else:
                spy, err = parse_dump(json.loads(dump.stdout), p.pid)
                if err:
                    kinds = [("walk-error(%s)" % "-".join(err.split()[:3]), err)]
                    names = []
                else:
                    protos = []
                    kinds, names = compare(truth, spy, is_ffi, Symbols(p.pid), protos)
                    for key, tn, sn in protos:
                        st.protos[(seed,) + key][0][tn or "?"] += 1
                        st.protos[(seed,) + key][1][sn or "?"] += 1
            if args.keep:
                with open(os.path.join(pdir, "stop%d.truth" % nstop), "w") as f:
                    f.write("\n".join(rec) + "\n")
                with open(os.path.join(pdir, "stop%d.json" % nstop), "w") as f:
                    f.write(dump.stdout)
            for nm in names:
                st.names[nm] += 1
            seen = set()
            for k, detail in kinds:
                if k in seen:
                    continue
                seen.add(k)
                st.kinds[k] += 1
                st.failures.append((seed, k, detail, nstop, pdir))
            if not kinds:
                st.clean += 1
            os.write(in_w, b"x")
        rc = p.wait(timeout=max(1, deadline - time.monotonic()))
        if rc != 0:
            st.errors.append("%s seed %d: program exited %d: %s" % (
                name, seed, rc, open(os.path.join(pdir, "stderr.txt")).read().strip()[-300:]))
    except (HarnessError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
        st.errors.append("%s seed %d: %s" % (name, seed, e))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(out_r)
        os.close(in_w)
        errf.close()
    if not args.keep and not any(f[0] == seed for f in st.failures):
        shutil.rmtree(pdir, ignore_errors=True)


def load_known(path):
    """allow-list rows: RUNTIME-GLOB KIND-GLOB reason..."""
    rows = []
    if path and os.path.exists(path):
        for ln in open(path):
            ln = ln.strip()
            if not ln or ln.startswith("#"):
                continue
            p = ln.split(None, 2)
            if len(p) < 3:
                raise HarnessError("known.txt: a row needs runtime, kind and reason: %r" % ln)
            rows.append(p)
    return rows


def is_known(rows, runtime, kind):
    return any(fnmatch.fnmatch(runtime, r[0]) and fnmatch.fnmatch(kind, r[1]) for r in rows)


def main():
    ap = argparse.ArgumentParser(description="differential stack fuzzer for luaspy")
    ap.add_argument("--seed", type=int, default=None, help="first seed (default: from the time)")
    ap.add_argument("--programs", type=int, default=None,
                    help="programs per runtime (default 1 with --seed, else 20)")
    ap.add_argument("--stops", type=int, default=8, help="stops per program at most")
    ap.add_argument("--nodes", type=int, default=20, help="functions per program at most")
    ap.add_argument("--runtime", action="append", help="only these runtimes (repeatable)")
    ap.add_argument("--luaspy", default=os.environ.get("LUASPY", "./luaspy"))
    ap.add_argument("--known", default=os.path.join(HERE, "known.txt"))
    ap.add_argument("--keep", action="store_true", help="keep program dirs and dumps")
    ap.add_argument("--valgrind", action="store_true",
                    help="run luaspy under valgrind; its reports are mismatches")
    ap.add_argument("--prog", help="run this Lua file instead of generated programs")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--modules", default=None,
                    help="directory with PKG/sgmod.so built by make (else built under the workdir)")
    ap.add_argument("--program-timeout", type=float, default=120)
    ap.add_argument("--names", type=int, default=6,
                    help="name differences and multi-name prototypes printed per runtime")
    ap.add_argument("--max-print", type=int, default=40,
                    help="mismatch lines printed per runtime")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = int(time.time()) % 1000000
        if args.programs is None:
            args.programs = 20
    if args.programs is None:
        args.programs = 1
    args.luaspy = os.path.abspath(args.luaspy)
    if not os.access(args.luaspy, os.X_OK):
        log("run.py: luaspy not found at %s" % args.luaspy)
        return 99
    known = load_known(args.known)
    workdir = args.workdir or tempfile.mkdtemp(prefix="stackgen.")
    log("stackgen: seed %d, %d programs x <= %d stops per runtime, workdir %s" % (
        args.seed, args.programs, args.stops, workdir))
    ran = 0
    unknown = 0
    total = collections.Counter()
    for rt in RUNTIMES:
        name, argv = rt[0], rt[1]
        if args.runtime and name not in args.runtime:
            continue
        if not shutil.which(argv[0]):
            log("%-12s skipped: %s is not installed" % (name, argv[0]))
            continue
        try:
            so = build_module(rt[2], os.path.join(workdir, "build", rt[2]), args.modules)
        except HarnessError as e:
            log("%-12s skipped: %s" % (name, e))
            continue
        ran += 1
        st = Stats()
        for i in range(args.programs):
            run_program(rt, args.seed + i, args, so, workdir, st)
        total["programs"] += st.programs
        total["stops"] += st.stops
        total["clean"] += st.clean
        log("%-12s programs %d, stops %d, clean %d, mismatches %d%s" % (
            name, st.programs, st.stops, st.clean, sum(st.kinds.values()),
            "".join(" [%s %d]" % kv for kv in sorted(st.kinds.items()))))
        printed = 0
        for seed, k, detail, nstop, pdir in st.failures:
            kn = is_known(known, name, k)
            if not kn:
                unknown += 1
            if printed < args.max_print:
                log("  %s %s seed %d stop %d: %s\n      replay: run.py %s "
                    "--runtime %s --keep%s%s" % (
                        "known" if kn else "MISMATCH", k, seed, nstop, detail[:400],
                        "--prog " + args.prog if args.prog else "--seed %d" % seed,
                        name, " --stops %d" % args.stops if args.stops != 8 else "",
                        " (kept in %s)" % pdir if args.keep else ""))
                printed += 1
        for e in st.errors:
            log("  ERROR %s" % e)
            unknown += 1
        if st.names:
            log("  name differences (truth -> dump, prototype): %d kinds" % len(st.names))
            for (a, b, proto), c in st.names.most_common(args.names):
                log("    %-24s -> %-28s %s x%d" % (a, b, proto, c))
        # one function, one name (issue 13): prototypes the dump showed
        # under more than one name within one process
        multi = [(k, v) for k, v in st.protos.items() if len(v[1]) > 1]
        log("  prototypes seen %d, shown under more than one name %d" % (
            len(st.protos), len(multi)))
        for (sd, ch, ld), (tn, sn) in multi[:args.names]:
            log("    seed %d %s:%d dump names %s; getinfo names %s" % (
                sd, ch, ld, dict(sn), dict(tn)))
    if not args.keep and not args.workdir and unknown == 0:
        shutil.rmtree(workdir, ignore_errors=True)
    log("stackgen: %d runtimes, %d programs, %d stops, %d clean, %d not allow-listed" % (
        ran, total["programs"], total["stops"], total["clean"], unknown))
    if ran == 0:
        return 77
    return 1 if unknown else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except HarnessError as e:
        print("run.py: %s" % e, file=sys.stderr)
        sys.exit(99)
