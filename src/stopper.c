/* stopper.c: the stop-window thread (see stopper.h). */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "err.h"
#include "proc_ptrace.h"
#include "stopper.h"
#include "timeutil.h"

static struct {
	int active;
	pthread_t th;
	cpu_set_t mask;          /* our affinity at start */
	int cpu;                 /* the stopper's CPU, -1 = the start mask */
	/* one request at a time: the caller bumps req, the stopper bumps done */
	_Atomic uint32_t req, done;
	int want_cpu;
	int (*fn)(void *);
	void *arg;
	int rc;
	int quit;
	int in_fn;               /* stopper_done() not yet called for this request */
	_Atomic int caller_sleeps; /* the caller waits in futex_wait on done */
	_Atomic uint32_t boot;   /* 1 the stopper runs boosted, -1 it could not */
} sp = { .cpu = -1 };

/* The caller spins this long for the result before it sleeps. A stop
 * window takes tens of us. A caller that sleeps leaves its CPU idle, and
 * the idle CPU pulls the target over while the stopper has preempted it
 * (newidle balance) or gets it on the wakeup after PTRACE_DETACH: lua5.4
 * at 100 Hz migrated 1.4 times per sample and lost 5-25 % of its work;
 * spinning: no migrations, for ~50 us of CPU per sample. */
#define CALLER_SPIN_NS 300000ull

static void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void pin(int cpu)
{
	if (cpu == sp.cpu)
		return;
	cpu_set_t set;
	if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &sp.mask)) {
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
	} else {
		set = sp.mask;
		cpu = -1;
	}
	if (sched_setaffinity(0, sizeof set, &set) == 0)
		sp.cpu = cpu;
}

void stopper_done(int rc)
{
	if (!sp.active || !sp.in_fn)
		return;
	sp.in_fn = 0;
	sp.rc = rc;
	atomic_store(&sp.done, atomic_load_explicit(&sp.req, memory_order_relaxed));
}

/* After the request's work: wake the caller if it went to sleep. */
static void wake_caller(void)
{
	if (atomic_load(&sp.caller_sleeps))
		futex_wake(&sp.done);
}

struct ls_sched_attr {
	uint32_t size, policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime, deadline, period;
};

/* Make the stopper win its CPU at once when woken: it must preempt the
 * target there, and the fair scheduler otherwise lets a running task
 * finish its slice first (measured: at 1 kHz half the ticks came late, up
 * to 8 ms). Nice -20 (needs CAP_SYS_NICE, which a root profiler has) and
 * a 0.1 ms slice (sched_setattr sched_runtime, honoured from Linux 6.12:
 * a shorter slice may preempt on wakeup) together got that down to
 * 0.1-1 % late ticks. The stopper runs microseconds per sample and never
 * spins, so its priority takes nothing from the target but the stop
 * itself. Returns 0, or -1 when the nice value could not be set. */
static int boost(void)
{
	struct ls_sched_attr a;
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.policy = SCHED_OTHER;
	a.nice = -20;
	a.runtime = 100000;
	if (syscall(SYS_sched_setattr, 0, &a, 0) == 0)
		return 0;
	/* an older kernel may refuse the slice: the nice value alone */
	return setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -20) == 0 ? 0 : -1;
}

static void *loop(void *unused)
{
	(void)unused;
	uint32_t seen = 0;
	pthread_setname_np(pthread_self(), "luaspy-stop");
	atomic_store(&sp.boot, boost() == 0 ? 1 : -1);
	futex_wake(&sp.boot);
	for (;;) {
		uint32_t r;
		while ((r = atomic_load_explicit(&sp.req, memory_order_acquire)) == seen)
			futex_wait(&sp.req, seen);
		seen = r;
		sp.in_fn = 1;
		if (sp.quit) {
			stopper_done(0);
			wake_caller();
			return NULL;
		}
		if (sp.want_cpu >= 0)
			pin(sp.want_cpu);
		int rc = sp.fn(sp.arg);
		stopper_done(rc);
		wake_caller();
	}
}

int stopper_start(void)
{
	if (sp.active)
		return 1;
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, NULL);
	/* never spin for the stop: the stopper runs where the stop happens,
	 * and so does everything with a single CPU; spinning there would keep
	 * the thread from reaching its stop */
	uint64_t spin_was = ptrace_spin_ns;
	ptrace_spin_ns = 0;
	if (sched_getaffinity(0, sizeof sp.mask, &sp.mask) < 0 || CPU_COUNT(&sp.mask) < 2)
		return 0;
	atomic_store(&sp.boot, 0);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&sp.th, NULL, loop, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return -LS_E_NOMEM;
	sp.active = 1;
	uint32_t b;
	while ((b = atomic_load(&sp.boot)) == 0)
		futex_wait(&sp.boot, 0);
	if (b != 1) {
		/* without priority the stopper waits for the target's slice to
		 * end: worse than stopping from another CPU */
		stopper_end();
		ptrace_spin_ns = spin_was;
		return 0;
	}
	return 1;
}

static int submit(int cpu, int (*fn)(void *), void *arg, int quit)
{
	sp.want_cpu = cpu;
	sp.fn = fn;
	sp.arg = arg;
	sp.quit = quit;
	uint32_t r = atomic_load_explicit(&sp.req, memory_order_relaxed) + 1;
	atomic_store_explicit(&sp.req, r, memory_order_release);
	futex_wake(&sp.req);
	uint64_t t0 = time_now_ns();
	uint32_t d;
	while ((d = atomic_load_explicit(&sp.done, memory_order_acquire)) != r) {
		if (time_now_ns() - t0 < CALLER_SPIN_NS) {
			__builtin_ia32_pause();
			continue;
		}
		atomic_store(&sp.caller_sleeps, 1);
		if ((d = atomic_load(&sp.done)) != r)
			futex_wait(&sp.done, d);
		atomic_store(&sp.caller_sleeps, 0);
	}
	return sp.rc;
}

int stopper_call(int cpu, int (*fn)(void *arg), void *arg)
{
	if (!sp.active)
		return fn(arg);
	return submit(cpu, fn, arg, 0);
}

void stopper_end(void)
{
	if (!sp.active)
		return;
	submit(-1, NULL, NULL, 1);
	pthread_join(sp.th, NULL);
	sp.active = 0;
	sp.cpu = -1;
}
