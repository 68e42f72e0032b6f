/* proc_ptrace.c: per-sample seize/interrupt/detach of one thread. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include "err.h"
#include "proc_ptrace.h"
#include "proc_task.h"
#include "timeutil.h"

#ifndef PTRACE_EVENT_STOP
#define PTRACE_EVENT_STOP 128
#endif

uint64_t ptrace_spin_ns = 200000;

#define MAX_PENDING 256
static pid_t pending[MAX_PENDING];
static int npending;

static pid_t reaped_pid;
static int reaped_status;

static void note_reaped(pid_t tid, int status)
{
	reaped_pid = tid;
	reaped_status = status;
}

int ptrace_child_reaped(pid_t pid, int *status)
{
	if (reaped_pid == pid && pid > 0) {
		*status = reaped_status;
		return 1;
	}
	return 0;
}

/* Interpret a wait status for TID. 1 = stopped (ST filled), 0 = not yet,
 * negative = error. */
static int classify(pid_t tid, int status, struct ptrace_stop *st)
{
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		note_reaped(tid, status);
		return -LS_E_GONE;
	}
	if (!WIFSTOPPED(status))
		return 0;
	int sig = WSTOPSIG(status);
	int event = (unsigned)status >> 16;
	if (event == PTRACE_EVENT_STOP) {
		if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU)
			st->group_stop = 1;
	} else if (event == 0) {
		st->pass_sig = sig; /* signal-delivery-stop: hand it back at detach */
	}
	st->stop_ns = time_now_ns();
	return 1;
}

/* SIGCHLD, blocked once so that sigtimedwait() can sleep until the
 * kernel reports the stop (a ptrace stop sends the tracer SIGCHLD). */
static sigset_t chld_set;
static int chld_blocked;

/* TID is still seized from a stop that timed out. When that stop has
 * come since, the thread is stopped now: the stop is this sample's (under
 * load a stop often comes just after the timeout, and each one lost cost
 * every sample of the thread until ptrace_reap_pending()). 0 (ST filled),
 * -LS_E_BUSY while it has not stopped yet, -LS_E_GONE. */
static int take_pending(pid_t tid, struct ptrace_stop *st)
{
	int status;
	pid_t r = waitpid(tid, &status, __WALL | WNOHANG);
	if (r == 0)
		return -LS_E_BUSY;
	int c = r == tid ? classify(tid, status, st) : -LS_E_GONE;
	if (c == 0)
		return -LS_E_BUSY;
	int j = 0;
	for (int i = 0; i < npending; i++)
		if (pending[i] != tid)
			pending[j++] = pending[i];
	npending = j;
	return c > 0 ? 0 : c;
}

int ptrace_stop(pid_t tid, uint64_t timeout_ns, struct ptrace_stop *st)
{
	if (!chld_blocked) {
		sigemptyset(&chld_set);
		sigaddset(&chld_set, SIGCHLD);
		sigprocmask(SIG_BLOCK, &chld_set, NULL);
		chld_blocked = 1;
	}
	memset(st, 0, sizeof *st);
	st->tid = tid;
	if (ptrace_is_pending(tid))
		return take_pending(tid, st);
	if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0) {
		if (errno == EPERM) /* another tracer holds it, or not ours to trace */
			return proc_tracer(tid) ? -LS_E_TRACED : -LS_E_PERM;
		return -LS_E_GONE;
	}
	if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return -LS_E_GONE;
	}
	uint64_t t0 = time_now_ns();
	for (;;) {
		int status;
		pid_t r = waitpid(tid, &status, __WALL | WNOHANG);
		if (r == tid) {
			int c = classify(tid, status, st);
			if (c != 0)
				return c > 0 ? 0 : c;
			continue;
		}
		if (r < 0 && errno != EINTR)
			return -LS_E_GONE;
		uint64_t el = time_now_ns() - t0;
		if (el >= timeout_ns) {
			if (npending < MAX_PENDING)
				pending[npending++] = tid;
			return -LS_E_BUSY;
		}
		if (el >= ptrace_spin_ns) {
			/* sleep until a SIGCHLD (the stop, or a stale one: then
			 * waitpid says no and we sleep again) or the timeout */
			uint64_t left = timeout_ns - el;
			struct timespec ts = { (time_t)(left / 1000000000ull), (long)(left % 1000000000ull) };
			sigtimedwait(&chld_set, NULL, &ts);
		}
	}
}

int ptrace_npending(void)
{
	return npending;
}

int ptrace_is_pending(pid_t tid)
{
	for (int i = 0; i < npending; i++)
		if (pending[i] == tid)
			return 1;
	return 0;
}

int ptrace_getregs(pid_t tid, struct user_regs_struct *regs)
{
	if (ptrace(PTRACE_GETREGS, tid, 0, regs) < 0)
		return -LS_E_GONE;
	return 0;
}

int ptrace_release(struct ptrace_stop *st)
{
	if (ptrace(PTRACE_DETACH, st->tid, 0, (void *)(long)st->pass_sig) < 0)
		return -LS_E_GONE;
	return 0;
}

int ptrace_reap_pending(void)
{
	int j = 0;
	for (int i = 0; i < npending; i++) {
		int status;
		pid_t tid = pending[i];
		pid_t r = waitpid(tid, &status, __WALL | WNOHANG);
		if (r == 0) {
			pending[j++] = tid;
			continue;
		}
		if (r == tid && WIFSTOPPED(status)) {
			int event = (unsigned)status >> 16;
			int sig = event == 0 ? WSTOPSIG(status) : 0;
			ptrace(PTRACE_DETACH, tid, 0, (void *)(long)sig);
		} else if (r == tid) {
			note_reaped(tid, status);
		}
	}
	npending = j;
	return npending;
}

int ptrace_detach_stray(pid_t pid, int status)
{
	int event = (unsigned)status >> 16;
	if (ptrace(PTRACE_DETACH, pid, 0, (void *)(long)(event ? 0 : WSTOPSIG(status))) < 0)
		return -LS_E_GONE;
	return 0;
}
