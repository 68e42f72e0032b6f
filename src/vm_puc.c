/* vm_puc.c: the PUC Lua 5.1-5.4 walker (vm_puc_ops).
 *
 * probe:   lua_ident -> release -> layout row (vm_puc_layout.c); main
 *          states from symbols (globalL, redis lctx), then a .data/.bss
 *          pre-pass, then the allocation-block invariant over the heap
 *          (notes/puc-lua.md §9); C function names from the registry's
 *          _LOADED; the luaV_execute code range from symbols or, when
 *          stripped, from its opcode jump table.
 * capture: (thread stopped) picks the lua_States running on this OS
 *          thread (errorJmp ordering + resume chain, §10) and copies
 *          their CallInfo chains: a few reads per frame.
 * walk:    Protos (cached, validated), lines (the running leaf's from
 *          luaV_execute's pc register, §5.1), call-site names, and the
 *          merge (§8): each native luaV_execute frame is replaced by the
 *          Lua frames it runs, each C function's native frame by a
 *          FRAME_C named by its symbol, else by package.loaded; a
 *          coroutine's frames stay above the lua_resume running it, the
 *          ones that lost their native frames to a yield just there.
 * Target memory is untrusted: every loop is bounded, every pointer and
 * tag checked; an inconsistent chain is -LS_E_TORN, never a guess. */
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "elf_sym.h"
#include "err.h"
#include "intern.h"
#include "merge.h"
#include "msg.h"
#include "proc_maps.h"
#include "vm.h"
#include "vm_puc.h"

#define MAX_STATES     16      /* main states kept per process */
#define MAX_COROS      4096    /* coroutines remembered from the allgc walk */
#define MAX_GC_VISIT   400000  /* objects visited per allgc walk */
#define MAX_RAW        1024    /* CallInfos copied per sample (leaf side) */
#define MAX_CI_STEPS   200000  /* CallInfo links followed per thread */
#define MAX_THREADS_L  16      /* nested lua_States per OS thread */
#define MAX_EXEC       8       /* luaV_execute code ranges */
#define MAX_CNAMES     20000   /* C function names from _LOADED */
#define PROTO_CACHE    1024    /* Proto cache slots (direct mapped) */
#define MAX_SIZECODE   (1 << 22)
#define STR_MAX        1024
#define GC_BLOCK       (64u << 10) /* read-ahead for the allgc walk */

/* one CallInfo as copied by capture() */
struct puc_raw {
	uint64_t L;          /* lua_State it belongs to */
	uint64_t ci;         /* CallInfo address */
	uint64_t cl;         /* closure address (0 for a light C function) */
	uint64_t proto;      /* Lua: Proto* */
	uint64_t cfn;        /* C: lua_CFunction */
	uint64_t savedpc;
	uint32_t status;     /* callstatus (5.2+) */
	int32_t tailcalls;   /* 5.1 */
	uint8_t lua;         /* 1 Lua function, 0 C function */
	uint8_t first;       /* first (innermost) frame of its lua_State */
	uint8_t last;        /* outermost frame of its lua_State */
};

struct puc_proto {
	uint64_t addr, code_addr, source_addr;
	int sizecode, linedefined, lastlinedefined;
	const char *chunk;   /* formatted chunk name (interned) */
	uint32_t *code;
	int32_t *line;       /* line per pc, NULL when stripped */
	int nloc;
	struct { const char *name; int startpc, endpc; } *loc;
	int nup;
	const char **upname;
	int nk;
	uint64_t k_addr;
	int np;
	uint64_t p_addr;
	/* call-site names by pc, computed on first use (the Proto is
	 * immutable while its header matches); "" = no name */
	const char **cs_name, **cs_what;
};

struct cname { uint64_t f; const char *name; };
struct range { uint64_t lo, hi; };

struct vm {
	const struct puc_layout *lay;
	int minor, patch;
	char desc[96];
	uint64_t ident;
	const char *lua_module;        /* module holding lua_ident */
	uint64_t states[MAX_STATES];   /* main lua_States */
	int nstates;
	uint64_t coros[MAX_COROS];     /* other threads (allgc walk) */
	int ncoros;
	uint64_t coros_ns;             /* when they were listed */
	struct cname *cn;
	int ncn;
	uint64_t co_resume;            /* coroutine.resume */
	uint64_t co_yield;             /* coroutine.yield */
	struct range exec[MAX_EXEC];
	int nexec;
	const char *exec_how;
	uint64_t resume_fn;            /* lua_resume */
	struct puc_proto *pcache[PROTO_CACHE];
	/* capture scratch: raw frames of the last captured thread */
	pid_t raw_tid;
	int nraw, raw_truncated, raw_err;
	struct puc_raw raw[MAX_RAW];
	unsigned pcreg_votes[UREG_NREGS]; /* which register held luaV_execute's pc */
	/* fde cache */
	struct { uint64_t pc, lo, hi; } fde[256];
};

/* ---- small readers ------------------------------------------------------ */

static int rd64(struct mem *m, uint64_t a, uint64_t *v) { return mem_read_u64(m, a, v); }
static int rd8(struct mem *m, uint64_t a, uint8_t *v) { return mem_read_u8(m, a, v); }

static uint64_t g64(const uint8_t *b, int off) { uint64_t v; memcpy(&v, b + off, 8); return v; }
static uint32_t g32(const uint8_t *b, int off) { uint32_t v; memcpy(&v, b + off, 4); return v; }
static uint16_t g16(const uint8_t *b, int off) { uint16_t v; memcpy(&v, b + off, 2); return v; }

static int ptr_ok(uint64_t p)
{
	return p >= 0x1000 && p < (1ull << 47) && (p & 7) == 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* tag of a TValue copied into B (16 bytes) */
static unsigned tv_tag(const struct puc_layout *lay, const uint8_t *b)
{
	return lay->tv_tt_size == 1 ? b[8] : g32(b, 8);
}

/* Read the TString at A into BUF (at most MAX bytes); returns length or -1. */
static int read_tstring(const struct puc_layout *lay, struct mem *m, uint64_t a, char *buf,
			size_t max)
{
	uint8_t h[32];
	if (!ptr_ok(a) || lay->ts_data > 32 || mem_read(m, a, h, (size_t)lay->ts_data) < 0)
		return -1;
	uint64_t len;
	if (h[8] != lay->gct_sstr && h[8] != lay->gct_lstr)
		return -1;
	if (lay->str_len == PUC_STR_SHRLEN && h[8] == lay->gct_sstr)
		len = h[11];
	else
		len = g64(h, 16);
	if (len > (1u << 24))
		return -1;
	size_t n = len < max ? (size_t)len : max;
	if (n && mem_read(m, a + (uint64_t)lay->ts_data, buf, n) < 0)
		return -1;
	buf[n] = 0;
	return (int)n;
}

static const char *intern_tstring(const struct puc_layout *lay, struct mem *m, uint64_t a)
{
	char buf[STR_MAX + 1];
	int n = read_tstring(lay, m, a, buf, STR_MAX);
	return n < 0 ? NULL : intern_n(buf, (size_t)n);
}

/* luaO_chunkid, without its 60-byte limit on file names */
static const char *chunkid(const char *src)
{
	if (!src)
		return intern("?");
	if (src[0] == '=' || src[0] == '@')
		return intern(src + 1);
	char buf[80];
	const char *nl = strchr(src, '\n');
	size_t n = nl ? (size_t)(nl - src) : strlen(src);
	if (n > 45 || nl)
		snprintf(buf, sizeof buf, "[string \"%.*s...\"]", (int)(n > 45 ? 45 : n), src);
	else
		snprintf(buf, sizeof buf, "[string \"%.*s\"]", (int)n, src);
	return intern(buf);
}

/* ---- validation of a main state (notes §9.1) ---------------------------- */

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
	if (vm->nstates >= MAX_STATES)
		return;
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

/* Scan [lo, hi) for qwords. MODE 0: any qword that is a lua_State pointer
 * (the .data/.bss pre-pass); MODE 1: the allocation-block invariant at the
 * qword's own address (heap scan). Bounded by the caller. */
static void scan_range(struct vm *vm, struct mem *m, const struct proc_maps *maps, uint64_t lo,
		       uint64_t hi, int mode, const char *how)
{
	const struct puc_layout *lay = vm->lay;
	static uint8_t buf[1 << 20];
	int64_t delta = (int64_t)lay->L_size - lay->L_l_G; /* q - a for a main state */
	for (uint64_t a = lo; a < hi; a += sizeof buf) {
		size_t n = hi - a < sizeof buf ? (size_t)(hi - a) : sizeof buf;
		ssize_t got = m->read(m, a, buf, n);
		if (got <= 0)
			continue;
		int tries = 0;
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
			} else if (tries < 20000 && rw_mapping(maps, q)) {
				/* only pointers to something whose +8 byte is a thread tag */
				tries++;
				try_state_ptr(vm, m, maps, q, how);
			}
		}
	}
}

static void find_states(struct vm *vm, struct target *t)
{
	struct mem *m = &t->mem.base;
	const struct proc_maps *maps = symtab_maps(t->sym);
	const struct puc_layout *lay = vm->lay;
	uint64_t a, v;
	/* symbols: lua.c's globalL, redis's lctx (lctx.lua first) */
	if ((a = symtab_find(t->sym, "globalL", NULL, NULL)) && rd64(m, a, &v) == 0)
		try_state_ptr(vm, m, maps, v, "symbol globalL");
	if ((a = symtab_find(t->sym, "lctx", NULL, NULL)))
		for (int i = 0; i < 8; i++)
			if (rd64(m, a + 8 * i, &v) == 0 && try_state_ptr(vm, m, maps, v, "symbol lctx"))
				break;
	/* pre-pass: writable file-backed mappings (.data/.bss) */
	uint64_t total = 0;
	for (int i = 0; i < maps->n; i++) {
		const struct proc_map *pm = &maps->m[i];
		if (!(pm->perms & MAP_W) || !proc_map_is_file(pm) || pm->end - pm->start > (64u << 20))
			continue;
		if (total > (256u << 20))
			break;
		total += pm->end - pm->start;
		scan_range(vm, m, maps, pm->start, pm->end, 0, "pointer in .data/.bss");
		/* .bss continues in the anonymous mapping right after */
		if (i + 1 < maps->n && maps->m[i + 1].start == pm->end && !proc_map_is_file(&maps->m[i + 1]) &&
		    maps->m[i + 1].path[0] == 0 && maps->m[i + 1].end - maps->m[i + 1].start < (1u << 20))
			scan_range(vm, m, maps, maps->m[i + 1].start, maps->m[i + 1].end, 0,
				   "pointer in .bss");
	}
	/* heap scan: allocation-block invariant over [heap] and anonymous rw memory */
	total = 0;
	uint64_t t0 = now_ns();
	for (int i = 0; i < maps->n; i++) {
		const struct proc_map *pm = &maps->m[i];
		if ((pm->perms & (MAP_R | MAP_W)) != (MAP_R | MAP_W))
			continue;
		if (proc_map_is_file(pm) || (pm->path[0] && strcmp(pm->path, "[heap]") != 0))
			continue;
		uint64_t len = pm->end - pm->start;
		if (total + len > (512ull << 20))
			continue;
		total += len;
		scan_range(vm, m, maps, pm->start, pm->end, 1, "heap scan");
	}
	msg_debug(1, "puc: heap scan of %llu KiB took %.1f ms, %d main state(s)",
		  (unsigned long long)(total >> 10), (now_ns() - t0) / 1e6, vm->nstates);
	(void)lay;
}

/* ---- C function names from the registry's _LOADED (notes §6) ------------- */

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

static void cname_add(struct vm *vm, uint64_t f, const char *mod, const char *key)
{
	if (!f || vm->ncn >= MAX_CNAMES)
		return;
	const char *name = strcmp(mod, "_G") == 0 ? intern(key) : internf("%s.%s", mod, key);
	for (int i = 0; i < vm->ncn; i++) {
		if (vm->cn[i].f != f)
			continue;
		/* prefer global names, then the shorter one */
		int cur_g = strchr(vm->cn[i].name, '.') == NULL, new_g = strcmp(mod, "_G") == 0;
		if ((new_g && !cur_g) || (new_g == cur_g && strcmp(name, vm->cn[i].name) < 0))
			vm->cn[i].name = name;
		return;
	}
	vm->cn[vm->ncn].f = f;
	vm->cn[vm->ncn].name = name;
	vm->ncn++;
}

static int loaded_fn_cb(void *arg, const char *key, const uint8_t *val)
{
	struct loaded_arg *la = arg;
	uint64_t f = tv_cfunction(la->vm->lay, la->m, val);
	if (f)
		cname_add(la->vm, f, la->mod, key);
	return la->vm->ncn >= MAX_CNAMES;
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

static void load_cnames(struct vm *vm, struct target *t, uint64_t L)
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

static const char *cname_find(const struct vm *vm, uint64_t f)
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

/* Start and end of the function (CFI FDE) covering PC, or 0: a binary
 * search of the module's .eh_frame_hdr table (PT_GNU_EH_FRAME, read from
 * target memory; x86_64 GCC/clang encode it datarel|sdata4 and FDEs
 * pcrel|sdata4, checked below). */
static uint64_t fde_lookup(struct target *t, uint64_t pc, uint64_t *end)
{
	Elf *elf = NULL;
	uint64_t bias = 0;
	*end = 0;
	if (!symtab_module_at(t->sym, pc, &elf, &bias) || !elf)
		return 0;
	size_t nph = 0;
	if (elf_getphdrnum(elf, &nph) != 0)
		return 0;
	uint64_t hdr = 0;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
			hdr = ph.p_vaddr + bias;
	}
	uint8_t h[12];
	struct mem *m = &t->mem.base;
	if (!hdr || mem_read(m, hdr, h, 12) < 0 || h[0] != 1 || h[2] != 0x03 || h[3] != 0x3b)
		return 0;
	uint32_t count = g32(h, 8);
	if (count == 0 || count > (1u << 22))
		return 0;
	int32_t key = (int32_t)(pc - hdr);
	uint32_t lo = 0, hi = count - 1;
	int32_t e[2];
	while (lo < hi) {  /* last entry with initial_loc <= pc */
		uint32_t mid = lo + (hi - lo + 1) / 2;
		if (mem_read(m, hdr + 12 + 8ull * mid, e, 8) < 0)
			return 0;
		if (e[0] <= key)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (mem_read(m, hdr + 12 + 8ull * lo, e, 8) < 0 || e[0] > key)
		return 0;
	uint64_t start = hdr + (uint64_t)(int64_t)e[0], fde = hdr + (uint64_t)(int64_t)e[1];
	uint32_t range;
	if (mem_read_u32(m, fde + 12, &range) < 0 || pc >= start + range)
		return 0;
	*end = start + range;
	return start;
}

static uint64_t fde_of(struct vm *vm, struct target *t, uint64_t pc, uint64_t *end)
{
	unsigned h = (unsigned)((pc * 0x9E3779B97F4A7C15ull) >> 56);
	if (vm->fde[h].pc == pc && pc) {
		*end = vm->fde[h].hi;
		return vm->fde[h].lo;
	}
	uint64_t lo = fde_lookup(t, pc, end);
	vm->fde[h].pc = pc;
	vm->fde[h].lo = lo;
	vm->fde[h].hi = *end;
	return lo;
}

/* Function start of native frame NF (symbol, else its FDE), or 0. */
static uint64_t native_start(struct vm *vm, struct target *t, const struct native_frame *nf)
{
	struct sym_info si;
	int ret = !(nf->flags & NF_LEAF);
	symtab_lookup(t->sym, nf->pc, ret, &si);
	if (si.func_start)
		return si.func_start;
	uint64_t end;
	return fde_of(vm, t, ret ? nf->pc - 1 : nf->pc, &end);
}

static int in_exec(const struct vm *vm, uint64_t pc)
{
	for (int i = 0; i < vm->nexec; i++)
		if (pc >= vm->exec[i].lo && pc < vm->exec[i].hi)
			return 1;
	return 0;
}

static void exec_add(struct vm *vm, uint64_t lo, uint64_t hi, const char *how)
{
	if (!lo || hi <= lo || vm->nexec >= MAX_EXEC)
		return;
	for (int i = 0; i < vm->nexec; i++)
		if (vm->exec[i].lo == lo)
			return;
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
	uint64_t lo = fde_of(js->vm, js->t, tg[0], &end);
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
	uint64_t t0 = now_ns();
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
	msg_debug(1, "puc: opcode table scan took %.1f ms", (now_ns() - t0) / 1e6);
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

/* ---- Protos (cached by address, validated by header) ---------------------- */

static void proto_free(struct puc_proto *p)
{
	if (!p)
		return;
	free(p->code);
	free(p->line);
	free(p->loc);
	free(p->upname);
	free(p->cs_name);
	free(p->cs_what);
	free(p);
}

/* The Proto at A, from the cache when its header still matches. NULL when
 * A is not a valid Proto (torn read or garbage). */
static struct puc_proto *proto_get(struct vm *vm, struct mem *m, uint64_t a)
{
	const struct puc_layout *lay = vm->lay;
	uint8_t h[136];
	/* read only as far as the last field: a Proto may end its mapping */
	int hl = lay->p_source + 8;
	const int ends[] = { lay->p_k, lay->p_code, lay->p_p, lay->p_upvalues, lay->p_lineinfo,
			     lay->p_abslineinfo, lay->p_locvars };
	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
		if (ends[i] + 8 > hl)
			hl = ends[i] + 8;
	if (lay->p_nups + 1 > hl)
		hl = lay->p_nups + 1;
	if (lay->p_lastlinedefined + 4 > hl)
		hl = lay->p_lastlinedefined + 4;
	if (!ptr_ok(a) || hl > 128 || mem_read(m, a, h, (size_t)hl) < 0 || h[8] != lay->p_tt_value)
		return NULL;
	uint64_t code = g64(h, lay->p_code), src = g64(h, lay->p_source);
	int sizecode = (int)g32(h, lay->p_sizecode);
	int linedef = (int)g32(h, lay->p_linedefined);
	unsigned slot = (unsigned)((a >> 4) * 0x9E3779B1u) % PROTO_CACHE;
	struct puc_proto *p = vm->pcache[slot];
	if (p && p->addr == a && p->code_addr == code && p->sizecode == sizecode &&
	    p->linedefined == linedef && p->source_addr == src)
		return p;
	if (!ptr_ok(code) || sizecode <= 0 || sizecode > MAX_SIZECODE || linedef < 0)
		return NULL;
	p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->addr = a;
	p->code_addr = code;
	p->source_addr = src;
	p->sizecode = sizecode;
	p->linedefined = linedef;
	p->lastlinedefined = (int)g32(h, lay->p_lastlinedefined);
	p->code = malloc((size_t)sizecode * 4);
	if (!p->code || mem_read(m, code, p->code, (size_t)sizecode * 4) < 0)
		goto bad;
	/* source */
	const char *s = src ? intern_tstring(lay, m, src) : NULL;
	p->chunk = src ? (s ? chunkid(s) : NULL) : intern("=?");
	if (!p->chunk)
		goto bad;
	/* lines */
	int sizeli = (int)g32(h, lay->p_sizelineinfo);
	uint64_t li = g64(h, lay->p_lineinfo);
	if (sizeli > 0 && ptr_ok(li | 0) && sizeli <= MAX_SIZECODE) {
		p->line = malloc((size_t)sizecode * sizeof *p->line);
		if (!p->line)
			goto bad;
		if (lay->p_abslineinfo < 0) {
			int32_t *tmp = malloc((size_t)sizeli * 4);
			if (!tmp || mem_read(m, li, tmp, (size_t)sizeli * 4) < 0) {
				free(tmp);
				goto bad;
			}
			for (int i = 0; i < sizecode; i++)
				p->line[i] = i < sizeli ? tmp[i] : 0;
			free(tmp);
		} else {
			int nabs = (int)g32(h, lay->p_sizeabslineinfo);
			uint64_t abs = g64(h, lay->p_abslineinfo);
			if (nabs < 0 || nabs > MAX_SIZECODE)
				goto bad;
			int8_t *rel = malloc((size_t)sizeli);
			int32_t *ab = malloc((size_t)(nabs ? nabs : 1) * 8);
			if (!rel || !ab || mem_read(m, li, rel, (size_t)sizeli) < 0 ||
			    (nabs && mem_read(m, abs, ab, (size_t)nabs * 8) < 0)) {
				free(rel);
				free(ab);
				goto bad;
			}
			for (int i = 0; i < sizecode; i++) {
				int l = puc_line54(rel, sizeli, ab, nabs, linedef, i);
				p->line[i] = l < 0 ? 0 : l;
			}
			free(rel);
			free(ab);
		}
	}
	/* locals, upvalue names, constants and children: read lazily for names */
	p->nloc = (int)g32(h, lay->p_sizelocvars);
	uint64_t lv = g64(h, lay->p_locvars);
	if (p->nloc < 0 || p->nloc > 65536 || (p->nloc && !ptr_ok(lv)))
		p->nloc = 0;
	if (p->nloc) {
		uint8_t *tmp = malloc((size_t)p->nloc * 16);
		p->loc = calloc((size_t)p->nloc, sizeof *p->loc);
		if (tmp && p->loc && mem_read(m, lv, tmp, (size_t)p->nloc * 16) == 0) {
			for (int i = 0; i < p->nloc; i++) {
				p->loc[i].name = intern_tstring(lay, m, g64(tmp, 16 * i));
				p->loc[i].startpc = (int)g32(tmp, 16 * i + 8);
				p->loc[i].endpc = (int)g32(tmp, 16 * i + 12);
			}
		} else {
			p->nloc = 0;
		}
		free(tmp);
	}
	p->nup = (int)g32(h, lay->p_sizeupvalues);
	uint64_t uv = g64(h, lay->p_upvalues);
	if (p->nup < 0 || p->nup > 256 || (p->nup && !ptr_ok(uv)))
		p->nup = 0;
	if (p->nup) {
		uint8_t tmp[256 * 16];
		p->upname = calloc((size_t)p->nup, sizeof *p->upname);
		if (p->upname && mem_read(m, uv, tmp, (size_t)p->nup * (size_t)lay->upval_stride) == 0) {
			for (int i = 0; i < p->nup; i++) {
				uint64_t sa = g64(tmp, i * lay->upval_stride);
				p->upname[i] = sa ? intern_tstring(lay, m, sa) : NULL;
			}
		} else {
			p->nup = 0;
		}
	}
	p->nk = (int)g32(h, lay->p_sizek);
	p->k_addr = g64(h, lay->p_k);
	if (p->nk < 0 || p->nk > (1 << 26))
		p->nk = 0;
	p->np = (int)g32(h, lay->p_sizep);
	p->p_addr = g64(h, lay->p_p);
	if (p->np < 0 || p->np > (1 << 20))
		p->np = 0;
	proto_free(vm->pcache[slot]);
	vm->pcache[slot] = p;
	return p;
bad:
	proto_free(p);
	return NULL;
}

struct name_arg {
	struct vm *vm;
	struct mem *m;
	struct puc_proto *p;
};

static const char *na_local(void *arg, int n, int pc)
{
	struct puc_proto *p = ((struct name_arg *)arg)->p;
	for (int i = 0; i < p->nloc && p->loc[i].startpc <= pc; i++) {
		if (pc < p->loc[i].endpc) {
			n--;
			if (n == 0)
				return p->loc[i].name;
		}
	}
	return NULL;
}

static const char *na_upval(void *arg, int idx)
{
	struct puc_proto *p = ((struct name_arg *)arg)->p;
	return idx >= 0 && idx < p->nup ? p->upname[idx] : NULL;
}

static const char *na_kstr(void *arg, int k)
{
	struct name_arg *na = arg;
	const struct puc_layout *lay = na->vm->lay;
	uint8_t tv[16];
	if (k < 0 || k >= na->p->nk || !ptr_ok(na->p->k_addr) ||
	    mem_read(na->m, na->p->k_addr + 16ull * (uint64_t)k, tv, 16) < 0)
		return NULL;
	unsigned tag = tv_tag(lay, tv);
	if (tag != lay->tag_sstr && tag != lay->tag_lstr)
		return NULL;
	return intern_tstring(lay, na->m, g64(tv, 0));
}

static int na_child_nups(void *arg, int idx)
{
	struct name_arg *na = arg;
	uint64_t cp;
	uint8_t nups;
	if (idx < 0 || idx >= na->p->np || na->vm->lay->p_nups < 0 ||
	    rd64(na->m, na->p->p_addr + 8ull * (uint64_t)idx, &cp) < 0 ||
	    rd8(na->m, cp + (uint64_t)na->vm->lay->p_nups, &nups) < 0)
		return -1;
	return nups;
}

/* Name of the function called by instruction PC of caller Proto P
 * (cached per Proto and pc). */
static const char *callsite_name(struct vm *vm, struct mem *m, struct puc_proto *p, int pc,
				 const char **what)
{
	*what = NULL;
	if (pc < 0 || pc >= p->sizecode)
		return NULL;
	if (!p->cs_name) {
		p->cs_name = calloc((size_t)p->sizecode, sizeof *p->cs_name);
		p->cs_what = calloc((size_t)p->sizecode, sizeof *p->cs_what);
	}
	if (p->cs_name && p->cs_what && p->cs_name[pc]) {
		*what = p->cs_what[pc];
		return *what ? p->cs_name[pc] : NULL;
	}
	struct name_arg na = { vm, m, p };
	struct puc_nameinfo ni = { vm->lay, p->code, p->sizecode, &na, na_local, na_upval,
				   na_kstr, na_child_nups };
	const char *name = NULL;
	*what = puc_funcname(&ni, pc, &name);
	if (*what && name)
		name = intern(name);   /* "?" and literals from the decoder too */
	if (p->cs_name && p->cs_what) {
		p->cs_name[pc] = *what && name ? name : "";
		p->cs_what[pc] = *what && name ? *what : NULL;
	}
	return *what ? name : NULL;
}

/* ---- threads ---------------------------------------------------------------- */

/* Walk every global_State's allgc (5.1 rootgc) list, bounded, keeping
 * threads other than the main ones. Brent's cycle check. */
static int enum_threads(struct vm *vm, struct mem *live, uint64_t *out, int max)
{
	const struct puc_layout *lay = vm->lay;
	int n = 0;
	/* objects on allgc sit next to each other (allocation order): read
	 * them a block at a time, not a syscall each (1 GiB heap: 400000
	 * objects took 1-2 s one by one) */
	struct mem_cache mc;
	mem_cache_init(&mc, live, GC_BLOCK, 1);
	struct mem *m = &mc.base;
	for (int s = 0; s < vm->nstates; s++) {
		uint64_t g = vm->states[s] + (uint64_t)lay->L_size, o;
		if (rd64(m, g + (uint64_t)lay->g_allgc, &o) < 0)
			continue;
		uint64_t tort = o, power = 1, lam = 0;
		for (int steps = 0; o && steps < MAX_GC_VISIT; steps++) {
			uint8_t h[16];
			if (!ptr_ok(o) || mem_read(m, o, h, 16) < 0)
				break;
			if (h[8] == lay->gct_thread && n < max) {
				int main_ = 0;
				for (int k = 0; k < vm->nstates; k++)
					main_ |= vm->states[k] == o;
				if (!main_)
					out[n++] = o;
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
	}
	mem_cache_free(&mc);
	return n;
}

static void refresh_coros(struct vm *vm, struct mem *m)
{
	vm->ncoros = enum_threads(vm, m, vm->coros, MAX_COROS);
	vm->coros_ns = now_ns();
}

/* The coroutine that L is running through coroutine.resume/wrap, or 0. */
static uint64_t resume_child(struct vm *vm, struct mem *m, uint64_t L)
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
		if (!ptr_ok(c) || mem_read(m, c, cl, 48) < 0 || cl[8] != lay->gct_ccl)
			return 0;
		if (lay->cl_isC >= 0 && cl[lay->cl_isC] != 1)
			return 0;
		f = g64(cl, lay->ccl_f);
		if (f != vm->co_resume && cl[lay->cl_nupvalues] == 1 &&
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

struct cand { uint64_t L, ej; };

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;
	return x->ej < y->ej ? -1 : x->ej > y->ej;
}

/* Is L inside a Lua call (ci != base_ci)? */
static int state_active(const struct puc_layout *lay, uint64_t L, const uint8_t *lb)
{
	uint64_t ci = g64(lb, lay->L_ci);
	if (lay->L_end_ci >= 0)
		return ci != g64(lb, lay->L_base_ci);
	return ci != L + (uint64_t)lay->L_base_ci;
}

/* ---- capture: copy the CallInfo chains (thread stopped) ------------------- */

static int push_raw(struct vm *vm, const struct puc_raw *r)
{
	if (vm->nraw >= MAX_RAW) {
		vm->raw_truncated = 1;
		return -1;
	}
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

static int read_chain(struct vm *vm, struct mem *m, uint64_t L, const uint8_t *lb)
{
	const struct puc_layout *lay = vm->lay;
	uint64_t stack = g64(lb, lay->L_stack), last = g64(lb, lay->L_stack_last);
	uint64_t ci = g64(lb, lay->L_ci);
	int first = vm->nraw;
	uint8_t cb[128];
	if (!ptr_ok(stack) || last < stack)
		return -LS_E_TORN;
	if (lay->L_end_ci >= 0) {
		/* 5.1: contiguous CallInfo array [base_ci, end_ci) */
		uint64_t base = g64(lb, lay->L_base_ci), end = g64(lb, lay->L_end_ci);
		uint64_t sz = (uint64_t)lay->ci_size;
		if (!ptr_ok(base) || ci < base || ci >= end || (ci - base) % sz || (end - base) / sz > 40000)
			return -LS_E_TORN;
		uint64_t nci = (ci - base) / sz + 1, lo = 1;
		if (nci > MAX_RAW + 1) {
			lo = nci - MAX_RAW;
			vm->raw_truncated = 1;
		}
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
			if (push_raw(vm, &r) < 0)
				break;
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
			/* 5.4.5+ relstack() turns pointers into byte offsets from the
			 * old stack while it reallocates: small values, below any
			 * stack address (not "< 4 GiB": non-PIE heaps live there) */
			if (func < stack || func > last + 5 * 16)
				return -LS_E_TORN;
			r.L = L;
			r.ci = ci;
			if (read_func(vm, m, func, &r) < 0)
				return -LS_E_TORN;
			r.status = lay->ci_callstatus_size == 2 ? g16(cb, lay->ci_callstatus)
							       : cb[lay->ci_callstatus];
			int islua = lay->cist_c ? !(r.status & lay->cist_c) : !!(r.status & lay->cist_lua);
			if (islua != r.lua)
				return -LS_E_TORN;
			if (r.lua)
				r.savedpc = g64(cb, lay->ci_savedpc);
			if (push_raw(vm, &r) < 0)
				break;
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

static int capture_once(struct vm *vm, struct target *t, struct thread_snap *ts);

/* A stopped thread reads consistently; a running one (--nonblocking) may
 * tear: read again, up to three times, before counting the sample torn. */
static int puc_capture(struct vm *vm, struct target *t, struct thread_snap *ts)
{
	int rc = 0;
	for (int attempt = 0; attempt < 3; attempt++) {
		rc = capture_once(vm, t, ts);
		if (rc < 0 || vm->raw_err != -LS_E_TORN)
			break;
	}
	return rc;
}

static int capture_once(struct vm *vm, struct target *t, struct thread_snap *ts)
{
	const struct puc_layout *lay = vm->lay;
	struct mem *m = ts->mem ? ts->mem : &t->mem.base;
	vm->raw_tid = ts->tid;
	vm->nraw = 0;
	vm->raw_truncated = 0;
	vm->raw_err = 0;
	uint64_t rsp = ts->regs.rsp, hi = rsp + (16u << 20);
	const struct proc_map *pm = rsp ? proc_maps_find(symtab_maps(t->sym), rsp) : NULL;
	if (pm)
		hi = pm->end;
	/* candidates: main states, their resume chains, known coroutines */
	struct cand c[MAX_STATES * 8 + 512];
	uint64_t seen[MAX_STATES * 8 + 512];
	int nseen = 0, nc = 0;
	uint8_t lb[256];
	for (int s = 0; s < vm->nstates; s++) {
		uint64_t L = vm->states[s];
		for (int d = 0; L && d < 8; d++) {
			seen[nseen++] = L;
			L = resume_child(vm, m, L);
		}
	}
	/* phase 1: main states and their resume chains; phase 2 (only when
	 * nothing runs here, or the innermost state sits in a C function that
	 * may lua_resume a coroutine itself, like haproxy): known coroutines */
	int nfirst = nseen;
	for (int phase = 0; phase < 2; phase++) {
		if (phase == 1) {
			int need = nc == 0;
			if (!need) {
				uint64_t ci, func;
				uint8_t tv[16];
				need = rd64(m, c[0].L + (uint64_t)lay->L_ci, &ci) < 0 || !ptr_ok(ci) ||
				       rd64(m, ci + (uint64_t)lay->ci_func, &func) < 0 || !ptr_ok(func) ||
				       mem_read(m, func, tv, 16) < 0 || tv_tag(lay, tv) != lay->tag_lcl;
				/* 5.1 has one closure tag: a Lua closure has isC == 0 */
				if (!need && lay->cl_isC >= 0) {
					uint8_t isc = 1;
					need = rd8(m, g64(tv, 0) + (uint64_t)lay->cl_isC, &isc) < 0 || isc != 0;
				}
			}
			if (!need)
				break;
			int ncoros = vm->ncoros < 512 ? vm->ncoros : 512;
			for (int i = 0; i < ncoros; i++)
				seen[nseen++] = vm->coros[vm->ncoros - 1 - i];
		}
		for (int i = phase ? nfirst : 0; i < (phase ? nseen : nfirst); i++) {
			uint64_t L = seen[i];
			int dup = 0;
			for (int k = 0; k < i && !dup; k++)
				dup = seen[k] == L;
			if (dup || mem_read(m, L, lb, (size_t)lay->L_size) < 0 || lb[8] != lay->gct_thread)
				continue;
			uint64_t ej = g64(lb, lay->L_errorJmp);
			if (lb[lay->L_status] != 0 || !rsp || ej < rsp || ej >= hi)
				continue;
			c[nc].L = L;
			c[nc].ej = ej;
			nc++;
		}
		qsort(c, (size_t)nc, sizeof *c, cand_cmp);
	}
	if (nc == 0 && ts->tid == t->pid) {
		/* a host calling Lua without a protected call: resume chain only */
		for (int s = 0; s < vm->nstates && !nc; s++) {
			uint64_t chain[8];
			int nch = 0;
			uint64_t L = vm->states[s];
			/* only a state inside no protected call at all (errorJmp NULL):
			 * one with an errorJmp runs on the thread whose stack holds it
			 * (unknown without registers: --nonblocking) */
			while (L && nch < 8 && mem_read(m, L, lb, (size_t)lay->L_size) == 0 &&
			       lb[lay->L_status] == 0 && state_active(lay, L, lb) &&
			       (nch > 0 || !rsp || g64(lb, lay->L_errorJmp) == 0)) {
				chain[nch++] = L;
				L = resume_child(vm, m, L);
			}
			for (int k = nch; k-- > 0;)
				c[nc++].L = chain[k];
		}
	}
	if (nc == 0)
		return 0;   /* not in Lua, or a coroutine we don't know yet (walk) */
	for (int i = 0; i < nc && i < MAX_THREADS_L; i++) {
		if (mem_read(m, c[i].L, lb, (size_t)lay->L_size) < 0) {
			vm->raw_err = -LS_E_TORN;
			return 0;
		}
		int first_of_L = vm->nraw;
		int rc = read_chain(vm, m, c[i].L, lb);
		if (rc == 0 && vm->nraw == first_of_L && i > 0) {
			vm->raw_err = -LS_E_TORN;   /* an outer state with no frame */
			return 0;
		}
		if (rc < 0) {
			vm->raw_err = rc;
			return 0;
		}
		/* torn: the chain moved while we read it */
		uint64_t ci2;
		if (rd64(m, c[i].L + (uint64_t)lay->L_ci, &ci2) < 0 || ci2 != g64(lb, lay->L_ci)) {
			vm->raw_err = -LS_E_TORN;
			return 0;
		}
		/* an outer state must be inside the C function that resumed the
		 * inner one, not back in Lua or yielding (the chain moved) */
		if (i > 0 && vm->raw[first_of_L].lua) {
			vm->raw_err = -LS_E_TORN;
			return 0;
		}
		if (i > 0 && vm->co_yield && vm->raw[first_of_L].cfn == vm->co_yield) {
			vm->raw_err = -LS_E_TORN;
			return 0;
		}
		if (vm->raw_truncated)
			break;
	}
	return 0;
}

static void set_co_names(struct vm *vm);

/* ---- walk: frames, names, lines, merge ---------------------------------- */

struct wframe {
	struct frame fr;
	struct puc_proto *p;
	int pc;
	int bottom;       /* Lua: first-entered frame of its luaV_execute invocation */
};

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
	name = callsite_name(vm, m, cw->p, cw->pc, &what);
	return what ? name : NULL;
}

/* Line really executing in the running leaf frame, from luaV_execute's
 * registers (5.1/5.4 keep pc in a register and save it only at calls and
 * "Protect" points; notes §5.1). pc is in a callee-saved register; when
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

static int walk_once(struct vm *vm, struct target *t, struct thread_snap *ts, struct stack *out,
		     struct walk_info *info);

/* A state (when none is known) and the coroutine list, from the heap:
 * luaV_execute was on a stack with no state or coroutine known for it. */
static int puc_discover_now(struct vm *vm, struct target *t)
{
	int before = vm->nstates;
	if (vm->nstates == 0)
		find_states(vm, t);
	for (int k = before; k < vm->nstates; k++)
		load_cnames(vm, t, vm->states[k]);
	set_co_names(vm);
	refresh_coros(vm, &t->mem.base);
	return vm->nstates - before;
}

/* TRANSITIONAL: the sampler's discover() entry */
static int puc_discover(struct vm *vm, struct target *t, unsigned what)
{
	(void)what;
	return puc_discover_now(vm, t);
}

/* Lua-only walks (no native stack to stay consistent with) re-read a
 * chain that turned out torn, like capture() does. */
static int puc_walk(struct vm *vm, struct target *t, struct thread_snap *ts, struct stack *out,
		    struct walk_info *info)
{
	int rc = walk_once(vm, t, ts, out, info);
	for (int attempt = 0; rc == -LS_E_TORN && ts->native.n == 0 && ts->tid > 0 && attempt < 2;
	     attempt++) {
		puc_capture(vm, t, ts);
		rc = walk_once(vm, t, ts, out, info);
	}
	return rc;
}

static int walk_once(struct vm *vm, struct target *t, struct thread_snap *ts, struct stack *out,
		     struct walk_info *info)
{
	const struct puc_layout *lay = vm->lay;
	struct mem *m = ts->mem ? ts->mem : &t->mem.base;
	const struct native_stack *ns = &ts->native;
	memset(info, 0, sizeof *info);
	if (vm->raw_tid != ts->tid)
		vm->nraw = 0;
	if (vm->raw_tid == ts->tid && vm->raw_err)
		return vm->raw_err;
	int n = vm->nraw;
	if (n == 0 && !t->sym)
		return 0;
	if (n == 0) {
		/* luaV_execute on the stack but no state for it: a state or a
		 * coroutine born after the last scan; rescan, rate-limited */
		int in_lua = 0;
		for (int k = 0; k < ns->n && !in_lua; k++)
			in_lua = in_exec(vm, ns->f[k].pc - !(ns->f[k].flags & NF_LEAF)) ||
				 (vm->resume_fn && native_start(vm, t, &ns->f[k]) == vm->resume_fn);
		uint64_t now = now_ns();
		if ((in_lua || vm->nstates == 0) &&
		    now - vm->coros_ns > (vm->nstates ? 1000000000ull : 200000000ull)) {
			if (ts->held)
				info->discover = 1; /* a heap scan: not while held */
			else
				puc_discover_now(vm, t);
		}
		return merge_stacks_old(t->sym, ns, NULL, 0, out) < 0 ? -LS_E_NOMEM : 0;
	}
	struct wframe *w = calloc((size_t)n, sizeof *w);
	struct frame *sf = calloc((size_t)n, sizeof *sf);
	struct lua_segment_old *segs = calloc((size_t)n * 2 + 2, sizeof *segs);
	int rc = 0, nlua = 0;
	if (!w || !sf || !segs) {
		rc = -LS_E_NOMEM;
		goto done;
	}
	/* 1. Protos, pcs, lines */
	for (int i = 0; i < n; i++) {
		const struct puc_raw *r = &vm->raw[i];
		if (!r->lua)
			continue;
		w[i].p = proto_get(vm, m, r->proto);
		if (!w[i].p || pc_of(w[i].p, r->savedpc, &w[i].pc) < 0) {
			rc = -LS_E_TORN;
			goto done;
		}
		nlua++;
	}
	/* 2. invocation bottoms (notes §8.1) */
	for (int i = 0; i < n; i++) {
		const struct puc_raw *r = &vm->raw[i];
		if (!r->lua)
			continue;
		int b;
		switch (lay->exec) {
		case PUC_EXEC_51: {
			const struct puc_raw *cr = r->last ? NULL : &vm->raw[i + 1];
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
	/* 3. frames */
	for (int i = 0; i < n; i++) {
		const struct puc_raw *r = &vm->raw[i];
		struct frame *f = &w[i].fr;
		const char *cs = frame_callsite(vm, m, w, i, n);
		if (r->lua) {
			f->kind = FRAME_LUA;
			f->file = w[i].p->chunk;
			f->firstline = w[i].p->linedefined;
			f->line = w[i].p->line ? w[i].p->line[w[i].pc] : 0;
			f->name = lua_frame_name(w[i].p, cs);
		} else {
			struct sym_info si;
			f->kind = FRAME_C;
			f->addr = r->cfn;
			/* the symbol (as merge.h names fused C frames), else the
			 * name the target's package.loaded gives it (stripped) */
			const char *nm = NULL;
			memset(&si, 0, sizeof si);
			if (t->sym)   /* NULL: synthetic images (puc_walk_image) */
				symtab_lookup(t->sym, r->cfn, 0, &si);
			f->module = si.module;
			if (si.name && si.func_start == r->cfn)
				nm = si.name;
			if (!nm)
				nm = cname_find(vm, r->cfn);
			if (!nm && cs)
				nm = intern(cs);
			f->name = nm ? nm : internf("[C function 0x%llx]", (unsigned long long)r->cfn);
		}
	}
	/* 4. match against native frames, leaf to root (notes §8.3) */
	int N = ns->n, j = 0, nsf = 0, pend = 0, nsegs = 0, leaf_native = -1;
	for (int i = 0; i < n;) {
		/* one lua_State: [i, e) */
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
			for (int k = j; k < N; k++)
				if (native_start(vm, t, &ns->f[k]) == vm->resume_fn) {
					bound = k;
					break;
				}
		while (i < e) {
			const struct puc_raw *r = &vm->raw[i];
			if (!r->lua) {
				int mfound = -1;
				for (int k = j; k < bound && mfound < 0; k++)
					if (native_start(vm, t, &ns->f[k]) == r->cfn)
						mfound = k;
				if (mfound >= 0) {
					if (nsf > pend) {
						segs[nsegs++] = (struct lua_segment_old){ mfound, 0, sf + pend, nsf - pend };
						pend = nsf;
					}
					sf[nsf] = w[i].fr;
					/* the native frame keeps its symbol; ours names it otherwise */
					segs[nsegs++] = (struct lua_segment_old){ mfound, 1, sf + nsf, 1 };
					nsf++;
					pend = nsf;
					j = mfound + 1;
					/* C-function anchor: f <- luaD_precall <- luaV_execute */
					if (!r->last && vm->raw[i + 1].lua && mfound + 2 < N &&
					    !in_exec(vm, ns->f[mfound + 2].pc - 1) && vm->nexec < 2) {
						uint64_t end, lo = fde_of(vm, t, ns->f[mfound + 2].pc - 1, &end);
						if (lo && end - lo >= 4096)
							exec_add(vm, lo, end, "C-function anchor");
					}
				} else {
					sf[nsf++] = w[i].fr;
				}
				i++;
				continue;
			}
			/* a Lua segment: frames up to and including the next bottom */
			int leaf_seg = (i == 0), seg_first = i;
			while (i < e && vm->raw[i].lua) {
				sf[nsf++] = w[i].fr;
				int b = w[i].bottom;
				i++;
				if (b)
					break;
			}
			int mfound = -1;
			for (int k = j; k < bound && mfound < 0; k++) {
				uint64_t pc = ns->f[k].flags & NF_LEAF ? ns->f[k].pc : ns->f[k].pc - 1;
				if (in_exec(vm, pc))
					mfound = k;
			}
			if (mfound >= 0 && !leaf_seg && !(ns->f[mfound].flags & NF_LEAF)) {
				/* this invocation called out: its pc register == savedpc */
				const struct native_frame *vf = &ns->f[mfound];
				for (int k = 0; k < UREG_NREGS; k++)
					if ((vf->regs_valid & (1u << k)) && vf->regs[k] == vm->raw[seg_first].savedpc &&
					    vm->pcreg_votes[k] < 1000000)
						vm->pcreg_votes[k]++;
			}
			if (mfound >= 0) {
				segs[nsegs++] = (struct lua_segment_old){ mfound, 1, sf + pend, nsf - pend };
				pend = nsf;
				j = mfound + 1;
				if (leaf_seg)
					leaf_native = mfound;
			}
		}
		if (nsf > pend) {
			segs[nsegs++] = (struct lua_segment_old){ bound, 0, sf + pend, nsf - pend };
			pend = nsf;
		}
		/* the outer state's frames start above its lua_resume call */
		if (bound < N && bound + 1 > j)
			j = bound + 1;
	}
	/* 5. the running leaf's exact line (5.1 and 5.4 keep pc in a register) */
	if (vm->raw[0].lua && leaf_native >= 0 && w[0].p->line &&
	    ((lay->isa == PUC_ISA_51 && (ns->f[leaf_native].flags & NF_LEAF)) ||
	     lay->isa == PUC_ISA_54)) {
		int line = leaf_line_from_regs(w[0].p, ts, &ns->f[leaf_native], vm->raw[0].savedpc,
					       vm->pcreg_votes);
		if (line > 0)
			sf[0].line = line;   /* sf[0] is raw[0]'s frame */
	}
	if (merge_stacks_old(t->sym, ns, segs, nsegs, out) < 0)
		rc = -LS_E_NOMEM;
	info->lua_frames = nlua;
	info->vmstate = intern(vm->raw[0].lua ? "interpreter" : "C");
	info->state = vm->raw[0].lua ? VMS_INTERP : VMS_C;
done:
	free(w);
	free(sf);
	free(segs);
	return rc;
}

static void set_co_names(struct vm *vm)
{
	for (int i = 0; i < vm->ncn; i++)
		if (strcmp(vm->cn[i].name, "coroutine.resume") == 0)
			vm->co_resume = vm->cn[i].f;
		else if (strcmp(vm->cn[i].name, "coroutine.yield") == 0)
			vm->co_yield = vm->cn[i].f;
}

/* ---- coroutines (dump --all-coroutines) ---------------------------------- */

static int puc_coroutines(struct vm *vm, struct target *t,
			  void (*fn)(void *arg, uint64_t addr, const char *status,
				     const struct stack *st),
			  void *arg)
{
	const struct puc_layout *lay = vm->lay;
	struct mem *m = &t->mem.base;
	refresh_coros(vm, m);
	struct thread_snap *ts = calloc(1, sizeof *ts);
	if (!ts)
		return -LS_E_NOMEM;
	struct stack st = { 0 };
	int count = 0;
	uint64_t all[MAX_STATES + MAX_COROS];
	int nall = 0;
	for (int i = 0; i < vm->nstates; i++)
		all[nall++] = vm->states[i];
	for (int i = 0; i < vm->ncoros; i++)
		all[nall++] = vm->coros[i];
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
				 : resume_child(vm, m, L) ? "normal" : "running";
		vm->nraw = 0;
			vm->raw_truncated = 0;
		vm->raw_err = 0;
		vm->raw_tid = -1;
		if (active || status == 1)
			vm->raw_err = read_chain(vm, m, L, lb);
		ts->tid = -1;
		ts->mem = m;
		ts->native.n = 0;
		struct walk_info info;
		stack_clear(&st);
		if (walk_once(vm, t, ts, &st, &info) < 0)
			stack_clear(&st);
		fn(arg, L, what, &st);
		count++;
	}
	vm->nraw = 0;
	vm->raw_tid = 0;
	stack_free(&st);
	free(ts);
	return count;
}

/* ---- synthetic images (unit tests) ---------------------------------------- */

int puc_walk_image(const struct puc_layout *lay, struct mem *m, uint64_t L, struct stack *out)
{
	struct vm *vm = calloc(1, sizeof *vm);
	struct thread_snap *ts = calloc(1, sizeof *ts);
	struct target t;
	uint8_t lb[256];
	int rc;
	if (!vm || !ts) {
		free(vm);
		free(ts);
		return -LS_E_NOMEM;
	}
	memset(&t, 0, sizeof t);
	vm->lay = lay;
	ts->tid = -1;
	ts->mem = m;
	vm->raw_tid = -1;
	stack_clear(out);
	if (lay->L_size > (int)sizeof lb || mem_read(m, L, lb, (size_t)lay->L_size) < 0)
		rc = -LS_E_FAULT;
	else if ((rc = read_chain(vm, m, L, lb)) == 0) {
		struct walk_info info;
		rc = walk_once(vm, &t, ts, out, &info);
	}
	for (int i = 0; i < PROTO_CACHE; i++)
		proto_free(vm->pcache[i]);
	free(vm);
	free(ts);
	return rc;
}

/* ---- probe ------------------------------------------------------------------ */

static const char *puc_describe(struct vm *vm)
{
	return vm->desc;
}

static void puc_close(struct vm *vm)
{
	if (!vm)
		return;
	for (int i = 0; i < PROTO_CACHE; i++)
		proto_free(vm->pcache[i]);
	free(vm->cn);
	free(vm);
}

static int puc_probe(struct target *t, unsigned flags, struct vm **out, char *why, size_t whylen)
{
	(void)flags;
	uint64_t size = 0;
	const char *mod = NULL;
	uint64_t a = symtab_find(t->sym, "lua_ident", &size, &mod);
	if (!a) {
		msg_debug(1, "puc: no lua_ident symbol: not PUC Lua");
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
	msg_debug(1, "puc: lua_ident in %s says \"%s\": layout %s [%s]", mod ? mod : "?", shown,
		  lay->name, lay->source);
	find_states(vm, t);
	if (vm->nstates == 0)
		msg_debug(1, "puc: no lua_State found yet (validated by the allocation-block invariant)");
	for (int i = 0; i < vm->nstates; i++)
		load_cnames(vm, t, vm->states[i]);
	set_co_names(vm);
	vm->resume_fn = symtab_find(t->sym, "lua_resume", NULL, NULL);
	find_exec(vm, t);
	refresh_coros(vm, &t->mem.base);
	msg_debug(1, "puc: %d coroutine(s) on the GC lists", vm->ncoros);
	*out = vm;
	return 1;
}

const struct vm_ops vm_puc_ops = {
	.family = "puc",
	.probe = puc_probe,
	.capture = puc_capture,
	.walk_merged = puc_walk,
	.discover = puc_discover,
	.describe = puc_describe,
	.coroutines = puc_coroutines,
	.close = puc_close,
};
