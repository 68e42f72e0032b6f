/* sampler.h: taking one sample of one thread of a target (target.h).
 *
 * The stop window is kept small: registers, one copy of the top of the C
 * stack, the walker's capture(), then the thread is resumed and unwound
 * and walked from the copies (unless walk_stopped asks for a fully
 * consistent sample, as dump does). */
#ifndef LUASPY_SAMPLER_H
#define LUASPY_SAMPLER_H

#include <stdint.h>
#include <sys/types.h>
#include "frame.h"
#include "proc_task.h"
#include "target.h"
#include "vm.h"

struct sampler_opts {
	int idle;                /* sample threads that are not running (state != R) */
	int native;              /* unwind native frames (0 = --lua-only) */
	int nonblocking;         /* never stop the thread (needs native = 0) */
	int walk_stopped;        /* unwind + walk before resuming (consistent; dump) */
	int held;                /* the caller holds the thread stopped (ptrace_stop)
	                          * and releases it: no stop, no release here */
	const struct user_regs_struct *regs; /* the thread's registers as given (a core
	                          * file, with held): no ptrace at all */
	size_t stack_copy_bytes; /* bytes of C stack copied while stopped */
	uint64_t stop_timeout_ns;/* give up waiting for a stop after this */
};

/* Defaults: idle 0, native 1, nonblocking 0, walk_stopped 0, held 0, 32 KiB, 50 ms. */
void sampler_opts_default(struct sampler_opts *o);

struct sample_stats {
	uint64_t stopped_ns;     /* time the thread was stopped (ptrace view) */
	uint64_t walk_ns;        /* unwind + walk time */
};

/* Sample thread TID of T (STATE its state letter, CPU the CPU it last
 * ran on or -1): stop (unless nonblocking; on the stopper thread when
 * one runs, see stopper.h), capture, resume, unwind, walk. OUT receives the merged stack (innermost first), INFO the
 * VM state. TS is scratch space owned by the caller (reused between
 * calls; its stack buffer is grown as needed and freed by
 * thread_snap_free). Returns 0, or -LS_E_* (GONE: thread exited; BUSY:
 * didn't stop in time; TORN/GARBAGE/FAULT: walker error). */
int sampler_sample_thread(struct target *t, pid_t tid, char state, int cpu,
			  const struct sampler_opts *o, struct thread_snap *ts,
			  struct stack *out, struct walk_info *info, struct sample_stats *stats);
void thread_snap_free(struct thread_snap *ts);

/* A sample someone else took (the perf sampler, sampler_perf.h): thread
 * TS->tid's registers REGS and STACK_LEN bytes of its stack copied from
 * REGS->rsp up (at most O->stack_copy_bytes are kept), the thread still
 * running. Capture and walk as --nonblocking does (every heap read goes to
 * the running target; the walkers check it against REGS and the copy),
 * the native stack unwound from the copy. OUT, INFO as for
 * sampler_sample_thread; *WALK_NS the time spent. AGAIN (scratch, may
 * be NULL): walk a second time into it and call the sample torn when the
 * two stacks differ (the chain moved while it was read). TICK (or NULL):
 * target memory copied at the tick (the eBPF tick copy, sampler_bpf.h),
 * read in place of the live target inside its regions; its UNDER is set
 * here. Returns 0 or -LS_E_* (TORN/GARBAGE/FAULT: the heap no longer
 * matched the sample). */
int sampler_sample_copy(struct target *t, const struct sampler_opts *o, struct thread_snap *ts,
			const struct user_regs_struct *regs, const uint8_t *stack, size_t stack_len,
			struct mem_overlay *tick, struct stack *out, struct stack *again,
			struct walk_info *info, uint64_t *walk_ns);

#endif
