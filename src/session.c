/* session.c: the sampling loop: ticks on absolute deadlines, every
 * target's threads at each tick, walked stacks into the profile. The
 * processes are follow.c's, the launched command child.c's, the thread
 * lists threads.c's, CPU placement place.c's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>
#include "child.h"
#include "err.h"
#include "fiber_tarantool.h"
#include "follow.h"
#include "intern.h"
#include "limit.h"
#include "msg.h"
#include "pgrep.h"
#include "place.h"
#include "proc_ptrace.h"
#include "proc_task.h"
#include "sampler.h"
#include "sampler_bpf.h"
#include "sampler_perf.h"
#include "session.h"
#include "gc_filter.h"
#include "stopper.h"
#include "timeutil.h"

#define MAX_STOP_RECORDS (1u << 20)
#define HOUSEKEEP_NS (100 * 1000000ull)
#define REFRESH_NS (1000 * 1000000ull)
#define LAG_MIN_RUN_NS (1000 * 1000000ull) /* report lag of runs this long */
#define STALL_NS (100 * 1000000ull)     /* a pause in sampling this long is a stall */
#define ANCESTOR_GRACE_NS (1000 * 1000000ull) /* see session_run */
#define WAIT_MSG_NS (500 * 1000000ull) /* say we wait for Lua after this long */
#define PERF_ROUND_NS (10 * 1000000ull) /* perf sampler: threads listed this often at most */

volatile int session_stop_signal;

struct session {
	struct cli_opts o;
	struct sampler_opts so;
	struct follow fl;          /* the processes (follow.h) */
	struct child child;        /* the launched command, pid 0 if attached */
	struct session_stats st;
	struct thread_snap ts;
	struct stack stack;
	struct stack again;        /* perf: the second walk of a sample */
	uint32_t *stop_us;         /* stop time per sample, in us */
	uint32_t *walk_us;
	size_t nstop;
	uint64_t start_ns;         /* session_start entered */
	uint64_t attached_ns;      /* the first target was opened and probed */
	uint64_t first_sample_ns;  /* the first stack was counted */
	struct place place;        /* CPU we keep off (place.h) */
	int perf;                  /* 1: the perf sampler (sampler_perf.h), 0: ptrace */
	int epfd;                  /* perf: every event's fd, for the loop's wait */
	struct perf_counts pc;     /* perf: its counts, for --stats */
	char sampler_why[320];     /* why this sampler (--stats, -v) */
	int perf_once;             /* perf: one walk per sample, not two (environment
	                            * LUASPY_PERF_ONCE, for measurements) */
	struct sampler_bpf *bpf;   /* perf: the eBPF tick copy (sampler_bpf.h), or NULL */
	char bpf_why[256];         /* perf: why there is none (--stats) */
	struct gc_filter *gcf;     /* record --gc (gc_filter.h), or NULL */
};

static void on_signal(int sig)
{
	session_stop_signal = sig;
}

void session_install_signals(void)
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

/* session_start gave up: stop the launched child (if any), free S,
 * return CODE. */
static int start_failed(struct session *s, int code)
{
	child_kill(&s->child);
	follow_close(&s->fl);
	if (s->perf)
		close(s->epfd);
	sampler_bpf_close(s->bpf);
	free(s->gcf);
	free(s->stop_us);
	free(s->walk_us);
	free(s);
	return code;
}

/* A new session for O, nothing started yet; NULL when out of memory. */
static struct session *session_new(const struct cli_opts *o)
{
	struct session *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->o = *o;
	s->start_ns = time_now_ns();
	follow_init(&s->fl);
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
	if (!s->stop_us || !s->walk_us) {
		free(s->stop_us);
		free(s->walk_us);
		free(s);
		return NULL;
	}
	return s;
}

/* Errors of a probe that waiting does not cure (a process that is
 * starting, exec'ing or exiting can fail any read). */
static int final_error(int rc)
{
	return rc == -LS_E_PERM || rc == -LS_E_TRACED || rc == -LS_E_ARCH32 ||
	       rc == -LS_E_KTHREAD || rc == -LS_E_NOMEM;
}

/* Probe TG (process PID) until Lua shows up, up to O->timeout_s. Returns
 * 0 (found), 1 (the launched command ended first: nothing to sample), or
 * the last -LS_E_* (WHY filled for -LS_E_UNSUPPORTED). */
static int wait_for_lua(struct session *s, struct tgt *tg, char *why, size_t whylen)
{
	uint64_t t0 = time_now_ns();
	uint64_t deadline = t0 + (uint64_t)(s->o.timeout_s * 1e9);
	int said = 0;
	for (;;) {
		int rc = follow_probe(&s->fl, tg, why, whylen);
		if (rc == 0)
			return 0;
		child_check(&s->child);
		if (s->child.reaped)
			return 1;
		if (final_error(rc))
			return rc;
		if (!s->child.pid && !proc_alive(tg->pid))
			return -LS_E_EXITED;
		uint64_t now = time_now_ns();
		if (now >= deadline || session_stop_signal)
			return rc;
		if (!said && now - t0 >= WAIT_MSG_NS) {
			msg_waiting_for_lua(tg->pid, s->o.timeout_s);
			said = 1;
		}
		sleep_ns(50 * 1000000ull);
	}
}

/* The sampling loop's thread (this one, not the launched command, which
 * is started already) at nice SESSION_NICE when allowed (CAP_SYS_NICE):
 * at nice 0 on a loaded machine it waited for a CPU like every other
 * task. record -s of forker.sh at load ~17 on 2 CPUs, 12 s: 27 ticks of
 * 1200, 108 samples, 29 of 40 children sampled; at nice -10: 492 ticks,
 * 775 samples, 32 of 32 children, luaspy using ~1 s of CPU either way.
 * The stopper (stopper.h) runs at -20 for the same reason. */
#define SESSION_NICE (-10)
static void raise_priority(void)
{
	errno = 0;
	int cur = getpriority(PRIO_PROCESS, 0);
	if (errno == 0 && cur <= SESSION_NICE)
		return;
	if (setpriority(PRIO_PROCESS, 0, SESSION_NICE) < 0)
		msg_debug(1, "sampling at nice %d: could not raise its priority (%s)", cur, strerror(errno));
}

/* --sampler: perf events when asked (or, for auto, allowed and the
 * options leave the choice), else ptrace; says which with -v. Returns 0,
 * an exit status > 0 after one error line (perf asked and refused), or
 * -LS_E_NOMEM. */
static int choose_sampler(struct session *s, pid_t pid)
{
	int want = s->o.sampler;
	if (want == SAMPLER_PTRACE) {
		snprintf(s->sampler_why, sizeof s->sampler_why, "ptrace");
		msg_debug(1, "sampler: ptrace");
		return 0;
	}
	if (want == SAMPLER_AUTO && (s->o.blocking || s->o.nonblocking || s->o.idle || !s->so.native ||
				     s->o.gc)) {
		snprintf(s->sampler_why, sizeof s->sampler_why, "ptrace (auto: %s needs it)",
			 s->o.blocking ? "--blocking" : s->o.nonblocking ? "--nonblocking" :
			 s->o.idle ? "--idle" : s->o.gc ? "--gc" : "--lua-only");
		msg_debug(1, "sampler: %s", s->sampler_why);
		return 0;
	}
	char why[256];
	int e = perf_sampler_check(pid, why, sizeof why);
	if (e != 0) {
		if (want == SAMPLER_PERF) {
			msg_error("--sampler perf: %s", why);
			return err_exit_code(LS_E_PERM);
		}
		snprintf(s->sampler_why, sizeof s->sampler_why, "ptrace (auto: %s)", why);
		msg_debug(1, "sampler: %s", s->sampler_why);
		return 0;
	}
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0)
		return -LS_E_NOMEM;
	s->perf = 1;
	s->perf_once = getenv("LUASPY_PERF_ONCE") != NULL;
	snprintf(s->sampler_why, sizeof s->sampler_why,
		 "perf (task-clock event per thread, %zu bytes of stack per sample)", s->so.stack_copy_bytes);
	msg_debug(1, "sampler: %s", s->sampler_why);
	/* the Lua state at the tick: eBPF when it loads (LUASPY_PERF_NO_BPF
	 * turns it off, for measurements), else read after the sample */
	int rc = -LS_E_UNSUPPORTED;
	if (getenv("LUASPY_PERF_NO_BPF"))
		snprintf(s->bpf_why, sizeof s->bpf_why, "off (LUASPY_PERF_NO_BPF)");
	else
		rc = sampler_bpf_open(&s->bpf, s->bpf_why, sizeof s->bpf_why);
	if (rc == -LS_E_NOMEM)
		return rc;
	if (rc == 0)
		msg_debug(1, "sampler: perf: the Lua state (LuaJIT or PUC Lua) copied at each tick by an eBPF program; "
			  "rings read in batches");
	else
		msg_debug(1, "sampler: perf: no eBPF tick copy, the Lua state is read after each sample: %s",
			  s->bpf_why);
	return 0;
}

int session_start(const struct cli_opts *o, struct session **out)
{
	*out = NULL;
	struct session *s = session_new(o);
	if (!s)
		return msg_err_pid(0, -LS_E_NOMEM);
	session_install_signals();
	pid_t pid = o->pid;
	if (o->argv) {
		int e = 0;
		int lr = child_launch(&s->child, o->argv, &e);
		if (lr == 1) /* the command could not run (reaped) */
			msg_cannot_run(o->argv[0], e);
		if (lr != 0)
			return start_failed(s, lr == 1 ? 127 : msg_err_pid(0, lr));
		pid = s->child.pid;
	} else {
		if (pid == s->fl.self) {
			return start_failed(s, msg_self(pid));
		}
		int rc = proc_check(pid);
		/* --pgrep: the first match may have exited since; the others count */
		if (rc < 0 && !(o->npids > 1 && (rc == -LS_E_NOPID || rc == -LS_E_ZOMBIE)))
			return start_failed(s, msg_err_pid(pid, rc));
	}
	struct tgt *tg = follow_add(&s->fl, pid);
	if (!tg)
		return start_failed(s, msg_err_pid(0, -LS_E_NOMEM));
	char why[512] = "";
	int rc;
	/* --pgrep's other matches: roots beside the first, each probed as
	 * -s probes its root (follow.h: follow_add_roots) */
	int multi = o->npids > 1;
	if (multi && follow_add_roots(&s->fl, o->pids + 1, o->npids - 1, !o->subprocesses) < 0)
		return start_failed(s, msg_err_pid(0, -LS_E_NOMEM));
	/* --pgrep: processes that match later join (docs/pgrep.md §4) */
	if (o->pgrep && follow_watch(&s->fl, o->pgrep, o->pgrep_full, !o->subprocesses) < 0)
		return start_failed(s, msg_err_pid(0, -LS_E_NOMEM));
	tg = &s->fl.tg[0];
	if (o->subprocesses || multi) {
		/* the root may be a shell, a supervisor, a wrapper: its
		 * descendants are followed from their start, not after
		 * --timeout */
		rc = follow_probe(&s->fl, tg, why, sizeof why);
		if (rc < 0)
			msg_debug(1, "pid %d: no Lua runtime (yet): following its descendants", (int)pid);
	} else {
		rc = wait_for_lua(s, tg, why, sizeof why);
	}
	if (rc == 1) {
		/* the command ended before Lua showed up: nothing to sample */
		tg->dead = 1;
		*out = s;
		return 0;
	}
	if (rc < 0 && (!(o->subprocesses || multi) || final_error(rc) ||
		       (rc == -LS_E_NOPID && !s->child.pid && !multi))) {
		int code;
		if (rc == -LS_E_UNSUPPORTED)
			code = msg_unsupported(pid, why);
		else
			code = msg_err_pid(pid, rc == -LS_E_NOPID && s->child.pid ? -LS_E_EXITED : rc);
		return start_failed(s, code);
	}
	if (rc < 0)
		tg->next_probe_ns = time_now_ns() + tg->probe_wait_ns;
	else
		s->attached_ns = time_now_ns();
	if (o->gc) { /* record --gc: can this target's collector be told apart? */
		s->gcf = calloc(1, sizeof *s->gcf);
		if (!s->gcf)
			return start_failed(s, msg_err_pid(0, -LS_E_NOMEM));
		int gr = gc_filter_check(s->gcf, rc < 0 ? NULL : tg->t, tg->start, why, sizeof why);
		if (gr == 0 && rc >= 0 && tg->t && tg->t->vm && tg->t->vm_ops != &vm_luajit_ops &&
		    !s->so.native) {
			snprintf(why, sizeof why, "PUC Lua's collector is told by native frames: "
				 "drop --lua-only");
			gr = -LS_E_UNSUPPORTED;
		}
		if (gr < 0) {
			msg_error("--gc: pid %d: %s", (int)pid, why);
			return start_failed(s, err_exit_code(gr));
		}
	}
	raise_priority();
	int sc = choose_sampler(s, pid);
	if (sc > 0)
		return start_failed(s, sc);
	if (sc < 0)
		return start_failed(s, msg_err_pid(0, sc));
	/* record --gc and perf samples: the Lua stack must be the tick's
	 * (docs/gc.md §3): LuaJIT's with the eBPF copy only, PUC's never */
	if (s->gcf && s->perf && rc >= 0 && tg->t && tg->t->vm &&
	    (tg->t->vm_ops != &vm_luajit_ops || !s->bpf)) {
		msg_error("--gc: --sampler perf reads the Lua stack after the sample (%s): "
			  "the collector's samples would land under later code; use --sampler ptrace",
			  tg->t->vm_ops != &vm_luajit_ops ? "PUC Lua" : "LuaJIT without the eBPF tick copy");
		return start_failed(s, err_exit_code(LS_E_UNSUPPORTED));
	}
	if (!o->nonblocking && !s->perf && stopper_start() < 0)
		return start_failed(s, msg_err_pid(0, -LS_E_NOMEM));
	*out = s;
	return 0;
}

static void account(struct session *s, struct profile *p, struct tgt *tg, pid_t tid,
		    const char *tname, struct stack *st, const struct walk_info *info)
{
	/* record --gc: only the collector's samples, the others counted;
	 * those kept are of the GC class (PUC's walk says interpreter or C) */
	struct walk_info gi;
	if (s->gcf) {
		int keep = gc_filter_keep(s->gcf, tg->t, tg->start, info, &s->ts.lw, &s->ts.native, st);
		s->st.gc_outside = s->gcf->outside;
		s->st.gc_unknown = s->gcf->unknown;
		s->st.gc_no_lua = s->gcf->kept_no_lua;
		s->st.gc_cut = s->gcf->cut;
		if (!keep)
			return;
		gi = *info;
		gi.vmstate = intern("GC");
		gi.state = VMS_GC;
		info = &gi;
	}
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
	if (s->o.coroutines) { /* inside the thread's root (docs/coroutines.md) */
		merge_coroutine_root(info, &r);
		const char *fib = info->coro && !info->coro_main && tg->t ?
				  fiber_names_root(tg->t, &tg->fibers, info->coro) : NULL;
		if (fib)
			r.name = fib; /* a Tarantool fiber's: fiber 104 "alpha" */
		stack_push(st, &r);
	}
	if (s->o.threads) {
		r.name = internf("thread %d \"%s\"", (int)tid, tname);
		stack_push(st, &r);
	}
	if (s->o.subprocesses || s->o.pgrep) {
		r.name = tg->root_label;
		stack_push(st, &r);
	}
	profile_add(p, tid, st, 1);
	if (!s->st.samples)
		s->first_sample_ns = time_now_ns();
	s->st.samples++;
	/* kept as they are (as perf and py-spy keep a stack whose unwind
	 * stopped early: no invented frame), but counted */
	if (s->ts.native.truncated)
		s->st.native_cut++;
	for (int i = 0; i < st->n; i++)
		if (st->f[i].kind == FRAME_ELIDED) {
			s->st.elided++;
			break;
		}
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

/* Sample TG's threads; LATE: only those whose stop timed out earlier in
 * this round, when it has come since (else the housekeeping after the
 * round would release them unsampled). */
static void sample_target(struct session *s, struct profile *p, struct tgt *tg, int late)
{
	int rc = late ? 0 : threads_update(&tg->threads, tg->pid, 1);
	if (rc < 0) {
		tg->dead = 1;
		threads_drop(&tg->threads);
		return;
	}
	struct proc_thread *th = tg->threads.th;
	int n = tg->threads.n;
	for (int i = 0; i < n; i++) {
		char state = th[i].state;
		/* a stop of ours that timed out: taken when it has come
		 * (ptrace_stop), whatever the state says */
		int pend = !s->so.nonblocking && ptrace_is_pending(th[i].tid);
		if (late && !pend)
			continue;
		if (state == 'Z' || state == 'X' || (!pend && (state == 'T' || state == 't')))
			continue; /* stopped by someone else, or exiting */
		if (!s->so.idle && state != 'R' && !pend)
			continue;
		struct walk_info info;
		struct sample_stats ss;
		if (!s->so.nonblocking) /* nothing is stopped: no reason to move */
			place_keep_off(&s->place, th[i].cpu);
		rc = sampler_sample_thread(tg->t, th[i].tid, state, th[i].cpu, &s->so, &s->ts, &s->stack,
					   &info, &ss);
		s->st.threads++;
		if (rc == -LS_E_GONE)
			continue;
		if (rc == -LS_E_BUSY && ptrace_is_pending(th[i].tid)) {
			/* no stop within the interval (a loaded machine: the
			 * thread waits for a CPU to reach it) or, PEND, not yet:
			 * the thread runs no code of its own until it stops, and
			 * that stop is its sample at a later tick: a late
			 * sample (the rate shortfall), not an error */
			s->st.late_stops += !late;
			continue;
		}
		if (rc < 0) {
			count_error(s, rc);
			continue;
		}
		if (s->nstop < MAX_STOP_RECORDS) {
			s->stop_us[s->nstop] = (uint32_t)(ss.stopped_ns / 1000);
			s->walk_us[s->nstop] = (uint32_t)(ss.walk_ns / 1000);
			s->nstop++;
		}
		if (!s->stack.n) {
			/* nothing unwound and no Lua frame (e.g. a thread caught
			 * between exec and its first instruction): an error,
			 * counted, never an empty stack in the outputs */
			msg_debug(2, "tid %d: no frame at all (pc 0x%llx, native walk %s)", (int)th[i].tid,
				  (unsigned long long)s->ts.regs.rip, s->ts.native.truncated ? "cut" : "empty");
			count_error(s, -LS_E_UNWIND);
			continue;
		}
		account(s, p, tg, th[i].tid, th[i].name, &s->stack, &info);
	}
}

/* The name of thread TID of TG as last listed, "?" when not listed. */
static const char *thread_name(const struct tgt *tg, pid_t tid)
{
	for (int i = 0; i < tg->threads.n; i++)
		if (tg->threads.th[i].tid == tid)
			return tg->threads.th[i].name;
	return "?";
}

/* Perf sampler: walk every sample waiting in TG's rings. */
static void drain_target(struct session *s, struct profile *p, struct tgt *tg)
{
	struct perf_proc *pp = tg->t->perf;
	struct perf_sample ps;
	while (pp && perf_proc_next(pp, &ps) == 1) {
		struct walk_info info;
		uint64_t walk_ns = 0;
		s->ts.tid = ps.tid;
		uint64_t age = time_now_ns() - ps.time_ns;
		int cut = 0;
		struct mem_overlay *tick = s->bpf ? sampler_bpf_pair(s->bpf, tg->pid, ps.tid, ps.time_ns, &cut) :
				       NULL;
		/* the torn check's second walk re-reads the frames live; with
		 * a whole tick copy they come from the copy both times, and
		 * the walk is the sampler's main cost (docs/sampling.md §9) */
		int twice = !s->perf_once && (!tick || cut);
		int rc = sampler_sample_copy(tg->t, &s->so, &s->ts, &ps.regs, ps.stack, ps.stack_len, tick,
					     &s->stack, twice ? &s->again : NULL, &info, &walk_ns);
		s->st.threads++;
		if (rc < 0) {
			count_error(s, rc);
			continue;
		}
		if (!s->stack.n) {
			msg_debug(2, "tid %d: no frame at all (pc 0x%llx, native walk %s)", (int)ps.tid,
				  (unsigned long long)ps.regs.rip, s->ts.native.truncated ? "cut" : "empty");
			count_error(s, -LS_E_UNWIND);
			continue;
		}
		if (s->nstop < MAX_STOP_RECORDS) {
			/* perf: how old the sample was when its walk began */
			s->stop_us[s->nstop] = (uint32_t)(age / 1000 > UINT32_MAX ? UINT32_MAX : age / 1000);
			s->walk_us[s->nstop] = (uint32_t)(walk_ns / 1000);
			s->nstop++;
		}
		account(s, p, tg, ps.tid, thread_name(tg, ps.tid), &s->stack, &info);
	}
}

/* Perf sampler, once a round: list TG's threads, give each new one its
 * event, then walk what is waiting. */
static void perf_target(struct session *s, struct profile *p, struct tgt *tg)
{
	int rc = threads_update(&tg->threads, tg->pid, 0);
	if (rc < 0) {
		drain_target(s, p, tg); /* what it left before it exited */
		if (s->bpf)
			sampler_bpf_forget(s->bpf, tg->pid);
		tg->dead = 1;
		threads_drop(&tg->threads);
		return;
	}
	/* with the tick copy, what changes at the tick is kept apart: the
	 * ring is read in batches (each wakeup is an IPI on the target's
	 * CPU), at every round (10 ms at most) when no batch is full */
	if (!tg->t->perf && perf_proc_open(tg->pid, s->epfd, s->o.rate_hz, s->so.stack_copy_bytes,
					   s->bpf != NULL, &s->pc, &tg->t->perf) < 0)
		return;
	/* the tick program on every event, configured once the state is
	 * known (and again if it changes) */
	if (s->bpf && sampler_bpf_target(s->bpf, tg->pid, tg->t) == 1)
		perf_proc_set_bpf(tg->t->perf, sampler_bpf_prog_fd(s->bpf));
	rc = perf_proc_sync(tg->t->perf, tg->threads.th, tg->threads.n);
	if (rc == -LS_E_PERM && !tg->perf_refused) {
		tg->perf_refused = 1;
		msg_debug(1, "pid %d: perf_event_open refused for its threads: not sampled", (int)tg->pid);
	}
	drain_target(s, p, tg);
}

/* Perf sampler, between rounds: wait up to NS for a sample, then walk
 * every sample waiting. */
static void perf_wait(struct session *s, struct profile *p, uint64_t ns)
{
	struct epoll_event ev[16];
	struct timespec to = { (time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull) };
	int n = epoll_pwait2(s->epfd, ev, 16, &to, NULL);
	if (n < 0 && errno == ENOSYS)
		n = epoll_wait(s->epfd, ev, 16, (int)((ns + 999999) / 1000000));
	for (int i = 0; i < n; i++)
		if (ev[i].events & (EPOLLHUP | EPOLLERR))
			perf_hup(s->epfd, ev[i].data.fd);
	if (n <= 0)
		return;
	for (int i = 0; i < s->fl.n; i++)
		if (s->fl.tg[i].t && !s->fl.tg[i].dead)
			drain_target(s, p, &s->fl.tg[i]);
}

/* One round: every live process's threads. Returns how many processes
 * are still alive, luaspy's ancestors not counted (those in *ANC);
 * *PROBES: how many processes were probed for Lua. */
static int sample_round(struct session *s, struct profile *p, int *anc, int *probes)
{
	s->st.ticks++;
	s->st.threads = 0;
	*probes = s->o.subprocesses || s->o.pgrep ? follow_scan(&s->fl) : 0;
	*anc = 0;
	int alive = 0, lua = 0;
	for (int i = 0; i < s->fl.n; i++) {
		struct tgt *tg = &s->fl.tg[i];
		if (tg->dead)
			continue;
		if (tg->t && s->perf) {
			perf_target(s, p, tg);
			lua++;
		} else if (tg->t) {
			sample_target(s, p, tg, 0);
			lua++;
		} else if (!proc_alive(tg->pid)) {
			tg->dead = 1;
		}
		if (tg->dead)
			continue;
		if (tg->ancestor)
			(*anc)++;
		else
			alive++;
	}
	/* stops that timed out during the round and came since */
	for (int i = 0; !s->perf && ptrace_npending() && i < s->fl.n; i++)
		if (s->fl.tg[i].t && !s->fl.tg[i].dead)
			sample_target(s, p, &s->fl.tg[i], 1);
	s->st.targets = lua;
	return alive;
}

/* The loop's clocks (CLOCK_MONOTONIC ns) between rounds. */
struct loop {
	uint64_t period;           /* between rounds */
	uint64_t next;             /* the next round's deadline */
	uint64_t next_tick;        /* the next call of the caller's TICK */
	uint64_t next_refresh;     /* the next target_refresh of every target */
	uint64_t next_house;       /* the next child_housekeep */
	uint64_t last_alive;       /* when a process not luaspy's ancestor was last alive */
};

/* Once a second: re-read the module lists (dlopen'ed modules, new
 * thread stacks). */
static void refresh_targets(struct session *s, struct loop *l)
{
	if (time_now_ns() < l->next_refresh)
		return;
	for (int i = 0; i < s->fl.n; i++)
		if (s->fl.tg[i].t && !s->fl.tg[i].dead)
			target_refresh(s->fl.tg[i].t);
	l->next_refresh = time_now_ns() + REFRESH_NS;
}

/* Timed-out stops and the launched child: on the stopper, so not on
 * every tick at high rates. */
static void housekeep(struct session *s, struct loop *l, uint64_t now)
{
	int kid = s->child.pid && !s->child.reaped;
	if (now >= l->next_house && (kid || ptrace_npending())) {
		child_housekeep(kid ? &s->child : NULL);
		l->next_house = now + HOUSEKEEP_NS;
	}
}

/* The round due at L->next starts at NOW: count a late tick (more than
 * one interval late) and a stall (over STALL_NS), skip the missed ticks. */
static void account_lag(struct session *s, struct loop *l, uint64_t now)
{
	uint64_t lag = now - l->next;
	if (lag > l->period) {
		s->st.late++;
		l->next += lag / l->period * l->period;
		if (lag > s->st.max_lag_ns)
			s->st.max_lag_ns = lag;
	}
	if (lag >= STALL_NS) {
		s->st.stalls++;
		if (lag > s->st.stall_max_ns)
			s->st.stall_max_ns = lag;
	}
	l->next += l->period;
}

void session_report_lag(const struct session *s)
{
	/* a run shorter than a second (a command that exits at once) has
	 * too few ticks to tell; with perf events the kernel times the
	 * samples (a late round only lists threads later) */
	if (!s->perf && s->st.elapsed_ns >= LAG_MIN_RUN_NS && s->st.late * 100 > s->st.ticks)
		msg_falling_behind(s->st.late, s->st.ticks, s->st.max_lag_ns);
}

int session_run(struct session *s, struct profile *p, uint64_t tick_ns,
		int (*tick)(void *arg, const struct session_stats *st), void *arg)
{
	uint64_t start = time_now_ns();
	uint64_t end = s->o.duration_s > 0 ? start + (uint64_t)(s->o.duration_s * 1e9) : UINT64_MAX;
	/* perf: the kernel times the samples; a round lists threads (new
	 * ones get their event) and is due every 10 ms at most */
	uint64_t period = (uint64_t)(1e9 / s->o.rate_hz);
	if (s->perf && period < PERF_ROUND_NS)
		period = PERF_ROUND_NS;
	struct loop l = { .period = period, .next = start,
			  .next_tick = start + tick_ns, .next_refresh = start + REFRESH_NS,
			  .next_house = start, .last_alive = start };
	for (;;) {
		if (session_stop_signal)
			return END_SIGNAL;
		uint64_t now = time_now_ns();
		s->st.elapsed_ns = now - start;
		if (now >= end)
			return END_DURATION;
		if (tick && now >= l.next_tick) {
			l.next_tick = now + tick_ns;
			if (tick(arg, &s->st))
				return END_CALLBACK;
		}
		if (now < l.next) {
			uint64_t until = l.next < l.next_tick ? l.next : l.next_tick;
			if (until > end)
				until = end;
			if (until > now && s->perf)
				perf_wait(s, p, until - now);
			else if (until > now)
				sleep_ns(until - now);
			continue;
		}
		account_lag(s, &l, now);
		int first = s->st.ticks == 0;
		int anc, probes;
		int alive = sample_round(s, p, &anc, &probes);
		refresh_targets(s, &l);
		/* the first tick warms caches (symbols, protos) and a probe
		 * opens a new process: the start-up of an attach, not lag */
		if (first || probes)
			l.next = time_now_ns() + l.period;
		housekeep(s, &l, now);
		if (s->child.pid && s->child.reaped)
			return END_EXITED;
		if (alive)
			l.last_alive = now;
		/* luaspy's ancestor waits for luaspy: never wait for it, but
		 * give its other children a moment to appear */
		if (!alive && (!anc || now - l.last_alive >= ANCESTOR_GRACE_NS)) {
			if (anc)
				msg_debug(1, "only luaspy's ancestors are left: ending the session");
			return END_EXITED;
		}
	}
}

const struct session_stats *session_stats(const struct session *s) { return &s->st; }
const char *session_runtime(const struct session *s) { return s->fl.runtime; }
int session_sampler_perf(const struct session *s) { return s->perf; }
pid_t session_pid(const struct session *s) { return s->fl.n ? s->fl.tg[0].pid : 0; }

const char *session_cmdline(const struct session *s)
{
	if (s->fl.root_cmd[0])
		return s->fl.root_cmd;
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

/* Percentiles of V[N]; ALL: the samples counted, of which the first
 * MAX_STOP_RECORDS are recorded in V. */
static void pct(FILE *f, const char *what, uint32_t *v, size_t n, uint64_t all)
{
	if (!n) {
		fprintf(f, "%s: no samples\n", what);
		return;
	}
	qsort(v, n, sizeof *v, cmp_u32);
	fprintf(f, "%s (us): median %u  p90 %u  p99 %u  max %u  (n=%zu", what, v[n / 2],
		v[(size_t)(n * 0.9)], v[(size_t)(n * 0.99)], v[n - 1], n);
	if (all > n)
		fprintf(f, ": the first of %llu samples", (unsigned long long)all);
	fprintf(f, ")\n");
}

void session_print_stats(const struct session *s, FILE *f)
{
	fprintf(f, "sampler: %s\n", s->sampler_why[0] ? s->sampler_why : "ptrace");
	if (s->perf) {
		fprintf(f, "perf records: %llu read, %llu lost (ring full), %llu throttled, %llu without "
			"registers; events: %llu opened, %llu refused%s\n",
			(unsigned long long)s->pc.records, (unsigned long long)s->pc.lost,
			(unsigned long long)s->pc.throttled, (unsigned long long)s->pc.no_regs,
			(unsigned long long)s->pc.opened, (unsigned long long)s->pc.open_failed,
			s->pc.user_only ? " (user mode only: no sample inside system calls)" : "");
		if (s->bpf) {
			const struct bpf_tick_counts *b = sampler_bpf_counts(s->bpf);
			fprintf(f, "perf tick copies (eBPF): %llu samples walked over one, %llu without, "
				"%llu before the state was configured; "
				"%llu records unclaimed, %llu cut (LuaJIT: Lua stack over %u KiB; PUC Lua: a "
				"CallInfo chain not copied whole: the rest read live), %llu events without the program; pairing gap max %.1f us\n",
				(unsigned long long)b->paired, (unsigned long long)b->unpaired,
				(unsigned long long)b->unconfigured,
				(unsigned long long)b->orphans, (unsigned long long)b->cut, 16u,
				(unsigned long long)s->pc.bpf_failed, (double)b->max_delta_ns / 1e3);
		} else {
			fprintf(f, "perf tick copies (eBPF): none: %s\n", s->bpf_why);
		}
		pct(f, "sample age when walked", s->stop_us, s->nstop, s->st.samples);
	} else {
		pct(f, "stopped per sample", s->stop_us, s->nstop, s->st.samples);
	}
	pct(f, "unwind+walk per sample", s->walk_us, s->nstop, s->st.samples);
	fprintf(f, "late ticks: %llu of %llu (started more than one interval late; longest lag %.1f ms)\n",
		(unsigned long long)s->st.late, (unsigned long long)s->st.ticks,
		(double)s->st.max_lag_ns / 1e6);
	fprintf(f, "late stops: %llu (ticks at which a thread had not reached its stop yet: sampled once it does)\n",
		(unsigned long long)s->st.late_stops);
	fprintf(f, "stalls: %llu (sampling paused for %llu ms or more; longest %.1f ms)\n",
		(unsigned long long)s->st.stalls, STALL_NS / 1000000ull,
		(double)s->st.stall_max_ns / 1e6);
	if (s->o.subprocesses || s->o.pgrep)
		fprintf(f, "processes: %llu followed, %llu exited and freed\n", s->fl.added, s->fl.freed);
	if (s->fl.watching)
		fprintf(f, "--pgrep: %llu later matches followed, up to %llu left out (at most %d at once); "
			"/proc listed %llu times (every %.0f s or more); %llu probes for Lua\n",
			s->fl.watch_added, s->fl.watch_over, PGREP_MAX, s->fl.watch_scans,
			(double)FOLLOW_WATCH_NS / 1e9, s->fl.probes);
	if (s->first_sample_ns && s->attached_ns)
		fprintf(f, "time to first sample (ms): %.1f  (attach and probe %.1f)\n",
			(double)(s->first_sample_ns - s->start_ns) / 1e6,
			(double)(s->attached_ns - s->start_ns) / 1e6);
	else if (s->first_sample_ns) /* -s: the root was not Lua, a descendant was */
		fprintf(f, "time to first sample (ms): %.1f\n",
			(double)(s->first_sample_ns - s->start_ns) / 1e6);
	if (s->gcf) { /* record --gc (docs/gc.md) */
		fprintf(f, "--gc: %llu samples in the collector kept (%llu without a Lua frame), %llu outside "
			"left out, %llu of processes whose collector was not found left out, %llu in the "
			"collector left out (no Lua frame, native walk cut short)\n",
			(unsigned long long)s->gcf->kept, (unsigned long long)s->gcf->kept_no_lua,
			(unsigned long long)s->gcf->outside, (unsigned long long)s->gcf->unknown,
			(unsigned long long)s->gcf->cut);
		for (int i = 0; i < s->gcf->n; i++)
			fprintf(f, "--gc: pid %d: %s\n", (int)s->gcf->tg[i].pid,
				s->gcf->tg[i].rc < 0 ? "collector not found" : s->gcf->tg[i].code.how);
	}
	for (int e = 0; e < 32; e++)
		if (s->st.err_by_kind[e])
			fprintf(f, "errors: %s: %llu\n", err_text(e),
				(unsigned long long)s->st.err_by_kind[e]);
	fprintf(f, "native walks cut short: %llu of %llu samples (unwinding stopped before the "
		"outermost frame; kept as far as it went)\n",
		(unsigned long long)s->st.native_cut, (unsigned long long)s->st.samples);
	fprintf(f, "stacks with elided frames: %llu of %llu samples (too deep: both ends kept, "
		"\"<elided N frames>\" between)\n",
		(unsigned long long)s->st.elided, (unsigned long long)s->st.samples);
	for (int k = 0; k < LIMIT__N; k++)
		if (limit_count(k))
			fprintf(f, "limit reached: %s: %llu\n", limit_text(k),
				(unsigned long long)limit_count(k));
}

int session_finish(struct session *s)
{
	int code = 0;
	child_check(&s->child);
	if (s->child.pid) {
		if (s->child.reaped)
			code = child_exit_status(&s->child);
		else
			child_kill(&s->child);
	}
	follow_close(&s->fl);
	if (s->perf)
		close(s->epfd);
	sampler_bpf_close(s->bpf);
	child_housekeep(NULL);
	stopper_end();
	thread_snap_free(&s->ts);
	stack_free(&s->stack);
	stack_free(&s->again);
	free(s->gcf);
	free(s->stop_us);
	free(s->walk_us);
	free(s);
	return code;
}
