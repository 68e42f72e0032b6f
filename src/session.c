/* session.c: targets, the sampling loop and stack accounting. */
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "err.h"
#include "intern.h"
#include "msg.h"
#include "proc_ptrace.h"
#include "proc_task.h"
#include "sampler.h"
#include "session.h"
#include "stopper.h"
#include "timeutil.h"

#define MAX_TARGETS 256
#define MAX_STOP_RECORDS (1u << 20)
#define CHILD_SCAN_NS (200 * 1000000ull)
#define REPROBE_NS (1000 * 1000000ull)
#define HOUSEKEEP_NS (100 * 1000000ull)

volatile int session_stop_signal;

struct tgt {
	pid_t pid;
	struct target *t;          /* NULL while not (yet) Lua */
	uint64_t next_probe_ns;
	int dead;
	const char *root_label;    /* "process PID \"cmdline\"" */
	struct proc_thread *th;    /* thread list, relisted every RELIST_NS */
	int *stat_fd;              /* per thread: /proc/PID/task/TID/stat, -1 */
	int nth;
	uint64_t relist_ns;
};

struct session {
	struct cli_opts o;
	struct sampler_opts so;
	struct tgt tg[MAX_TARGETS];
	int ntg;
	pid_t child;               /* launched command, 0 if attached */
	int child_status;          /* wait status once reaped */
	int child_reaped;
	uint64_t next_child_scan;
	struct session_stats st;
	struct thread_snap ts;
	struct stack stack;
	uint32_t *stop_us;         /* stop time per sample, in us */
	uint32_t *walk_us;
	size_t nstop;
	const char *runtime;
	uint64_t start_ns;         /* session_start entered */
	uint64_t attached_ns;      /* the first target was opened and probed */
	uint64_t first_sample_ns;  /* the first stack was counted */
	cpu_set_t place_mask;      /* our affinity at start (place()) */
	int place_init;            /* 0 not yet, 1 ok, -1 unusable */
	int place_cpu;             /* CPU we keep off, -1 none */
};

static void on_signal(int sig)
{
	session_stop_signal = sig;
}

static void install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	nanosleep(&ts, NULL);
}

/* Reap the launched child if it exited (on the stopper thread: it may
 * have to detach a ptrace stop). */
static int check_child_fn(void *arg);

static void check_child(struct session *s)
{
	if (s->child && !s->child_reaped)
		stopper_call(-1, check_child_fn, s);
}

/* Release timed-out stops; with ARG (the session), check the child too
 * (check_child_fn releases them itself). */
static int reap_pending_fn(void *arg)
{
	return arg ? check_child_fn(arg) : ptrace_reap_pending();
}

static void reap_pending(void)
{
	stopper_call(-1, reap_pending_fn, NULL);
}

static int check_child_fn(void *arg)
{
	struct session *s = arg;
	/* The child's main thread may still be seized from a stop that timed
	 * out: its ptrace stop is proc_ptrace.c's to collect, not ours (and
	 * collecting it may reap the child's exit). */
	ptrace_reap_pending();
	if (!s->child || s->child_reaped)
		return 0;
	int status;
	if (ptrace_child_reaped(s->child, &status)) {
		s->child_status = status;
		s->child_reaped = 1;
		return 0;
	}
	if (ptrace_is_pending(s->child))
		return 0;
	pid_t r = waitpid(s->child, &status, WNOHANG | __WALL);
	if (r != s->child)
		return 0;
	if (WIFSTOPPED(status)) {
		/* a stray ptrace stop (never expected: we are detached between
		 * samples); let it go with its signal */
		int event = (unsigned)status >> 16;
		ptrace(PTRACE_DETACH, s->child, 0, (void *)(long)(event ? 0 : WSTOPSIG(status)));
		return 0;
	}
	s->child_status = status;
	s->child_reaped = 1;
	return 0;
}

static int child_exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 1;
}

static void kill_child(struct session *s)
{
	if (!s->child || s->child_reaped)
		return;
	kill(s->child, SIGTERM);
	for (int i = 0; i < 100; i++) {
		check_child(s);
		if (s->child_reaped)
			return;
		sleep_ns(10 * 1000000ull);
	}
	kill(s->child, SIGKILL);
	int status;
	if (waitpid(s->child, &status, 0) == s->child) {
		s->child_status = status;
		s->child_reaped = 1;
	}
}

static int launch(struct session *s)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -1;
	}
	if (pid == 0) {
		close(pfd[0]);
		signal(SIGPIPE, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL); /* ptrace_stop blocks SIGCHLD */
		execvp(s->o.argv[0], s->o.argv);
		int e = errno;
		ssize_t w = write(pfd[1], &e, sizeof e);
		(void)w;
		_exit(127);
	}
	close(pfd[1]);
	int e = 0;
	ssize_t n = read(pfd[0], &e, sizeof e);
	close(pfd[0]);
	s->child = pid;
	if (n == (ssize_t)sizeof e) {
		int status;
		waitpid(pid, &status, 0);
		s->child_reaped = 1;
		s->child_status = status;
		msg_error("cannot run '%s': %s", s->o.argv[0], strerror(e));
		return -2;
	}
	return 0;
}

static const char *root_label(pid_t pid)
{
	char cmd[256];
	if (proc_cmdline(pid, cmd, sizeof cmd) < 0)
		cmd[0] = 0;
	for (char *c = cmd; *c; c++)
		if (*c == '"')
			*c = '\'';
	return internf("process %d \"%s\"", (int)pid, cmd);
}

/* Try to attach to TG (open + probe). Returns 0 when Lua was found,
 * -LS_E_NOTLUA/-UNSUPPORTED (WHY filled) or another -LS_E_*. */
static int probe_tgt(struct session *s, struct tgt *tg, char *why, size_t whylen)
{
	struct target *t;
	int vmrc;
	int rc = target_open(tg->pid, VM_PROBE | VM_PROBE_QUICK, &t, &vmrc, why, whylen);
	if (rc < 0)
		return rc;
	if (vmrc < 0) {
		target_close(t);
		return vmrc;
	}
	/* a young process maps libraries while we probe: read its maps again */
	target_refresh(t);
	tg->t = t;
	tg->root_label = root_label(tg->pid);
	if (!s->runtime && t->vm_ops->describe)
		s->runtime = intern(t->vm_ops->describe(t->vm));
	msg_debug(1, "pid %d: profiling %s", (int)tg->pid, s->runtime ? s->runtime : "Lua");
	return 0;
}

static struct tgt *add_tgt(struct session *s, pid_t pid)
{
	for (int i = 0; i < s->ntg; i++)
		if (s->tg[i].pid == pid)
			return &s->tg[i];
	if (s->ntg == MAX_TARGETS)
		return NULL;
	struct tgt *tg = &s->tg[s->ntg++];
	memset(tg, 0, sizeof *tg);
	tg->pid = pid;
	return tg;
}

/* session_start gave up: stop the launched child (if any), free S,
 * return CODE. */
static int start_failed(struct session *s, int code)
{
	kill_child(s);
	free(s->stop_us);
	free(s->walk_us);
	free(s);
	return code;
}

int session_start(const struct cli_opts *o, struct session **out)
{
	*out = NULL;
	struct session *s = calloc(1, sizeof *s);
	if (!s)
		return msg_err_pid(0, -LS_E_NOMEM);
	s->o = *o;
	s->start_ns = time_now_ns();
	sampler_opts_default(&s->so);
	s->so.idle = o->idle;
	s->so.native = o->native && !o->lua_only;
	s->so.nonblocking = o->nonblocking;
	s->so.walk_stopped = o->blocking;
	/* a sample must never block for longer than one interval */
	uint64_t period = (uint64_t)(1e9 / o->rate_hz);
	s->so.stop_timeout_ns = period < 50000000ull ? period : 50000000ull;
	s->stop_us = malloc(MAX_STOP_RECORDS * sizeof *s->stop_us);
	s->walk_us = malloc(MAX_STOP_RECORDS * sizeof *s->walk_us);
	if (!s->stop_us || !s->walk_us)
		return start_failed(s, msg_err_pid(0, -LS_E_NOMEM));
	install_signals();
	pid_t pid = o->pid;
	if (o->argv) {
		int lr = launch(s);
		if (lr < 0) /* -2: the command could not run (said, and reaped) */
			return start_failed(s, lr == -2 ? 127 : msg_err_pid(0, -LS_E_INTERNAL));
		pid = s->child;
	} else {
		int rc = proc_check(pid);
		if (rc < 0)
			return start_failed(s, msg_err_pid(pid, rc));
	}
	struct tgt *tg = add_tgt(s, pid);
	uint64_t deadline = time_now_ns() + (uint64_t)(o->timeout_s * 1e9);
	char why[512] = "";
	int rc;
	for (;;) {
		rc = probe_tgt(s, tg, why, sizeof why);
		if (rc == 0)
			break;
		check_child(s);
		if (s->child_reaped) {
			/* the command ended before Lua showed up: nothing to sample */
			tg->dead = 1;
			*out = s;
			return 0;
		}
		/* a process that is starting, exec'ing or exiting can fail any
		 * read: only these errors are final at once */
		if (rc == -LS_E_PERM || rc == -LS_E_ARCH32 || rc == -LS_E_KTHREAD ||
		    rc == -LS_E_NOMEM)
			break;
		if (!s->child && !proc_alive(pid)) {
			rc = -LS_E_EXITED;
			break;
		}
		if (time_now_ns() >= deadline || session_stop_signal)
			break;
		/* also consider children: a shell that starts Lua */
		sleep_ns(50 * 1000000ull);
	}
	if (rc < 0 && !o->subprocesses) {
		int code;
		if (rc == -LS_E_UNSUPPORTED) {
			msg_error("pid %d: unsupported runtime: %s", (int)pid, why);
			code = err_exit_code(rc);
		} else {
			code = msg_err_pid(pid, rc == -LS_E_NOPID && s->child ? -LS_E_EXITED : rc);
		}
		return start_failed(s, code);
	}
	if (rc < 0)
		tg->next_probe_ns = time_now_ns() + REPROBE_NS;
	else
		s->attached_ns = time_now_ns();
	if (!o->nonblocking && stopper_start() < 0)
		return start_failed(s, msg_err_pid(0, -LS_E_NOMEM));
	*out = s;
	return 0;
}

/* --subprocesses: find descendants of the targets, add new ones, re-probe
 * the ones without Lua now and then. */
static void scan_children(struct session *s)
{
	uint64_t now = time_now_ns();
	if (now < s->next_child_scan)
		return;
	s->next_child_scan = now + CHILD_SCAN_NS;
	for (int i = 0; i < s->ntg; i++) {
		if (s->tg[i].dead)
			continue;
		pid_t kids[256];
		int n = proc_children(s->tg[i].pid, kids, 256);
		for (int k = 0; k < n; k++) {
			int known = 0;
			for (int j = 0; j < s->ntg; j++)
				if (s->tg[j].pid == kids[k])
					known = 1;
			if (!known) {
				struct tgt *t = add_tgt(s, kids[k]);
				if (t)
					t->next_probe_ns = now;
			}
		}
	}
	for (int i = 0; i < s->ntg; i++) {
		struct tgt *tg = &s->tg[i];
		if (tg->dead || tg->t || now < tg->next_probe_ns)
			continue;
		char why[256];
		int rc = probe_tgt(s, tg, why, sizeof why);
		if (rc == -LS_E_NOPID || rc == -LS_E_GONE || rc == -LS_E_ZOMBIE)
			tg->dead = 1;
		else if (rc < 0)
			tg->next_probe_ns = now + REPROBE_NS;
	}
}

static void account(struct session *s, struct profile *p, struct tgt *tg, pid_t tid,
		    const char *tname, struct stack *st, const struct walk_info *info)
{
	if (s->o.function)
		for (int i = 0; i < st->n; i++)
			if (st->f[i].kind == FRAME_LUA && st->f[i].firstline > 0)
				st->f[i].line = st->f[i].firstline;
	if (s->o.vmstate && info->vmstate) {
		struct frame v = { 0 };
		v.kind = FRAME_VMSTATE;
		if (info->trace > 0)
			v.name = internf("[JIT trace %d]", info->trace);
		else
			v.name = internf("[%s]", info->vmstate);
		if (stack_push(st, &v) == 0) {
			memmove(&st->f[1], &st->f[0], (size_t)(st->n - 1) * sizeof st->f[0]);
			st->f[0] = v;
		}
	}
	struct frame r = { 0 };
	r.kind = FRAME_ROOT;
	if (s->o.threads) {
		r.name = internf("thread %d \"%s\"", (int)tid, tname);
		stack_push(st, &r);
	}
	if (s->o.subprocesses) {
		r.name = tg->root_label;
		stack_push(st, &r);
	}
	profile_add(p, tid, st, 1);
	if (!s->st.samples)
		s->first_sample_ns = time_now_ns();
	s->st.samples++;
	if (info->lua_frames > 0)
		s->st.vmstate[info->trace > 0 ? VMS_TRACE : info->state]++;
}

static void count_error(struct session *s, int rc)
{
	s->st.errors++;
	int e = rc < 0 ? -rc : rc;
	if (e < 32)
		s->st.err_by_kind[e]++;
}

/* ---- CPU placement ----
 * The stop window runs on the stopper thread, pinned to the CPU the
 * sampled thread last ran on (stopper.h). This thread unwinds and walks
 * afterwards, and keeps off that CPU so as not to take it from the
 * target; within the affinity luaspy was started with, and not at all
 * with one allowed CPU. CPU comes from the thread's stat, read every
 * tick anyway. */
static void place(struct session *s, int cpu)
{
	if (!s->place_init) {
		s->place_init = 1;
		s->place_cpu = -1;
		if (sched_getaffinity(0, sizeof s->place_mask, &s->place_mask) < 0)
			s->place_init = -1;
	}
	if (s->place_init < 0 || CPU_COUNT(&s->place_mask) < 2)
		return;
	if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == s->place_cpu)
		return;
	cpu_set_t set = s->place_mask;
	CPU_CLR(cpu, &set);
	if (CPU_COUNT(&set) == 0)
		set = s->place_mask;
	if (sched_setaffinity(0, sizeof set, &set) == 0)
		s->place_cpu = cpu;
}

/* ---- thread list ----
 * Listing /proc/PID/task and reading every thread's stat costs ~8
 * syscalls per tick for one thread. The list is taken every RELIST_NS
 * (new threads show up that much later); in between, each listed
 * thread's state comes from one pread of its stat file, kept open (up to
 * MAX_STAT_FDS threads; larger processes are relisted every tick). */
#define RELIST_NS (100 * 1000000ull)
#define MAX_STAT_FDS 256

static void threads_drop(struct tgt *tg)
{
	for (int i = 0; tg->stat_fd && i < tg->nth; i++)
		if (tg->stat_fd[i] >= 0)
			close(tg->stat_fd[i]);
	free(tg->stat_fd);
	free(tg->th);
	tg->stat_fd = NULL;
	tg->th = NULL;
	tg->nth = 0;
}

/* Fresh states of TG's threads into tg->th[].state; 0 or -LS_E_*. */
static int threads_update(struct tgt *tg)
{
	uint64_t now = time_now_ns();
	if (tg->th && tg->stat_fd && now < tg->relist_ns) {
		int alive = 0;
		for (int i = 0; i < tg->nth; i++) {
			char buf[512];
			ssize_t r = tg->stat_fd[i] < 0 ? -1 : pread(tg->stat_fd[i], buf, sizeof buf - 1, 0);
			char st = 'X';
			int cpu = -1;
			if (r > 0) {
				buf[r] = 0;
				if (proc_stat_state_cpu(buf, &st, &cpu) < 0)
					st = 'X';
			}
			tg->th[i].state = st;
			tg->th[i].cpu = cpu;
			alive += tg->th[i].state != 'X';
		}
		if (alive)
			return 0;
	}
	threads_drop(tg);
	struct proc_thread *th;
	int n;
	int rc = proc_threads(tg->pid, &th, &n);
	if (rc < 0)
		return rc;
	tg->th = th;
	tg->nth = n;
	tg->relist_ns = now + RELIST_NS;
	if (n <= MAX_STAT_FDS && (tg->stat_fd = malloc((size_t)n * sizeof *tg->stat_fd))) {
		for (int i = 0; i < n; i++) {
			char path[64];
			snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)tg->pid, (int)th[i].tid);
			tg->stat_fd[i] = open(path, O_RDONLY | O_CLOEXEC);
		}
	}
	return 0;
}

static void sample_target(struct session *s, struct profile *p, struct tgt *tg)
{
	int rc = threads_update(tg);
	if (rc < 0) {
		tg->dead = 1;
		threads_drop(tg);
		return;
	}
	struct proc_thread *th = tg->th;
	int n = tg->nth;
	for (int i = 0; i < n; i++) {
		char state = th[i].state;
		if (state == 'T' || state == 't' || state == 'Z' || state == 'X')
			continue; /* stopped by someone else, or exiting */
		if (!s->so.idle && state != 'R')
			continue;
		struct walk_info info;
		struct sample_stats ss;
		if (!s->so.nonblocking) /* nothing is stopped: no reason to move */
			place(s, th[i].cpu);
		rc = sampler_sample_thread(tg->t, th[i].tid, state, th[i].cpu, &s->so, &s->ts, &s->stack,
					   &info, &ss);
		s->st.threads++;
		if (rc == -LS_E_GONE)
			continue;
		if (rc < 0) {
			count_error(s, rc);
			continue;
		}
		if (s->nstop < MAX_STOP_RECORDS) {
			s->stop_us[s->nstop] = (uint32_t)(ss.stopped_ns / 1000);
			s->walk_us[s->nstop] = (uint32_t)(ss.walk_ns / 1000);
			s->nstop++;
		}
		account(s, p, tg, th[i].tid, th[i].name, &s->stack, &info);
	}
}

int session_run(struct session *s, struct profile *p, uint64_t tick_ns,
		int (*tick)(void *arg, const struct session_stats *st), void *arg)
{
	uint64_t period = (uint64_t)(1e9 / s->o.rate_hz);
	uint64_t start = time_now_ns();
	uint64_t end = s->o.duration_s > 0 ? start + (uint64_t)(s->o.duration_s * 1e9) : UINT64_MAX;
	uint64_t next = start, next_tick = start + tick_ns, next_lag_msg = start + 1000000000ull;
	uint64_t late_reported = 0, max_lag = 0, next_refresh = start + 1000000000ull;
	uint64_t next_house = start;
	for (;;) {
		if (session_stop_signal)
			return END_SIGNAL;
		uint64_t now = time_now_ns();
		s->st.elapsed_ns = now - start;
		if (now >= end)
			return END_DURATION;
		if (tick && now >= next_tick) {
			next_tick = now + tick_ns;
			if (tick(arg, &s->st))
				return END_CALLBACK;
		}
		if (now < next) {
			uint64_t until = next < next_tick ? next : next_tick;
			if (until > end)
				until = end;
			if (until > now)
				sleep_ns(until - now);
			continue;
		}
		uint64_t lag = now - next;
		if (lag > period) {
			/* more than one interval behind: skip the missed ticks */
			uint64_t behind = lag / period;
			s->st.late += behind;
			next += behind * period;
			if (lag > max_lag)
				max_lag = lag;
		}
		next += period;
		int first = s->st.ticks == 0;
		/* one tick: every target's threads */
		s->st.ticks++;
		s->st.threads = 0;
		if (s->o.subprocesses)
			scan_children(s);
		int alive = 0, lua = 0;
		for (int i = 0; i < s->ntg; i++) {
			struct tgt *tg = &s->tg[i];
			if (tg->dead)
				continue;
			if (tg->t) {
				sample_target(s, p, tg);
				lua++;
			} else if (!proc_alive(tg->pid)) {
				tg->dead = 1;
			}
			if (!tg->dead)
				alive++;
		}
		s->st.targets = lua;
		if (time_now_ns() >= next_refresh) { /* dlopen'ed modules, new thread stacks */
			for (int i = 0; i < s->ntg; i++)
				if (s->tg[i].t && !s->tg[i].dead)
					target_refresh(s->tg[i].t);
			next_refresh = time_now_ns() + 1000000000ull;
		}
		if (first) /* the first tick warms caches (symbols, protos): don't count it as lag */
			next = time_now_ns() + period;
		/* timed-out stops and the launched child: on the stopper, so
		 * not on every tick at high rates */
		int kid = s->child && !s->child_reaped;
		if (now >= next_house && (kid || ptrace_npending())) {
			stopper_call(-1, reap_pending_fn, kid ? s : NULL);
			next_house = now + HOUSEKEEP_NS;
		}
		if (s->child && s->child_reaped)
			return END_EXITED;
		if (!alive)
			return END_EXITED;
		/* say so at most once a second, when more than 1% of ticks are late */
		if (now >= next_lag_msg) {
			uint64_t nlate = s->st.late - late_reported;
			if (nlate * 100 > (uint64_t)s->o.rate_hz)
				msg_error("falling behind: %llu samples late in the last second (up to %.1f ms lag); lower the rate with -r",
					  (unsigned long long)nlate, (double)max_lag / 1e6);
			late_reported = s->st.late;
			max_lag = 0;
			next_lag_msg = now + 1000000000ull;
		}
	}
}

const struct session_stats *session_stats(const struct session *s) { return &s->st; }
const char *session_runtime(const struct session *s) { return s->runtime; }
pid_t session_pid(const struct session *s) { return s->ntg ? s->tg[0].pid : 0; }

const char *session_cmdline(const struct session *s)
{
	if (s->ntg && s->tg[0].t)
		return s->tg[0].t->cmdline;
	static char buf[512];
	if (s->o.argv) {
		size_t n = 0;
		buf[0] = 0;
		for (char **a = s->o.argv; *a && n < sizeof buf - 2; a++)
			n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n ? " " : "", *a);
		return buf;
	}
	snprintf(buf, sizeof buf, "pid %d", (int)s->o.pid);
	return buf;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static void pct(FILE *f, const char *what, uint32_t *v, size_t n)
{
	if (!n) {
		fprintf(f, "%s: no samples\n", what);
		return;
	}
	qsort(v, n, sizeof *v, cmp_u32);
	fprintf(f, "%s (us): median %u  p90 %u  p99 %u  max %u  (n=%zu)\n", what, v[n / 2],
		v[(size_t)(n * 0.9)], v[(size_t)(n * 0.99)], v[n - 1], n);
}

void session_print_stats(const struct session *s, FILE *f)
{
	pct(f, "stopped per sample", s->stop_us, s->nstop);
	pct(f, "unwind+walk per sample", s->walk_us, s->nstop);
	fprintf(f, "late ticks: %llu of %llu\n", (unsigned long long)s->st.late,
		(unsigned long long)s->st.ticks);
	if (s->first_sample_ns)
		fprintf(f, "time to first sample (ms): %.1f  (attach and probe %.1f)\n",
			(double)(s->first_sample_ns - s->start_ns) / 1e6,
			s->attached_ns ? (double)(s->attached_ns - s->start_ns) / 1e6 : 0.0);
	for (int e = 0; e < 32; e++)
		if (s->st.err_by_kind[e])
			fprintf(f, "errors: %s: %llu\n", err_text(e),
				(unsigned long long)s->st.err_by_kind[e]);
}

int session_finish(struct session *s)
{
	int code = 0;
	check_child(s);
	if (s->child) {
		if (s->child_reaped)
			code = child_exit_code(s->child_status);
		else
			kill_child(s);
	}
	for (int i = 0; i < s->ntg; i++) {
		target_close(s->tg[i].t);
		threads_drop(&s->tg[i]);
	}
	reap_pending();
	stopper_end();
	thread_snap_free(&s->ts);
	stack_free(&s->stack);
	free(s->stop_us);
	free(s->walk_us);
	free(s);
	return code;
}
