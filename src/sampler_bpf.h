/* sampler_bpf.h: the perf sampler's eBPF tick copy of the LuaJIT state.
 *
 * The perf sampler (sampler_perf.h) gets the registers and the C stack
 * as they were at the tick, but the Lua state lives on the heap and is
 * read after the sample, when a coroutine may have yielded and the
 * frames moved (torn samples, docs/sampling.md §8). This module loads a
 * small eBPF program (src/bpf/sampler_bpf_tick.bpf.c, built with clang
 * and embedded; loaded with libbpf) that runs on the same perf events
 * and copies, at the tick, g's vmstate/cur_L/jit_base, the running
 * lua_State's header and Lua stack window (at most 16 KiB) and the main
 * thread's (8 KiB) into a BPF ring buffer. Each perf sample is paired
 * with the record of the same tick (same thread, stamped within a few µs
 * of it on the same clock), and the walk reads those ranges from the copy
 * (a struct mem_overlay under the native stack copy), everything else
 * (prototypes, strings, immutable while alive) from the heap as before.
 * Without libbpf or clang at build time, or when the program cannot be
 * loaded (no CAP_BPF, the verifier), sampler_bpf_open fails with a
 * reason and the perf sampler reads the heap as before. Nothing here
 * prints except msg_debug. */
#ifndef LUASPY_SAMPLER_BPF_H
#define LUASPY_SAMPLER_BPF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "proc_mem.h"

struct target;
struct lsbpf_cfg;

/* Counts for --stats. */
struct bpf_tick_counts {
	uint64_t records;        /* tick records read from the ring */
	uint64_t paired;         /* perf samples walked over their tick copy */
	uint64_t unpaired;       /* perf samples of a configured process without one
	                          * (record lost, ring full, or not written) */
	uint64_t unconfigured;   /* perf samples of a process not (yet) configured:
	                          * taken before its state was known, or past
	                          * LSBPF_MAX_PROCS */
	uint64_t orphans;        /* records no perf sample claimed (its sample lost) */
	uint64_t cut;            /* paired copies whose running thread's stack was
	                          * larger than the window (frames below read live) */
	uint64_t max_delta_ns;   /* largest perf-sample-minus-record time paired */
};

struct sampler_bpf;

/* Load the tick program (needs CAP_BPF or root, and a kernel with BPF
 * ring buffers, 5.8+). 0 with *OUT, or -LS_E_UNSUPPORTED (not built in,
 * or the kernel/libbpf refused: WHY says which, one line, lower case),
 * -LS_E_NOMEM. */
int sampler_bpf_open(struct sampler_bpf **out, char *why, size_t whylen);

/* Free B, its program and maps (the kernel detaches the program from
 * events as they close). NULL is a no-op. */
void sampler_bpf_close(struct sampler_bpf *b);

/* The program's fd, for PERF_EVENT_IOC_SET_BPF on each thread's event. */
int sampler_bpf_prog_fd(const struct sampler_bpf *b);

/* Configure process PID of T: for a LuaJIT VM with a known state, the
 * first state's address and the walker's offsets (vm_luajit.h) go to
 * the program's map (again when the state changed). Returns 1 when
 * configured, 0 when not (not LuaJIT, no state yet), -LS_E_*. */
int sampler_bpf_target(struct sampler_bpf *b, pid_t pid, struct target *t);

/* Process PID is gone: its map entry and waiting records are dropped. */
void sampler_bpf_forget(struct sampler_bpf *b, pid_t pid);

/* The tick copy of the perf sample of thread TID of process PID taken at
 * TIME_NS (CLOCK_MONOTONIC): reads the ring, pairs, and returns an
 * overlay of the copied ranges (its UNDER is left NULL: the caller sets
 * it), valid until the next call; NULL when there is none. *CUT: 1 when
 * the running thread's stack or CallInfo chain did not fit the copy (the
 * rest is read live), else 0. */
struct mem_overlay *sampler_bpf_pair(struct sampler_bpf *b, pid_t pid, pid_t tid, uint64_t time_ns,
				     int *cut);

/* Fill C (sampler_bpf_rec.h) for T's PUC Lua VM: its first main state
 * and the walker's layout row. 1, or 0 when there is none (no state yet,
 * a layout the program cannot copy). sampler_bpf_puc.c. */
int sampler_bpf_puc_cfg(const struct target *t, struct lsbpf_cfg *c);

/* The counts so far. */
const struct bpf_tick_counts *sampler_bpf_counts(const struct sampler_bpf *b);

/* For tests (tests/t_sampler_bpf.c) and the paths above: */
/* A B with no program loaded (pairing and overlays only): 0 or
 * -LS_E_NOMEM. Freed by sampler_bpf_close. */
int sampler_bpf_new_unloaded(struct sampler_bpf **out);
/* Configure process PID with C (sampler_bpf_rec.h; also written to the
 * program's map when one is loaded). 1, or -LS_E_UNSUPPORTED (the map
 * refused), 0 when LSBPF_MAX_PROCS are configured. */
int sampler_bpf_config(struct sampler_bpf *b, pid_t pid, const struct lsbpf_cfg *c);
/* Take record DATA (LEN bytes, struct lsbpf_rec up to its last window)
 * as the ring gives it. 0, or -1 when its sizes do not fit LEN (not
 * kept). */
int sampler_bpf_feed(struct sampler_bpf *b, const void *data, size_t len);

#endif
