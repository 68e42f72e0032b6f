/* sampler.c: one sample of one thread. */
#include <stdlib.h>
#include <string.h>
#include "elf_sym.h"
#include "err.h"
#include "merge.h"
#include "msg.h"
#include "proc_ptrace.h"
#include "sampler.h"
#include "sampler_perf.h"
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

static int c_callees_agree(struct target *t, const struct thread_snap *ts);

/* A perf sample's native walk when its leaf is in a function epilogue
 * (perf_leaf_epilogue): the walk from the caller's registers CALLER, the
 * leaf put in front. Not when the return address ends its function (a
 * call to a noreturn function: its CFI row would be the next
 * function's). Returns frames, or 0 to unwind as usual. */
static int unwind_past_epilogue(struct target *t, struct thread_snap *ts,
				const struct user_regs_struct *caller)
{
	uint64_t ra = caller->rip;
	if (symtab_fde_start(t->sym, ra, NULL) != symtab_fde_start(t->sym, ra - 1, NULL))
		return 0;
	struct native_stack *ns = &ts->native;
	int n = unwind_stack(t->unw, ts->tid, caller, ts->mem, NULL, NULL, ns);
	if (n <= 0)
		return 0;
	if (n == UNWIND_MAX_FRAMES) {
		n--;
		ns->truncated = 1;
	}
	memmove(&ns->f[1], &ns->f[0], (size_t)n * sizeof ns->f[0]);
	ns->f[1].flags &= ~NF_LEAF;
	struct native_frame *f = &ns->f[0];
	memset(f, 0, sizeof *f);
	f->pc = ts->regs.rip;
	f->sp = ts->regs.rsp;
	f->flags = NF_LEAF;
	const unsigned long long v[UREG_NREGS] = { ts->regs.rbx, ts->regs.rbp, ts->regs.r12,
						   ts->regs.r13, ts->regs.r14, ts->regs.r15 };
	for (int i = 0; i < UREG_NREGS; i++)
		f->regs[i] = v[i];
	f->regs_valid = (1u << UREG_NREGS) - 1;
	ns->n = n + 1;
	return ns->n;
}

/* Unwind and walk; no ptrace needed. */
static int walk(struct target *t, const struct sampler_opts *o, struct thread_snap *ts,
		struct stack *out, struct walk_info *info)
{
	ts->native.n = 0;
	ts->native.truncated = 0;
	if (o->native && !o->nonblocking) {
		struct user_regs_struct caller;
		int rc = 0;
		if (ts->after && t->sym && perf_leaf_epilogue(&t->mem.base, ts->mem, &ts->regs, &caller))
			rc = unwind_past_epilogue(t, ts, &caller);
		if (rc == 0)
			rc = unwind_stack(t->unw, ts->tid, &ts->regs, ts->mem, NULL, NULL, &ts->native);
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
	/* states live in memory the maps may not show yet (a launched
	 * command's heap, made after the probe read them; the session
	 * re-reads them once a second): a state scan reads them first */
	if (what & VM_DISC_STATES)
		target_refresh(t);
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

/* Does each C function that the heap's chain says a VM frame called
 * match the native frame the stack copy shows that VM frame calling (by
 * symbol, or by the FDE covering its pc: merge_stacks' rule)? The chain
 * is read after the sample, the copy is the sample's: a mismatch means
 * the chain moved on (the VM now runs another C function, or none).
 * LuaJIT only: its VM calls a lua_CFunction from the VM frame itself
 * (lj_vm_*: "call aword CFUNC:RB->f"); PUC Lua calls it through
 * luaD_precall, and an optimised C function may tail-call another, so
 * the frame inside luaV_execute's is not the function the chain names.
 * Measured with --blocking (every chain exact): 1 mismatch in ~2000
 * samples of luajit_sandwich.lua -joff, 0 with the JIT on.
 * Returns 1 when they agree (or nothing to check), 0 on a mismatch. */
static int c_callees_agree(struct target *t, const struct thread_snap *ts)
{
	const struct lua_walk *w = &ts->lw;
	const struct native_stack *ns = &ts->native;
	for (int k = 0; k < w->nseg; k++) {
		const struct lua_segment *sg = &w->seg[k];
		int i = sg->native_index;
		if (!sg->replace || sg->n == 0 || i <= 0 || i > ns->n)
			continue;
		const struct frame *c = &w->f[sg->first];
		if (c->kind != FRAME_C || c->addr == 0)
			continue;
		const struct native_frame *nf = &ns->f[i - 1];
		/* coroutine.resume/wrap (fast functions with no native frame
		 * of their own) run the coroutine on a VM frame of its own
		 * right inside the resumer's: nothing to compare */
		if (nf->pc >= w->vm_start && nf->pc < w->vm_end)
			continue;
		int ret = nf_is_return(nf);
		struct sym_info si;
		symtab_lookup(t->sym, nf->pc, ret, &si);
		if (si.func_start == c->addr ||
		    symtab_fde_start(t->sym, ret ? nf->pc - 1 : nf->pc, NULL) == c->addr)
			continue;
		msg_debug(3, "tid %d: torn: the chain's C function %s (0x%llx) is not the one native "
			  "frame %d runs (pc 0x%llx)", (int)ts->tid, c->name, (unsigned long long)c->addr,
			  i - 1, (unsigned long long)nf->pc);
		return 0;
	}
	return 1;
}

/* The red zone: the 128 bytes below rsp that x86_64 code may use
 * without moving rsp (the System V x86-64 ABI, section 3.2.2). */
#define RED_ZONE 128

/* A reader that refuses the red zone of a perf sample's thread, passing
 * every other read to UNDER. The kernel copies the stack from rsp up
 * (PERF_SAMPLE_STACK_USER): what was below it at the tick is not in the
 * copy, and the live memory there has been reused since. A function's
 * CFI may point there: at the `ret` of a gcc epilogue (`pop rbp; ret`)
 * rbp is still described as saved at CFA-16, just below rsp; read live,
 * that gave rbp garbage and a native walk that ended cleanly after two
 * frames (kept stacks rooted at `cfib` in perf-sampler-sandwich.test).
 * Refused, libdw still ends the walk there as if at the outermost frame
 * (a return address it cannot compute is "undefined"), so a walk that
 * needed a refused read is marked cut. perf_leaf_epilogue() runs such
 * an epilogue over the copy instead, so few walks need one. */
struct red_zone_guard {
	struct mem base;
	struct mem *under;
	uint64_t lo, hi;                /* [rsp - RED_ZONE, rsp) */
	int refused;                    /* reads refused */
};

static ssize_t guard_read(struct mem *base, uint64_t addr, void *buf, size_t len)
{
	struct red_zone_guard *g = (struct red_zone_guard *)base;
	if (addr < g->hi && addr + len > g->lo) {
		g->refused++;
		return -LS_E_FAULT;
	}
	return g->under->read(g->under, addr, buf, len);
}

/* One capture and walk of the copies in TS (sampler_sample_copy); TICK
 * (or NULL) sits between the red zone guard and the live target. */
static int copy_walk(struct target *t, const struct sampler_opts *o, struct thread_snap *ts,
		     const struct user_regs_struct *regs, struct mem_overlay *tick,
		     struct stack *out, struct walk_info *info)
{
	memset(info, 0, sizeof *info);
	stack_clear(out);
	ts->xlen = 0;
	ts->held = 0;
	ts->native.n = 0;
	ts->native.truncated = 0;
	ts->regs = *regs;
	ts->after = 1;
	memset(ts->vm_data, 0, sizeof ts->vm_data);
	/* a page cache of its own per walk: each page of the running
	 * target read once (a small read is a system call: uncached, a
	 * LuaJIT walk made ~440 of them a sample); a second walk (AGAIN)
	 * starts empty, so it reads the target anew */
	target_sample_reader(t, ts, 1);
	struct mem *live = ts->ov.under;
	if (tick) {
		tick->under = live;
		live = &tick->base;
	}
	struct red_zone_guard g = { .base.read = guard_read, .under = live,
				    .lo = regs->rsp - RED_ZONE, .hi = regs->rsp };
	ts->ov.under = &g.base;
	int rc = 0;
	if (t->vm && t->vm_ops->capture)
		rc = t->vm_ops->capture(t->vm, t, ts);
	g.refused = 0; /* the walk's (a capture may unwind to look, too) */
	if (rc == 0)
		rc = walk(t, o, ts, out, info);
	if (g.refused)
		ts->native.truncated = 1;
	ts->ov.under = tick ? tick->under : g.under;
	return rc;
}

/* A LuaJIT Lua frame whose function has line information (firstline
 * known) but no current line: its pc, read from the heap after the
 * sample, is not in the function's bytecode (the frame was reused).
 * --blocking showed 3 such frames in 1911 samples of luajit_sandwich.lua
 * -joff, perf samples one in ten of their wrong stacks. 1 when none. */
static int lines_known(const struct stack *st)
{
	for (int i = 0; i < st->n; i++)
		if (st->f[i].kind == FRAME_LUA && st->f[i].line <= 0 && st->f[i].firstline > 0)
			return 0;
	return 1;
}

/* A PUC Lua native luaV_execute frame left in the merged stack: the
 * walker found no Lua frames for it, so the CallInfo chain read after the
 * sample is not the one that frame ran (puc_sandwich.lua under lua5.3:
 * 3 of 662 perf samples, each with a wrong caller; 0 of 282 with
 * --blocking). Needs luaV_execute's symbol (liblua5.x-0-dbg, or an
 * unstripped host); without it the rule cannot fire. 1 when none. */
static int vm_frames_walked(const struct stack *st)
{
	for (int i = 0; i < st->n; i++)
		if (st->f[i].kind == FRAME_NATIVE && st->f[i].name && !strcmp(st->f[i].name, "luaV_execute"))
			return 0;
	return 1;
}

static int same_stack(const struct stack *a, const struct stack *b)
{
	if (a->n != b->n)
		return 0;
	for (int i = 0; i < a->n; i++)
		if (a->f[i].kind != b->f[i].kind || a->f[i].name != b->f[i].name ||
		    a->f[i].line != b->f[i].line || a->f[i].file != b->f[i].file)
			return 0;
	return 1;
}

int sampler_sample_copy(struct target *t, const struct sampler_opts *o, struct thread_snap *ts,
			const struct user_regs_struct *regs, const uint8_t *stack, size_t stack_len,
			struct mem_overlay *tick, struct stack *out, struct stack *again,
			struct walk_info *info, uint64_t *walk_ns)
{
	ts->state = 'R';
	if (stack_len > o->stack_copy_bytes)
		stack_len = o->stack_copy_bytes;
	if (!ts->stack && !(ts->stack = malloc(o->stack_copy_bytes)))
		return -LS_E_NOMEM;
	memcpy(ts->stack, stack, stack_len);
	ts->stack_addr = regs->rsp;
	ts->stack_len = stack_len;
	uint64_t tw = time_now_ns();
	int rc = copy_walk(t, o, ts, regs, tick, out, info);
	if (rc == 0 && t->vm && !strcmp(t->vm_ops->family, "luajit") &&
	    (!c_callees_agree(t, ts) || !lines_known(out)))
		rc = -LS_E_TORN;
	if (rc == 0 && t->vm && !strcmp(t->vm_ops->family, "puc") && !vm_frames_walked(out))
		rc = -LS_E_TORN;
	/* a native walk of the copy cut short (the red zone refused, a
	 * frame past the copy read live and wrong): the Lua frames would
	 * hang off whatever native frame it reached, a stack rooted in C
	 * that never ran so. An error, where ptrace keeps such a stack (its
	 * cuts are the unwinder's, not the copy's): docs/sampling.md §8 */
	if (rc == 0 && t->vm && ts->native.truncated)
		rc = -LS_E_UNWIND;
	if (rc == 0 && again) {
		/* the heap read twice must give the same stack: a chain that
		 * moved under the first walk is a torn sample */
		struct walk_info i2;
		int r2 = copy_walk(t, o, ts, regs, tick, again, &i2);
		if (r2 < 0)
			rc = r2;
		else if (!same_stack(out, again))
			rc = -LS_E_TORN;
		info->discover |= i2.discover;
	}
	*walk_ns = time_now_ns() - tw;
	discover(t, info->discover, ts->tid);
	return rc;
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
	ts->after = 0;
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
