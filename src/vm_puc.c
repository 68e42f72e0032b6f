/* vm_puc.c: the PUC Lua 5.1-5.4 VM family (vm_puc_ops): discovery after
 * a sample, every coroutine for dump --all-coroutines, and the table.
 * The probe is vm_puc_probe.c, capture and walk vm_puc_walk.c, Protos
 * vm_puc_proto.c, the name and line decoder vm_puc_names.c, the layouts
 * vm_puc_layout.c, the image walker of the tests vm_puc_image.c. */
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "intern.h"
#include "merge.h"
#include "vm_puc_int.h"

/* ---- discovery --------------------------------------------------------------- */

/* vm_ops.discover, after the release (never inside a walk): what the
 * walks asked for in WHAT. VM_DISC_STATES: main states from the heap (a
 * walk asks when none is known, or when luaV_execute runs on a thread
 * but no known state does: one created after the last scan; the sampler's
 * back-off paces the scans), and the C function names of new ones;
 * VM_DISC_NAMES: the names of every state again; VM_DISC_COROS: the
 * coroutine list. Returns the states and coroutines not known before. */
static int puc_discover(struct vm *vm, struct target *t, unsigned what)
{
	int before = vm->nstates, found = 0;
	if (what & VM_DISC_STATES)
		puc_find_states(vm, t);
	for (int k = (what & VM_DISC_NAMES) ? 0 : before; k < vm->nstates; k++)
		puc_load_cnames(vm, t, vm->states[k]);
	puc_set_co_names(vm);
	found += vm->nstates - before;
	if (what & VM_DISC_COROS)
		found += puc_refresh_coros(vm, &t->mem.base);
	return found;
}

/* ---- coroutines (dump --all-coroutines) ---------------------------------- */

#define CORO_OUTER 512         /* outermost CallInfos kept of a chain longer than MAX_RAW */

/* For a CallInfo chain of thread L (LB its lua_State copy) longer than
 * the MAX_RAW leaf entries puc_read_chain() copies: LB2 = LB whose ci is
 * the first of the outermost CORO_OUTER entries past those (5.1: with
 * its savedpc), *ELIDED = the entries between the two parts. 0, 1 when
 * there is nothing past the leaf part, or -LS_E_*. */
static int chain_outer(struct vm *vm, struct mem *m, uint64_t L, const uint8_t *lb, uint8_t *lb2,
		       int *elided)
{
	const struct puc_layout *lay = vm->lay;
	uint64_t ci = g64(lb, lay->L_ci), start;
	int64_t total, p0;
	memcpy(lb2, lb, (size_t)lay->L_size);
	if (lay->L_end_ci >= 0) {
		/* 5.1: entries 1 .. nci-1 of the base_ci array, leaf last */
		uint64_t base = g64(lb, lay->L_base_ci), sz = (uint64_t)lay->ci_size, pc;
		total = (int64_t)((ci - base) / sz);
		if (total <= MAX_RAW)
			return 1;
		p0 = total - CORO_OUTER > MAX_RAW ? total - CORO_OUTER : MAX_RAW;
		start = base + (uint64_t)(total - p0) * sz;
		if (rd64(m, start + (uint64_t)lay->ci_savedpc, &pc) < 0)
			return -LS_E_TORN;
		memcpy(lb2 + lay->L_savedpc, &pc, 8);
	} else {
		/* 5.2+: a list from L->ci down to L->base_ci; the last
		 * CORO_OUTER addresses kept in a ring */
		uint64_t ring[CORO_OUTER], base = L + (uint64_t)lay->L_base_ci;
		total = 0;
		while (ci != base) {
			if (total >= MAX_CI_STEPS || !ptr_ok(ci))
				return -LS_E_GARBAGE;
			ring[total % CORO_OUTER] = ci;
			total++;
			if (rd64(m, ci + (uint64_t)lay->ci_previous, &ci) < 0)
				return -LS_E_TORN;
		}
		if (total <= MAX_RAW)
			return 1;
		p0 = total - CORO_OUTER > MAX_RAW ? total - CORO_OUTER : MAX_RAW;
		start = ring[p0 % CORO_OUTER];
	}
	memcpy(lb2 + lay->L_ci, &start, 8);
	*elided = (int)(p0 - MAX_RAW);
	return 0;
}

/* The Lua stack of coroutine L (LB its lua_State copy; READ: its chain
 * is to be read) into ST through TS. 0 or -LS_E_*. */
static int coro_stack(struct vm *vm, struct target *t, struct thread_snap *ts, uint64_t L,
		      const uint8_t *lb, int read, struct lua_walk *lw, struct stack *st)
{
	struct mem *m = &t->mem.base;
	struct walk_info info;
	vm->nraw = 0;
	vm->raw_truncated = 0;
	vm->raw_err = 0;
	vm->raw_tid = -1;
	if (read)
		vm->raw_err = puc_read_chain(vm, m, L, lb);
	int truncated = vm->raw_truncated;
	stack_clear(st);
	lua_walk_reset(lw);
	int rc = puc_walk_raw(vm, t, ts, lw, &info);
	if (rc == 0 && merge_stacks(t->sym, &ts->native, lw, st) < 0)
		rc = -LS_E_NOMEM;
	if (rc < 0 || !truncated)
		return rc;
	/* deeper than MAX_RAW: the outermost entries too, and what lies
	 * between them said, not dropped */
	uint8_t lb2[256];
	int elided = 0;
	rc = chain_outer(vm, m, L, lb, lb2, &elided);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	vm->nraw = 0;
	vm->raw_truncated = 0;
	vm->raw_err = puc_read_chain(vm, m, L, lb2);
	struct stack outer = { 0 };
	lua_walk_reset(lw);
	rc = puc_walk_raw(vm, t, ts, lw, &info);
	if (rc == 0 && merge_stacks(t->sym, &ts->native, lw, &outer) < 0)
		rc = -LS_E_NOMEM;
	if (rc == 0) {
		/* the leaf part's outermost frame is named by its caller,
		 * which is cut: it goes with the elided ones */
		if (st->n > 1) {
			st->n--;
			elided++;
		}
		if (elided > 0) {
			struct frame e = { .kind = FRAME_ELIDED,
					   .name = internf("<elided %d frames>", elided) };
			stack_push(st, &e);
		}
		for (int i = 0; i < outer.n; i++)
			stack_push(st, &outer.f[i]);
	}
	stack_free(&outer);
	return rc;
}

static int puc_coroutines(struct vm *vm, struct target *t, const struct thread_snap *held,
			  int nheld, vm_coroutine_fn *fn, void *arg, const char **cut)
{
	(void)held; /* the CallInfo chains are exact: no registers needed */
	(void)nheld;
	const struct puc_layout *lay = vm->lay;
	struct mem *m = &t->mem.base;
	puc_refresh_coros(vm, m);
	*cut = vm->coros_cut;
	struct thread_snap *ts = calloc(1, sizeof *ts);
	if (!ts)
		return -LS_E_NOMEM;
	struct stack st = { 0 };
	struct lua_walk lw = { 0 };
	int count = 0;
	uint64_t all[MAX_STATES + MAX_COROS];
	int nall = 0;
	for (int i = 0; i < vm->nstates; i++)
		all[nall++] = vm->states[i];
	for (int i = 0; i < vm->ncoros; i++)
		all[nall++] = vm->coros[i];
	ts->tid = -1;
	ts->mem = m;
	ts->native.n = 0;
	for (int i = 0; i < nall; i++) {
		uint8_t lb[256];
		uint64_t L = all[i];
		if (mem_read(m, L, lb, (size_t)lay->L_size) < 0 || lb[8] != lay->gct_thread)
			continue;
		int status = lb[lay->L_status], active = state_active(lay, L, lb);
		/* as coroutine.status: not started (a function on the stack) or dead */
		uint64_t top = g64(lb, lay->L_top), base = 0;
		if (lay->L_base >= 0)
			base = g64(lb, lay->L_base);
		else if (rd64(m, L + (uint64_t)lay->L_base_ci + (uint64_t)lay->ci_func, &base) == 0)
			base += 16;
		const char *what = status == 1 ? "suspended" : status > 1 ? "dead"
				 : !active ? (i < vm->nstates ? "normal" : top == base ? "dead" : "suspended")
				 : puc_resume_child(vm, m, L) ? "normal" : "running";
		int rc = coro_stack(vm, t, ts, L, lb, active || status == 1, &lw, &st);
		fn(arg, L, what, &st, rc < 0 ? rc : 0);
		count++;
	}
	vm->nraw = 0;
	vm->raw_tid = 0;
	stack_free(&st);
	lua_walk_free(&lw);
	free(ts);
	return count;
}

static const char *puc_describe(struct vm *vm)
{
	return vm->desc;
}

static void puc_close(struct vm *vm)
{
	if (!vm)
		return;
	puc_protos_free(vm);
	free(vm->cn);
	free(vm);
}

const struct vm_ops vm_puc_ops = {
	.family = "puc",
	.probe = puc_probe,
	.capture = puc_capture,
	.walk = puc_walk,
	.discover = puc_discover,
	.describe = puc_describe,
	.coroutines = puc_coroutines,
	.close = puc_close,
};
