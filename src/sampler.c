/* sampler.c: one sample of one thread. */
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "merge.h"
#include "msg.h"
#include "proc_ptrace.h"
#include "sampler.h"
#include "stopper.h"
#include "timeutil.h"
#include "unwind.h"

void sampler_opts_default(struct sampler_opts *o)
{
	memset(o, 0, sizeof *o);
	o->native = 1;
	o->stack_copy_bytes = 32 * 1024;
	o->stop_timeout_ns = 50 * 1000000ull;
}

void thread_snap_free(struct thread_snap *ts)
{
	lua_walk_free(&ts->lw);
	mem_cache_free(&ts->pages);
	free(ts->xbuf);
	ts->xbuf = NULL;
	ts->xlen = 0;
	free(ts->stack);
	ts->stack = NULL;
	ts->stack_len = 0;
}

static int copy_stack(struct target *t, const struct sampler_opts *o, struct thread_snap *ts)
{
	size_t want = o->stack_copy_bytes;
	if (!ts->stack) {
		ts->stack = malloc(want);
		if (!ts->stack)
			return -LS_E_NOMEM;
	}
	ts->stack_addr = ts->regs.rsp;
	ts->stack_len = 0;
	ssize_t n = t->mem.base.read(&t->mem.base, ts->regs.rsp, ts->stack, want);
	if (n > 0)
		ts->stack_len = (size_t)n;
	return 0;
}

/* Unwind and walk; no ptrace needed. */
static int walk(struct target *t, const struct sampler_opts *o, struct thread_snap *ts,
		struct stack *out, struct walk_info *info)
{
	ts->native.n = 0;
	ts->native.truncated = 0;
	if (o->native && !o->nonblocking) {
		int rc = unwind_stack(t->unw, ts->tid, &ts->regs, ts->mem, NULL, NULL, &ts->native);
		if (rc < 0)
			return rc;
	}
	lua_walk_reset(&ts->lw);
	int rc = 0;
	if (t->vm && t->vm_ops->walk)
		rc = t->vm_ops->walk(t->vm, t, ts, &ts->lw, info);
	if (info->lua_frames == 0)
		info->lua_frames = lua_walk_frames(&ts->lw);
	if (!info->vmstate)
		info->state = VMS_OTHER;
	/* no VM: native frames only; a failed walk is an error sample whose
	 * OUT still holds the native stack (dump shows it with the error) */
	if (rc < 0) {
		merge_stacks(t->sym, &ts->native, NULL, out);
		return rc;
	}
	return merge_stacks(t->sym, &ts->native, &ts->lw, out) < 0 ? -LS_E_NOMEM : 0;
}

#define DISC_FIRST_NS (200 * 1000000ull)   /* first wait after a fruitless discovery */
#define DISC_MAX_NS (10 * 1000000000ull)   /* the wait doubles up to this */

/* Discovery the walks asked for (vm_ops.discover), outside any stop
 * window, with one back-off rule for every VM: after a discovery that
 * found nothing, wait 0.2 s, then 0.4, 0.8... up to 10 s before the next;
 * one that found something resets the wait. */
static void discover(struct target *t, unsigned want, pid_t tid)
{
	t->disc_want |= want;
	if (!t->disc_want || !t->vm || !t->vm_ops->discover)
		return;
	uint64_t now = time_now_ns();
	if (t->disc_ns && now - t->disc_ns < t->disc_wait_ns)
		return;
	unsigned what = t->disc_want;
	t->disc_want = 0;
	int found = t->vm_ops->discover(t->vm, t, what);
	uint64_t end = time_now_ns();
	t->disc_ns = end;
	if (found > 0)
		t->disc_wait_ns = DISC_FIRST_NS;
	else
		t->disc_wait_ns = !t->disc_wait_ns ? DISC_FIRST_NS :
				  t->disc_wait_ns < DISC_MAX_NS / 2 ? t->disc_wait_ns * 2 : DISC_MAX_NS;
	msg_debug(1, "tid %d: discovery (0x%x) after the release: %.1f ms, %d found", (int)tid,
		  what, (end - now) / 1e6, found);
}

/* The stop window: runs on the stopper thread when there is one. */
struct stop_job {
	struct target *t;
	const struct sampler_opts *o;
	struct thread_snap *ts;
	struct stack *out;
	struct walk_info *info;
	pid_t tid;
	int group_stop;
	uint64_t stopped_ns, walk_ns;
};

static int stop_window(void *arg)
{
	struct stop_job *j = arg;
	struct target *t = j->t;
	struct thread_snap *ts = j->ts;
	struct ptrace_stop st = { .tid = j->tid, .stop_ns = time_now_ns() };
	/* a local copy: after stopper_done() J is the caller's again (its
	 * stack frame may already hold something else) */
	const int held = j->o->held;
	int rc = held ? 0 : ptrace_stop(j->tid, j->o->stop_timeout_ns, &st);
	if (rc < 0)
		return rc;
	uint64_t t0 = st.stop_ns;
	if (j->o->regs)
		ts->regs = *j->o->regs;
	else
		rc = ptrace_getregs(j->tid, &ts->regs);
	if (rc == 0)
		rc = copy_stack(t, j->o, ts);
	if (rc == 0) {
		target_sample_reader(t, ts, 1);
		if (t->vm && t->vm_ops->capture)
			rc = t->vm_ops->capture(t->vm, t, ts);
	}
	if (rc == 0 && j->o->walk_stopped) {
		uint64_t tw = time_now_ns();
		ts->held = 1;
		rc = walk(t, j->o, ts, j->out, j->info);
		j->walk_ns = time_now_ns() - tw;
		ts->held = 0;
	}
	j->stopped_ns = time_now_ns() - t0;
	j->group_stop = st.group_stop;
	if (rc == 0 && !j->o->walk_stopped) {
		/* the copies are taken: the caller may walk them while we
		 * detach (the detach's result can't change the sample) */
		stopper_done(0);
		if (!held)
			ptrace_release(&st);
		return 0;
	}
	int rr = held ? 0 : ptrace_release(&st);
	return rc == 0 ? rr : rc;
}

int sampler_sample_thread(struct target *t, pid_t tid, char state, int cpu,
			  const struct sampler_opts *o, struct thread_snap *ts,
			  struct stack *out, struct walk_info *info, struct sample_stats *stats)
{
	memset(info, 0, sizeof *info);
	stack_clear(out);
	ts->tid = tid;
	ts->state = state;
	ts->stack_len = 0;
	ts->xlen = 0;
	ts->held = 0;
	ts->native.n = 0;
	ts->native.truncated = 0; /* no stale one from the last thread after a failed stop */
	memset(&ts->regs, 0, sizeof ts->regs);
	memset(ts->vm_data, 0, sizeof ts->vm_data);
	if (stats)
		memset(stats, 0, sizeof *stats);
	int rc;
	if (o->nonblocking) {
		/* no page cache here: pages read at different moments of a
		 * running target would make torn samples look consistent or
		 * consistent ones torn; every read goes to the target */
		target_sample_reader(t, ts, 0);
		uint64_t tw = time_now_ns();
		if (t->vm && t->vm_ops->capture && (rc = t->vm_ops->capture(t->vm, t, ts)) < 0)
			return rc;
		rc = walk(t, o, ts, out, info);
		if (stats)
			stats->walk_ns = time_now_ns() - tw;
		discover(t, info->discover, tid);
		return rc;
	}
	struct stop_job j = { .t = t, .o = o, .ts = ts, .out = out, .info = info, .tid = tid };
	rc = stopper_call(cpu, stop_window, &j);
	if (stats) {
		stats->stopped_ns = j.stopped_ns;
		stats->walk_ns = j.walk_ns;
	}
	if (rc == 0 && j.group_stop && !o->walk_stopped)
		rc = -LS_E_BUSY; /* someone else stopped it: not running, no sample */
	if (o->walk_stopped) {
		/* what the walk could not do while the thread was held */
		discover(t, info->discover, tid);
		return rc;
	}
	if (rc < 0)
		return rc;
	uint64_t tw = time_now_ns();
	rc = walk(t, o, ts, out, info);
	if (stats)
		stats->walk_ns = time_now_ns() - tw;
	discover(t, info->discover, tid);
	return rc;
}
