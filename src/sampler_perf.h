/* sampler_perf.h: samples taken by the kernel, not by stopping threads.
 *
 * One perf event per target thread (perf_event_open(2): software
 * task-clock, one sample every 1/rate s of the thread's CPU time, with
 * PERF_SAMPLE_TID | TIME | REGS_USER | STACK_USER): at each timer
 * interrupt the kernel copies the thread's user registers and the top of
 * its user stack into a ring buffer mapped into luaspy, without stopping
 * it. luaspy drains the rings; each record's registers and stack copy
 * feed the same unwind and Lua walk as a ptrace sample
 * (sampler_sample_copy in sampler.h), the Lua heap being read right after
 * and checked by the walkers against the registers and the copy
 * (docs/sampling.md §8). Nothing here prints; errors are -LS_E_* or,
 * for the permission check, an errno with its reason. */
#ifndef LUASPY_SAMPLER_PERF_H
#define LUASPY_SAMPLER_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>
#include "proc_task.h"

/* Counts of the perf sampler for --stats, shared by every process. */
struct perf_counts {
	uint64_t records;        /* samples read from the rings */
	uint64_t lost;           /* samples the kernel dropped, ring full (PERF_RECORD_LOST) */
	uint64_t throttled;      /* times the kernel throttled an event (PERF_RECORD_THROTTLE) */
	uint64_t no_regs;        /* records without user registers or stack (skipped) */
	uint64_t opened;         /* thread events opened */
	uint64_t open_failed;    /* thread events that could not be opened (thread gone...) */
	uint64_t user_only;      /* 1 when events exclude the kernel (unprivileged): no
	                          * sample while a thread runs in a system call */
	uint64_t bpf_failed;     /* events the eBPF tick program could not be attached to */
};

/* One sample as the kernel took it. Valid until the next perf_proc_next. */
struct perf_sample {
	pid_t tid;
	uint64_t time_ns;              /* CLOCK_MONOTONIC when taken */
	struct user_regs_struct regs;  /* user registers (fs_base, gs_base, segments 0) */
	const uint8_t *stack;          /* copy of the user stack from regs.rsp up */
	size_t stack_len;              /* bytes in STACK (what the kernel could copy) */
};

/* Can luaspy open a perf event on thread TID? Opens one and closes it.
 * Returns 0, or the errno of perf_event_open (EACCES, EPERM: not allowed,
 * with the paranoid level or seccomp; ENOSYS, ENOENT, EOPNOTSUPP: no
 * perf events) with WHY filled (one line, lower case). */
int perf_sampler_check(pid_t tid, char *why, size_t whylen);

struct perf_proc;

/* Perf events for process PID, none opened yet (perf_proc_sync opens
 * them): one sample every 1e9/RATE_HZ ns of a thread's CPU time, STACK_BYTES
 * of its stack per sample (rounded down to 8, at most 60 KiB: a record
 * must fit the kernel's 64 KiB). Every event's fd is added to the epoll
 * instance EPFD (EPOLLIN: samples are waiting). BATCH 0: EPOLLIN at every
 * sample (walked as close to its tick as luaspy can); 1: a larger ring
 * (128 pages) and EPOLLIN once it is about a quarter full, for callers that
 * drain it at least every 10 ms anyway and keep what changes at the tick
 * elsewhere (the eBPF tick copy): each wakeup costs the sampled thread an
 * IPI on its CPU (docs/sampling.md §9). C receives the counts (kept by the
 * caller). 0 with *OUT, or -LS_E_NOMEM. */
int perf_proc_open(pid_t pid, int epfd, double rate_hz, size_t stack_bytes, int batch,
		   struct perf_counts *c, struct perf_proc **out);

/* Attach the eBPF program PROG_FD (sampler_bpf.h; -1: none) to every
 * event of P, those open and those it opens from now on
 * (PERF_EVENT_IOC_SET_BPF); an event it cannot be attached to is counted
 * in bpf_failed and sampled without. Again with the same fd: no-op. */
void perf_proc_set_bpf(struct perf_proc *p, int prog_fd);

/* Close every event of P and free it. NULL is a no-op. */
void perf_proc_close(struct perf_proc *p);

/* Make P's events match the thread list TH[0..N) (threads.h): open one
 * for each thread without one (a thread that is gone by then is
 * counted in open_failed, nothing else), close those of threads no longer
 * listed once their ring is drained. Returns events open, or -LS_E_PERM
 * when not one could be opened for a permission reason. */
int perf_proc_sync(struct perf_proc *p, const struct proc_thread *th, int n);

/* The next sample waiting in any of P's rings into *S (oldest first per
 * thread). Records other than samples are counted and skipped. Returns
 * 1 with *S, 0 when every ring is empty. */
int perf_proc_next(struct perf_proc *p, struct perf_sample *s);

/* An event's fd that reported EPOLLHUP (its thread exited): remove it
 * from EPFD so that it wakes no one; its ring is still drained and the
 * fd closed by perf_proc_sync. */
void perf_hup(int epfd, int fd);

struct mem;

/* A perf sample's leaf in a function epilogue: at most 8 instructions
 * from REGS->rip that are `pop` of a general register, `add rsp, imm`,
 * `leave`, then `ret` (c3, f3 c3). The kernel's stack copy starts at
 * rsp, and the epilogue's CFI still says the registers it popped are
 * saved below rsp (gcc emits no restore rule after `pop`): the unwinder
 * read them from live memory reused since, or not at all, and ended the
 * walk there as if at the outermost frame (kept stacks rooted at `cfib`,
 * docs/sampling.md §8). So the epilogue is run over M (the copy) into
 * *CALLER: the caller's registers, rip its return address. Code is read
 * through CODE (the live target: text does not change). 1 when done,
 * 0 when REGS->rip is not in such an epilogue (or a read failed). */
int perf_leaf_epilogue(struct mem *code, struct mem *m, const struct user_regs_struct *regs,
		       struct user_regs_struct *caller);

#endif
