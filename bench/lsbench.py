#!/usr/bin/env python3
"""lsbench.py: luaspy's benchmark harness (issue 7). Run by `make bench`.

  python3 bench/lsbench.py [--quick] [--only N,...] [--out DIR]

Six benchmarks, each interleaving the runs it compares (A B C A B C ...)
in one invocation, because the machine is shared and noisy; each reports
medians (and spreads) over rounds:

  1 slowdown  work done by a fib workload with luaspy at 100/1000 Hz and
              perf record -g at the same rates, relative to unprofiled
              windows of the same process (luajit, luajit -joff, lua5.4)
  2 stop      time the target is stopped per sample: luaspy --stats
              (outside) and the in-target gap meter (inside), as the
              excess over unprofiled windows; lost time per second
  3 cpu       luaspy's user+sys CPU per second at 100/1000 Hz
              (/proc/PID/schedstat over the steady state), perf alongside
  4 maxrate   highest rate with < 1 % late ticks, merged stacks and
              --lua-only --nonblocking
  5 attach    time to first sample (luaspy --stats) for a 1 GiB Lua heap
              and for the heap-scan path
  6 writers   bench/bench_out (time, output size) and per-writer peak RSS
              (bench/bench_writer, one process per format)

Every number comes from this machine at the time of the run; the table
goes to stdout and to OUT/LATEST.md (default bench/results), the raw
numbers to OUT/LATEST.json. Environment: LUASPY (binary), BENCH_QUICK=1
(same as --quick), BENCH_ROUNDS (override rounds), PERF (perf binary).
"""
import argparse
import json
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))          # srcdir/bench
BUILD = os.environ.get("BENCH_BUILDDIR", os.path.dirname(HERE))
LUASPY = os.environ.get("LUASPY", os.path.join(BUILD, "luaspy"))
PERF = os.environ.get("PERF", shutil.which("perf") or "")
MODDIR = {"jit": os.path.join(BUILD, "bench", "jit"), "54": os.path.join(BUILD, "bench", "54")}

# runtime name -> (argv prefix, module dir key)
RUNTIMES = {
    "luajit": (["luajit"], "jit"),
    "luajit -joff": (["luajit", "-joff"], "jit"),
    "lua5.4": (["lua5.4"], "54"),
}

TARGETS = {  # the targets, for the table
    "slow100": 0.01, "slow1000": 0.05, "stop_med": 20, "stop_p99": 100,
    "cpu100": 0.02, "maxrate": 5000, "attach_ms": 300, "writer_s": 1.0,
}

children = []   # every process we start, killed by pid on exit


def now_ns():
    return time.monotonic_ns()    # CLOCK_MONOTONIC, the clock lsbench.now_ns reads


def log(*a):
    print("[bench]", *a, file=sys.stderr, flush=True)


def q(v, p):
    """Quantile P (0..1) of V by nearest rank, as luaspy --stats does."""
    v = sorted(v)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(len(v) * p))]


def med(v):
    v = [x for x in v if x == x]
    return statistics.median(v) if v else float("nan")


def spawn(argv, **kw):
    p = subprocess.Popen(argv, **kw)
    children.append(p)
    return p


def stop(p):
    if p.poll() is None:
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass
    if p in children:
        children.remove(p)


def cleanup(*_):
    for p in list(children):
        stop(p)


class Target:
    """A Lua target whose stdout lines are collected with their kind."""

    def __init__(self, runtime, script, args=(), env=None):
        argv, mod = RUNTIMES[runtime]
        self.p = spawn(argv + [os.path.join(HERE, script), MODDIR[mod]] + list(args),
                       stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env)
        self.pid = self.p.pid
        self.lines = []
        self.ready = threading.Event()
        self.ready_line = None
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            if line.startswith("ready"):
                self.ready_line = line.strip()
                self.ready.set()
            else:
                self.lines.append(line)
        self.ready.set()

    def wait_ready(self, timeout=120):
        if not self.ready.wait(timeout) or self.p.poll() is not None:
            raise RuntimeError("target %s did not start" % self.p.args)

    def kill(self):
        stop(self.p)

    def work_points(self):
        pts = []
        for l in list(self.lines):
            f = l.split()
            if len(f) == 3 and f[0] == "W":
                pts.append((int(float(f[1])), float(f[2])))
        return pts


def work_at(pts, t):
    """Completed calls at time T, linear between the target's reports."""
    for i in range(1, len(pts)):
        if pts[i][0] >= t:
            (t0, c0), (t1, c1) = pts[i - 1], pts[i]
            if t < t0:
                return None
            return c0 + (c1 - c0) * (t - t0) / max(1, t1 - t0)
    return None


def work_rate(target, t0, t1):
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        pts = target.work_points()
        if pts and pts[-1][0] >= t1:
            break
        time.sleep(0.05)
    a, b = work_at(pts, t0), work_at(pts, t1)
    if a is None or b is None:
        return float("nan")
    return (b - a) / ((t1 - t0) / 1e9)


def schedstat_ns(pid):
    """On-CPU time (user+sys) of PID and all its threads, in ns."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stat_user_sys(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            s = f.read()
        f = s[s.rindex(")") + 2:].split()
        hz = os.sysconf("SC_CLK_TCK")
        return int(f[11]) / hz, int(f[12]) / hz
    except (OSError, ValueError, IndexError):
        return None


STATS_RE = {
    "stop": re.compile(r"stopped per sample \(us\): median (\d+)\s+p90 (\d+)\s+p99 (\d+)\s+max (\d+)\s+\(n=(\d+)\)"),
    "walk": re.compile(r"unwind\+walk per sample \(us\): median (\d+)\s+p90 (\d+)\s+p99 (\d+)\s+max (\d+)"),
    "late": re.compile(r"late ticks: (\d+) of (\d+)"),
    "first": re.compile(r"time to first sample \(ms\): ([\d.]+)"),
    "samples": re.compile(r"Samples: (\d+)\s+Errors: (\d+)"),
}


def parse_stats(text):
    r = {}
    m = STATS_RE["stop"].search(text)
    if m:
        r["stop"] = [int(x) for x in m.groups()]
    m = STATS_RE["walk"].search(text)
    if m:
        r["walk"] = [int(x) for x in m.groups()]
    m = STATS_RE["late"].search(text)
    if m:
        r["late"], r["ticks"] = int(m.group(1)), int(m.group(2))
    m = STATS_RE["first"].search(text)
    if m:
        r["first_ms"] = float(m.group(1))
    m = STATS_RE["samples"].search(text)
    if m:
        r["samples"], r["errors"] = int(m.group(1)), int(m.group(2))
    r["errlines"] = [l for l in text.splitlines() if l.startswith("errors:")]
    return r


class Profiler:
    """One luaspy record or perf record run against a pid, with its CPU
    read from /proc over [cpu_from, cpu_to] seconds after the start."""

    def __init__(self, kind, pid, rate, secs, tmp, extra=(), cpu_window=None):
        self.kind, self.rate, self.secs = kind, rate, secs
        self.t_start = now_ns()
        if kind == "luaspy":
            out = os.path.join(tmp, "ls.txt")
            argv = [LUASPY, "record", "-p", str(pid), "-r", str(rate), "-d", str(secs),
                    "-f", "folded", "-o", out, "--stats"] + list(extra)
        else:
            out = os.path.join(tmp, "perf.data")
            argv = [PERF, "record", "-q", "-F", str(rate), "-g", "-e", "cpu-clock",
                    "-p", str(pid), "-o", out, "--", "sleep", str(secs)]
        self.p = spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.cpu = None
        if cpu_window:
            a, b = cpu_window
            time.sleep(a)
            c0, u0 = schedstat_ns(self.p.pid), stat_user_sys(self.p.pid)
            time.sleep(b - a)
            c1, u1 = schedstat_ns(self.p.pid), stat_user_sys(self.p.pid)
            if c0 is not None and c1 is not None:
                self.cpu = {"cpu_per_s": (c1 - c0) / 1e9 / (b - a),
                            "user_per_s": (u1[0] - u0[0]) / (b - a) if u0 and u1 else None,
                            "sys_per_s": (u1[1] - u0[1]) / (b - a) if u0 and u1 else None}

    def finish(self):
        try:
            _, err = self.p.communicate(timeout=self.secs + 60)
        except subprocess.TimeoutExpired:
            stop(self.p)
            err = ""
        if self.p in children:
            children.remove(self.p)
        self.stderr = err
        self.stats = parse_stats(err) if self.kind == "luaspy" else {}
        return self


# ---------------------------------------------------------------- 1 + 3

def bench_slowdown(cfg, tmp):
    """Interleaved windows in one long-running process per runtime."""
    rates = [100, 1000]
    conds = ["off"] + ["luaspy@%d" % r for r in rates]
    if PERF and cfg["perf"]:
        conds += ["perf@%d" % r for r in rates]
    res = {"conds": conds, "runtimes": {}}
    settle, win = 0.6, cfg["win"]
    for rt in cfg["runtimes"]:
        t = Target(rt, "work.lua")
        t.wait_ready()
        time.sleep(cfg["warm"])                  # JIT warm-up, caches
        rows = {c: [] for c in conds}
        cpu = {c: [] for c in conds}
        stats = {c: [] for c in conds}
        order = list(conds)
        rnd = random.Random(7)
        for rd in range(cfg["rounds"]):
            rnd.shuffle(order)
            for c in order:
                if c == "off":
                    t0 = now_ns() + int(settle * 1e9)
                    time.sleep(settle + win)
                    rows[c].append(work_rate(t, t0, t0 + int(win * 1e9)))
                    continue
                kind, rate = c.split("@")
                pr = Profiler(kind, t.pid, int(rate), settle + win + 0.3, tmp,
                              cpu_window=(settle, settle + win))
                t0 = pr.t_start + int(settle * 1e9)
                pr.finish()
                rows[c].append(work_rate(t, t0, t0 + int(win * 1e9)))
                if pr.cpu:
                    cpu[c].append(pr.cpu)
                stats[c].append(pr.stats)
            log("slowdown %s round %d: %s" % (rt, rd + 1, "  ".join(
                "%s %.0f/s" % (c, rows[c][-1]) for c in conds)))
        t.kill()
        ratios = {c: [rows[c][i] / rows["off"][i] for i in range(cfg["rounds"])] for c in conds}
        res["runtimes"][rt] = {"rates": rows, "ratios": ratios, "cpu": cpu,
                               "stats": stats}
    return res


def bench_cpu(cfg, tmp, slow):
    """Profiler CPU per second: from benchmark 1's runs when it ran, else
    its own interleaved runs on luajit -joff."""
    res = {}
    src = slow["runtimes"] if slow else None
    if not src:
        sub = dict(cfg, runtimes=["luajit -joff"], perf=cfg["perf"])
        src = bench_slowdown(sub, tmp)["runtimes"]
    for rt, r in src.items():
        res[rt] = {}
        for c, lst in r["cpu"].items():
            if lst:
                res[rt][c] = {"cpu_per_s": med([x["cpu_per_s"] for x in lst]),
                              "user_per_s": med([x["user_per_s"] for x in lst if x["user_per_s"] is not None]),
                              "sys_per_s": med([x["sys_per_s"] for x in lst if x["sys_per_s"] is not None]),
                              "n": len(lst)}
    return res


# ---------------------------------------------------------------- 2

def gap_windows(target):
    out = []
    for l in list(target.lines):
        f = l.split()
        if len(f) >= 5 and f[0] == "G":
            gaps = [int(x) for x in f[5].split(",")] if len(f) > 5 and f[5] else []
            out.append((int(float(f[1])), int(float(f[2])), gaps))
    return out


def excess_quantiles(prof, base, prof_s, base_s):
    """Quantiles of the gaps the profiler added: the profiled gap
    histogram minus the unprofiled one scaled to the same duration."""
    edges = [1000 * (1.05 ** i) for i in range(200)]    # 1 us .. ~17 ms, 5 % bins

    def hist(v):
        h = [0.0] * len(edges)
        for x in v:
            lo, hi = 0, len(edges) - 1
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if edges[mid] <= x:
                    lo = mid
                else:
                    hi = mid - 1
            h[lo] += 1
        return h
    hp, hb = hist(prof), hist(base)
    k = prof_s / base_s if base_s else 0
    ex = [max(0.0, a - b * k) for a, b in zip(hp, hb)]
    n = sum(ex)
    if n <= 0:
        return None
    res, acc, want = {}, 0.0, [("median", 0.5), ("p90", 0.9), ("p99", 0.99), ("max", 1.0)]
    for i, c in enumerate(ex):
        acc += c
        while want and acc >= want[0][1] * n - 1e-9:
            # bin centre (geometric) in us
            res[want[0][0]] = edges[i] * 1.025 / 1000
            want.pop(0)
    if want:
        res["max"] = edges[-1] / 1000
    res["per_s"] = n / prof_s
    return res


def bench_stop(cfg, tmp):
    rates = [100, 1000]
    conds = ["off"] + ["luaspy@%d" % r for r in rates]
    res = {}
    settle, win = 0.6, cfg["win"]
    for rt in cfg["stop_runtimes"]:
        t = Target(rt, "gaps.lua", ["0.1", "1000"])
        t.wait_ready()
        time.sleep(0.5)
        spans = {c: [] for c in conds}
        stats = {c: [] for c in conds}
        order = list(conds)
        rnd = random.Random(11)
        for rd in range(cfg["rounds"]):
            rnd.shuffle(order)
            for c in order:
                if c == "off":
                    t0 = now_ns() + int(settle * 1e9)
                    time.sleep(settle + win)
                    spans[c].append((t0, t0 + int(win * 1e9)))
                    continue
                rate = int(c.split("@")[1])
                pr = Profiler("luaspy", t.pid, rate, settle + win + 0.3, tmp)
                t0 = pr.t_start + int(settle * 1e9)
                pr.finish()
                spans[c].append((t0, t0 + int(win * 1e9)))
                stats[c].append(pr.stats)
        time.sleep(0.3)
        wins = gap_windows(t)
        t.kill()
        # per round: gaps inside each condition's span (whole 0.1 s windows)
        per = {c: [] for c in conds}    # (seconds, [gaps]) per span
        for c in conds:
            for (a, b) in spans[c]:
                sel = [w for w in wins if w[0] >= a and w[1] <= b]
                secs = sum(w[1] - w[0] for w in sel) / 1e9
                per[c].append((secs, [g for w in sel for g in w[2]]))
        r = {"inside": {}, "outside": {}, "lost_ms_per_s": {}, "base_lost_ms_per_s": None}
        bs = sum(s for s, _ in per["off"])
        bg = [g for _, gl in per["off"] for g in gl]
        base_lost = [sum(gl) / 1e6 / s for s, gl in per["off"] if s > 0]
        r["base_lost_ms_per_s"] = med(base_lost)
        for c in conds[1:]:
            lost = []
            for i, (s, gl) in enumerate(per[c]):
                if s > 0 and per["off"][i][0] > 0:
                    so, go = per["off"][i]
                    lost.append(sum(gl) / 1e6 / s - sum(go) / 1e6 / so)
            r["lost_ms_per_s"][c] = med(lost)
            ps = sum(s for s, _ in per[c])
            pg = [g for _, gl in per[c] for g in gl]
            r["inside"][c] = excess_quantiles(pg, bg, ps, bs)
            st = [x["stop"] for x in stats[c] if "stop" in x]
            if st:
                r["outside"][c] = {"median": med([x[0] for x in st]), "p90": med([x[1] for x in st]),
                                   "p99": med([x[2] for x in st]), "max": max(x[3] for x in st),
                                   "walk_median": med([x["walk"][0] for x in stats[c] if "walk" in x])}
            if r["inside"][c]:
                n_samples = sum(x.get("samples", 0) for x in stats[c])
                rate = int(c.split("@")[1])
                r["inside"][c]["mean_per_sample_us"] = (med(lost) * 1000 / rate) if lost else None
        res[rt] = r
        log("stop %s: %s" % (rt, json.dumps(r["lost_ms_per_s"])))
    return res


# ---------------------------------------------------------------- 4

def bench_maxrate(cfg, tmp):
    ladder = cfg["ladder"]
    modes = {"merged": [], "--lua-only --nonblocking": ["--lua-only", "--nonblocking"]}
    res = {}
    t = Target("luajit -joff", "work.lua")
    t.wait_ready()
    time.sleep(0.5)
    for mode, extra in modes.items():
        rows = []
        for rate in ladder:
            fr = []
            for rep in range(cfg["maxrate_reps"]):
                pr = Profiler("luaspy", t.pid, rate, cfg["maxrate_secs"], tmp, extra).finish()
                st = pr.stats
                late, ticks = st.get("late", 0), st.get("ticks", 0)
                fr.append({"late": late, "ticks": ticks,
                           "late_frac": late / (late + ticks) if ticks else 1.0,
                           "errors": st.get("errors", 0), "samples": st.get("samples", 0),
                           "walk_med": st.get("walk", [None])[0]})
            lf = med([x["late_frac"] for x in fr])
            rows.append({"rate": rate, "late_frac": lf, "runs": fr})
            log("maxrate %s %d Hz: late %.2f %%" % (mode, rate, 100 * lf))
        ok = [r["rate"] for r in rows if r["late_frac"] < 0.01]
        # the highest rate such that it and every lower rate kept up
        best = 0
        for r in rows:
            if r["late_frac"] < 0.01:
                best = r["rate"]
            else:
                break
        res[mode] = {"rows": rows, "max_ok": best, "any_ok": max(ok) if ok else 0}
    t.kill()
    return res


# ---------------------------------------------------------------- 5

def bench_attach(cfg, tmp):
    res = {}
    cases = [("luajit", cfg["heap_mib"], {}, "luajit %d MiB heap" % cfg["heap_mib"]),
             ("lua5.4", cfg["heap_mib"], {}, "lua5.4 %d MiB heap" % cfg["heap_mib"]),
             ("lua5.4", cfg["heap_mib"], {"LUASPY_PUC_NOSYMS": "1"},
              "lua5.4 %d MiB heap, no symbols (heap scan)" % cfg["heap_mib"]),
             ("luajit", 1, {}, "luajit small heap"),
             ("lua5.4", 1, {"LUASPY_PUC_NOSYMS": "1"}, "lua5.4 small heap, no symbols (heap scan)")]
    targets = {}
    for rt, mib, env, label in cases:
        key = (rt, mib)
        if key not in targets:
            t0 = time.monotonic()
            targets[key] = Target(rt, "heap.lua", [str(mib)])
            targets[key].wait_ready(timeout=300)
            log("attach: %s heap %s built in %.1f s" % (rt, targets[key].ready_line,
                                                        time.monotonic() - t0))
    for rt, mib, env, label in cases:
        t = targets[(rt, mib)]
        first, wall = [], []
        for rep in range(cfg["attach_reps"]):
            e = dict(os.environ, **env)
            t0 = now_ns()
            p = spawn([LUASPY, "record", "-p", str(t.pid), "-r", "100", "-d", "0.3", "-f", "folded",
                       "-o", os.path.join(tmp, "attach.txt"), "--stats"],
                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=e)
            _, err = p.communicate(timeout=120)
            children.remove(p)
            st = parse_stats(err)
            if "first_ms" in st:
                first.append(st["first_ms"])
            wall.append((now_ns() - t0) / 1e6)
            if "first_ms" not in st:
                log("attach %s: no time to first sample in: %s" % (label, err.strip()[-300:]))
        heap_kib = float(t.ready_line.split()[1]) if t.ready_line and len(t.ready_line.split()) > 1 else None
        res[label] = {"first_ms": first, "median_ms": med(first), "max_ms": max(first) if first else None,
                      "wall_ms": wall, "heap_mib": heap_kib / 1024 if heap_kib else None}
        log("attach %s: %s" % (label, first))
    for t in targets.values():
        t.kill()
    return res


# ---------------------------------------------------------------- 6

def bench_writers(cfg, tmp):
    res = {}
    bo = os.path.join(BUILD, "bench", "bench_out")
    bw = os.path.join(BUILD, "bench", "bench_writer")
    n = cfg["stacks"]
    out = subprocess.run([bo, str(n), "50", tmp], capture_output=True, text=True, timeout=600)
    for l in out.stdout.splitlines():
        m = re.match(r"(\S+)\s+([\d.]+) s\s+peak RSS\s+(\d+) KiB\s+(\d+) bytes", l)
        if m:
            res[m.group(1)] = {"time_s": [float(m.group(2))], "size": int(m.group(4))}
        m = re.match(r"aggregate\s+([\d.]+) s\s+peak RSS\s+(\d+) KiB", l)
        if m:
            res["aggregate"] = {"time_s": [float(m.group(1))], "rss_kib": int(m.group(2))}
    # per-writer peak memory and more timings: one process per format, interleaved
    for rep in range(cfg["writer_reps"]):
        for fmt in ["flamegraph", "speedscope", "pprof", "folded"]:
            o = subprocess.run([bw, fmt, str(n), "50", tmp], capture_output=True, text=True, timeout=600)
            m = re.search(r"write ([\d.]+) s\s+base RSS (\d+) KiB\s+peak RSS (\d+) KiB\s+(\d+) bytes", o.stdout)
            if not m:
                log("bench_writer %s: %s %s" % (fmt, o.stdout, o.stderr))
                continue
            r = res.setdefault(fmt, {"time_s": []})
            r["time_s"].append(float(m.group(1)))
            r.setdefault("base_kib", []).append(int(m.group(2)))
            r.setdefault("peak_kib", []).append(int(m.group(3)))
            r["size"] = int(m.group(4))
    for fmt, r in res.items():
        r["median_s"] = med(r["time_s"])
        if "peak_kib" in r:
            r["peak_mib"] = med(r["peak_kib"]) / 1024
            r["extra_mib"] = med([p - b for p, b in zip(r["peak_kib"], r["base_kib"])]) / 1024
    log("writers: %s" % {k: round(v["median_s"], 3) for k, v in res.items()})
    return res


# ---------------------------------------------------------------- table

def fmt_ratio(v):
    return "%.3f" % v if v == v else "n/a"


def pct_slow(ratio):
    return "%+.1f %%" % ((1 - ratio) * 100) if ratio == ratio else "n/a"


def verdict(ok):
    return "meets" if ok else "**misses**"


def render(R, cfg):
    L = []
    env = R["env"]
    L.append("# luaspy benchmarks: latest run")
    L.append("")
    L.append("`%s` on %s, %s, %d CPUs; loadavg before %s, after %s; %s." % (
        env["command"], env["host"], env["kernel"], env["ncpu"], env["load_before"],
        env.get("load_after", "?"), env["date"]))
    L.append("luaspy %s; %s; %s; %s." % (env["luaspy"], env["luajit"], env["lua54"], env["perf"]))
    L.append("Settings: %s." % ", ".join("%s=%s" % (k, v) for k, v in sorted(cfg.items())
                                         if k not in ("runtimes", "stop_runtimes", "ladder")))
    L.append("")
    summ = []
    if "slowdown" in R:
        S = R["slowdown"]
        L.append("## 1. Target slowdown (work ratio profiled / unprofiled, median of %d interleaved rounds; range)" % cfg["rounds"])
        L.append("")
        L.append("| runtime | unprofiled calls/s | " + " | ".join(S["conds"][1:]) + " |")
        L.append("|---|---|" + "---|" * (len(S["conds"]) - 1))
        for rt, r in S["runtimes"].items():
            cells = []
            for c in S["conds"][1:]:
                v = r["ratios"][c]
                cells.append("%s (%.2f–%.2f)" % (fmt_ratio(med(v)), min(v), max(v)))
            L.append("| %s | %.3g | %s |" % (rt, med(r["rates"]["off"]), " | ".join(cells)))
        L.append("")
        for rt, r in S["runtimes"].items():
            for rate, tgt in ((100, TARGETS["slow100"]), (1000, TARGETS["slow1000"])):
                v = med(r["ratios"]["luaspy@%d" % rate])
                summ.append(("slowdown %s @%d Hz" % (rt, rate), "≤ %g %%" % (tgt * 100),
                             pct_slow(v), verdict(1 - v <= tgt)))
    if "stop" in R:
        L.append("## 2. Time stopped per sample (µs)")
        L.append("")
        L.append("Outside: luaspy --stats (waitpid saw the stop → detach), median over runs of each run's quantile; max of maxima. "
                 "Inside: gaps the target's own CLOCK_MONOTONIC spin loop saw, minus the gaps of interleaved unprofiled windows "
                 "(histogram difference); lost = gap time per second profiled minus unprofiled.")
        L.append("")
        L.append("| runtime | rate | outside median | p90 | p99 | max | inside median | p90 | p99 | max | extra gaps/s | lost ms/s | walk median (not stopped) |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for rt, r in R["stop"].items():
            for c in ("luaspy@100", "luaspy@1000"):
                o = r["outside"].get(c, {})
                i = r["inside"].get(c) or {}

                def g(d, k, f="%.0f"):
                    return f % d[k] if d.get(k) is not None else "n/a"
                L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %s |" % (
                    rt, c.split("@")[1], g(o, "median"), g(o, "p90"), g(o, "p99"), g(o, "max"),
                    g(i, "median"), g(i, "p90"), g(i, "p99"), g(i, "max"), g(i, "per_s"),
                    r["lost_ms_per_s"].get(c, float("nan")), g(o, "walk_median")))
            L.append("")
            L.append("Unprofiled %s windows lost %.1f ms/s to gaps > 1 µs anyway (other load, interrupts)." % (
                rt, r["base_lost_ms_per_s"]))
            L.append("")
            for c in ("luaspy@1000",):
                o = r["outside"].get(c, {})
                i = r["inside"].get(c) or {}
                if o:
                    summ.append(("stop median %s (outside / inside)" % rt, "≤ 20 µs",
                                 "%.0f / %s µs" % (o["median"], "%.0f" % i["median"] if i.get("median") else "n/a"),
                                 verdict(o["median"] <= 20 and (i.get("median") or 0) <= 20)))
                    summ.append(("stop p99 %s (outside / inside)" % rt, "≤ 100 µs",
                                 "%.0f / %s µs" % (o["p99"], "%.0f" % i["p99"] if i.get("p99") else "n/a"),
                                 verdict(o["p99"] <= 100 and (i.get("p99") or 0) <= 100)))
    if "cpu" in R:
        L.append("## 3. Profiler CPU (user+sys seconds per second of the profiler process, steady state)")
        L.append("")
        L.append("| runtime | profiler | CPU % of one core | user % | sys % |")
        L.append("|---|---|---|---|---|")
        for rt, r in R["cpu"].items():
            for c, v in r.items():
                L.append("| %s | %s | %.2f | %.1f | %.1f |" % (rt, c, v["cpu_per_s"] * 100,
                                                             (v["user_per_s"] or 0) * 100, (v["sys_per_s"] or 0) * 100))
        L.append("")
        L.append("CPU % from /proc/PID/schedstat (ns on CPU); user/sys from /proc/PID/stat (10 ms ticks, coarse).")
        L.append("")
        for rt, r in R["cpu"].items():
            if "luaspy@100" in r:
                v = r["luaspy@100"]["cpu_per_s"]
                summ.append(("profiler CPU %s @100 Hz" % rt, "≤ 2 %", "%.2f %%" % (v * 100), verdict(v <= 0.02)))
    if "maxrate" in R:
        L.append("## 4. Max sustained rate (luajit -joff fib; < 1 % late ticks; median of %d runs of %g s per rate)" % (
            cfg["maxrate_reps"], cfg["maxrate_secs"]))
        L.append("")
        L.append("| mode | " + " | ".join("%d Hz" % r for r in cfg["ladder"]) + " | max sustained |")
        L.append("|---|" + "---|" * (len(cfg["ladder"]) + 1))
        for mode, r in R["maxrate"].items():
            L.append("| %s | %s | **%d Hz** |" % (mode, " | ".join("%.1f %%" % (100 * x["late_frac"]) for x in r["rows"]),
                                                 r["max_ok"]))
        L.append("")
        L.append("Cells: late ticks / scheduled ticks. luaspy's -r is capped at 10 000 Hz.")
        L.append("")
        m = R["maxrate"]["merged"]["max_ok"]
        summ.append(("max sustained rate, merged", "≥ 5000 Hz", "%d Hz" % m, verdict(m >= 5000)))
    if "attach" in R:
        L.append("## 5. Attach: time to first sample (luaspy --stats, from session start; median, max of %d)" % cfg["attach_reps"])
        L.append("")
        L.append("| target | heap | median ms | max ms | luaspy wall incl. 0.3 s sampling, ms |")
        L.append("|---|---|---|---|---|")
        for label, r in R["attach"].items():
            L.append("| %s | %s | %s | %s | %.0f |" % (label, "%.0f MiB" % r["heap_mib"] if r["heap_mib"] else "?",
                                                     "%.1f" % r["median_ms"] if r["median_ms"] == r["median_ms"] else "n/a",
                                                     "%.1f" % r["max_ms"] if r["max_ms"] else "n/a", med(r["wall_ms"])))
            if "MiB heap" in label and "no symbols" not in label:
                v = r["median_ms"]
                summ.append(("attach, %s" % label, "≤ 300 ms", "%.0f ms" % v if v == v else "n/a",
                             verdict(v == v and v <= 300)))
        L.append("")
    if "writers" in R:
        W = R["writers"]
        L.append("## 6. Writers (%d distinct stacks × 50 frames)" % cfg["stacks"])
        L.append("")
        L.append("| format | write s (median) | peak RSS MiB | writer's own MiB | output bytes |")
        L.append("|---|---|---|---|---|")
        for fmt in ("flamegraph", "speedscope", "pprof", "folded"):
            if fmt in W:
                r = W[fmt]
                L.append("| %s | %.3f | %s | %s | %s |" % (fmt, r["median_s"],
                                                        "%.0f" % r["peak_mib"] if "peak_mib" in r else "n/a",
                                                        "%.0f" % r["extra_mib"] if "extra_mib" in r else "n/a",
                                                        "{:,}".format(r.get("size", 0))))
        if "aggregate" in W:
            L.append("")
            L.append("Building the profile (aggregate) took %.3f s." % W["aggregate"]["median_s"])
        L.append("")
        for fmt in ("flamegraph", "speedscope", "pprof"):
            if fmt in W:
                v = W[fmt]["median_s"]
                summ.append(("writer %s" % fmt, "≤ 1 s", "%.2f s" % v, verdict(v <= 1.0)))
    L.append("## Summary against the targets")
    L.append("")
    L.append("| what | target | measured | |")
    L.append("|---|---|---|---|")
    for s in summ:
        L.append("| %s | %s | %s | %s |" % s)
    L.append("")
    return "\n".join(L)


def tool_version(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (r.stdout + r.stderr).strip().splitlines()[0]
    except Exception:
        return "?"


def main():
    ap = argparse.ArgumentParser(description="luaspy benchmarks (issue 7)")
    ap.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1")
    ap.add_argument("--only", default=os.environ.get("BENCH_ONLY", "1,2,3,4,5,6"))
    ap.add_argument("--out", default=os.environ.get("BENCH_OUT", os.path.join(HERE, "results")))
    ap.add_argument("--no-perf", action="store_true")
    a = ap.parse_args()
    only = {int(x) for x in a.only.split(",") if x}
    if a.quick:
        cfg = dict(rounds=2, win=1.0, warm=1.0, maxrate_secs=1.5, maxrate_reps=1,
                   ladder=[1000, 5000, 10000], heap_mib=256, attach_reps=2, stacks=100000,
                   writer_reps=1, runtimes=["luajit", "luajit -joff", "lua5.4"],
                   stop_runtimes=["luajit -joff", "lua5.4"], perf=1)
    else:
        cfg = dict(rounds=5, win=2.0, warm=2.0, maxrate_secs=2.0, maxrate_reps=3,
                   ladder=[1000, 2000, 3000, 5000, 7000, 10000], heap_mib=1024, attach_reps=3,
                   stacks=100000, writer_reps=3, runtimes=["luajit", "luajit -joff", "lua5.4"],
                   stop_runtimes=["luajit -joff", "lua5.4"], perf=1)
    if os.environ.get("BENCH_ROUNDS"):
        cfg["rounds"] = int(os.environ["BENCH_ROUNDS"])
    if a.no_perf or not PERF:
        cfg["perf"] = 0
    signal.signal(signal.SIGTERM, lambda *_: (cleanup(), sys.exit(143)))
    os.makedirs(a.out, exist_ok=True)
    R = {"env": {
        "command": os.environ.get("BENCH_COMMAND", "make bench" + (" BENCH_QUICK=1" if a.quick else "")),
        "host": platform.node(), "kernel": platform.release(), "ncpu": os.cpu_count(),
        "load_before": open("/proc/loadavg").read().split()[:3],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "luaspy": subprocess.run(["git", "-C", HERE, "describe", "--always", "--dirty"],
                                 capture_output=True, text=True).stdout.strip() or "?",
        "luajit": tool_version(["luajit", "-v"]), "lua54": tool_version(["lua5.4", "-v"]),
        "perf": tool_version([PERF, "--version"]) if PERF else "no perf"}}
    t_all = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="lsbench.")
    try:
        if 1 in only:
            t0 = time.monotonic()
            R["slowdown"] = bench_slowdown(cfg, tmp)
            log("1 slowdown: %.0f s" % (time.monotonic() - t0))
        if 2 in only:
            t0 = time.monotonic()
            R["stop"] = bench_stop(cfg, tmp)
            log("2 stop: %.0f s" % (time.monotonic() - t0))
        if 3 in only:
            t0 = time.monotonic()
            R["cpu"] = bench_cpu(cfg, tmp, R.get("slowdown"))
            log("3 cpu: %.0f s" % (time.monotonic() - t0))
        if 4 in only:
            t0 = time.monotonic()
            R["maxrate"] = bench_maxrate(cfg, tmp)
            log("4 maxrate: %.0f s" % (time.monotonic() - t0))
        if 5 in only:
            t0 = time.monotonic()
            R["attach"] = bench_attach(cfg, tmp)
            log("5 attach: %.0f s" % (time.monotonic() - t0))
        if 6 in only:
            t0 = time.monotonic()
            R["writers"] = bench_writers(cfg, tmp)
            log("6 writers: %.0f s" % (time.monotonic() - t0))
    finally:
        cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    R["env"]["load_after"] = open("/proc/loadavg").read().split()[:3]
    R["env"]["seconds"] = round(time.monotonic() - t_all)
    R["env"]["load_before"] = " ".join(R["env"]["load_before"])
    R["env"]["load_after"] = " ".join(R["env"]["load_after"])
    text = render(R, cfg) + "\nTotal run time %d s.\n" % R["env"]["seconds"]
    with open(os.path.join(a.out, "LATEST.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "LATEST.json"), "w") as f:
        json.dump({"cfg": cfg, "results": R}, f, indent=1, default=str)
    print(text)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        cleanup()
        sys.exit(130)
