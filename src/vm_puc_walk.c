/* vm_puc_walk.c: the PUC Lua 5.1-5.4 walker: capture and walk.
 *
 * capture: (thread stopped) picks the lua_States running on this OS
 *          thread (errorJmp ordering + resume chain, docs/puc-lua.md §10)
 *          and copies their CallInfo chains: a few reads per frame.
 * walk:    Protos (cached, validated), lines (the running leaf's from
 *          luaV_execute's pc register, docs/puc-lua.md §5.1), call-site
 *          names, and the segments (docs/puc-lua.md §8): each native
 *          luaV_execute frame is replaced by the Lua frames it runs,
 *          each C function's native frame by a FRAME_C named by its
 *          symbol, else by package.loaded; a coroutine's frames stay
 *          above the lua_resume running it, the ones that lost their
 *          native frames to a yield just there.
 * Target memory is untrusted: every loop is bounded, every pointer and
 * tag checked; an inconsistent chain is -LS_E_TORN, never a guess. */
#include <stdlib.h>
#include <string.h>
#include "elf_sym.h"
#include "err.h"
#include "intern.h"
#include "merge.h"
#include "msg.h"
#include "proc_maps.h"
#include "vm_puc_int.h"

/* ---- luaV_execute ranges -------------------------------------------------- */

static int in_exec(const struct vm *vm, uint64_t pc)
{
	for (int i = 0; i < vm->nexec; i++)
		if (pc >= vm->exec[i].lo && pc < vm->exec[i].hi)
			return 1;
	for (int i = 0; i < vm->nwexec; i++)
		if (pc >= vm->wexec[i].lo && pc < vm->wexec[i].hi)
			return 1;
	return 0;
}

/* The walk learned [LO, HI) is luaV_execute (its cache, vm->wexec). */
static void exec_learn(struct vm *vm, uint64_t lo, uint64_t hi)
{
	if (!lo || hi <= lo || in_exec(vm, lo))
		return;
	if (vm->nwexec >= MAX_EXEC) {
		limit_hit(LIMIT_PUC_EXEC, 1);
		return;
	}
	vm->wexec[vm->nwexec].lo = lo;
	vm->wexec[vm->nwexec].hi = hi;
	vm->nwexec++;
	msg_debug(1, "puc: luaV_execute at [0x%llx, 0x%llx) (C-function anchor)",
		  (unsigned long long)lo, (unsigned long long)hi);
}


/* ---- resume chains ---------------------------------------------------------- */

/* The coroutine that L is running through coroutine.resume/wrap, or 0. */
uint64_t puc_resume_child(struct vm *vm, struct mem *m, uint64_t L)
{
	const struct puc_layout *lay = vm->lay;
	uint64_t ci, func;
	uint8_t tv[16], cl[64];
	if (rd64(m, L + (uint64_t)lay->L_ci, &ci) < 0 || !ptr_ok(ci) ||
	    rd64(m, ci + (uint64_t)lay->ci_func, &func) < 0 || !ptr_ok(func) ||
	    mem_read(m, func, tv, 16) < 0)
		return 0;
	unsigned tag = tv_tag(lay, tv);
	uint64_t f = 0, co = 0;
	if (tag == lay->tag_lcf) {
		f = g64(tv, 0);
	} else if (tag == lay->tag_ccl) {
		uint64_t c = g64(tv, 0);
		/* the closure up to f (the smallest one), then its upvalue when
		 * it has one: never a byte not read */
		size_t cll = (size_t)lay->ccl_f + 8;
		if (!ptr_ok(c) || lay->ccl_upvalue + 16 > (int)sizeof cl ||
		    mem_read(m, c, cl, cll) < 0 || cl[8] != lay->gct_ccl)
			return 0;
		if (lay->cl_isC >= 0 && cl[lay->cl_isC] != 1)
			return 0;
		f = g64(cl, lay->ccl_f);
		if (f != vm->co_resume && cl[lay->cl_nupvalues] == 1 &&
		    mem_read(m, c + (uint64_t)lay->ccl_upvalue, cl + lay->ccl_upvalue, 16) == 0 &&
		    tv_tag(lay, cl + lay->ccl_upvalue) == lay->tag_thread)
			co = g64(cl, lay->ccl_upvalue);   /* coroutine.wrap's auxwrap */
	}
	if (!co && f && f == vm->co_resume) {
		if (mem_read(m, func + 16, tv, 16) < 0 || tv_tag(lay, tv) != lay->tag_thread)
			return 0;
		co = g64(tv, 0);
	}
	uint8_t tt;
	if (!co || !ptr_ok(co) || rd8(m, co + 8, &tt) < 0 || tt != lay->gct_thread)
		return 0;
	return co;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct puc_cand *x = a, *y = b;
	return x->ej < y->ej ? -1 : x->ej > y->ej;
}

/* ---- capture: copy the CallInfo chains (thread stopped) ------------------- */

/* Append R to VM->raw (grown up to MAX_RAW). 0, or -LS_E_NOMEM. */
static int push_raw(struct vm *vm, const struct puc_raw *r)
{
	if (vm->nraw >= MAX_RAW ||
	    array_grow(&vm->raw, &vm->capraw, (size_t)vm->nraw + 1, sizeof *vm->raw) < 0)
		return -LS_E_NOMEM;
	vm->raw[vm->nraw++] = *r;
	return 0;
}

/* classify the function TValue at FUNC into R; 0 or -LS_E_TORN */
static int read_func(struct vm *vm, struct mem *m, uint64_t func, struct puc_raw *r)
{
	const struct puc_layout *lay = vm->lay;
	uint8_t tv[16], cl[48];
	if (mem_read(m, func, tv, 16) < 0)
		return -LS_E_TORN;
	unsigned tag = tv_tag(lay, tv);
	uint64_t v = g64(tv, 0);
	if (tag == lay->tag_lcf) {
		r->lua = 0;
		r->cfn = v;
		return v ? 0 : -LS_E_TORN;
	}
	if (tag != lay->tag_lcl && tag != lay->tag_ccl)
		return -LS_E_TORN;
	/* a Lua closure without upvalues is only 32 bytes (5.2+) */
	size_t cll = (size_t)(lay->ccl_f > lay->lcl_p ? lay->ccl_f : lay->lcl_p) + 8;
	if (!ptr_ok(v) || mem_read(m, v, cl, cll) < 0)
		return -LS_E_TORN;
	int isC;
	if (lay->cl_isC >= 0) {
		if (cl[8] != lay->gct_lcl)
			return -LS_E_TORN;
		isC = cl[lay->cl_isC];
		if (isC > 1)
			return -LS_E_TORN;
	} else {
		isC = tag == lay->tag_ccl;
		if (cl[8] != (isC ? lay->gct_ccl : lay->gct_lcl))
			return -LS_E_TORN;
	}
	r->cl = v;
	r->lua = !isC;
	if (isC)
		r->cfn = g64(cl, lay->ccl_f);
	else
		r->proto = g64(cl, lay->lcl_p);
	if (isC ? !r->cfn : !ptr_ok(r->proto))
		return -LS_E_TORN;
	return 0;
}

int puc_read_chain(struct vm *vm, struct mem *m, uint64_t L, const uint8_t *lb)
{
	const struct puc_layout *lay = vm->lay;
	uint64_t stack = g64(lb, lay->L_stack), last = g64(lb, lay->L_stack_last);
	uint64_t ci = g64(lb, lay->L_ci);
	int first = vm->nraw;
	uint8_t cb[128];
	if (!ptr_ok(stack) || last < stack)
		return -LS_E_TORN;
	if (lay->L_end_ci >= 0) {
		/* 5.1: contiguous CallInfo array [base_ci, end_ci]: lstate.c sets
		 * end_ci = base_ci + size_ci - 1, the last usable entry, and
		 * inc_ci grows the array only when ci == end_ci */
		uint64_t base = g64(lb, lay->L_base_ci), end = g64(lb, lay->L_end_ci);
		uint64_t sz = (uint64_t)lay->ci_size;
		/* 5.1 refuses more than LUAI_MAXCALLS (20000) CallInfos */
		if (!ptr_ok(base) || ci < base || ci > end || (ci - base) % sz || (end - base) / sz > 40000)
			return -LS_E_TORN;
		uint64_t nci = (ci - base) / sz + 1, lo = 1;
		if (nci <= lo)
			return 0;
		size_t bytes = (size_t)((nci - lo) * sz);
		uint8_t *arr = malloc(bytes);
		if (!arr)
			return -LS_E_NOMEM;
		if (mem_read(m, base + lo * sz, arr, bytes) < 0) {
			free(arr);
			return -LS_E_TORN;
		}
		for (uint64_t k = nci; k-- > lo;) {
			const uint8_t *e = arr + (k - lo) * sz;
			struct puc_raw r = { 0 };
			r.L = L;
			r.ci = base + k * sz;
			uint64_t func = g64(e, lay->ci_func);
			if (func < stack || func > last + 5 * 16 || read_func(vm, m, func, &r) < 0) {
				free(arr);
				return -LS_E_TORN;
			}
			r.savedpc = k == nci - 1 ? g64(lb, lay->L_savedpc) : g64(e, lay->ci_savedpc);
			r.tailcalls = (int32_t)g32(e, lay->ci_tailcalls);
			if (push_raw(vm, &r) < 0) {
				free(arr);
				return -LS_E_NOMEM;
			}
		}
		free(arr);
	} else {
		uint64_t base = L + (uint64_t)lay->L_base_ci;
		int steps;
		for (steps = 0; steps < MAX_CI_STEPS && ci != base; steps++) {
			struct puc_raw r = { 0 };
			if (!ptr_ok(ci) || mem_read(m, ci, cb, (size_t)lay->ci_size) < 0)
				return -LS_E_TORN;
			uint64_t func = g64(cb, lay->ci_func);
			r.L = L;
			r.ci = ci;
			/* 5.4.5+ relstack() turns pointers into byte offsets from the
			 * old stack while it reallocates: small values, below any
			 * stack address (not "< 4 GiB": non-PIE heaps live there) */
			int bad = func < stack || func > last + 5 * 16 || read_func(vm, m, func, &r) < 0;
			r.status = lay->ci_callstatus_size == 2 ? g16(cb, lay->ci_callstatus)
							       : cb[lay->ci_callstatus];
			int islua = lay->cist_c ? !(r.status & lay->cist_c) : !!(r.status & lay->cist_lua);
			if (!bad && islua != r.lua)
				bad = 1;
			/* luaD_precall (5.2-5.4) links a reused CallInfo into L->ci
			 * (next_ci) before it sets its func, callstatus and base:
			 * stopped there, the innermost one holds an earlier call's
			 * values (table.sort's comparator calls, 0.4-1.3 % of the
			 * samples under --blocking were errors). The function is not
			 * entered yet: its caller is the top frame. Only the
			 * innermost, and only once */
			if (bad && steps == 0 && vm->nraw == first) {
				ci = g64(cb, lay->ci_previous);
				continue;
			}
			if (bad)
				return -LS_E_TORN;
			if (r.lua)
				r.savedpc = g64(cb, lay->ci_savedpc);
			if (push_raw(vm, &r) < 0)
				return -LS_E_NOMEM;
			ci = g64(cb, lay->ci_previous);
		}
		if (steps >= MAX_CI_STEPS)
			return -LS_E_GARBAGE;
	}
	if (vm->nraw > first) {
		vm->raw[first].first = 1;
		vm->raw[vm->nraw - 1].last = 1;
	}
	return 0;
}

/* States that may run on a thread, tried by capture: main states and
 * their resume chains (up to MAX_THREADS_L deep), then up to 512 known
 * coroutines; the scratch (vm->cseen, vm->cand) grows as they are seen
 * (bounded by MAX_STATES * MAX_THREADS_L + 512). */
#define CAND_COROS 512

/* Append L to vm->cseen (*N entries). 0 or -LS_E_NOMEM. */
static int seen_push(struct vm *vm, int *n, uint64_t L)
{
	if (array_grow(&vm->cseen, &vm->capcseen, (size_t)*n + 1, sizeof *vm->cseen) < 0)
		return -LS_E_NOMEM;
	vm->cseen[(*n)++] = L;
	return 0;
}

/* Should capture also try the known coroutines? Yes when nothing runs
 * here (NC == 0), or when the innermost state sits in a C function that
 * may lua_resume a coroutine itself (haproxy). */
static int need_coros(struct vm *vm, struct mem *m, const struct puc_cand *c, int nc)
{
	const struct puc_layout *lay = vm->lay;
	if (nc == 0)
		return 1;
	uint64_t ci, func;
	uint8_t tv[16];
	int need = rd64(m, c[0].L + (uint64_t)lay->L_ci, &ci) < 0 || !ptr_ok(ci) ||
		   rd64(m, ci + (uint64_t)lay->ci_func, &func) < 0 || !ptr_ok(func) ||
		   mem_read(m, func, tv, 16) < 0 || tv_tag(lay, tv) != lay->tag_lcl;
	/* 5.1 has one closure tag: a Lua closure has isC == 0 */
	if (!need && lay->cl_isC >= 0) {
		uint8_t isc = 1;
		need = rd8(m, g64(tv, 0) + (uint64_t)lay->cl_isC, &isc) < 0 || isc != 0;
	}
	return need;
}

/* Add to C (sorted by errorJmp, innermost first) the states of SEEN[lo,
 * hi) inside a protected call whose errorJmp lies on this thread's stack
 * [RSP, HI), each once. */
static int add_cands(struct vm *vm, struct mem *m, const uint64_t *seen, int lo, int hi,
		     uint64_t rsp, uint64_t stack_hi, struct puc_cand *c, int nc)
{
	const struct puc_layout *lay = vm->lay;
	uint8_t lb[256];
	for (int i = lo; i < hi; i++) {
		uint64_t L = seen[i];
		if (mem_read(m, L, lb, (size_t)lay->L_size) < 0 || lb[8] != lay->gct_thread)
			continue;
		uint64_t ej = g64(lb, lay->L_errorJmp);
		if (lb[lay->L_status] != 0 || !rsp || ej < rsp || ej >= stack_hi)
			continue;
		/* a state seen twice (a resume chain, the coroutine list) is
		 * among the few kept already: compare with those, not with
		 * every state seen */
		int dup = 0;
		for (int k = 0; k < nc && !dup; k++)
			dup = c[k].L == L;
		if (dup)
			continue;
		c[nc].L = L;
		c[nc].ej = ej;
		nc++;
	}
	qsort(c, (size_t)nc, sizeof *c, cand_cmp);
	return nc;
}

/* A host calling Lua without a protected call (main thread only): the
 * resume chain of a main state inside no protected call at all (errorJmp
 * NULL: one with an errorJmp runs on the thread whose stack holds it,
 * unknown without registers: --nonblocking). Outermost last. */
static int unprotected_cands(struct vm *vm, struct mem *m, uint64_t rsp, struct puc_cand *c)
{
	const struct puc_layout *lay = vm->lay;
	uint8_t lb[256];
	int nc = 0;
	for (int s = 0; s < vm->nstates && !nc; s++) {
		uint64_t chain[MAX_THREADS_L];
		int nch = 0;
		uint64_t L = vm->states[s];
		while (L && nch < MAX_THREADS_L && mem_read(m, L, lb, (size_t)lay->L_size) == 0 &&
		       lb[lay->L_status] == 0 && state_active(lay, L, lb) &&
		       (nch > 0 || !rsp || g64(lb, lay->L_errorJmp) == 0)) {
			chain[nch++] = L;
			L = puc_resume_child(vm, m, L);
		}
		for (int k = nch; k-- > 0;)
			c[nc++].L = chain[k];
	}
	return nc;
}

/* The lua_States running on thread TS, innermost first, into vm->cand;
 * their count, or -LS_E_NOMEM. */
static int find_cands(struct vm *vm, struct target *t, struct thread_snap *ts, struct mem *m)
{
	uint64_t rsp = ts->regs.rsp, hi = rsp + (16u << 20);
	const struct proc_map *pm = rsp ? proc_maps_find(symtab_maps(t->sym), rsp) : NULL;
	if (pm)
		hi = pm->end;
	int nseen = 0, nc;
	for (int s = 0; s < vm->nstates; s++) {
		uint64_t L = vm->states[s];
		int start = nseen, loop = 0;
		for (int d = 0; L && !loop && d < MAX_THREADS_L; d++) {
			if (seen_push(vm, &nseen, L) < 0)
				return -LS_E_NOMEM;
			L = puc_resume_child(vm, m, L);
			/* a chain back to itself is a torn read (auxresume
			 * refusing a running coroutine): end it there */
			for (int k = start; k < nseen && !loop; k++)
				loop = vm->cseen[k] == L;
		}
		if (L && !loop)   /* resumed deeper than lua_resume allows */
			limit_hit(LIMIT_PUC_NESTED, 1);
	}
	int nfirst = nseen;
	int ncoros = vm->ncoros < CAND_COROS ? vm->ncoros : CAND_COROS;
	/* room for every state seen, the coroutines and an unprotected chain */
	if (array_grow(&vm->cand, &vm->capcand, (size_t)nseen + (size_t)ncoros + MAX_THREADS_L,
		       sizeof *vm->cand) < 0)
		return -LS_E_NOMEM;
	struct puc_cand *c = vm->cand;
	nc = add_cands(vm, m, vm->cseen, 0, nfirst, rsp, hi, c, 0);
	if (need_coros(vm, m, c, nc)) {
		for (int i = 0; i < ncoros; i++)
			if (seen_push(vm, &nseen, vm->coros[vm->ncoros - 1 - i]) < 0)
				return -LS_E_NOMEM;
		nc = add_cands(vm, m, vm->cseen, nfirst, nseen, rsp, hi, c, nc);
	}
	if (nc == 0 && ts->tid == t->pid)
		nc = unprotected_cands(vm, m, rsp, c);
	return nc;
}

/* Copy the chain of candidate I (state L) into vm->raw; a torn or
 * inconsistent one sets vm->raw_err. Returns 0 to go on, 1 to stop. */
static int capture_state(struct vm *vm, struct mem *m, uint64_t L, int i)
{
	const struct puc_layout *lay = vm->lay;
	uint8_t lb[256];
	if (mem_read(m, L, lb, (size_t)lay->L_size) < 0) {
		vm->raw_err = -LS_E_TORN;
		return 1;
	}
	int first_of_L = vm->nraw;
	int rc = puc_read_chain(vm, m, L, lb);
	if (rc < 0) {
		vm->raw_err = rc;
		return 1;
	}
	uint64_t ci2;
	if ((i > 0 && vm->nraw == first_of_L) ||   /* an outer state with no frame */
	    /* torn: the chain moved while we read it */
	    rd64(m, L + (uint64_t)lay->L_ci, &ci2) < 0 || ci2 != g64(lb, lay->L_ci) ||
	    /* an outer state must be inside the C function that resumed the
	     * inner one, not back in Lua or yielding (the chain moved) */
	    (i > 0 && vm->raw[first_of_L].lua) ||
	    (i > 0 && vm->co_yield && vm->raw[first_of_L].cfn == vm->co_yield)) {
		vm->raw_err = -LS_E_TORN;
		return 1;
	}
	return 0;
}

static int capture_once(struct vm *vm, struct target *t, struct thread_snap *ts)
{
	struct mem *m = ts->mem ? ts->mem : &t->mem.base;
	vm->raw_tid = ts->tid;
	vm->nraw = 0;
	vm->raw_err = 0;
	int nc = find_cands(vm, t, ts, m);
	if (nc < 0) {
		vm->raw_err = nc;
		return 0;
	}
	/* none: not in Lua, or a coroutine we don't know yet (walk) */
	int i;
	for (i = 0; i < nc && i < MAX_THREADS_L; i++)
		if (capture_state(vm, m, vm->cand[i].L, i))
			break;
	/* more states on this thread than MAX_THREADS_L: the outer ones'
	 * frames are not walked (counted) */
	if (i == MAX_THREADS_L && nc > MAX_THREADS_L)
		limit_hit(LIMIT_PUC_NESTED, 1);
	return 0;
}

/* A stopped thread reads consistently; a running one (--nonblocking) may
 * tear: read again, up to three times, before counting the sample torn. */
int puc_capture(struct vm *vm, struct target *t, struct thread_snap *ts)
{
	int rc = 0;
	for (int attempt = 0; attempt < 3; attempt++) {
		rc = capture_once(vm, t, ts);
		if (rc < 0 || vm->raw_err != -LS_E_TORN)
			break;
	}
	return rc;
}

/* ---- walk: frames, names, lines, merge ---------------------------------- */

struct wframe {
	struct frame fr;
	struct puc_proto *p;
	int pc;
	int bottom;       /* Lua: first-entered frame of its luaV_execute invocation */
};

/* *PC: the instruction SAVEDPC stands for in P's code (the one before
 * it: savedpc points past the current instruction). 0, or -1 when
 * SAVEDPC is not in the code. */
static int pc_of(const struct puc_proto *p, uint64_t savedpc, int *pc)
{
	if (savedpc < p->code_addr || ((savedpc - p->code_addr) & 3))
		return -1;
	uint64_t idx = (savedpc - p->code_addr) / 4;
	if (idx > (uint64_t)p->sizecode)
		return -1;
	*pc = idx == 0 ? 0 : (int)idx - 1;
	return 0;
}

/* name of frame I as getinfo "n" computes it, from its caller I+1 */
static const char *frame_callsite(struct vm *vm, struct mem *m, struct wframe *w, int i, int n)
{
	const struct puc_layout *lay = vm->lay;
	const struct puc_raw *r = &vm->raw[i];
	const struct puc_raw *cr = r->last || i + 1 >= n ? NULL : &vm->raw[i + 1];
	const char *what = NULL, *name = NULL;
	if (lay->isa == PUC_ISA_51) {
		if ((r->lua && r->tailcalls > 0) || !cr || !cr->lua)
			return NULL;
	} else if (lay->isa == PUC_ISA_54) {
		if (r->status & lay->cist_tail)
			return NULL;
		if (!cr)
			return NULL;
		if (cr->status & lay->cist_hooked)
			return "?";
		if (cr->status & lay->cist_fin)
			return "__gc";
		if (!cr->lua)
			return NULL;
	} else {
		if (lay->cist_fin && (r->status & lay->cist_fin))
			return "__gc";
		if (r->status & lay->cist_tail)
			return NULL;
		if (!cr || !cr->lua)
			return NULL;
		if (lay->isa == PUC_ISA_53 && (cr->status & lay->cist_hooked))
			return "?";
	}
	struct wframe *cw = &w[i + 1];
	if (!cw->p)
		return NULL;
	name = puc_callsite_name(vm, m, cw->p, cw->pc, &what);
	return what ? name : NULL;
}

/* Line really executing in the running leaf frame, from luaV_execute's
 * registers (5.1/5.4 keep pc in a register and save it only at calls and
 * "Protect" points; docs/puc-lua.md §5.1). pc is in a callee-saved register; when
 * several point into the code, a register that held exactly savedpc in a
 * frame that called out (VOTES, per register index) decides, else
 * agreeing candidates, else the highest one. Returns the line, or 0. */
static int leaf_line_from_regs(const struct puc_proto *p, const struct thread_snap *ts,
			       const struct native_frame *nf, uint64_t savedpc, unsigned *votes)
{
	uint64_t lo = p->code_addr, hi = p->code_addr + 4ull * (uint64_t)p->sizecode;
	uint64_t vals[16];
	int idx[16], nv = 0;
	if (nf->flags & NF_LEAF) {
		const struct user_regs_struct *r = &ts->regs;
		uint64_t all[] = { r->rbx, r->rbp, r->r12, r->r13, r->r14, r->r15 };
		for (int k = 0; k < 6; k++) {
			idx[nv] = k;
			vals[nv++] = all[k];
		}
	} else {
		for (int k = 0; k < UREG_NREGS; k++)
			if (nf->regs_valid & (1u << k)) {
				idx[nv] = k;
				vals[nv++] = nf->regs[k];
			}
	}
	int lines[16], kidx[16], nc = 0;
	uint64_t cv[16];
	for (int k = 0; k < nv; k++) {
		uint64_t v = vals[k];
		if (v <= lo || v > hi || ((v - lo) & 3))
			continue;
		int pc = (int)((v - lo) / 4) - 1;
		lines[nc] = p->line[pc < 0 ? 0 : pc];
		kidx[nc] = idx[k];
		cv[nc++] = v;
	}
	if (nc == 0)
		return 0;
	/* a register that was the only candidate in earlier samples */
	int bestk = -1;
	for (int c = 0; c < nc; c++)
		if (votes[kidx[c]] >= 3 && (bestk < 0 || votes[kidx[c]] > votes[kidx[bestk]]))
			bestk = c;
	if (bestk >= 0)
		return lines[bestk];
	if (nc == 1 && votes[kidx[0]] < 1000000)
		votes[kidx[0]]++;
	int agree = 1;
	for (int c = 1; c < nc; c++)
		agree &= lines[c] == lines[0];
	if (agree)
		return lines[0];
	/* disagreement: the pointer to the next instruction is the highest
	 * (others are pc-1 copies or older); Debian 5.1 and 5.4 both showed
	 * pc in r13 next to a lower pointer in rbx or r14 */
	int best = 0;
	for (int c = 1; c < nc; c++)
		if (cv[c] > cv[best])
			best = c;
	(void)savedpc;
	return lines[best];
}

static const char *lua_frame_name(const struct puc_proto *p, const char *cs)
{
	if (cs)
		return intern(cs);
	if (p->linedefined == 0)
		return intern("main chunk");
	return internf("function <%s:%d>", p->chunk, p->linedefined);
}

/* A segment while the walk builds it: frames SF[first, first + n). */
struct wseg { int native_index, replace, first, n; };

/* Hand the segments to the sampler's lua_walk, in order. */
static int emit_walk(struct lua_walk *lw, const struct frame *sf, const struct wseg *segs, int nsegs)
{
	for (int k = 0; k < nsegs; k++) {
		int rc = lua_walk_segment(lw, segs[k].native_index, segs[k].replace);
		for (int j = 0; rc == 0 && j < segs[k].n; j++)
			rc = lua_walk_push(lw, &sf[segs[k].first + j]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* What one walk works on: the raw frames, their Protos and frames, and
 * the segments being built against the native stack. */
struct wctx {
	struct vm *vm;
	struct target *t;
	struct thread_snap *ts;
	struct mem *m;
	const struct native_stack *ns;
	int n;                   /* raw frames (vm->raw) */
	struct wframe *w;        /* one per raw frame */
	struct frame *sf;        /* the frames in segment order */
	int nsf;
	struct wseg *segs;
	int nsegs;
	int pend;                /* first frame of sf not in a segment yet */
	int j;                   /* first native frame not matched yet */
	int leaf_native;         /* native frame of the leaf's segment, or -1 */
};

/* Close the pending frames into a segment at native frame NI. */
static void seg_close(struct wctx *c, int ni, int replace)
{
	if (c->nsf > c->pend) {
		c->segs[c->nsegs++] = (struct wseg){ ni, replace, c->pend, c->nsf - c->pend };
		c->pend = c->nsf;
	}
}

/* Is a luaV_execute frame on the native stack: the VM runs Lua here? */
static int native_in_exec(const struct wctx *c)
{
	const struct native_stack *ns = c->ns;
	for (int k = 0; k < ns->n; k++)
		if (in_exec(c->vm, ns->f[k].pc - nf_is_return(&ns->f[k])))
			return 1;
	return 0;
}

/* No frame captured: luaV_execute (or lua_resume) on the stack but no
 * state for it means a state or a coroutine born after the last scan;
 * discovery looks for them after the release (the sampler paces it). */
static void walk_none(struct wctx *c, struct walk_info *info)
{
	const struct native_stack *ns = c->ns;
	struct vm *vm = c->vm;
	int in_lua = native_in_exec(c);
	for (int k = 0; k < ns->n && !in_lua; k++)
		in_lua = vm->resume_fn && puc_native_start(vm, c->t, &ns->f[k]) == vm->resume_fn;
	if (in_lua || vm->nstates == 0)
		info->discover |= VM_DISC_STATES | VM_DISC_COROS;
}

/* Protos and pcs of the Lua frames; the number of Lua frames, or
 * -LS_E_TORN. */
static int walk_protos(struct wctx *c)
{
	int nlua = 0;
	for (int i = 0; i < c->n; i++) {
		const struct puc_raw *r = &c->vm->raw[i];
		if (!r->lua)
			continue;
		c->w[i].p = puc_proto_get(c->vm, c->m, r->proto);
		if (!c->w[i].p || pc_of(c->w[i].p, r->savedpc, &c->w[i].pc) < 0)
			return -LS_E_TORN;
		nlua++;
	}
	return nlua;
}

/* Which Lua frames were the first entered by their luaV_execute
 * invocation (docs/puc-lua.md §8.1). */
static void walk_bottoms(struct wctx *c)
{
	const struct puc_layout *lay = c->vm->lay;
	struct wframe *w = c->w;
	for (int i = 0; i < c->n; i++) {
		const struct puc_raw *r = &c->vm->raw[i];
		if (!r->lua)
			continue;
		int b;
		switch (lay->exec) {
		case PUC_EXEC_51: {
			const struct puc_raw *cr = r->last ? NULL : &c->vm->raw[i + 1];
			b = !cr || !cr->lua || !w[i + 1].p ||
			    !puc_is_call_op(lay, w[i + 1].p->code[w[i + 1].pc]);
			break;
		}
		case PUC_EXEC_REENTRY: b = !(r->status & lay->cist_reentry); break;
		case PUC_EXEC_FRESH: b = !!(r->status & lay->cist_fresh); break;
		default: b = 1;
		}
		w[i].bottom = b || r->last;
	}
}

/* Name of C function CFN: its symbol (as merge.h names fused C
 * frames), else the name the target's package.loaded gives it
 * (stripped), else the call site's CS, else "MODULE+0xOFF" (OFF its ELF
 * address). Sets F->module. */
static const char *c_frame_name(struct wctx *c, uint64_t cfn, const char *cs, struct frame *f)
{
	struct sym_info si;
	const char *nm = NULL;
	memset(&si, 0, sizeof si);
	if (c->t->sym)   /* NULL: synthetic images (puc_walk_image) */
		symtab_lookup(c->t->sym, cfn, 0, &si);
	f->module = si.module;
	/* a function of the Lua runtime itself: the name Lua code knows it
	 * by (string.gsub, as LuaJIT frames say), else its C symbol
	 * (str_gsub); a C module's or host's function: its C symbol
	 * (cfib_call) first, then the library name; else the call site's */
	int runtime = !si.module || !c->vm->lua_module || !strcmp(si.module, c->vm->lua_module);
	if (runtime)
		nm = puc_cname_find(c->vm, cfn);
	if (!nm && si.name && si.func_start == cfn)
		nm = si.name;
	if (!nm && !runtime)
		nm = puc_cname_find(c->vm, cfn);
	if (!nm && cs)
		nm = intern(cs);
	/* no name at all: the module and ELF address of the function, the
	 * same in every process, as LuaJIT's C functions and native code
	 * are named (docs/naming.md §5); the absolute address only for a
	 * function in no module */
	if (!nm)
		nm = symtab_offset_name(&si, cfn);
	return nm ? nm : internf("[C function 0x%llx]", (unsigned long long)cfn);
}

/* The frame of every raw frame: names, chunks, lines. */
static void walk_frames(struct wctx *c)
{
	for (int i = 0; i < c->n; i++) {
		const struct puc_raw *r = &c->vm->raw[i];
		struct wframe *wf = &c->w[i];
		struct frame *f = &wf->fr;
		const char *cs = frame_callsite(c->vm, c->m, c->w, i, c->n);
		if (r->lua) {
			f->kind = FRAME_LUA;
			f->addr = wf->p->addr; /* the Proto: tells apart functions on one line */
			f->file = wf->p->chunk;
			f->firstline = wf->p->linedefined;
			f->line = wf->p->line ? wf->p->line[wf->pc] : 0;
			f->name = lua_frame_name(wf->p, cs);
		} else {
			f->kind = FRAME_C;
			f->addr = r->cfn;
			f->name = c_frame_name(c, r->cfn, cs, f);
		}
	}
}

/* C frame I: replaces the native frame of its function when one is
 * found in [c->j, BOUND) (the frames before it go just inside), else it
 * waits in the pending frames. Returns the next raw frame. */
static int place_c_frame(struct wctx *c, int i, int bound)
{
	struct vm *vm = c->vm;
	const struct native_stack *ns = c->ns;
	const struct puc_raw *r = &vm->raw[i];
	int mfound = -1;
	for (int k = c->j; k < bound && mfound < 0; k++)
		if (puc_native_start(vm, c->t, &ns->f[k]) == r->cfn)
			mfound = k;
	if (mfound < 0) {
		c->sf[c->nsf++] = c->w[i].fr;
		return i + 1;
	}
	seg_close(c, mfound, 0);
	c->sf[c->nsf++] = c->w[i].fr;
	/* the native frame keeps its symbol; ours names it otherwise */
	seg_close(c, mfound, 1);
	c->j = mfound + 1;
	/* C-function anchor: f <- luaD_precall <- luaV_execute */
	if (!r->last && vm->raw[i + 1].lua && mfound + 2 < ns->n &&
	    !in_exec(vm, ns->f[mfound + 2].pc - 1) && vm->nexec + vm->nwexec < 2) {
		uint64_t end, lo = puc_fde_of(vm, c->t, ns->f[mfound + 2].pc - 1, &end);
		if (lo && end - lo >= 4096)
			exec_learn(vm, lo, end);
	}
	return i + 1;
}

/* The Lua frames from I up to and including the next invocation bottom
 * (state end E): they replace the next luaV_execute frame in [c->j,
 * BOUND) when there is one, else they wait in the pending frames.
 * Returns the next raw frame. */
static int place_lua_segment(struct wctx *c, int i, int e, int bound)
{
	struct vm *vm = c->vm;
	const struct native_stack *ns = c->ns;
	int leaf_seg = (i == 0), seg_first = i;
	while (i < e && vm->raw[i].lua) {
		c->sf[c->nsf++] = c->w[i].fr;
		int b = c->w[i].bottom;
		i++;
		if (b)
			break;
	}
	int mfound = -1;
	for (int k = c->j; k < bound && mfound < 0; k++) {
		uint64_t pc = ns->f[k].flags & NF_LEAF ? ns->f[k].pc : ns->f[k].pc - 1;
		if (in_exec(vm, pc))
			mfound = k;
	}
	if (mfound < 0)
		return i;
	if (!leaf_seg && !(ns->f[mfound].flags & NF_LEAF)) {
		/* this invocation called out: its pc register == savedpc */
		const struct native_frame *vf = &ns->f[mfound];
		for (int k = 0; k < UREG_NREGS; k++)
			if ((vf->regs_valid & (1u << k)) && vf->regs[k] == vm->raw[seg_first].savedpc &&
			    vm->pcreg_votes[k] < 1000000)
				vm->pcreg_votes[k]++;
	}
	seg_close(c, mfound, 1);
	c->j = mfound + 1;
	if (leaf_seg)
		c->leaf_native = mfound;
	return i;
}

/* The frames of the lua_State starting at raw frame I, matched against
 * the native frames leaf to root (docs/puc-lua.md §8.3). Returns the
 * first raw frame of the next state. */
static int place_state(struct wctx *c, int i)
{
	struct vm *vm = c->vm;
	const struct native_stack *ns = c->ns;
	int n = c->n, N = ns->n;
	int e = i;
	while (e < n && !(vm->raw[e].last))
		e++;
	if (e < n)
		e++;
	int outermost = e >= n, is_main = 0;
	for (int k = 0; k < vm->nstates; k++)
		is_main |= vm->states[k] == vm->raw[i].L;
	int bound = N;
	/* a coroutine's frames all lie above the lua_resume running it */
	if ((!outermost || !is_main) && vm->resume_fn)
		for (int k = c->j; k < N; k++)
			if (puc_native_start(vm, c->t, &ns->f[k]) == vm->resume_fn) {
				bound = k;
				break;
			}
	while (i < e)
		i = vm->raw[i].lua ? place_lua_segment(c, i, e, bound) : place_c_frame(c, i, bound);
	seg_close(c, bound, 0);
	/* the outer state's frames start above its lua_resume call */
	if (bound < N && bound + 1 > c->j)
		c->j = bound + 1;
	return i;
}

/* For a sample whose chain was read after it (TS->after: the perf
 * sampler): does the native copy hold more VM activations than the chain
 * explains? A native frame in luaV_execute (its symbol, or the range a
 * walk learned: vm->exec, vm->wexec) that no Lua segment replaced, or
 * more lua_resume frames (vm->resume_fn) than the chain has states: the
 * coroutine that ran at the tick has yielded or returned since, and the
 * stack would end at its resumer (lua5.2 without luaV_execute's symbol:
 * CI kept 1387 such stacks, none reaching co_work). 1 when so. */
static int vm_frames_unexplained(const struct wctx *c)
{
	const struct native_stack *ns = c->ns;
	int resumes = 0, states = 0;
	for (int i = 0; i < c->n; i++)
		states += c->vm->raw[i].last != 0;
	for (int k = 0; k < ns->n; k++) {
		const struct native_frame *f = &ns->f[k];
		if (c->vm->resume_fn && puc_native_start(c->vm, c->t, f) == c->vm->resume_fn)
			resumes++;
		if (!in_exec(c->vm, f->pc - nf_is_return(f)))
			continue;
		int placed = 0;
		for (int s = 0; s < c->nsegs && !placed; s++)
			placed = c->segs[s].native_index == k && c->segs[s].replace && c->segs[s].n > 0;
		if (!placed) {
			msg_debug(2, "puc: native frame %d in luaV_execute has no Lua frames", k);
			return 1;
		}
	}
	if (resumes > states) {
		msg_debug(2, "puc: %d lua_resume frames, %d states in the chain", resumes, states);
		return 1;
	}
	return 0;
}

/* The running leaf's exact line (5.1 and 5.4 keep pc in a register). */
static void walk_leaf_line(struct wctx *c)
{
	struct vm *vm = c->vm;
	const struct puc_layout *lay = vm->lay;
	int ln = c->leaf_native;
	if (!vm->raw[0].lua || ln < 0 || !c->w[0].p->line)
		return;
	if (!((lay->isa == PUC_ISA_51 && (c->ns->f[ln].flags & NF_LEAF)) || lay->isa == PUC_ISA_54))
		return;
	int line = leaf_line_from_regs(c->w[0].p, c->ts, &c->ns->f[ln], vm->raw[0].savedpc,
				       vm->pcreg_votes);
	if (line > 0)
		c->sf[0].line = line;   /* sf[0] is raw[0]'s frame */
}

/* record --coroutines (vm.h: walk_info.coro): the innermost state's
 * thread is raw[0].L, its frames run up to the first raw frame marked
 * last (puc_read_chain reads a chain down to base_ci: its bottom); the
 * body is the outermost Lua one; a main thread is one of vm->states
 * (G(L)->mainthread, lstate.c). */
static void walk_coro(const struct wctx *c, struct walk_info *info)
{
	const struct vm *vm = c->vm;
	uint64_t L = vm->raw[0].L;
	info->coro = L;
	for (int k = 0; k < vm->nstates; k++)
		info->coro_main |= vm->states[k] == L;
	for (int i = 0; i < c->n && vm->raw[i].L == L; i++) {
		if (vm->raw[i].lua)
			info->coro_body = c->w[i].fr;
		if (vm->raw[i].last)
			break;
	}
}

int puc_walk_raw(struct vm *vm, struct target *t, struct thread_snap *ts, struct lua_walk *lw,
		 struct walk_info *info)
{
	memset(info, 0, sizeof *info);
	if (vm->raw_tid != ts->tid)
		vm->nraw = 0;
	if (vm->raw_tid == ts->tid && vm->raw_err)
		return vm->raw_err;
	struct wctx c = { .vm = vm, .t = t, .ts = ts, .m = ts->mem ? ts->mem : &t->mem.base,
			  .ns = &ts->native, .n = vm->nraw, .leaf_native = -1 };
	/* a native stack inside luaV_execute with no Lua frame lost its Lua
	 * part (a torn capture, a state not found): an error, never a stack */
	if (c.n == 0) {
		if (!t->sym)
			return 0;
		walk_none(&c, info);
		return native_in_exec(&c) ? -LS_E_TORN : 0;
	}
	c.w = calloc((size_t)c.n, sizeof *c.w);
	c.sf = calloc((size_t)c.n, sizeof *c.sf);
	c.segs = calloc((size_t)c.n * 2 + 2, sizeof *c.segs);
	int rc = -LS_E_NOMEM, nlua = 0;
	if (c.w && c.sf && c.segs)
		rc = nlua = walk_protos(&c);
	if (rc == 0 && t->sym && native_in_exec(&c)) {
		info->discover |= VM_DISC_STATES | VM_DISC_COROS;
		rc = -LS_E_TORN;
	}
	if (rc >= 0) {
		walk_bottoms(&c);
		walk_frames(&c);
		for (int i = 0; i < c.n;)
			i = place_state(&c, i);
		walk_leaf_line(&c);
		walk_coro(&c, info);
		rc = ts->after && t->sym && vm_frames_unexplained(&c) ? -LS_E_TORN :
		     emit_walk(lw, c.sf, c.segs, c.nsegs);
		info->lua_frames = nlua;
		info->vmstate = intern(vm->raw[0].lua ? "interpreter" : "C");
		info->state = vm->raw[0].lua ? VMS_INTERP : VMS_C;
	}
	free(c.w);
	free(c.sf);
	free(c.segs);
	puc_protos_release(vm);
	return rc;
}

/* Lua-only walks (no native stack to stay consistent with) re-read a
 * chain that turned out torn, like capture() does. */
int puc_walk(struct vm *vm, struct target *t, struct thread_snap *ts, struct lua_walk *lw,
	     struct walk_info *info)
{
	int rc = puc_walk_raw(vm, t, ts, lw, info);
	for (int attempt = 0; rc == -LS_E_TORN && ts->native.n == 0 && ts->tid > 0 && attempt < 2;
	     attempt++) {
		puc_capture(vm, t, ts);
		lua_walk_reset(lw);
		rc = puc_walk_raw(vm, t, ts, lw, info);
	}
	return rc;
}


