/* vm_puc_probe.c: finding a PUC Lua 5.1-5.4 VM in a process.
 *
 * lua_ident -> release -> layout row (vm_puc_layout.c); main states from
 * symbols (globalL, redis lctx), then a .data/.bss pre-pass, then the
 * allocation-block invariant over the heap (docs/puc-lua.md §9); C
 * function names from the registry's _LOADED; the luaV_execute code range
 * from symbols or, when stripped, from its opcode jump table; the
 * coroutines from the GC lists. What it finds, the walk only reads;
 * puc_discover (vm_puc.c) adds to it after a sample. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elf_sym.h"
#include "err.h"
#include "intern.h"
#include "msg.h"
#include "proc_maps.h"
#include "timeutil.h"
#include "vm_puc_int.h"

/* ---- validation of a main state (docs/puc-lua.md §9.1) ---------------------------- */

static int exec_mapping(const struct proc_maps *maps, uint64_t a)
{
	const struct proc_map *pm = proc_maps_find(maps, a);
	return pm && (pm->perms & MAP_X);
}

static int rw_mapping(const struct proc_maps *maps, uint64_t a)
{
	const struct proc_map *pm = proc_maps_find(maps, a);
	return pm && (pm->perms & MAP_W) && (pm->perms & MAP_R);
}

/* Is L the main thread of its global_State? 1 yes, 0 no. */
static int state_valid(const struct puc_layout *lay, struct mem *m, const struct proc_maps *maps,
		       uint64_t L)
{
	uint8_t lb[256], gb[512];
	if (!ptr_ok(L) || lay->L_size > (int)sizeof lb || mem_read(m, L, lb, lay->L_size) < 0)
		return 0;
	if (lb[8] != lay->gct_thread)
		return 0;
	uint64_t g = g64(lb, lay->L_l_G);
	if (g != L + (uint64_t)lay->L_size)
		return 0;
	int glen = lay->g_tmname + 8;
	if (glen > (int)sizeof gb || mem_read(m, g, gb, (size_t)glen) < 0)
		return 0;
	if (g64(gb, lay->g_mainthread) != L)
		return 0;
	if (!exec_mapping(maps, g64(gb, lay->g_frealloc)))
		return 0;
	if (tv_tag(lay, gb + lay->g_l_registry) != lay->tag_table)
		return 0;
	if (lay->g_currentwhite >= 0) {
		unsigned w = gb[lay->g_currentwhite] & lay->white_mask;
		if (w == 0 || (w & (w - 1)))
			return 0;
	}
	uint32_t ss = g32(gb, lay->g_strt_size);
	if (ss < 32 || (ss & (ss - 1)))
		return 0;
	uint64_t stack = g64(lb, lay->L_stack), top = g64(lb, lay->L_top),
		 last = g64(lb, lay->L_stack_last), ci = g64(lb, lay->L_ci);
	if (!ptr_ok(stack) || !(stack <= top && top <= last + 5 * 16) || !ptr_ok(ci))
		return 0;
	return 1;
}

static void add_state(struct vm *vm, uint64_t L, const char *how)
{
	for (int i = 0; i < vm->nstates; i++)
		if (vm->states[i] == L)
			return;
	if (vm->nstates >= MAX_STATES ||
	    array_grow(&vm->states, &vm->capstates, (size_t)vm->nstates + 1, sizeof *vm->states) < 0) {
		msg_debug(2, "puc: main lua_State 0x%llx (%s) not kept: %d states already",
			  (unsigned long long)L, how, vm->nstates);
		limit_hit(LIMIT_PUC_STATES, 1);
		return;
	}
	vm->states[vm->nstates++] = L;
	msg_debug(1, "puc: main lua_State 0x%llx (%s)", (unsigned long long)L, how);
}

/* Q may be any lua_State (or garbage): add its main thread if valid. */
static int try_state_ptr(struct vm *vm, struct mem *m, const struct proc_maps *maps, uint64_t q,
			 const char *how)
{
	const struct puc_layout *lay = vm->lay;
	if (!ptr_ok(q) || !rw_mapping(maps, q))
		return 0;
	if (state_valid(lay, m, maps, q)) {
		add_state(vm, q, how);
		return 1;
	}
	uint8_t tt;
	uint64_t g, mt;
	if (rd8(m, q + 8, &tt) < 0 || tt != lay->gct_thread)
		return 0;
	if (rd64(m, q + (uint64_t)lay->L_l_G, &g) < 0 || !ptr_ok(g) ||
	    rd64(m, g + (uint64_t)lay->g_mainthread, &mt) < 0)
		return 0;
	if (mt != q && ptr_ok(mt) && state_valid(lay, m, maps, mt)) {
		add_state(vm, mt, how);
		return 1;
	}
	return 0;
}

#define SCAN_BLOCK (1u << 20)   /* bytes read at a time by scan_range */
#define HEAP_SCAN_MAX (512ull << 20) /* bytes of anonymous memory a heap scan reads;
                                      * the mappings past it are counted (limit.h) */

/* Pointers the .data/.bss pre-pass follows in all (each costs a read or
 * two of the target): a program with a big .data full of pointers (a
 * compiler, 16 MiB of them) made one dump 641 000 process_vm_readv
 * calls and 1.2 s of CPU when the budget was 20 000 per MiB
 * (bench/huge-binary.sh). Past it the heap scan, which reads no more
 * per pointer, still finds every main state. */
#define PREPASS_TRIES 4096

/* Scan [lo, hi) for qwords, SCAN_BLOCK bytes at a time through BUF (that
 * big). MODE 0: any qword that is a lua_State pointer (the .data/.bss
 * pre-pass), at most *TRIES of them followed (decremented); MODE 1: the
 * allocation-block invariant at the qword's own address (heap scan).
 * Bounded by the caller. */
static void scan_range(struct vm *vm, struct mem *m, const struct proc_maps *maps, uint8_t *buf,
		       uint64_t lo, uint64_t hi, int mode, const char *how, int *tries)
{
	const struct puc_layout *lay = vm->lay;
	int64_t delta = (int64_t)lay->L_size - lay->L_l_G; /* q - a for a main state */
	for (uint64_t a = lo; a < hi; a += SCAN_BLOCK) {
		size_t n = hi - a < SCAN_BLOCK ? (size_t)(hi - a) : SCAN_BLOCK;
		ssize_t got = m->read(m, a, buf, n);
		if (got <= 0)
			continue;
		for (size_t off = 0; off + 8 <= (size_t)got; off += 8) {
			uint64_t q = g64(buf, (int)off);
			if (q < 0x1000 || (q & 7))
				continue;
			if (mode == 1) {
				if ((int64_t)(q - (a + off)) != delta)
					continue;
				uint64_t L = a + off - (uint64_t)lay->L_l_G;
				if (state_valid(lay, m, maps, L))
					add_state(vm, L, how);
			} else if (*tries > 0 && rw_mapping(maps, q)) {
				/* only pointers to something whose +8 byte is a thread tag */
				(*tries)--;
				try_state_ptr(vm, m, maps, q, how);
			}
		}
	}
}

int puc_find_states(struct vm *vm, struct target *t)
{
	struct mem *m = &t->mem.base;
	const struct proc_maps *maps = symtab_maps(t->sym);
	uint64_t a, v;
	/* states closed since the last scan go (the table stays the live
	 * ones); the scan below finds any still valid again */
	int kept = 0;
	for (int i = 0; i < vm->nstates; i++)
		if (state_valid(vm->lay, m, maps, vm->states[i]))
			vm->states[kept++] = vm->states[i];
	if (kept < vm->nstates)
		msg_debug(1, "puc: %d main state(s) no longer valid, forgotten", vm->nstates - kept);
	vm->nstates = kept;
	int before = kept;
	/* symbols: lua.c's globalL, redis's lctx (lctx.lua first) */
	if ((a = symtab_find(t->sym, "globalL", NULL, NULL)) && rd64(m, a, &v) == 0)
		try_state_ptr(vm, m, maps, v, "symbol globalL");
	if ((a = symtab_find(t->sym, "lctx", NULL, NULL)))
		for (int i = 0; i < 8; i++)
			if (rd64(m, a + 8 * i, &v) == 0 && try_state_ptr(vm, m, maps, v, "symbol lctx"))
				break;
	uint8_t *buf = malloc(SCAN_BLOCK);
	if (!buf)
		return vm->nstates - before;
	/* pre-pass: writable file-backed mappings (.data/.bss) */
	uint64_t total = 0;
	int tries = PREPASS_TRIES;
	for (int i = 0; i < maps->n; i++) {
		const struct proc_map *pm = &maps->m[i];
		if (!(pm->perms & MAP_W) || !proc_map_is_file(pm) || pm->end - pm->start > (64u << 20))
			continue;
		if (total > (256u << 20))
			break;
		total += pm->end - pm->start;
		scan_range(vm, m, maps, buf, pm->start, pm->end, 0, "pointer in .data/.bss", &tries);
		/* .bss continues in the anonymous mapping right after */
		if (i + 1 < maps->n && maps->m[i + 1].start == pm->end && !proc_map_is_file(&maps->m[i + 1]) &&
		    maps->m[i + 1].path[0] == 0 && maps->m[i + 1].end - maps->m[i + 1].start < (1u << 20))
			scan_range(vm, m, maps, buf, maps->m[i + 1].start, maps->m[i + 1].end, 0,
				   "pointer in .bss", &tries);
	}
	if (tries <= 0)
		msg_debug(1, "puc: .data/.bss pre-pass followed its %d pointers; the heap scan goes on",
			  PREPASS_TRIES);
	/* heap scan: allocation-block invariant over [heap] and anonymous rw memory */
	total = 0;
	uint64_t skipped = 0;
	uint64_t t0 = time_now_ns();
	for (int i = 0; i < maps->n; i++) {
		const struct proc_map *pm = &maps->m[i];
		if ((pm->perms & (MAP_R | MAP_W)) != (MAP_R | MAP_W))
			continue;
		if (proc_map_is_file(pm) || (pm->path[0] && strcmp(pm->path, "[heap]") != 0))
			continue;
		uint64_t len = pm->end - pm->start;
		if (total + len > HEAP_SCAN_MAX) {
			skipped += len;
			continue;
		}
		total += len;
		scan_range(vm, m, maps, buf, pm->start, pm->end, 1, "heap scan", NULL);
	}
	if (skipped) {
		msg_debug(1, "puc: heap scan skipped %llu KiB past its %llu MiB",
			  (unsigned long long)(skipped >> 10), (unsigned long long)(HEAP_SCAN_MAX >> 20));
		limit_hit(LIMIT_PUC_HEAP_SCAN, 1);
	}
	msg_debug(1, "puc: heap scan of %llu KiB took %.1f ms, %d main state(s)",
		  (unsigned long long)(total >> 10), (time_now_ns() - t0) / 1e6, vm->nstates);
	free(buf);
	return vm->nstates - before;
}

/* ---- C function names from the registry's _LOADED (docs/puc-lua.md §6) ------------- */

/* Call FN for each string-keyed entry of the hash part of table TAB.
 * Bounded: 2^16 nodes. Returns 0 or -1 when the table can't be read. */
static int table_each(const struct puc_layout *lay, struct mem *m, uint64_t tab,
		      int (*fn)(void *arg, const char *key, const uint8_t *val), void *arg)
{
	uint8_t th[72];
	int tl = lay->t_sizearray + 4;
	if (lay->t_node + 8 > tl)
		tl = lay->t_node + 8;
	if (lay->t_metatable + 8 > tl)
		tl = lay->t_metatable + 8;
	if (!ptr_ok(tab) || tl > (int)sizeof th || mem_read(m, tab, th, (size_t)tl) < 0 ||
	    th[8] != lay->gct_table)
		return -1;
	unsigned lsz = th[lay->t_lsizenode];
	if (lsz > 16)
		return -1;
	uint64_t node = g64(th, lay->t_node);
	size_t nn = (size_t)1 << lsz;
	size_t bytes = nn * (size_t)lay->node_size;
	uint8_t *nb = malloc(bytes);
	if (!nb)
		return -1;
	if (!ptr_ok(node) || mem_read(m, node, nb, bytes) < 0) {
		free(nb);
		return -1;
	}
	for (size_t i = 0; i < nn; i++) {
		const uint8_t *n = nb + i * (size_t)lay->node_size;
		unsigned ktt = lay->node_key_tt_size == 1 ? n[lay->node_key_tt] : g32(n, lay->node_key_tt);
		if (ktt != lay->tag_sstr && ktt != lay->tag_lstr)
			continue;
		if (tv_tag(lay, n) == lay->tag_nil)
			continue;
		const char *key = intern_tstring(lay, m, g64(n, lay->node_key_val));
		if (key && fn(arg, key, n))
			break;
	}
	free(nb);
	return 0;
}

struct loaded_arg {
	struct vm *vm;
	struct mem *m;
	const char *mod;
	uint64_t loaded;
};

/* C function pointer of the function TValue VAL, or 0 */
static uint64_t tv_cfunction(const struct puc_layout *lay, struct mem *m, const uint8_t *val)
{
	unsigned tag = tv_tag(lay, val);
	uint64_t v = g64(val, 0);
	if (tag == lay->tag_lcf)
		return v;
	if (tag != lay->tag_ccl)
		return 0;
	uint8_t h[16];
	uint64_t f;
	if (!ptr_ok(v) || mem_read(m, v, h, 16) < 0 || h[8] != lay->gct_ccl)
		return 0;
	if (lay->cl_isC >= 0 && h[lay->cl_isC] != 1)
		return 0;
	if (rd64(m, v + (uint64_t)lay->ccl_f, &f) < 0)
		return 0;
	return f;
}

/* Learn NAME (MOD.KEY) for C function F; 1 when the table is full (F
 * dropped and counted), else 0. */
static int cname_add(struct vm *vm, uint64_t f, const char *mod, const char *key)
{
	if (!f)
		return 0;
	if (vm->ncn >= MAX_CNAMES) {
		/* the table walk stops at the first one (loaded_fn_cb) */
		limit_hit(LIMIT_PUC_CNAMES, 1);
		return 1;
	}
	const char *name = strcmp(mod, "_G") == 0 ? intern(key) : internf("%s.%s", mod, key);
	for (int i = 0; i < vm->ncn; i++) {
		if (vm->cn[i].f != f)
			continue;
		/* prefer global names, then the shorter one */
		int cur_g = strchr(vm->cn[i].name, '.') == NULL, new_g = strcmp(mod, "_G") == 0;
		if ((new_g && !cur_g) || (new_g == cur_g && strcmp(name, vm->cn[i].name) < 0))
			vm->cn[i].name = name;
		return 0;
	}
	vm->cn[vm->ncn].f = f;
	vm->cn[vm->ncn].name = name;
	vm->ncn++;
	return 0;
}

static int loaded_fn_cb(void *arg, const char *key, const uint8_t *val)
{
	struct loaded_arg *la = arg;
	uint64_t f = tv_cfunction(la->vm->lay, la->m, val);
	return f && cname_add(la->vm, f, la->mod, key); /* full: stop */
}

static int loaded_mod_cb(void *arg, const char *key, const uint8_t *val)
{
	struct loaded_arg *la = arg;
	const struct puc_layout *lay = la->vm->lay;
	if (tv_tag(lay, val) != lay->tag_table)
		return 0;
	struct loaded_arg sub = *la;
	sub.mod = key;
	table_each(lay, la->m, g64(val, 0), loaded_fn_cb, &sub);
	return 0;
}

static int registry_cb(void *arg, const char *key, const uint8_t *val)
{
	struct loaded_arg *la = arg;
	if (strcmp(key, "_LOADED") == 0 && tv_tag(la->vm->lay, val) == la->vm->lay->tag_table) {
		la->loaded = g64(val, 0);
		return 1;
	}
	return 0;
}

static int cname_cmp(const void *a, const void *b)
{
	const struct cname *x = a, *y = b;
	return x->f < y->f ? -1 : x->f > y->f;
}

void puc_load_cnames(struct vm *vm, struct target *t, uint64_t L)
{
	struct mem *m = &t->mem.base;
	const struct puc_layout *lay = vm->lay;
	uint8_t reg[16];
	uint64_t g = L + (uint64_t)lay->L_size;
	if (mem_read(m, g + (uint64_t)lay->g_l_registry, reg, 16) < 0 || tv_tag(lay, reg) != lay->tag_table)
		return;
	struct loaded_arg la = { vm, m, NULL, 0 };
	table_each(lay, m, g64(reg, 0), registry_cb, &la);
	if (!la.loaded) {
		msg_debug(1, "puc: no _LOADED in the registry of 0x%llx", (unsigned long long)L);
		return;
	}
	int before = vm->ncn;
	table_each(lay, m, la.loaded, loaded_mod_cb, &la);
	qsort(vm->cn, (size_t)vm->ncn, sizeof *vm->cn, cname_cmp);
	msg_debug(1, "puc: %d new C function names from _LOADED of 0x%llx", vm->ncn - before,
		  (unsigned long long)L);
}

const char *puc_cname_find(const struct vm *vm, uint64_t f)
{
	int lo = 0, hi = vm->ncn - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (vm->cn[mid].f == f)
			return vm->cn[mid].name;
		if (vm->cn[mid].f < f)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return NULL;
}

/* ---- native code: function starts and the luaV_execute range ------------- */

uint64_t puc_fde_of(struct vm *vm, struct target *t, uint64_t pc, uint64_t *end)
{
	unsigned h = (unsigned)((pc * 0x9E3779B97F4A7C15ull) >> 56);
	if (vm->fde[h].pc == pc && pc) {
		*end = vm->fde[h].hi;
		return vm->fde[h].lo;
	}
	uint64_t lo = symtab_fde_start(t->sym, pc, end);
	vm->fde[h].pc = pc;
	vm->fde[h].lo = lo;
	vm->fde[h].hi = *end;
	return lo;
}

/* Function start of native frame NF (symbol, else its FDE), or 0. */
uint64_t puc_native_start(struct vm *vm, struct target *t, const struct native_frame *nf)
{
	struct sym_info si;
	int ret = nf_is_return(nf);
	symtab_lookup(t->sym, nf->pc, ret, &si);
	if (si.func_start)
		return si.func_start;
	uint64_t end;
	return puc_fde_of(vm, t, ret ? nf->pc - 1 : nf->pc, &end);
}

static void exec_add(struct vm *vm, uint64_t lo, uint64_t hi, const char *how)
{
	if (!lo || hi <= lo)
		return;
	for (int i = 0; i < vm->nexec; i++)
		if (vm->exec[i].lo == lo)
			return;
	if (vm->nexec >= MAX_EXEC) {
		limit_hit(LIMIT_PUC_EXEC, 1);
		return;
	}
	vm->exec[vm->nexec].lo = lo;
	vm->exec[vm->nexec].hi = hi;
	vm->nexec++;
	if (!vm->exec_how)
		vm->exec_how = how;
	msg_debug(1, "puc: luaV_execute at [0x%llx, 0x%llx) (%s)", (unsigned long long)lo,
		  (unsigned long long)hi, how);
}

struct jt_scan {
	struct vm *vm;
	struct target *t;
	uint64_t text_lo, text_hi;
	uint64_t best_lo, best_hi;
	int best_exact;
};

/* A dispatch table: N (or N-1, when the last opcode is the default)
 * entries whose targets all lie in one FDE and are mostly distinct:
 * luaV_execute's opcode switch (5.1-5.3: int32 offsets from the table)
 * or 5.4's computed-goto disptab (absolute pointers). TG holds K >= N-1
 * targets (up to N+2), PREV the target the entry before the table would
 * have. A table that starts exactly here and ends after N entries
 * ("exact") beats a longer one; then the bigger function wins. */
static void jt_check(struct jt_scan *js, const uint64_t *tg, int k, int n, uint64_t prev)
{
	uint64_t end;
	uint64_t lo = puc_fde_of(js->vm, js->t, tg[0], &end);
	if (!lo || end - lo < 2048)
		return;
	if (prev >= lo && prev < end)
		return;   /* the middle of a longer table */
	int run = 0, distinct = 0;
	while (run < k && tg[run] >= lo && tg[run] < end)
		run++;
	if (run < n - 1)
		return;
	for (int i = 0; i < n - 1; i++) {
		int dup = 0;
		for (int j = 0; j < i && !dup; j++)
			dup = tg[j] == tg[i];
		distinct += !dup;
	}
	if (distinct * 4 < (n - 1) * 3)
		return;
	int exact = run <= n;
	if (exact > js->best_exact ||
	    (exact == js->best_exact && end - lo > js->best_hi - js->best_lo)) {
		js->best_lo = lo;
		js->best_hi = end;
		js->best_exact = exact;
	}
}

static void find_exec_by_table(struct vm *vm, struct target *t)
{
	const struct proc_maps *maps = symtab_maps(t->sym);
	const struct proc_map *im = proc_maps_find(maps, vm->ident);
	if (!im)
		return;
	struct jt_scan js = { vm, t, UINT64_MAX, 0, 0, 0, -1 };
	for (int i = 0; i < maps->n; i++)
		if (maps->m[i].path == im->path && (maps->m[i].perms & MAP_X)) {
			if (maps->m[i].start < js.text_lo)
				js.text_lo = maps->m[i].start;
			if (maps->m[i].end > js.text_hi)
				js.text_hi = maps->m[i].end;
		}
	if (js.text_lo >= js.text_hi)
		return;
	int n = vm->lay->num_opcodes;
	uint64_t tg[100];
	uint64_t t0 = time_now_ns();
	for (int i = 0; i < maps->n; i++) {
		const struct proc_map *pm = &maps->m[i];
		if (pm->path != im->path || (pm->perms & MAP_X) || !(pm->perms & MAP_R))
			continue;
		size_t len = pm->end - pm->start;
		if (len > (32u << 20))
			continue;
		uint8_t *buf = malloc(len);
		if (!buf)
			continue;
		ssize_t got = t->mem.base.read(&t->mem.base, pm->start, buf, len);
		for (ssize_t off = 0; got > 0 && off + 4 * (n - 1) <= got; off += 4) {
			/* relative int32 table */
			uint64_t base = pm->start + (uint64_t)off;
			int k;
			for (k = 0; k < n + 2 && off + 4 * k + 4 <= got; k++) {
				int32_t d;
				memcpy(&d, buf + off + 4 * k, 4);
				uint64_t a = base + (uint64_t)(int64_t)d;
				if (a < js.text_lo || a >= js.text_hi)
					break;
				tg[k] = a;
			}
			if (k >= n - 1) {
				int32_t d = 0;
				if (off >= 4)
					memcpy(&d, buf + off - 4, 4);
				jt_check(&js, tg, k, n, off >= 4 ? base + (uint64_t)(int64_t)d : 0);
			}
			/* absolute pointers */
			if ((off & 7) == 0) {
				for (k = 0; k < n + 2 && off + 8 * k + 8 <= got; k++) {
					uint64_t a = g64(buf, (int)off + 8 * k);
					if (a < js.text_lo || a >= js.text_hi)
						break;
					tg[k] = a;
				}
				if (k >= n - 1)
					jt_check(&js, tg, k, n, off >= 8 ? g64(buf, (int)off - 8) : 0);
			}
		}
		free(buf);
	}
	msg_debug(1, "puc: opcode table scan took %.1f ms", (time_now_ns() - t0) / 1e6);
	if (js.best_lo)
		exec_add(vm, js.best_lo, js.best_hi, js.best_exact ? "opcode dispatch table"
							 : "opcode dispatch table, inexact");
}

static void find_exec(struct vm *vm, struct target *t)
{
	static const char *const names[] = { "luaV_execute", "luaV_execute.cold",
		"_Z12luaV_executeP9lua_StateP8CallInfo", "_Z12luaV_executeP9lua_Statei",
		"_Z12luaV_executeP9lua_State" };
	/* LUASPY_PUC_NOSYMS=1 (tests): ignore debug symbols, use the heuristics */
	const char *nosyms = getenv("LUASPY_PUC_NOSYMS");
	for (size_t i = 0; (!nosyms || !*nosyms) && i < sizeof names / sizeof names[0]; i++) {
		uint64_t size = 0;
		uint64_t a = symtab_find(t->sym, names[i], &size, NULL);
		if (a && size)
			exec_add(vm, a, a + size, "symbol");
	}
	if (!vm->nexec)
		find_exec_by_table(vm, t);
	if (!vm->nexec)
		msg_debug(1, "puc: luaV_execute not found; Lua frames are placed by C-function anchors");
}

/* ---- coroutines on the GC lists ------------------------------------------- */

/* Walk every global_State's allgc (5.1 rootgc) list, bounded, keeping
 * threads other than the main ones into VM->coros (grown up to
 * MAX_COROS; what is cut is counted). Brent's cycle check. Returns the
 * count. */
static int enum_threads(struct vm *vm, struct mem *live)
{
	const struct puc_layout *lay = vm->lay;
	int n = 0, dropped = 0, cut = 0;
	/* objects on allgc sit next to each other (allocation order): read
	 * them a block at a time, not a syscall each (1 GiB heap: 400000
	 * objects took 1-2 s one by one) */
	struct mem_cache mc;
	mem_cache_init(&mc, live, GC_BLOCK, 1);
	struct mem *m = &mc.base;
	vm->coros_cut = NULL;
	for (int s = 0; s < vm->nstates; s++) {
		uint64_t g = vm->states[s] + (uint64_t)lay->L_size, o;
		if (rd64(m, g + (uint64_t)lay->g_allgc, &o) < 0)
			continue;
		uint64_t tort = o, power = 1, lam = 0;
		int steps;
		for (steps = 0; o && steps < MAX_GC_VISIT; steps++) {
			uint8_t h[16];
			if (!ptr_ok(o) || mem_read(m, o, h, 16) < 0)
				break;
			if (h[8] == lay->gct_thread) {
				int main_ = 0;
				for (int k = 0; k < vm->nstates && !main_; k++)
					main_ |= vm->states[k] == o;
				if (!main_ && n < MAX_COROS &&
				    array_grow(&vm->coros, &vm->capcoros, (size_t)n + 1, sizeof *vm->coros) == 0)
					vm->coros[n++] = o;
				else if (!main_)
					dropped++;
			}
			o = g64(h, 0);
			if (o == tort)
				break; /* cycle */
			if (++lam == power) {
				tort = o;
				power <<= 1;
				lam = 0;
			}
		}
		if (steps >= MAX_GC_VISIT && o)
			cut++;
	}
	mem_cache_free(&mc);
	vm->coros_cut = NULL;
	if (dropped) {
		msg_debug(1, "puc: %d coroutine(s) past the first %d not listed", dropped, n);
		limit_hit(LIMIT_PUC_COROS, 1);
		vm->coros_cut = n < MAX_COROS ? "out of memory for the coroutine list"
					      : "more coroutines than the " PUC_XSTR(MAX_COROS) " kept";
	}
	if (cut) {
		msg_debug(1, "puc: allgc walk of %d state(s) stopped after %d objects", cut, MAX_GC_VISIT);
		limit_hit(LIMIT_PUC_GC_VISIT, 1);
		vm->coros_cut = "more than " PUC_XSTR(MAX_GC_VISIT) " GC objects in a state";
	}
	return n;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* List the coroutines again; returns how many were not listed before. */
int puc_refresh_coros(struct vm *vm, struct mem *m)
{
	int nold = vm->ncoros, fresh = 0;
	uint64_t *old = nold ? malloc((size_t)nold * sizeof *old) : NULL;
	if (old) {
		memcpy(old, vm->coros, (size_t)nold * sizeof *old);
		qsort(old, (size_t)nold, sizeof *old, u64_cmp);
	}
	vm->ncoros = enum_threads(vm, m);
	for (int i = 0; i < vm->ncoros; i++)
		fresh += !old || !bsearch(&vm->coros[i], old, (size_t)nold, sizeof *old, u64_cmp);
	free(old);
	return fresh;
}

void puc_set_co_names(struct vm *vm)
{
	for (int i = 0; i < vm->ncn; i++)
		if (strcmp(vm->cn[i].name, "coroutine.resume") == 0)
			vm->co_resume = vm->cn[i].f;
		else if (strcmp(vm->cn[i].name, "coroutine.yield") == 0)
			vm->co_yield = vm->cn[i].f;
}


/* ---- probe ------------------------------------------------------------------ */

#define IDENT_SCAN_MAP (32u << 20)    /* skip read-only mappings larger than this */
#define IDENT_SCAN_TOTAL (256u << 20) /* and stop after this much */

/* No lua_ident symbol (a static, stripped host): lapi.c's lua_ident text
 * is still in the read-only data of the module that links Lua: "$Lua: Lua
 * 5.1..." or "$LuaVersion: Lua 5.x...". Its address and module (*MOD:
 * the basename), or 0. Bounded: read-only file mappings up to 32 MiB,
 * 256 MiB in all. */
static uint64_t find_ident_text(struct target *t, const char **mod)
{
	static const char *const pat[] = { "$LuaVersion: Lua 5.", "$Lua: Lua 5.1" };
	const struct proc_maps *maps = symtab_maps(t->sym);
	uint64_t total = 0;
	for (int i = 0; i < maps->n; i++) {
		const struct proc_map *pm = &maps->m[i];
		if (!proc_map_is_file(pm) || !(pm->perms & MAP_R) || (pm->perms & MAP_W))
			continue;
		uint64_t len = pm->end - pm->start;
		if (len > IDENT_SCAN_MAP || total + len > IDENT_SCAN_TOTAL)
			continue;
		total += len;
		uint8_t *buf = malloc((size_t)len);
		if (!buf)
			return 0;
		ssize_t got = t->mem.base.read(&t->mem.base, pm->start, buf, (size_t)len);
		for (size_t k = 0; got > 0 && k < sizeof pat / sizeof pat[0]; k++) {
			const uint8_t *hit = memmem(buf, (size_t)got, pat[k], strlen(pat[k]));
			if (hit) {
				uint64_t a = pm->start + (uint64_t)(hit - buf);
				free(buf);
				*mod = pm->name;
				msg_debug(1, "puc: no lua_ident symbol; its text at 0x%llx in %s",
					  (unsigned long long)a, pm->name);
				return a;
			}
		}
		free(buf);
	}
	return 0;
}

int puc_probe(struct target *t, unsigned flags, struct vm **out, char *why, size_t whylen)
{
	(void)flags; /* unused: the PUC probe does the same for record, top and dump */
	uint64_t size = 0;
	const char *mod = NULL;
	uint64_t a = symtab_find(t->sym, "lua_ident", &size, &mod);
	const char *via = "lua_ident";
	if (!a && (a = find_ident_text(t, &mod)))
		via = "the lua_ident text";
	if (!a) {
		msg_debug(1, "puc: no lua_ident symbol or text: not PUC Lua");
		return 0;
	}
	char s[200];
	ssize_t n = mem_read_str(&t->mem.base, a, s, 160);
	if (n <= 0) {
		snprintf(why, whylen, "lua_ident in %s at 0x%llx is unreadable", mod ? mod : "?",
			 (unsigned long long)a);
		return -LS_E_UNSUPPORTED;
	}
	/* what it says, without the RCS-style decoration: "Lua 5.4.4" */
	char shown[64];
	const char *lp = strstr(s, "Lua ");
	if (lp && (strncmp(s, "$Lua: ", 6) == 0 || strncmp(s, "$LuaVersion: ", 13) == 0)) {
		size_t k = strcspn(lp, " \n$");
		k += lp[k] == ' ' ? 1 + strcspn(lp + k + 1, " \n$") : 0; /* "Lua" + version */
		snprintf(shown, sizeof shown, "%.*s", (int)(k < 60 ? k : 60), lp);
	} else {
		snprintf(shown, sizeof shown, "%.60s", s);
	}
	for (char *c = shown; *c; c++)
		if (*c == '\n' || (unsigned char)*c < 32)
			*c = ' ';
	int minor, patch;
	if (puc_ident_parse(s, (size_t)n, &minor, &patch) < 0) {
		snprintf(why, whylen, "lua_ident in %s says \"%s\": not a PUC Lua 5.1-5.4 release",
			 mod ? mod : "?", shown);
		return -LS_E_UNSUPPORTED;
	}
	const struct puc_layout *lay = puc_layout_find(minor, patch);
	if (!lay || (patch >= 0 && (patch < lay->rel_lo || patch > lay->rel_hi))) {
		snprintf(why, whylen, "Lua 5.%d.%d (lua_ident in %s): no layout known for this release",
			 minor, patch, mod ? mod : "?");
		return -LS_E_UNSUPPORTED;
	}
	if (minor == 1 && symtab_find(t->sym, "lua_isreadonlytable", NULL, NULL))
		lay = &puc_layouts[1];   /* redis's Table with 'readonly' */
	struct vm *vm = calloc(1, sizeof *vm);
	if (!vm)
		return -LS_E_NOMEM;
	vm->cn = calloc(MAX_CNAMES, sizeof *vm->cn);
	if (!vm->cn) {
		free(vm);
		return -LS_E_NOMEM;
	}
	vm->lay = lay;
	vm->minor = minor;
	vm->patch = patch;
	vm->ident = a;
	vm->lua_module = mod;
	snprintf(vm->desc, sizeof vm->desc, "Lua 5.%d.%d%s (%s)", minor, patch < 0 ? 0 : patch,
		 lay == &puc_layouts[1] ? " (redis)" : "", mod ? mod : "?");
	msg_debug(1, "puc: %s in %s says \"%s\": layout %s [%s]", via, mod ? mod : "?", shown,
		  lay->name, lay->source);
	puc_find_states(vm, t);
	if (vm->nstates == 0)
		msg_debug(1, "puc: no lua_State found yet (validated by the allocation-block invariant)");
	for (int i = 0; i < vm->nstates; i++)
		puc_load_cnames(vm, t, vm->states[i]);
	puc_set_co_names(vm);
	vm->resume_fn = symtab_find(t->sym, "lua_resume", NULL, NULL);
	find_exec(vm, t);
	puc_refresh_coros(vm, &t->mem.base);
	msg_debug(1, "puc: %d coroutine(s) on the GC lists", vm->ncoros);
	*out = vm;
	return 1;
}

