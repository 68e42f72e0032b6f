/* heap_child.c: the launched command of `heap -- COMMAND`, traced so
 * that its heap is walked at lua_close's entry or at its exit
 * (heap_child.h, docs/heap.md §10). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "err.h"
#include "heap_child.h"
#include "msg.h"
#include "proc_task.h"
#include "timeutil.h"

#define HC_MAX_THREADS 4096      /* threads of the command followed; more are refused */
#define HC_SLICE_NS (100 * 1000000ull) /* longest sleep of one wait: signals end it sooner */

struct hc_thread {
	pid_t tid;
	int stopped;      /* in a ptrace stop we hold */
	int sig;          /* signal to pass on when it is restarted */
	int group;        /* the stop is a group-stop: restart with PTRACE_LISTEN */
};

struct heap_child {
	pid_t pid;
	uint64_t addr;    /* lua_close's entry, 0: no breakpoint */
	uint8_t orig;     /* the byte the int3 replaced */
	int armed;        /* the int3 is in the code now */
	int was_armed;    /* it was, once: an int3 trap at ADDR is ours */
	int closing;      /* a thread stopped at lua_close */
	int exiting;      /* the main thread stopped at its exit (HC_EXIT) */
	int execd;        /* the command ran execve: another program, no breakpoint */
	int reaped, status;
	struct hc_thread th[HC_MAX_THREADS];
	int n;
};

static struct hc_thread *hc_find(struct heap_child *hc, pid_t tid)
{
	for (int i = 0; i < hc->n; i++)
		if (hc->th[i].tid == tid)
			return &hc->th[i];
	return NULL;
}

static struct hc_thread *hc_add(struct heap_child *hc, pid_t tid)
{
	struct hc_thread *t = hc_find(hc, tid);
	if (t || hc->n >= HC_MAX_THREADS)
		return t;
	t = &hc->th[hc->n++];
	memset(t, 0, sizeof *t);
	t->tid = tid;
	return t;
}

static void hc_remove(struct heap_child *hc, pid_t tid)
{
	struct hc_thread *t = hc_find(hc, tid);
	if (t)
		*t = hc->th[--hc->n];
}

/* Write byte B at ADDR through stopped thread TID (a word read, changed,
 * written: PTRACE_POKEDATA breaks the copy-on-write of the code page).
 * *OLD (may be NULL) gets the byte that was there. 0 or -LS_E_*. */
static int hc_poke_byte(pid_t tid, uint64_t addr, uint8_t b, uint8_t *old)
{
	errno = 0;
	long w = ptrace(PTRACE_PEEKDATA, tid, (void *)addr, NULL);
	if (errno)
		return errno == ESRCH ? -LS_E_GONE : -LS_E_FAULT;
	if (old)
		*old = (uint8_t)(w & 0xff);
	w = (long)(((unsigned long)w & ~0xfful) | b);
	if (ptrace(PTRACE_POKEDATA, tid, (void *)addr, (void *)w) != 0)
		return errno == ESRCH ? -LS_E_GONE : -LS_E_FAULT;
	return 0;
}

/* The next wait status of any traced thread: 1 with *TID, *STATUS; 0 at
 * DEADLINE_NS (0: none); 2 when *STOP_FLAG (may be NULL) is set (by a
 * signal handler: its signal ends the sleep);
 * -1 when nothing is left to wait for. */
static int hc_next(uint64_t deadline_ns, const volatile int *stop_flag, pid_t *tid, int *status)
{
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		pid_t r = waitpid(-1, status, __WALL | WNOHANG);
		if (r > 0) {
			*tid = r;
			return 1;
		}
		if (r < 0 && errno == ECHILD)
			return -1;
		if (stop_flag && *stop_flag)
			return 2;
		uint64_t now = time_now_ns();
		if (deadline_ns && now >= deadline_ns)
			return 0;
		uint64_t left = deadline_ns ? deadline_ns - now : HC_SLICE_NS;
		if (left > HC_SLICE_NS)
			left = HC_SLICE_NS;
		struct timespec ts = { (time_t)(left / 1000000000u), (long)(left % 1000000000u) };
		sigtimedwait(&chld, NULL, &ts);
	}
}

/* A stop or exit of TID (wait STATUS). STOPPING: the stops are being
 * collected (heap_child_stop): a stop is kept, not restarted. Returns an
 * enum heap_child_event worth returning (HC_CLOSE, HC_EXIT, HC_GONE) or
 * HC_TIMEOUT for "nothing to report". */
static int hc_handle(struct heap_child *hc, pid_t tid, int status, int stopping)
{
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		if (tid == hc->pid) {
			hc->reaped = 1;
			hc->status = status;
			hc->n = 0;
			return HC_GONE;
		}
		hc_remove(hc, tid);
		return HC_TIMEOUT;
	}
	if (!WIFSTOPPED(status))
		return HC_TIMEOUT;
	int ev = status >> 16, sig = WSTOPSIG(status);
	struct hc_thread *t = hc_find(hc, tid);
	if (!t) {
		char task[64];
		snprintf(task, sizeof task, "/proc/%d/task/%d", (int)hc->pid, (int)tid);
		if (access(task, F_OK) != 0) {
			/* a process the command forked: its copy of the code
			 * gets the byte back, then it goes its own way */
			if (hc->was_armed && hc_poke_byte(tid, hc->addr, hc->orig, NULL) == 0)
				msg_debug(1, "heap: pid %d: the command forked pid %d: lua_close restored in it",
					  (int)hc->pid, (int)tid);
			ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)(ev ? 0 : sig == SIGSTOP ? 0 : sig));
			return HC_TIMEOUT;
		}
		t = hc_add(hc, tid);
		if (!t) { /* more threads than followed: let it run untraced */
			ptrace(PTRACE_DETACH, tid, NULL, NULL);
			return HC_TIMEOUT;
		}
	}
	int group = 0, report = HC_TIMEOUT;
	if (ev == PTRACE_EVENT_CLONE) {
		unsigned long nt = 0;
		if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &nt) == 0 && nt)
			hc_add(hc, (pid_t)nt);
		sig = 0;
	} else if (ev == PTRACE_EVENT_EXEC) {
		hc->execd = 1;
		hc->armed = 0;
		hc->was_armed = 0;
		sig = 0;
	} else if (ev == PTRACE_EVENT_EXIT) {
		sig = 0;
		/* the int3 still in place: lua_close never ran, the heap is whole */
		if (tid == hc->pid && hc->armed && !hc->exiting) {
			hc->exiting = 1;
			report = HC_EXIT;
		}
	} else if (ev == PTRACE_EVENT_STOP) {
		group = sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
		sig = 0;
	} else if (ev == PTRACE_EVENT_FORK || ev == PTRACE_EVENT_VFORK) {
		sig = 0;
	} else if (ev == 0 && sig == SIGTRAP && hc->was_armed) {
		struct user_regs_struct r;
		if (ptrace(PTRACE_GETREGS, tid, NULL, &r) == 0 && r.rip - 1 == hc->addr) {
			/* our int3: back to the entry, the byte back */
			r.rip = hc->addr;
			ptrace(PTRACE_SETREGS, tid, NULL, &r);
			if (hc->armed && hc_poke_byte(tid, hc->addr, hc->orig, NULL) == 0)
				hc->armed = 0;
			sig = 0;
			if (!hc->closing) {
				hc->closing = 1;
				report = HC_CLOSE;
			}
		}
	}
	t->sig = sig;
	t->group = group;
	if (stopping || report != HC_TIMEOUT) {
		t->stopped = 1;
		return report;
	}
	if (group)
		ptrace(PTRACE_LISTEN, tid, NULL, NULL);
	else
		ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig);
	t->stopped = 0;
	return HC_TIMEOUT;
}

int heap_child_attach(pid_t pid, uint64_t close_addr, struct heap_child **out)
{
	struct heap_child *hc = calloc(1, sizeof *hc);
	if (!hc)
		return -LS_E_NOMEM;
	hc->pid = pid;
	struct proc_thread *th;
	int nth;
	int rc = proc_threads(pid, &th, &nth);
	if (rc < 0) {
		free(hc);
		return rc;
	}
	long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC |
		    PTRACE_O_EXITKILL;
	for (int i = 0; i < nth && i < HC_MAX_THREADS; i++) {
		if (ptrace(PTRACE_SEIZE, th[i].tid, NULL, (void *)opts) == 0)
			hc_add(hc, th[i].tid);
		else if (errno == EPERM) {
			rc = -LS_E_PERM;
			break;
		}
	}
	free(th);
	if (rc == 0 && hc->n == 0)
		rc = -LS_E_GONE;
	if (rc == 0 && close_addr) {
		int nth2;
		int left = heap_child_stop(hc, 1000 * 1000000ull, &nth2);
		struct hc_thread *lead = hc_find(hc, pid);
		if (hc->reaped)
			rc = -LS_E_GONE;
		else if (left || !lead || !lead->stopped)
			rc = -LS_E_BUSY;
		else if ((rc = hc_poke_byte(pid, close_addr, 0xcc, &hc->orig)) == 0) {
			hc->addr = close_addr;
			hc->armed = hc->was_armed = 1;
		}
		if (hc->orig == 0xcc && hc->armed) {
			/* someone's breakpoint is there already: not ours to keep */
			hc->armed = hc->was_armed = 0;
			rc = -LS_E_TRACED;
		}
		if (!hc->reaped)
			heap_child_resume(hc);
	}
	if (rc < 0) {
		heap_child_detach(hc);
		return rc;
	}
	*out = hc;
	return 0;
}

int heap_child_wait(struct heap_child *hc, uint64_t deadline_ns, const volatile int *stop_flag)
{
	for (;;) {
		if (hc->reaped)
			return HC_GONE;
		pid_t tid;
		int status;
		int r = hc_next(deadline_ns, stop_flag, &tid, &status);
		if (r == 0)
			return HC_TIMEOUT;
		if (r == 2)
			return HC_SIGNAL;
		if (r < 0) {
			hc->reaped = 1;
			return HC_GONE;
		}
		int ev = hc_handle(hc, tid, status, 0);
		if (ev != HC_TIMEOUT)
			return ev;
	}
}

int heap_child_stop(struct heap_child *hc, uint64_t timeout_ns, int *nth)
{
	for (int i = 0; i < hc->n; i++)
		if (!hc->th[i].stopped && ptrace(PTRACE_INTERRUPT, hc->th[i].tid, NULL, NULL) != 0 &&
		    errno == ESRCH)
			hc->th[i].stopped = -1; /* gone: its exit is on the way */
	uint64_t deadline = time_now_ns() + timeout_ns;
	for (;;) {
		int left = 0;
		for (int i = 0; i < hc->n; i++)
			left += hc->th[i].stopped == 0;
		if (!left || hc->reaped)
			break;
		pid_t tid;
		int status;
		int r = hc_next(deadline, NULL, &tid, &status);
		if (r <= 0)
			break;
		hc_handle(hc, tid, status, 1);
	}
	int left = 0;
	for (int i = 0; i < hc->n; i++) {
		if (hc->th[i].stopped < 0)
			hc->th[i].stopped = 0;
		else
			left += hc->th[i].stopped == 0;
	}
	*nth = hc->n;
	return left;
}

int heap_child_resume(struct heap_child *hc)
{
	int rc = 0;
	for (int i = 0; i < hc->n; i++) {
		struct hc_thread *t = &hc->th[i];
		if (!t->stopped)
			continue;
		long r = t->group ? ptrace(PTRACE_LISTEN, t->tid, NULL, NULL)
				  : ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)t->sig);
		if (r != 0)
			rc = -LS_E_GONE;
		t->stopped = 0;
		t->sig = 0;
	}
	return rc;
}

int heap_child_closing(const struct heap_child *hc)
{
	return hc->closing;
}

int heap_child_exiting(const struct heap_child *hc)
{
	return hc->exiting;
}

int heap_child_status(const struct heap_child *hc, int *status)
{
	if (!hc->reaped)
		return 0;
	*status = hc->status;
	return 1;
}

void heap_child_detach(struct heap_child *hc)
{
	if (!hc)
		return;
	if (!hc->reaped) {
		int nth;
		heap_child_stop(hc, 1000 * 1000000ull, &nth);
		struct hc_thread *any = NULL;
		for (int i = 0; i < hc->n && !any; i++)
			if (hc->th[i].stopped)
				any = &hc->th[i];
		if (hc->armed && any && hc_poke_byte(any->tid, hc->addr, hc->orig, NULL) == 0)
			hc->armed = 0;
		if (hc->armed)
			msg_debug(1, "heap: pid %d: lua_close's byte could not be put back", (int)hc->pid);
		for (int i = 0; i < hc->n; i++)
			if (hc->th[i].stopped)
				ptrace(PTRACE_DETACH, hc->th[i].tid, NULL, (void *)(long)hc->th[i].sig);
	}
	free(hc);
}
