/* session.h: a profiling session: the sampling loop timed by absolute
 * deadlines over the session's processes (a pid, a launched command, and
 * with --subprocesses their descendants: follow.h, child.h), and turning
 * walked stacks into profile entries (roots, vmstate leaves). Shared by
 * record and top. */
#ifndef LUASPY_SESSION_H
#define LUASPY_SESSION_H

#include <stdint.h>
#include <sys/types.h>
#include "cli.h"
#include "profile.h"
#include "vm.h"

struct session;

struct session_stats {
	uint64_t samples;        /* stacks counted */
	uint64_t errors;         /* samples lost to errors */
	uint64_t late;           /* ticks that started more than one period late (<= ticks) */
	uint64_t ticks;          /* sampling rounds run */
	uint64_t max_lag_ns;     /* the largest lag of a late tick */
	uint64_t stalls;         /* ticks that started STALL_NS (100 ms) or more late */
	uint64_t stall_max_ns;   /* the longest stall */
	uint64_t late_stops;     /* ticks whose stop of a thread had not come: sampled later */
	uint64_t elapsed_ns;     /* since the first tick */
	int threads;             /* threads sampled in the last tick */
	int targets;             /* processes with a Lua VM being sampled */
	uint64_t vmstate[8];     /* samples per VM state class: interp, trace, C, GC, other */
	uint64_t err_by_kind[32];/* errors per -LS_E_* code */
	uint64_t native_cut;     /* samples (<= samples) whose native walk ended on an
	                          * error, not at the outermost frame (unwind.h) */
	uint64_t elided;         /* samples (<= samples) whose stack was cut in its
	                          * middle ("<elided N frames>", merge.h) */
	/* record --gc (gc_filter.h): samples left out, not in SAMPLES */
	uint64_t gc_outside;     /* outside the collector */
	uint64_t gc_unknown;     /* of targets whose collector was not found */
	uint64_t gc_no_lua;      /* kept (in SAMPLES): in the collector, no Lua frame */
	uint64_t gc_cut;         /* in the collector, no Lua frame, native walk cut: left out */
};

/* stats.vmstate[] is indexed by enum vm_state (vm.h) */

/* Why a session ended */
enum session_end { END_NONE = 0, END_DURATION, END_SIGNAL, END_EXITED, END_CALLBACK };

/* Start a session from O: attach to O->pid or launch O->argv, and wait
 * up to O->timeout_s for a Lua runtime. With several --pgrep matches
 * (O->npids > 1) every one is a root, probed as -s probes its root
 * (no wait), and each sample gets its process's root frame. On failure prints one error line
 * and returns the exit status (> 0) with *OUT NULL; a launched child is
 * killed and reaped then. Returns 0 on success. */
int session_start(const struct cli_opts *o, struct session **out);

/* Sample until the duration ends, a stop signal (SIGINT, SIGTERM,
 * SIGHUP) arrives, every target exited, or TICK returns non-zero. Counts
 * into P. TICK (may be NULL) is called about every TICK_NS with the
 * current stats; it runs between samples, never while a thread is
 * stopped. Returns an enum session_end. */
int session_run(struct session *s, struct profile *p, uint64_t tick_ns,
		int (*tick)(void *arg, const struct session_stats *st), void *arg);

const struct session_stats *session_stats(const struct session *s);
/* "LuaJIT 2.1 ..." of the first target, or NULL. */
const char *session_runtime(const struct session *s);
/* 1 when samples come from perf events (--sampler perf, or auto that
 * found them usable), 0 when from ptrace stops. */
int session_sampler_perf(const struct session *s);
/* Command line of the main target. */
const char *session_cmdline(const struct session *s);
pid_t session_pid(const struct session *s);

/* When more than 1% of the ticks of a run of a second or more were
 * late: one "fell behind" line with the counts, for the summary at the
 * end. */
void session_report_lag(const struct session *s);

/* Print --stats to F: stop time and walk time (median/p90/p99/max), late
 * ticks, stalls, the samples whose native walk was cut short or whose
 * stack was elided (of the samples counted), errors by kind, and every
 * limit that cut data (limit.h). */
void session_print_stats(const struct session *s, FILE *f);

/* End the session: detach from everything; a launched child that still
 * runs is terminated. Returns the exit status to use: the child's own
 * when it exited by itself, else 0. Frees S. */
int session_finish(struct session *s);

/* Set by the SIGINT/SIGTERM/SIGHUP handler that session_start installs. */
extern volatile int session_stop_signal;

/* Install that handler (SIGINT, SIGTERM, SIGHUP set session_stop_signal;
 * SIGPIPE is ignored), for commands that run a loop of their own
 * (perf-map) as session_start does for record and top. */
void session_install_signals(void);

#endif
