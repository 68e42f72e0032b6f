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
	int added = 0, found = 0;
	if (what & VM_DISC_STATES)
		added = puc_find_states(vm, t);
	/* the new states are the last ADDED */
	for (int k = (what & VM_DISC_NAMES) ? 0 : vm->nstates - added; k < vm->nstates; k++)
		puc_load_cnames(vm, t, vm->states[k]);
	puc_set_co_names(vm);
	found += added;
	if (what & VM_DISC_COROS)
		found += puc_refresh_coros(vm, &t->mem.base);
	return found;
}

/* ---- coroutines (dump --all-coroutines) ---------------------------------- */


/* The Lua stack of coroutine L (LB its lua_State copy; READ: its chain
 * is to be read) into ST through TS: the whole CallInfo chain is copied
 * (up to MAX_CI_STEPS) and merge_stacks() keeps both ends of a stack too
 * deep to keep whole, with <elided N frames> between. 0 or -LS_E_*. */
static int coro_stack(struct vm *vm, struct target *t, struct thread_snap *ts, uint64_t L,
		      const uint8_t *lb, int read, struct lua_walk *lw, struct stack *st)
{
	struct mem *m = &t->mem.base;
	struct walk_info info;
	vm->nraw = 0;
	vm->raw_err = 0;
	vm->raw_tid = -1;
	if (read)
		vm->raw_err = puc_read_chain(vm, m, L, lb);
	stack_clear(st);
	lua_walk_reset(lw);
	int rc = puc_walk_raw(vm, t, ts, lw, &info);
	if (rc == 0 && merge_stacks(t->sym, &ts->native, lw, st) < 0)
		rc = -LS_E_NOMEM;
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
	uint64_t *all = malloc(((size_t)vm->nstates + (size_t)vm->ncoros + 1) * sizeof *all);
	int nall = 0;
	if (!all) {
		free(ts);
		return -LS_E_NOMEM;
	}
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
	free(all);
	free(ts);
	return count;
}

static const char *puc_describe(struct vm *vm)
{
	return vm->desc;
}

void puc_vm_free(struct vm *vm)
{
	if (!vm)
		return;
	puc_protos_free(vm);
	free(vm->retired);
	free(vm->cn);
	free(vm->states);
	free(vm->coros);
	free(vm->raw);
	free(vm->cseen);
	free(vm->cand);
	free(vm);
}

static void puc_close(struct vm *vm)
{
	puc_vm_free(vm);
}

const struct vm_ops vm_puc_ops = {
	.family = "puc",
	.probe = puc_probe,
	.capture = puc_capture,
	.walk = puc_walk,
	.discover = puc_discover,
	.describe = puc_describe,
	.coroutines = puc_coroutines,
	.locals = puc_locals,
	.close = puc_close,
	.heap = puc_heap,
};
