/* stopper.h: the thread that holds the stop window next to the sampled
 * thread.
 *
 * While a thread is stopped for a sample its CPU has nothing to run, and
 * on these VMs an idle vCPU halts: waking it again for PTRACE_DETACH cost
 * ~50 us, and a tracer on another CPU that spins for the stop takes a
 * core. So the stop window (seize, interrupt, wait, registers, copies,
 * detach) runs on a luaspy thread pinned to the CPU the sampled thread
 * last ran on: the stop hands that CPU straight to the stopper, and the
 * detach hands it straight back. The unwind and walk run afterwards on
 * the calling thread, which keeps off that CPU (session.c).
 *
 * The stopper runs at nice -20 with a 0.1 ms slice, so that it preempts
 * the target at once when woken; it never spins and runs microseconds per
 * sample. Without CAP_SYS_NICE it can't, and a stopper that waits for the
 * target's slice to end is worse than none: then there is no stopper and
 * the stop is taken from the calling thread, off the target's CPU.
 *
 * ptrace requests must come from the thread that seized the tracee, so
 * while the stopper runs every ptrace call of the session goes through
 * stopper_call(). The caller waits for each call: nothing runs on both
 * threads at once, so no other state needs locking. */
#ifndef LUASPY_STOPPER_H
#define LUASPY_STOPPER_H

#include <stdint.h>

/* Start the stopper thread if it can help: at least two CPUs allowed.
 * Blocks SIGCHLD in the caller first (ptrace_stop waits for it with
 * sigtimedwait; a thread that did not block it would swallow it). All
 * signals stay blocked in the stopper, so SIGINT & co. reach the caller.
 * While the stopper works, stopper_call() spins for the result (up to
 * 300 us) rather than sleep: a sleeping caller leaves its CPU idle and
 * the scheduler moves the target onto it (stopper.c has the numbers).
 * Returns 1 when started, 0 when not needed or not allowed (fewer than
 * two CPUs, no CAP_SYS_NICE), or -LS_E_NOMEM. */
int stopper_start(void);

/* Run FN(ARG) on the stopper thread, pinned to CPU first when CPU >= 0
 * and allowed (otherwise its affinity is left as it is), and return FN's
 * result. FN may call stopper_done() to let the caller go on before FN
 * returns (the caller then gets the value passed there). Without a
 * stopper, FN runs on the calling thread. */
int stopper_call(int cpu, int (*fn)(void *arg), void *arg);

/* Inside FN: report RC to stopper_call's caller now and let it go on
 * while FN finishes (e.g. detaching after the copies are taken). FN must
 * not touch the caller's data after this. */
void stopper_done(int rc);

/* Stop and join the stopper thread (no-op when none). */
void stopper_end(void);

#endif
