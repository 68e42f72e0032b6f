/* stopper.h: the thread that holds the stop window next to the sampled
 * thread.
 *
 * While a thread is stopped for a sample its CPU has nothing to run, and
 * on these VMs an idle vCPU halts: waking it again for PTRACE_DETACH cost
 * ~50 us, and a tracer on another CPU that spins for the stop takes a
 * core. So the stop window (seize, interrupt, wait, registers, copies,
 * detach) runs on a luaspy thread pinned to the CPU the sampled thread
 * last ran on: the stop hands that CPU straight to the stopper, and the
 * detach hands it straight back. The unwind and walk run on the calling
 * thread, which keeps off that CPU (place.h), while the stopper detaches
 * (stopper_done).
 *
 * The stopper runs at nice -20 with a 0.1 ms slice, so that it preempts
 * the target at once when woken; it never spins and runs microseconds per
 * sample. Without CAP_SYS_NICE it can't, and a stopper that waits for the
 * target's slice to end is worse than none: then there is no stopper and
 * the stop is taken from the calling thread, off the target's CPU.
 *
 * ptrace requests must come from the thread that seized the tracee, so
 * while the stopper runs every ptrace call of the session goes through
 * stopper_call(), and so does reaping the launched command while a stop
 * of it may be pending (child.c).
 *
 * Who runs when. One request at a time: stopper_call() returns once FN
 * returns or, earlier, once FN calls stopper_done(). Between
 * stopper_done() and FN's return both threads run; that is the only
 * overlap, and the sampler (sampler.c, stop_window) uses it: the copies
 * taken, it reports success and detaches while the caller unwinds and
 * walks. Nothing is locked; the overlap is safe because of the rules
 * at stopper_done(). A further stopper_call() waits for the previous FN
 * to return before its FN starts, so requests never overlap each other. */
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
 * while FN finishes. A second call, a call outside FN, or any call
 * without a stopper (FN then runs on the caller) does nothing.
 *
 * After it, FN may only finish what involves no shared state: the
 * sampler releases its stop (ptrace_release() on the struct ptrace_stop
 * on the stopper's own stack, a PTRACE_DETACH, whose result is dropped:
 * a thread that exited meanwhile changes nothing in the copies) and
 * returns. FN must not touch ARG or anything the caller owns (the stop
 * job, the thread_snap with its copies and page cache, the target and
 * its reader), nor proc_ptrace.c's list of timed-out stops or reaped
 * exit (only ptrace_stop and ptrace_reap_pending write them, and they
 * run inside requests, never after stopper_done), nor print.
 *
 * The caller, meanwhile, owns everything it passed in ARG again and may
 * unwind, walk, read the target (process_vm_readv, /proc) and read
 * proc_ptrace.c's state (ptrace_npending). It must not issue ptrace or
 * waitpid itself (through stopper_call only, which waits for FN's
 * return), nor assume the sampled thread is still stopped or already
 * running: memory outside the copies may be either. */
void stopper_done(int rc);

/* Stop and join the stopper thread (no-op when none). */
void stopper_end(void);

#endif
