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
# BENCH_PERF_SAMPLER=0 leaves luaspy's perf_event sampler out of benchmark 1
PERF_SAMPLER = os.environ.get("BENCH_PERF_SAMPLER", "1") != "0"
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
    """On-CPU time (user+sys) of PID and all its threads, in ns.
    /proc/PID/schedstat is the main thread's alone: luaspy's stopper
    thread (and perf's own threads) would not be counted, so this sums
    /proc/PID/task/*/schedstat (threads that exit between two readings
    drop out; luaspy's and perf's live as long as the run)."""
    try:
        tot = 0
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                    tot += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        return tot
    except OSError:
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
    "perf": re.compile(r"perf records: (\d+) read, (\d+) lost \(ring full\), (\d+) throttled"),
    "age": re.compile(r"sample age when walked \(us\): median (\d+)\s+p90 (\d+)\s+p99 (\d+)\s+max (\d+)"),
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
    m = STATS_RE["perf"].search(text)
    if m:
        r["perf_read"], r["perf_lost"], r["perf_throttled"] = [int(x) for x in m.groups()]
    m = STATS_RE["age"].search(text)
    if m:
        r["age"] = [int(x) for x in m.groups()]
    r["errlines"] = [l for l in text.splitlines() if l.startswith("errors:")]
    return r


class Profiler:
    """One luaspy record or perf record run against a pid (started at
    construction, not waited for)."""

    def __init__(self, kind, pid, rate, secs, tmp, extra=(), env=None):
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
        self.p = spawn(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, **env) if env else None)
        self.pid = self.p.pid

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


def schedstat3(pid):
    """(on-CPU ns, runqueue wait ns) of PID's main thread."""
    try:
        with open("/proc/%d/schedstat" % pid) as f:
            v = f.read().split()
        return int(v[0]), int(v[1])
    except (OSError, ValueError, IndexError):
        return None


def sleep_until(t_ns):
    d = (t_ns - now_ns()) / 1e9
    if d > 0:
        time.sleep(d)


def window(target_pid, t0, t1, prof_pid=None):
    """Sleep through [T0, T1] (monotonic ns), reading the target's and the
    profiler's scheduler counters at both ends."""
    sleep_until(t0)
    a_t, a_p, a_u = schedstat3(target_pid), schedstat_ns(prof_pid) if prof_pid else None, \
        stat_user_sys(prof_pid) if prof_pid else None
    r0 = now_ns()
    sleep_until(t1)
    b_t, b_p, b_u = schedstat3(target_pid), schedstat_ns(prof_pid) if prof_pid else None, \
        stat_user_sys(prof_pid) if prof_pid else None
    r1 = now_ns()
    secs = (r1 - r0) / 1e9
    w = {"t0": t0, "t1": t1, "secs": secs}
    if a_t and b_t:
        w["target_cpu_s"] = (b_t[0] - a_t[0]) / 1e9
        w["run_delay_s"] = (b_t[1] - a_t[1]) / 1e9
        # neither running nor runnable: for a target that never sleeps,
        # the time it spent stopped (ptrace) -- whatever else ran meanwhile
        w["stopped_s"] = secs - w["target_cpu_s"] - w["run_delay_s"]
    if a_p is not None and b_p is not None:
        w["cpu"] = {"cpu_per_s": (b_p - a_p) / 1e9 / secs,
                    "user_per_s": (b_u[0] - a_u[0]) / secs if a_u and b_u else None,
                    "sys_per_s": (b_u[1] - a_u[1]) / secs if a_u and b_u else None}
    return w


SETTLE = 0.6     # s from starting a profiler to the start of its window


def run_cond(cond, pid, tmp, win):
    """One window of condition COND ("off", "luaspy@100", "perf@1000",
    "luaspy@5000/--lua-only"); returns the window with stats."""
    if cond == "off":
        t0 = now_ns()
        return window(pid, t0, t0 + int(win * 1e9))
    kind, rest = cond.split("@")
    rate, _, extra = rest.partition("/")
    toks = extra.split() if extra else []
    env = dict(t.split("=", 1) for t in toks if "=" in t and not t.startswith("-"))
    pr = Profiler(kind, pid, int(rate), SETTLE + win + 0.2, tmp, [t for t in toks if t not in
                                                                   ["%s=%s" % kv for kv in env.items()]], env)
    t0 = pr.t_start + int(SETTLE * 1e9)
    w = window(pid, t0, t0 + int(win * 1e9), pr.pid)
    pr.finish()
    w["stats"] = pr.stats
    return w


def interleave(conds, rounds, seed):
    """off c1 off c2 ... off, cond order shuffled per round: every profiled
    window has an unprofiled one right before and right after it."""
    rnd = random.Random(seed)
    seq = []
    for rd in range(rounds):
        order = [c for c in conds if c != "off"]
        rnd.shuffle(order)
        for c in order:
            seq.append((rd, "off"))
            seq.append((rd, c))
    seq.append((rounds - 1, "off"))
    return seq


def paired(seq, wins, cond, f):
    """F(window) of COND over the mean F of its neighbouring off windows."""
    out = []
    for i, (rd, c) in enumerate(seq):
        if c == cond and 0 < i < len(seq) - 1:
            a, b = f(wins[i - 1]), f(wins[i + 1])
            base = (a + b) / 2
            out.append(f(wins[i]) / base if base else float("nan"))
    return out


# ---------------------------------------------------------------- 1 + 3

def bench_slowdown(cfg, tmp):
    """Interleaved windows in one long-running process per runtime."""
    rates = [100, 1000]
    conds = ["off"] + ["luaspy@%d" % r for r in rates]
    # luaspy's perf_event sampler (--sampler perf), when the kernel allows it
    if PERF_SAMPLER:
        conds += ["luaspy@%d/--sampler perf" % r for r in rates]
    if PERF and cfg["perf"]:
        conds += ["perf@%d" % r for r in rates]
    res = {"conds": conds, "runtimes": {}}
    win = cfg["win"]
    for rt in cfg["runtimes"]:
        t = Target(rt, "work.lua")
        t.wait_ready()
        time.sleep(cfg["warm"])                  # JIT warm-up, caches
        seq = interleave(conds, cfg["rounds"], 7)
        wins = []
        for rd, c in seq:
            w = run_cond(c, t.pid, tmp, win)
            wins.append(w)
        time.sleep(0.2)
        for w in wins:
            w["rate"] = work_rate(t, w["t0"], w["t1"])
            avail = w["secs"] - w.get("run_delay_s", 0)
            w["rate_avail"] = w["rate"] * w["secs"] / avail if avail > 0 else float("nan")
        t.kill()
        r = {"ratios": {}, "ratios_avail": {}, "cpu": {}, "stats": {}, "rates": {}}
        for c in conds:
            sel = [w for (rd, cc), w in zip(seq, wins) if cc == c]
            r["rates"][c] = [w["rate"] for w in sel]
            r["cpu"][c] = [w["cpu"] for w in sel if "cpu" in w]
            r["stats"][c] = [w["stats"] for w in sel if "stats" in w]
            if c != "off":
                r["ratios"][c] = paired(seq, wins, c, lambda w: w["rate"])
                r["ratios_avail"][c] = paired(seq, wins, c, lambda w: w["rate_avail"])
        r["run_delay_off"] = med([w.get("run_delay_s", 0) / w["secs"] for (rd, c), w in zip(seq, wins) if c == "off"])
        res["runtimes"][rt] = r
        log("slowdown %s: %s" % (rt, "  ".join("%s %.3f/%.3f" % (c, med(r["ratios"][c]), med(r["ratios_avail"][c]))
                                                for c in conds[1:])))
    return res


def bench_cpu(cfg, tmp, slow):
    """Profiler CPU per second: from benchmark 1's runs when it ran, else
    its own interleaved runs on luajit -joff."""
    res = {}
    src = slow["runtimes"] if slow else None
    if not src:
        sub = dict(cfg, runtimes=["luajit -joff"])
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
    """The gap meter's windows: (start ns, end ns, stop gaps, other gaps)."""
    out = []
    for l in list(target.lines):
        f = l.split()
        if len(f) == 9 and f[0] == "G":
            lst = [[int(x) for x in f[i].split(",")] if f[i] != "-" else [] for i in (7, 8)]
            out.append((int(float(f[1])), int(float(f[2])), lst[0], lst[1]))
    return out


def bench_stop(cfg, tmp):
    """Inside: the gap meter's stop gaps (gaps with a voluntary context
    switch, i.e. ptrace stops; preemption by other load is told apart).
    Outside: luaspy --stats. Kernel: schedstat's not-running-not-runnable."""
    rates = [100, 1000]
    conds = ["off"] + ["luaspy@%d" % r for r in rates]
    # what a sample costs the target without a stop (issue 18): luaspy's
    # perf_event sampler and perf record at the same rates
    if PERF_SAMPLER:
        conds += ["luaspy@%d/--sampler perf" % r for r in rates]
    if PERF and cfg["perf"]:
        conds += ["perf@%d" % r for r in rates]
    res = {}
    win = cfg["win"]
    for rt in cfg["stop_runtimes"]:
        t = Target(rt, "gaps.lua", ["0.1", "1000"])
        t.wait_ready()
        time.sleep(0.5)
        seq = interleave(conds, cfg["rounds"], 11)
        wins = [run_cond(c, t.pid, tmp, win) for rd, c in seq]
        time.sleep(0.3)
        gw = gap_windows(t)
        t.kill()
        for w in wins:   # the meter's 0.1 s windows that lie inside this one
            sel = [g for g in gw if g[0] >= w["t0"] and g[1] <= w["t1"]]
            w["gsecs"] = sum(g[1] - g[0] for g in sel) / 1e9
            w["stops"] = [x for g in sel for x in g[2]]
            w["others"] = [x for g in sel for x in g[3]]
        r = {"inside": {}, "outside": {}, "kernel_us_per_sample": {}, "kernel_ms_per_s": {},
             "lost_per_sample": {}, "conds": conds}
        offs = [w for (rd, c), w in zip(seq, wins) if c == "off"]
        r["base"] = {"stop_gaps_per_s": sum(len(w["stops"]) for w in offs) / max(1e-9, sum(w["gsecs"] for w in offs)),
                     "other_ms_per_s": med([sum(w["others"]) / 1e6 / w["gsecs"] for w in offs if w["gsecs"]]),
                     "other_per_s": med([len(w["others"]) / w["gsecs"] for w in offs if w["gsecs"]]),
                     "rq_ms_per_s": med([1000 * w.get("run_delay_s", 0) / w["secs"] for w in offs]),
                     "kernel_ms_per_s": med([1000 * w.get("stopped_s", 0) / w["secs"] for w in offs])}
        for c in conds[1:]:
            sel = [(i, w) for i, ((rd, cc), w) in enumerate(zip(seq, wins)) if cc == c]
            stops = [x for i, w in sel for x in w["stops"]]
            secs = sum(w["gsecs"] for i, w in sel)
            if stops and secs:
                r["inside"][c] = {"median": q(stops, 0.5) / 1000, "p90": q(stops, 0.9) / 1000,
                                  "p99": q(stops, 0.99) / 1000, "max": max(stops) / 1000,
                                  "per_s": len(stops) / secs,
                                  "lost_ms_per_s": sum(stops) / 1e6 / secs}
            per = []
            for i, w in sel:
                if "stopped_s" not in w or "samples" not in w.get("stats", {}):
                    continue
                base = (wins[i - 1].get("stopped_s", 0) / wins[i - 1]["secs"] +
                        wins[i + 1].get("stopped_s", 0) / wins[i + 1]["secs"]) / 2
                span = SETTLE + win + 0.2 - w["stats"].get("first_ms", 0) / 1000
                sps = w["stats"]["samples"] / span if span > 0 else 0
                if sps > 0:
                    per.append((w["stopped_s"] / w["secs"] - base) / sps * 1e6)
            r["kernel_us_per_sample"][c] = med(per)
            r["lost_per_sample"][c] = lost_per_sample(seq, wins, c, win)
            r["kernel_ms_per_s"][c] = med([1000 * w["stopped_s"] / w["secs"] for i, w in sel if "stopped_s" in w])
            st = [w["stats"] for i, w in sel if "stop" in w.get("stats", {})]
            if st:
                r["outside"][c] = {"median": med([x["stop"][0] for x in st]), "p90": med([x["stop"][1] for x in st]),
                                   "p99": med([x["stop"][2] for x in st]), "max": max(x["stop"][3] for x in st),
                                   "walk_median": med([x["walk"][0] for x in st if "walk" in x])}
        res[rt] = r
        log("stop %s: inside %s" % (rt, json.dumps(r["inside"])))
    return res


def lost_per_sample(seq, wins, cond, win):
    """Time the target lost per sample, whatever the sampler: every gap of
    the meter (stops and others) per second of the window, less the time it
    waited in the runqueue (schedstat: other load), minus the mean of
    the unprofiled windows right before and after it, over the samples per
    second (luaspy: its --stats count over the time it sampled; perf record:
    the nominal rate, perf does not say). Median, min and max over the
    rounds, in µs; also the extra gaps per sample (about 1 when every sample
    costs the thread a gap over the meter's threshold)."""
    def cost(w):        # µs per s; the runqueue wait (preemption by other load) taken out
        if not w["gsecs"]:
            return float("nan")
        rq = w.get("run_delay_s", 0) / w["secs"] * 1e6 if w["secs"] else 0
        return (sum(w["stops"]) + sum(w["others"])) / 1e3 / w["gsecs"] - rq

    def count(w):
        return (len(w["stops"]) + len(w["others"])) / w["gsecs"] if w["gsecs"] else float("nan")
    us, per = [], []
    for i, (rd, c) in enumerate(seq):
        if c != cond or not 0 < i < len(seq) - 1:
            continue
        w = wins[i]
        if cond.startswith("luaspy"):
            st = w.get("stats", {})
            span = SETTLE + win + 0.2 - st.get("first_ms", 0) / 1000
            sps = (st.get("samples", 0) + st.get("errors", 0)) / span if span > 0 else 0
        else:
            sps = int(cond.split("@")[1].split("/")[0])
        if sps <= 0:
            continue
        base_c = (cost(wins[i - 1]) + cost(wins[i + 1])) / 2
        base_n = (count(wins[i - 1]) + count(wins[i + 1])) / 2
        us.append((cost(w) - base_c) / sps)
        per.append((count(w) - base_n) / sps)
    us = [x for x in us if x == x]
    per = [x for x in per if x == x]
    if not us:
        return None
    return {"median": med(us), "min": min(us), "max": max(us), "gaps_per_sample": med(per) if per else None,
            "n": len(us)}


# ---------------------------------------------------------------- 4

def bench_maxrate(cfg, tmp):
    ladder = cfg["ladder"]
    modes = {"merged": [], "--lua-only --nonblocking": ["--lua-only", "--nonblocking"]}
    if PERF_SAMPLER:
        modes["--sampler perf"] = ["--sampler", "perf"]
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
                if "perf_read" in st:
                    # no ticks of luaspy's own: what the kernel's ring lost
                    # or throttled, over all it produced
                    late = st["perf_lost"] + st["perf_throttled"]
                    ticks = st["perf_read"]
                fr.append({"late": late, "ticks": ticks,
                           "late_frac": late / (late + ticks) if ticks else 1.0,
                           "errors": st.get("errors", 0), "samples": st.get("samples", 0),
                           "walk_med": st.get("walk", [None])[0]})
            lf = med([x["late_frac"] for x in fr])
            ef = med([x["errors"] / (x["errors"] + x["samples"]) if x["errors"] + x["samples"] else 1.0 for x in fr])
            wm = med([x["walk_med"] for x in fr if x["walk_med"] is not None])
            rows.append({"rate": rate, "late_frac": lf, "err_frac": ef, "walk_med": wm, "runs": fr})
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
    big = "%d MiB heap" % cfg["heap_mib"] if cfg["heap_mib"] < 1024 else "1 GiB heap"
    cases = [("luajit", cfg["heap_mib"], {}, "luajit, %s (stripped binary: no state symbol)" % big),
             ("lua5.4", cfg["heap_mib"], {}, "lua5.4, %s (symbols from liblua5.4-0-dbg)" % big),
             ("lua5.4", cfg["heap_mib"], {"LUASPY_PUC_NOSYMS": "1"},
              "lua5.4, %s, symbols ignored (no state symbol)" % big),
             ("luajit", 1, {}, "luajit, small heap (stripped binary: no state symbol)"),
             ("lua5.4", 1, {"LUASPY_PUC_NOSYMS": "1"}, "lua5.4, small heap, symbols ignored (no state symbol)")]
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
    L.append("`%s` on %s, %s, %d CPUs; %s. loadavg (1, 5, 15 min) before %s, after %s; "
             "1-minute loadavg every 10 s during the run: %s." % (
                 env["command"], env["host"], env["kernel"], env["ncpu"], env["date"], env["load_before"],
                 env.get("load_after", "?"), env.get("load_during", "?")))
    L.append("luaspy %s; %s; %s; %s." % (env["luaspy"], env["luajit"], env["lua54"], env["perf"]))
    L.append("Settings: %s." % ", ".join("%s=%s" % (k, v) for k, v in sorted(cfg.items())
                                         if k not in ("runtimes", "stop_runtimes", "ladder")))
    L.append("")
    summ = []
    if "slowdown" in R:
        S = R["slowdown"]
        L.append("## 1. Target slowdown")
        L.append("")
        L.append("Work (fib calls) per second in a profiled %g s window over the mean of the unprofiled windows right "
                 "before and after it, same process; median of %d rounds (min–max). Second line per runtime: the same "
                 "with each window's time shortened by the target's runqueue wait (schedstat), i.e. with other "
                 "load on the machine factored out; ptrace stops are not runqueue wait, so they still count, but "
                 "the time luaspy's stopper holds the target's CPU before each stop is runqueue wait and drops out "
                 "too. So the verdict below uses the raw ratio when the unprofiled windows' runqueue wait is under "
                 "1 %% (a quiet machine), the load-corrected one only on a busy machine." % (
                     cfg["win"], cfg["rounds"]))
        L.append("")
        L.append("| runtime | unprofiled calls/s | " + " | ".join(S["conds"][1:]) + " |")
        L.append("|---|---|" + "---|" * (len(S["conds"]) - 1))
        for rt, r in S["runtimes"].items():
            for key, lab in (("ratios", ""), ("ratios_avail", " (load-corrected)")):
                cells = []
                for c in S["conds"][1:]:
                    v = [x for x in r[key][c] if x == x]
                    cells.append("%s (%.2f–%.2f)" % (fmt_ratio(med(v)), min(v), max(v)) if v else "n/a")
                L.append("| %s%s | %s | %s |" % (rt, lab, "%.3g" % med(r["rates"]["off"]) if not lab else
                                                "rq wait %.0f %%" % (100 * r["run_delay_off"]), " | ".join(cells)))
        L.append("")
        for rt, r in S["runtimes"].items():
            for rate, tgt in ((100, TARGETS["slow100"]), (1000, TARGETS["slow1000"])):
                for sfx, lab in (("", ""), ("/--sampler perf", ", --sampler perf")):
                    if "luaspy@%d%s" % (rate, sfx) not in r["ratios"]:
                        continue
                    v = med(r["ratios"]["luaspy@%d%s" % (rate, sfx)])
                    va = med(r["ratios_avail"]["luaspy@%d%s" % (rate, sfx)])
                    quiet = r["run_delay_off"] < 0.01
                    summ.append(("slowdown %s @%d Hz%s (raw / load-corrected; verdict on %s)" % (
                                     rt, rate, lab, "raw" if quiet else "load-corrected"), "≤ %g %%" % (tgt * 100),
                                 "%s / %s" % (pct_slow(v), pct_slow(va)), verdict(1 - (v if quiet else va) <= tgt)))
    if "stop" in R:
        L.append("## 2. Time stopped per sample (µs)")
        L.append("")
        L.append("Outside: luaspy --stats, from waitpid seeing the stop to PTRACE_DETACH (median over runs of each "
                 "run's quantile; max of maxima). Inside: gaps in the target's own CLOCK_MONOTONIC spin loop (a C "
                 "function called from Lua) during which it made a voluntary context switch, i.e. was stopped; gaps "
                 "from preemption and interrupts are told apart and left out. Lost = the stop gaps' sum per second. "
                 "Kernel: wall time minus the target thread's on-CPU and runqueue time (/proc/PID/schedstat), per "
                 "luaspy sample, minus the unprofiled windows' value.")
        L.append("")
        L.append("| runtime | rate | outside median | p90 | p99 | max | inside median | p90 | p99 | max | stops/s | lost ms/s | kernel µs/sample | walk median µs (after resume) |")
        L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for rt, r in R["stop"].items():
            for c in ("luaspy@100", "luaspy@1000"):
                o = r["outside"].get(c, {})
                i = r["inside"].get(c) or {}

                def g(d, k, f="%.0f"):
                    return f % d[k] if d.get(k) is not None and d[k] == d[k] else "n/a"
                L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f | %s |" % (
                    rt, c.split("@")[1], g(o, "median"), g(o, "p90"), g(o, "p99"), g(o, "max"),
                    g(i, "median"), g(i, "p90"), g(i, "p99"), g(i, "max"), g(i, "per_s"),
                    g(i, "lost_ms_per_s", "%.1f"), r["kernel_us_per_sample"].get(c, float("nan")),
                    g(o, "walk_median")))
        L.append("")
        L.append("Time lost per sample, any sampler: every gap of the meter (stops, preemption, interrupts) per second "
                 "of the profiled window, less its runqueue wait (schedstat: other load), minus the mean of its unprofiled neighbours, over the samples per second "
                 "(luaspy: its own count; perf record: the nominal rate). Median (min–max) over the rounds, µs; in "
                 "parentheses the extra gaps per sample. The perf_event sampler and perf record cost the thread an "
                 "interrupt, not a stop: their gaps are not voluntary switches, so the table above has none for them.")
        L.append("")
        conds2 = next(iter(R["stop"].values()))["conds"][1:] if R["stop"] else []
        L.append("| runtime | " + " | ".join(conds2) + " |")
        L.append("|---|" + "---|" * len(conds2))
        for rt, r in R["stop"].items():
            cells = []
            for c in conds2:
                v = r["lost_per_sample"].get(c)
                cells.append("%.1f (%.1f–%.1f; %.2f)" % (v["median"], v["min"], v["max"], v["gaps_per_sample"] or 0)
                             if v else "n/a")
            L.append("| %s | %s |" % (rt, " | ".join(cells)))
        L.append("")
        for rt, r in R["stop"].items():
            for c in ("luaspy@100/--sampler perf", "luaspy@1000/--sampler perf"):
                v = r["lost_per_sample"].get(c)
                if v:
                    summ.append(("time lost per sample, inside, %s @%s Hz, --sampler perf" % (
                        rt, c.split("@")[1].split("/")[0]), "≤ 10 µs", "%.1f µs" % v["median"],
                        verdict(v["median"] <= 10)))
        for rt, r in R["stop"].items():
            b_ = r["base"]
            L.append("Unprofiled %s windows: %.1f stop gaps/s (should be 0); %.0f other gaps/s costing %.1f ms/s; "
                     "runqueue wait %.0f ms/s (other load)." % (rt, b_["stop_gaps_per_s"], b_["other_per_s"],
                                                               b_["other_ms_per_s"], b_["rq_ms_per_s"]))
        L.append("")
        for rt, r in R["stop"].items():
            for c in ("luaspy@100", "luaspy@1000"):
                i = r["inside"].get(c)
                if i:
                    rate = int(c.split("@")[1])
                    summ.append(("stop median, inside, %s @%d Hz (outside)" % (rt, rate), "≤ 20 µs",
                                 "%.0f µs (%.0f)" % (i["median"], r["outside"].get(c, {}).get("median", float("nan"))),
                                 verdict(i["median"] <= 20)))
                    summ.append(("stop p99, inside, %s @%d Hz (outside)" % (rt, rate), "≤ 100 µs",
                                 "%.0f µs (%.0f)" % (i["p99"], r["outside"].get(c, {}).get("p99", float("nan"))),
                                 verdict(i["p99"] <= 100)))
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
        L.append("CPU % from /proc/PID/task/*/schedstat summed over all threads, luaspy's stopper included (ns on CPU); user/sys from /proc/PID/stat (10 ms ticks, coarse).")
        L.append("")
        for rt, r in R["cpu"].items():
            if "luaspy@100" in r:
                v = r["luaspy@100"]["cpu_per_s"]
                summ.append(("profiler CPU %s @100 Hz" % rt, "≤ 2 %", "%.2f %%" % (v * 100), verdict(v <= 0.02)))
            if "luaspy@100/--sampler perf" in r:  # issue 18: <= 1 % of a core
                v = r["luaspy@100/--sampler perf"]["cpu_per_s"]
                summ.append(("profiler CPU %s @100 Hz, --sampler perf" % rt, "≤ 1 %", "%.2f %%" % (v * 100),
                             verdict(v <= 0.01)))
    if "maxrate" in R:
        L.append("## 4. Max sustained rate (luajit -joff fib; < 1 %% late ticks; median of %d runs of %g s per rate)" % (
            cfg["maxrate_reps"], cfg["maxrate_secs"]))
        L.append("")
        L.append("| mode | " + " | ".join("%d Hz" % r for r in cfg["ladder"]) + " | max sustained |")
        L.append("|---|" + "---|" * (len(cfg["ladder"]) + 1))
        for mode, r in R["maxrate"].items():
            L.append("| %s | %s | **%d Hz** |" % (mode, " | ".join("%.1f %% (%.0f %%)" % (100 * x["late_frac"], 100 * x["err_frac"])
                                                                 for x in r["rows"]), r["max_ok"]))
        L.append("")
        L.append("Cells: late ticks / scheduled ticks (in parentheses: samples lost to errors, mostly threads that did "
                 "not stop within one period). luaspy's -r is capped at 10 000 Hz.")
        L.append("")
        if "--sampler perf" in R["maxrate"]:
            L.append("Row `--sampler perf`: no ticks of luaspy's own; the cell is the records the kernel's ring lost "
                     "or throttled over those read (in parentheses: samples that were errors, torn included).")
            L.append("")
        m = R["maxrate"]["merged"]["max_ok"]
        summ.append(("max sustained rate, merged", "≥ 5000 Hz", "%d Hz" % m, verdict(m >= 5000)))
        if "--sampler perf" in R["maxrate"]:
            m = R["maxrate"]["--sampler perf"]["max_ok"]
            summ.append(("max sustained rate, --sampler perf (< 1 % lost)", "≥ 10000 Hz", "%d Hz" % m,
                         verdict(m >= 10000)))
    if "attach" in R:
        L.append("## 5. Attach: time to first sample (luaspy --stats, from session start; median, max of %d)" % cfg["attach_reps"])
        L.append("")
        L.append("| target | heap | median ms | max ms | luaspy wall incl. 0.3 s sampling, ms |")
        L.append("|---|---|---|---|---|")
        for label, r in R["attach"].items():
            L.append("| %s | %s | %s | %s | %.0f |" % (label, "%.0f MiB" % r["heap_mib"] if r["heap_mib"] else "?",
                                                     "%.1f" % r["median_ms"] if r["median_ms"] == r["median_ms"] else "n/a",
                                                     "%.1f" % r["max_ms"] if r["max_ms"] else "n/a", med(r["wall_ms"])))
            if "small" not in label:
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
        cfg = dict(rounds=4, win=1.5, warm=2.0, maxrate_secs=2.0, maxrate_reps=2,
                   ladder=[1000, 2000, 3000, 5000, 7000, 10000], heap_mib=1024, attach_reps=3,
                   stacks=100000, writer_reps=2, runtimes=["luajit", "luajit -joff", "lua5.4"],
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
    loads = []
    done = threading.Event()

    def sample_load():      # the 1-minute loadavg every 10 s during the run
        while not done.wait(10):
            loads.append(float(open("/proc/loadavg").read().split()[0]))
    threading.Thread(target=sample_load, daemon=True).start()
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
    done.set()
    R["env"]["load_during"] = "%.2f–%.2f (median %.2f)" % (min(loads), max(loads), med(loads)) if loads else "?"
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
