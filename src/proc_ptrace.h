/* proc_ptrace.h: stopping one thread for one sample.
 *
 * A thread is seized (PTRACE_SEIZE, no options: never PTRACE_O_EXITKILL),
 * interrupted, sampled and detached again for every sample, so no thread
 * stays traced between samples: if luaspy dies at any moment (even by
 * SIGKILL) the kernel detaches and restarts the thread. A thread that was
 * in group-stop (SIGSTOP by someone else) stays stopped after detach. */
#ifndef LUASPY_PROC_PTRACE_H
#define LUASPY_PROC_PTRACE_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct ptrace_stop {
	pid_t tid;
	int pass_sig;      /* signal caught in signal-delivery-stop, re-injected at release */
	int group_stop;    /* the thread is in group-stop (stopped by SIGSTOP & co.) */
	uint64_t stop_ns;  /* CLOCK_MONOTONIC when the stop was seen */
};

/* How ptrace_stop waits: spin on waitpid(WNOHANG) for SPIN_NS first, then
 * sleep in sigtimedwait() until the stop's SIGCHLD (SIGCHLD is blocked in
 * luaspy for that) or the timeout. Default 200 us spin. */
extern uint64_t ptrace_spin_ns;

/* Seize and interrupt TID, wait up to TIMEOUT_NS for the stop. On 0 the
 * thread is stopped and ptrace_release() must follow. Errors:
 * -LS_E_GONE (exited), -LS_E_PERM, -LS_E_TRACED (another tracer holds
 * it: strace, gdb, another profiler's stop), -LS_E_BUSY (no stop in time: the
 * thread is left seized and released by ptrace_reap_pending(), or taken
 * as the stop of the next ptrace_stop() of TID once it has come). */
int ptrace_stop(pid_t tid, uint64_t timeout_ns, struct ptrace_stop *st);

/* General registers of a stopped thread. 0 or -LS_E_*. */
int ptrace_getregs(pid_t tid, struct user_regs_struct *regs);

/* Detach ST's thread, re-injecting a caught signal. 0 or -LS_E_GONE. */
int ptrace_release(struct ptrace_stop *st);

/* Release threads left seized by timed-out stops once they stop.
 * Non-blocking. Returns how many are still pending. */
int ptrace_reap_pending(void);

/* How many threads are left seized by stops that timed out. */
int ptrace_npending(void);

/* Is TID still seized from a stop that timed out? */
int ptrace_is_pending(pid_t tid);

/* If a wait in this module reaped the exit of process PID (a child we
 * launched that is also traced), report its wait status: returns 1 and
 * sets *STATUS, else 0. */
int ptrace_child_reaped(pid_t pid, int *status);

/* PID, a child of ours, was found in a ptrace stop outside any sample
 * (wait STATUS, WIFSTOPPED): detach it, passing on the signal of a
 * signal-delivery-stop. 0 or -LS_E_GONE. */
int ptrace_detach_stray(pid_t pid, int status);

#endif
