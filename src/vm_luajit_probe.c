/* vm_luajit_probe.c: finding a LuaJIT 2.1 VM in a process.
 *
 * Pipeline (docs/luajit.md §8): the VM code range from its one big FDE (CFA
 * rsp+80, > 10 KiB) in a module's .eh_frame (through .eh_frame_hdr's
 * sorted table and libdw's CFI); the entry code gives GC64/G2DISP,
 * vmstate and cur_L offsets, which choose a layout row; states
 * (global_State) come from symbols (tarantool_L, globalL), then a bounded
 * scan of writable anonymous memory for a main lua_State whose glref
 * points right behind it, each validated by the invariants of 8.5.
 * Threads stopped in VM code add their state later (DISPATCH register,
 * cframe anchors). Library names are learned once per state from the
 * registry's _LOADED tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <gelf.h>
#include <elfutils/libdw.h>
#include <dwarf.h>
#include "elf_sym.h"
#include "err.h"
#include "htab.h"
#include "intern.h"
#include "msg.h"
#include "proc_maps.h"
#include "vm.h"
#include "vm_luajit.h"
#include "vm_luajit_derive.h"

#define VM_FDE_MIN 10240u           /* the VM FDE is ~16 KiB; C functions are smaller */
#define SCAN_MAX_BYTES (512u << 20) /* heap scan budget */
#define SCAN_CHUNK (1u << 20)

/* ---- VM code range from .eh_frame ---- */

/* Is the FDE covering file address LOC the VM's? Fills [*s, *e). */
static int is_vm_fde(Dwarf_CFI *cfi, uint64_t loc, uint64_t *s, uint64_t *e, int *cfa)
{
	Dwarf_Frame *fr = NULL;
	if (dwarf_cfi_addrframe(cfi, loc, &fr) != 0 || !fr)
		return 0;
	Dwarf_Addr st = 0, en = 0;
	int ok = 0;
	if (dwarf_frame_info(fr, &st, &en, NULL) >= 0 && en > st && en - st >= VM_FDE_MIN &&
	    en - st < (4u << 20)) {
		Dwarf_Op *ops = NULL;
		size_t nops = 0;
		if (dwarf_frame_cfa(fr, &ops, &nops) == 0 && nops == 1 && ops[0].atom == DW_OP_bregx &&
		    ops[0].number == 7 && (ops[0].number2 == 80 || ops[0].number2 == 96)) {
			*s = st;
			*e = en;
			*cfa = (int)ops[0].number2;
			ok = 1;
		}
	}
	free(fr);
	return ok;
}

static Elf_Scn *find_section(Elf *elf, const char *name, GElf_Shdr *sh)
{
	size_t shstrndx;
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	Elf_Scn *scn = NULL;
	while ((scn = elf_nextscn(elf, scn)) != NULL) {
		if (!gelf_getshdr(scn, sh))
			continue;
		const char *n = elf_strptr(elf, shstrndx, sh->sh_name);
		if (n && strcmp(n, name) == 0)
			return scn;
	}
	return NULL;
}

int lj_fde_cb(void *arg, const char *name, uint64_t start, uint64_t end, Elf *elf,
	      uint64_t bias)
{
	struct lj_fde_find *ff = arg;
	if (!elf || (name && name[0] == '['))
		return 0;
	GElf_Shdr sh;
	Elf_Scn *scn = find_section(elf, ".eh_frame_hdr", &sh);
	if (!scn)
		return 0;
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !d->d_buf || d->d_size < 12)
		return 0;
	const uint8_t *h = d->d_buf;
	/* version 1, eh_frame_ptr pcrel|sdata4, fde_count udata4, table datarel|sdata4 */
	if (h[0] != 1 || h[1] != 0x1b || h[2] != 0x03 || h[3] != 0x3b)
		return 0;
	uint32_t n;
	memcpy(&n, h + 8, 4);
	if ((uint64_t)n * 8 + 12 > d->d_size)
		return 0;
	Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);
	if (!cfi)
		return 0;
	int found = 0;
	for (uint32_t i = 0; i < n && !found; i++) {
		int32_t loc, nxt;
		memcpy(&loc, h + 12 + 8 * i, 4);
		uint64_t a = sh.sh_addr + (int64_t)loc;
		uint64_t gap = ~0ull;
		if (i + 1 < n) {
			memcpy(&nxt, h + 12 + 8 * (i + 1), 4);
			gap = (uint64_t)((int64_t)nxt - loc);
		}
		if (gap < VM_FDE_MIN)
			continue;
		uint64_t s, e;
		int cfa;
		if (is_vm_fde(cfi, a, &s, &e, &cfa)) {
			ff->start = s + bias;
			ff->end = e + bias;
			const char *sl = strrchr(name, '/');
			ff->module = intern(sl ? sl + 1 : name);
			ff->cfa = cfa;
			found = 1;
		}
	}
	dwarf_cfi_end(cfi);
	return found;
}

/* ---- register save/restore sequences (vm_x64.dasc) ---- */

/* A push (POP 0: 0x50+r, 41 0x50+r) or pop (POP 1: 0x58+r, 41 0x58+r)
 * of callee-saved register at P (AVAIL bytes): its UREG_*, and *LEN;
 * -1 when none. */
static int pushpop_reg(const uint8_t *p, size_t avail, int pop, int *len)
{
	static const int8_t hi[] = { UREG_R12, UREG_R13, UREG_R14, UREG_R15 };
	uint8_t b = pop ? 0x58 : 0x50;
	if (avail >= 1 && (p[0] == b + 3 || p[0] == b + 5)) {
		*len = 1;
		return p[0] == b + 3 ? UREG_RBX : UREG_RBP;
	}
	if (avail >= 2 && p[0] == 0x41 && p[1] >= b + 4 && p[1] <= b + 7) {
		*len = 2;
		return hi[p[1] - b - 4];
	}
	return -1;
}

/* saveregs pushes these, in this order (4 of them, or 6 with
 * NO_UNWIND); restoreregs pops them in reverse */
static const int8_t save_order[] = { UREG_RBP, UREG_RBX, UREG_R15, UREG_R14, UREG_R13, UREG_R12 };

/* The sequence at CODE[O..LEN) as entry (EXIT 0) or exit (EXIT 1), into
 * *E; 1 when it is one whose stack adjustment is CF_SIZE. */
static int edge_at(const uint8_t *code, size_t len, size_t o, int exit, unsigned cf_size,
		   struct lj_edge *e)
{
	int8_t regs[6];
	int nr = 0, k = 0, l;
	size_t p = o;
	memset(e, 0, sizeof *e);
	/* vm_ffi_callback: saveregs_ after the stub's push rbp */
	if (!exit && code[o] == 0x53) {
		regs[nr++] = UREG_RBP;
		e->stub_rbp = 1;
	}
	if (exit) {
		/* add rsp, imm8 */
		if (len - p < 4 || code[p] != 0x48 || code[p + 1] != 0x83 || code[p + 2] != 0xc4)
			return 0;
		e->space = code[p + 3];
		e->off[k] = (uint8_t)(p - o);
		e->reg[k++] = -1;
		p += 4;
	}
	int r;
	while (nr < 6 && (r = pushpop_reg(code + p, len - p, exit, &l)) >= 0) {
		regs[nr++] = (int8_t)r;
		e->off[k] = (uint8_t)(p - o);
		e->reg[k++] = (int8_t)r;
		p += (size_t)l;
	}
	if (nr != 4 && nr != 6)
		return 0;
	for (int j = 0; j < nr; j++)
		if (regs[j] != save_order[exit ? nr - 1 - j : j])
			return 0;
	e->off[k] = (uint8_t)(p - o);
	e->reg[k] = -1;
	if (!exit) {
		/* sub rsp, imm8 */
		if (len - p < 4 || code[p] != 0x48 || code[p + 1] != 0x83 || code[p + 2] != 0xec)
			return 0;
		e->space = code[p + 3];
		p += 4;
	} else if (len - p >= 1 && code[p] == 0xc3) {
		p += 1; /* ret */
	} else if (len - p >= 5 && code[p] == 0xe9) {
		p += 5; /* jmp rel32 (vm_unwind_rethrow: to lj_err_throw) */
	} else {
		return 0;
	}
	k++;
	e->off[k] = (uint8_t)(p - o);
	if (8u * (unsigned)nr + e->space + 8u != cf_size)
		return 0;
	e->exit = (uint8_t)exit;
	e->ninsn = (uint8_t)k;
	return 1;
}

int lj_edges_find(const uint8_t *code, size_t len, uint64_t start, unsigned cf_size,
		  struct lj_edge *out, int max)
{
	int n = 0;
	for (size_t o = 0; o + 8 <= len && n < max; o++) {
		/* an entry starts with push rbp (push rbx after the callback
		 * stub's push rbp), an exit with add rsp */
		if (code[o] != 0x55 && code[o] != 0x53 && code[o] != 0x48)
			continue;
		if (!edge_at(code, len, o, code[o] == 0x48, cf_size, &out[n]))
			continue;
		out[n].addr = start + o;
		o += out[n].off[out[n].ninsn] - 1u;
		n++;
	}
	return n;
}

/* ---- validating a global_State ---- */

int lj_check_g(struct vm *vm, struct mem *m, uint64_t g)
{
	const struct lj_layout *l = vm->lay;
	const struct lj_objlayout *ol = vm->ol;
	if (!g || (g & 7))
		return -LS_E_GARBAGE;
	if (!(l->flags & LJL_GC64) && g >= 0x80000000ull)
		return -LS_E_GARBAGE;
	uint8_t buf[1200];
	size_t need = (size_t)l->g_jtrace + 16;
	if (need > sizeof buf)
		need = sizeof buf;
	if (mem_read(m, g, buf, need) < 0)
		return -LS_E_FAULT;
	uint64_t L = g - l->sizeof_L, mt = 0;
	memcpy(&mt, buf + l->g_mainthref, ol->gcref);
	if (lj_gcptr(vm->ol, mt) != L)
		return -LS_E_GARBAGE;
	/* strempty: a GCstr with gct 4 and len 0 */
	if (buf[l->g_strempty + ol->gct] != LJ_GCT_STR)
		return -LS_E_GARBAGE;
	uint32_t len;
	memcpy(&len, buf + l->g_strempty + l->str_len, 4);
	if (len != 0)
		return -LS_E_GARBAGE;
	int32_t vs;
	memcpy(&vs, buf + l->g_vmstate, 4);
	if (vs < l->vmst_min || vs > 65535)
		return -LS_E_GARBAGE;
	uint64_t cl = 0;
	memcpy(&cl, buf + l->g_cur_L, ol->gcref);
	cl = lj_gcptr(vm->ol, cl);
	if (cl) {
		uint64_t gl;
		if (lj_read_ref(vm->ol, m, cl + ol->L_glref, &gl) < 0 || gl != g)
			return -LS_E_GARBAGE;
		if (!lj_is_gct(ol, m, cl, LJ_GCT_THREAD))
			return -LS_E_GARBAGE;
	}
	/* main thread: a thread object */
	if (!lj_is_gct(ol, m, L, LJ_GCT_THREAD))
		return -LS_E_GARBAGE;
	/* dispatch boundary: dispatch[0] in the VM, the word before it not */
	uint64_t d[2];
	if (mem_read(m, g + l->g2disp - 8, d, sizeof d) < 0)
		return -LS_E_FAULT;
	if (vm->vm_end && !(d[1] >= vm->vm_start && d[1] < vm->vm_end))
		return -LS_E_GARBAGE;
	if (vm->vm_end && d[0] >= vm->vm_start && d[0] < vm->vm_end)
		return -LS_E_GARBAGE;
	return 0;
}

int lj_add_g(struct vm *vm, struct mem *m, uint64_t g, const char *how)
{
	for (int i = 0; i < vm->found.ng; i++)
		if (vm->found.g[i] == g)
			return i;
	for (int i = 0; i < vm->found.nbad; i++)
		if (vm->found.bad_g[i] == g)
			return -1;
	if (lj_check_g(vm, m, g) < 0) {
		if (vm->found.nbad < LJ_BAD_STATES)
			vm->found.bad_g[vm->found.nbad++] = g;
		else
			vm->found.bad_g[(vm->found.nbad_next++) % LJ_BAD_STATES] = g;
		msg_debug(2, "luajit: candidate global_State 0x%llx (%s) refused",
			  (unsigned long long)g, how);
		return -1;
	}
	if (vm->found.ng >= LJ_MAX_STATES ||
	    array_grow(&vm->found.g, &vm->found.capg, (size_t)vm->found.ng + 1, sizeof *vm->found.g) < 0) {
		msg_debug(1, "luajit: global_State 0x%llx (%s) not kept: %d states already",
			  (unsigned long long)g, how, vm->found.ng);
		return -1;
	}
	vm->found.g[vm->found.ng] = g;
	msg_debug(1, "luajit: global_State 0x%llx (main lua_State 0x%llx) found by %s",
		  (unsigned long long)g, (unsigned long long)(g - vm->lay->sizeof_L), how);
	lj_learn_names(vm, m, g);
	return vm->found.ng++;
}

int lj_state_usable(struct vm *vm, struct mem *m, uint64_t g, const char *how)
{
	for (int i = 0; i < vm->found.ng; i++)
		if (vm->found.g[i] == g)
			return 1;
	for (int i = 0; i < vm->found.nbad; i++)
		if (vm->found.bad_g[i] == g)
			return 0;
	for (int i = 0; i < vm->found.ncand; i++)
		if (vm->found.cand[i].g == g)
			return vm->found.cand[i].ok;
	int ok = lj_check_g(vm, m, g) == 0;
	if (vm->found.ncand < LJ_MAX_STATES &&
	    array_grow(&vm->found.cand, &vm->found.capcand, (size_t)vm->found.ncand + 1,
		       sizeof *vm->found.cand) == 0)
		vm->found.cand[vm->found.ncand++] = (struct lj_cand){ g, how, ok };
	return ok;
}

void lj_vm_free(struct vm *vm)
{
	if (!vm)
		return;
	for (int i = 0; i < LJ_TID_CACHE; i++)
		free(vm->cache.tb[i].buf);
	free(vm->found.g);
	free(vm->found.cand);
	free(vm);
}

int lj_adopt_candidates(struct vm *vm, struct mem *m)
{
	int before = vm->found.ng;
	int n = vm->found.ncand;
	vm->found.ncand = 0;
	for (int i = 0; i < n; i++)
		lj_add_g(vm, m, vm->found.cand[i].g, vm->found.cand[i].how);
	return vm->found.ng - before;
}

/* State from a symbol holding a lua_State pointer. */
static void probe_sym_state(struct vm *vm, struct target *t, const char *sym)
{
	uint64_t a = symtab_find(t->sym, sym, NULL, NULL);
	if (!a)
		return;
	uint64_t L = 0, g = 0;
	if (mem_read_u64(&t->mem.base, a, &L) < 0 || !L)
		return;
	if (lj_read_ref(vm->ol, &t->mem.base, L + vm->ol->L_glref, &g) < 0)
		return;
	msg_debug(1, "luajit: symbol %s = lua_State 0x%llx", sym, (unsigned long long)L);
	lj_add_g(vm, &t->mem.base, g, sym);
}

/* See vm_luajit.h. */
void lj_scan_heap(struct vm *vm, struct target *t)
{
	const struct proc_maps *maps = symtab_maps(t->sym);
	const struct lj_objlayout *ol = vm->ol;
	int gc64 = !!(vm->lay->flags & LJL_GC64);
	size_t budget = SCAN_MAX_BYTES;
	uint8_t *buf = malloc(SCAN_CHUNK + 256);
	if (!buf)
		return;
	unsigned long long scanned = 0;
	int cands = 0;
	for (int i = 0; i < maps->n && budget; i++) {
		const struct proc_map *mp = &maps->m[i];
		if ((mp->perms & (MAP_R | MAP_W)) != (MAP_R | MAP_W))
			continue;
		if (proc_map_is_file(mp))
			continue;
		if (mp->path[0] == '[' && strcmp(mp->path, "[heap]") != 0)
			continue;
		if (!gc64 && mp->start >= 0x80000000ull)
			continue;
		for (uint64_t a = mp->start; a < mp->end && budget; a += SCAN_CHUNK) {
			size_t want = mp->end - a > SCAN_CHUNK ? SCAN_CHUNK : (size_t)(mp->end - a);
			size_t rd = want + 64 <= mp->end - a ? want + 64 : want;
			ssize_t got = t->mem.base.read(&t->mem.base, a, buf, rd);
			if (got <= 0)
				break;
			budget = budget > (size_t)got ? budget - (size_t)got : 0;
			scanned += (size_t)got;
			for (size_t o = 0; o + ol->L_glref + 8 <= (size_t)got && o < want; o += 8) {
				uint64_t L = a + o, gl;
				if (gc64) {
					memcpy(&gl, buf + o + ol->L_glref, 8);
				} else {
					uint32_t g32;
					memcpy(&g32, buf + o + ol->L_glref, 4);
					gl = g32;
				}
				if (gl != L + vm->lay->sizeof_L || buf[o + ol->gct] != LJ_GCT_THREAD)
					continue;
				cands++;
				lj_add_g(vm, &t->mem.base, gl, "heap scan");
			}
		}
	}
	free(buf);
	msg_debug(1, "luajit: heap scan read %llu KiB, %d candidate lua_States, %d states",
		  scanned >> 10, cands, vm->found.ng);
}

/* ---- library names from the registry ---- */

/* Type of TValue V: itype (GC64: v >> 47 as signed; 32-bit: hi32 as int). */
static int tv_itype(const struct vm *vm, uint64_t v)
{
	if (vm->lay->flags & LJL_GC64)
		return (int)((int64_t)v >> 47);
	return (int)(int32_t)(uint32_t)(v >> 32);
}
#define IT_STR (-5)
#define IT_FUNC (-9)
#define IT_TAB (-12)

static int read_str(struct vm *vm, struct mem *m, uint64_t s, char *out, size_t outlen)
{
	uint32_t len;
	if (!lj_is_gct(vm->ol, m, s, LJ_GCT_STR))
		return -LS_E_GARBAGE;
	if (mem_read_u32(m, s + vm->lay->str_len, &len) < 0)
		return -LS_E_FAULT;
	if (len >= outlen)
		return -LS_E_GARBAGE;
	if (mem_read(m, s + vm->lay->str_data, out, len) < 0)
		return -LS_E_FAULT;
	out[len] = 0;
	return (int)len;
}

typedef void (*tab_fn)(struct vm *vm, struct mem *m, const char *key, uint64_t val, void *arg);

/* Call FN for every string-keyed entry of table T (bounded). */
static int tab_each(struct vm *vm, struct mem *m, uint64_t t, tab_fn fn, void *arg)
{
	const struct lj_objlayout *ol = vm->ol;
	if (!lj_is_gct(ol, m, t, LJ_GCT_TAB))
		return -LS_E_GARBAGE;
	uint64_t node;
	uint32_t hmask;
	if (lj_read_ref(vm->ol, m, t + ol->tab_node, &node) < 0 ||
	    mem_read_u32(m, t + ol->tab_hmask, &hmask) < 0)
		return -LS_E_FAULT;
	if (hmask > 0xffff || ((hmask + 1) & hmask))
		return -LS_E_GARBAGE;
	size_t sz = (size_t)(hmask + 1) * ol->node_size;
	uint8_t *nb = malloc(sz);
	if (!nb)
		return -LS_E_NOMEM;
	if (mem_read(m, node, nb, sz) < 0) {
		free(nb);
		return -LS_E_FAULT;
	}
	char key[256];
	for (uint32_t i = 0; i <= hmask; i++) {
		uint64_t k, v;
		memcpy(&v, nb + (size_t)i * ol->node_size, 8);
		memcpy(&k, nb + (size_t)i * ol->node_size + ol->node_key, 8);
		if (tv_itype(vm, k) != IT_STR)
			continue;
		if (read_str(vm, m, lj_gcptr(vm->ol, k), key, sizeof key) < 0)
			continue;
		fn(vm, m, key, v, arg);
	}
	free(nb);
	return 0;
}

static void add_name(struct vm *vm, struct mem *m, uint64_t fn, const char *name)
{
	for (int i = 0; i < vm->found.nnames; i++)
		if (vm->found.names[i].fn == fn)
			return;
	if (vm->found.nnames >= LJ_MAX_NAMES)
		return;
	uint8_t ffid;
	if (mem_read_u8(m, fn + vm->ol->fn_ffid, &ffid) < 0 || ffid == 0)
		return; /* Lua functions are named from the caller's bytecode */
	uint64_t f = 0;
	mem_read_u64(m, fn + vm->ol->fn_f, &f);
	struct lj_fname *n = &vm->found.names[vm->found.nnames++];
	n->fn = fn;
	n->f = f;
	n->ffid = ffid;
	n->name = intern(name);
	if (ffid > 1 && !vm->found.ffname[ffid])
		vm->found.ffname[ffid] = n->name;
}

struct lib_arg {
	const char *lib;
};

static void lib_entry(struct vm *vm, struct mem *m, const char *key, uint64_t v, void *arg)
{
	struct lib_arg *la = arg;
	if (tv_itype(vm, v) != IT_FUNC)
		return;
	char nm[300];
	if (strcmp(la->lib, "_G") == 0)
		snprintf(nm, sizeof nm, "%s", key);
	else
		snprintf(nm, sizeof nm, "%s.%s", la->lib, key);
	add_name(vm, m, lj_gcptr(vm->ol, v), nm);
}

static void loaded_entry(struct vm *vm, struct mem *m, const char *key, uint64_t v, void *arg)
{
	int pass = *(int *)arg;
	if (tv_itype(vm, v) != IT_TAB)
		return;
	/* _G last, so that string.format wins over a global alias */
	if ((strcmp(key, "_G") == 0) != (pass == 1))
		return;
	struct lib_arg la = { key };
	tab_each(vm, m, lj_gcptr(vm->ol, v), lib_entry, &la);
}

struct find_arg {
	const char *key;
	uint64_t v;
};

static void find_entry(struct vm *vm, struct mem *m, const char *key, uint64_t v, void *arg)
{
	struct find_arg *fa = arg;
	if (strcmp(key, fa->key) == 0)
		fa->v = v;
}

/* The metamethods of cdata (lib_ffi.c's ffi_meta table), which no library
 * table holds, as "cdata.__index" ... (docs/naming.md §3): the table is a
 * GC root, g->gcroot[GCROOT_BASEMT + ~LJ_TCDATA]. gcroot[] is found in
 * global_State (below DISPATCH) by its first entries, the metamethod
 * names in MMDEF order (lj_obj.h: "__index", "__newindex", "__gc",
 * "__mode", "__eq"); the base metatables follow the MM__MAX names. */
static void learn_cdata_names(struct vm *vm, struct mem *m, uint64_t g)
{
	static const char *const mm[] = { "__index", "__newindex", "__gc", "__mode", "__eq" };
	unsigned r = vm->ol->gcref, len = vm->lay->g2disp;
	if (len < 64 || len > 8192)
		return;
	uint8_t *buf = malloc(len);
	if (!buf || mem_read(m, g, buf, len) < 0) {
		free(buf);
		return;
	}
	char s[32];
	for (unsigned o = 0; o + 48 * r <= len; o += r) {
		int k = 0, n = 0;
		for (; k < 5; k++) {
			uint64_t ref = 0;
			memcpy(&ref, buf + o + k * r, r);
			if (read_str(vm, m, lj_gcptr(vm->ol, ref), s, sizeof s) < 0 || strcmp(s, mm[k]))
				break;
		}
		if (k < 5)
			continue;
		/* MM__MAX: the names go on while they are "__..." strings */
		for (n = 5; n < 32; n++) {
			uint64_t ref = 0;
			memcpy(&ref, buf + o + n * r, r);
			if (read_str(vm, m, lj_gcptr(vm->ol, ref), s, sizeof s) < 0 || strncmp(s, "__", 2))
				break;
		}
		uint64_t mt = 0;
		memcpy(&mt, buf + o + (n + LJ_GCT_CDATA) * r, r);
		mt = lj_gcptr(vm->ol, mt);
		struct lib_arg la = { "cdata" };
		int before = vm->found.nnames;
		if (mt && tab_each(vm, m, mt, lib_entry, &la) == 0)
			msg_debug(1, "luajit: g->gcroot at g+%u, %d metamethod names, %d cdata metamethods",
				  o, n, vm->found.nnames - before);
		break;
	}
	free(buf);
}

/* The metamethods of ffi.C (lib_ffi.c's ffi_clib: "ffi.C.__index" ...),
 * from its userdata's metatable: GCudata.metatable, after the header,
 * udtype, env and len, at 4 references (lj_obj.h GCudata,
 * docs/naming.md §3). LOADED is package.loaded. */
static void learn_clib_names(struct vm *vm, struct mem *m, uint64_t loaded)
{
	struct find_arg fa = { "ffi", 0 };
	tab_each(vm, m, loaded, find_entry, &fa);
	if (tv_itype(vm, fa.v) != IT_TAB)
		return;
	struct find_arg fc = { "C", 0 };
	tab_each(vm, m, lj_gcptr(vm->ol, fa.v), find_entry, &fc);
	uint64_t ud = lj_gcptr(vm->ol, fc.v), mt;
	if (!ud || !lj_is_gct(vm->ol, m, ud, LJ_GCT_UDATA) ||
	    lj_read_ref(vm->ol, m, ud + 4u * vm->ol->gcref, &mt) < 0 || !mt)
		return;
	struct lib_arg la = { "ffi.C" };
	tab_each(vm, m, mt, lib_entry, &la);
}

int lj_learn_names(struct vm *vm, struct mem *m, uint64_t g)
{
	uint64_t reg;
	if (mem_read_u64(m, g + vm->lay->g_registrytv, &reg) < 0 || tv_itype(vm, reg) != IT_TAB)
		return -LS_E_GARBAGE;
	struct find_arg fa = { "_LOADED", 0 };
	tab_each(vm, m, lj_gcptr(vm->ol, reg), find_entry, &fa);
	if (tv_itype(vm, fa.v) != IT_TAB)
		return -LS_E_GARBAGE;
	int before = vm->found.nnames;
	for (int pass = 0; pass < 2; pass++)
		tab_each(vm, m, lj_gcptr(vm->ol, fa.v), loaded_entry, &pass);
	msg_debug(1, "luajit: learned %d library function names from package.loaded",
		  vm->found.nnames - before);
	learn_cdata_names(vm, m, g);
	learn_clib_names(vm, m, lj_gcptr(vm->ol, fa.v));
	return 0;
}

/* ---- lj_debug_shortname ---- */

void lj_shortsrc(char *out, size_t outlen, const char *src, size_t len)
{
	enum { IDSIZE = 60 }; /* LUA_IDSIZE */
	char tmp[IDSIZE + 8];
	char *o = tmp;
	if (len && src[0] == '=') {
		size_t n = len - 1 < IDSIZE - 1 ? len - 1 : IDSIZE - 1;
		memcpy(o, src + 1, n);
		o[n] = 0;
	} else if (len && src[0] == '@') {
		size_t n = len - 1;
		const char *s = src + 1;
		if (n >= IDSIZE) {
			s += n - (IDSIZE - 4);
			n = IDSIZE - 4;
			memcpy(o, "...", 3);
			o += 3;
		}
		memcpy(o, s, n);
		o[n] = 0;
	} else {
		size_t n;
		for (n = 0; n < IDSIZE - 12 && n < len; n++)
			if ((unsigned char)src[n] < ' ')
				break;
		memcpy(o, "[string \"", 9);
		o += 9;
		if (n < len) {
			if (n > IDSIZE - 15)
				n = IDSIZE - 15;
			memcpy(o, src, n);
			o += n;
			memcpy(o, "...", 3);
			o += 3;
		} else {
			memcpy(o, src, n);
			o += n;
		}
		memcpy(o, "\"]", 3);
	}
	snprintf(out, outlen, "%s", tmp);
}

/* ---- a layout derived for a build no row names ---- */

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The main lua_State named by symbol SYM whose global_State's dispatch
 * table starts in the VM code: 1 and *L, *G, or 0. */
static int derive_sym_state(struct target *t, const struct lj_dcode *d, const struct lj_fde_find *ff,
			    const char *sym, uint64_t *Lp, uint64_t *Gp)
{
	uint64_t a = symtab_find(t->sym, sym, NULL, NULL), L = 0, g = 0, dd[2];
	const struct lj_objlayout *ol = d->ci.gc64 == 1 ? &lj_obj_gc64 : &lj_obj_32;
	if (!a || mem_read_u64(&t->mem.base, a, &L) < 0 || !L ||
	    lj_read_ref(ol, &t->mem.base, L + ol->L_glref, &g) < 0 || g <= L ||
	    mem_read(&t->mem.base, g + d->ci.g2disp - 8, dd, sizeof dd) < 0 ||
	    dd[1] < ff->start || dd[1] >= ff->end)
		return 0;
	*Lp = L;
	*Gp = g;
	return 1;
}

/* Derive the layout of the VM in CODE (LEN bytes, FF) on its first
 * state: lj_derive_code, a main lua_State from the symbols or the scan,
 * lj_derive_state; ROW (or NULL) is the row the code anchors matched,
 * compared field by field. Fills OUT, *L, *G and NAME; 0, or -LS_E_*
 * with WHY. */
static int derive_layout(struct target *t, const uint8_t *code, size_t len,
			 const struct lj_fde_find *ff, unsigned host, const struct lj_layout *row,
			 struct lj_layout *out, uint64_t *Lp, uint64_t *Gp, char *name, size_t namelen,
			 char *why, size_t whylen)
{
	uint64_t t0 = now_us();
	struct lj_dcode d;
	if (lj_derive_code(code, len, &d) < 0) {
		snprintf(why, whylen, "no vmstate or cur_L store in the VM code");
		return -LS_E_GARBAGE;
	}
	uint64_t t1 = now_us();
	msg_debug(1, "luajit: derivation: VM code says jit_base g+%d, gc.total g+%d, J.trace g+%d, "
		  "%d lea targets below cur_L (%llu us)", d.jit_base, d.gc_total, d.jtrace, d.nlea,
		  (unsigned long long)(t1 - t0));
	const char *how = "symbol tarantool_L";
	int rc = derive_sym_state(t, &d, ff, "tarantool_L", Lp, Gp);
	if (!rc) {
		how = "symbol globalL";
		rc = derive_sym_state(t, &d, ff, "globalL", Lp, Gp);
	}
	if (!rc) {
		how = "scan";
		rc = lj_derive_find_state(&d, &t->mem.base, symtab_maps(t->sym), ff->start, ff->end,
					  Lp, Gp);
	}
	if (rc < 0)
		return rc;
	if (rc == 0) {
		snprintf(why, whylen, "no main lua_State yet whose dispatch table points into the VM");
		return -LS_E_GARBAGE;
	}
	rc = lj_derive_state(&d, &t->mem.base, *Lp, *Gp, host, out, why, whylen);
	uint64_t t2 = now_us();
	if (rc < 0)
		return rc;
	char diff[200] = "";
	if (row && lj_layout_diff(out, row, diff, sizeof diff) == 0)
		snprintf(name, namelen, "derived, as row '%s'", row->name);
	else
		snprintf(name, namelen, "derived, %s, %s", out->flags & LJL_SNAP_MCOFS ? "2020-06 order" :
			 "beta3 order", out->flags & LJL_OPENRESTY ? "OpenResty" :
			 out->flags & LJL_TARANTOOL ? "Tarantool" : "no row");
	msg_debug(1, "luajit: layout derived on main lua_State 0x%llx (%s) in %llu us: sizeof_L %u, "
		  "gc.state g+%u, vmstate g+%u, strempty g+%u, mainthref g+%u, registrytv g+%u, "
		  "cur_L g+%u, jit_base g+%u, J.trace g+%u, str len +%u data +%u",
		  (unsigned long long)*Lp, how, (unsigned long long)(t2 - t0), out->sizeof_L,
		  out->g_gc_state, out->g_vmstate, out->g_strempty, out->g_mainthref,
		  out->g_registrytv, out->g_cur_L, out->g_jit_base, out->g_jtrace, out->str_len,
		  out->str_data);
	if (row && diff[0])
		msg_debug(1, "luajit: derived layout differs from row '%s' (derived/row): %s", row->name,
			  diff);
	return 0;
}

/* ---- probe ---- */

int lj_probe(struct target *t, unsigned flags, struct vm **out, char *why, size_t whylen)
{
	struct lj_fde_find ff = { 0 };
	symtab_each_module(t->sym, lj_fde_cb, &ff);
	if (!ff.end) {
		msg_debug(1, "luajit: no LuaJIT VM unwind record (FDE > 10 KiB, CFA rsp+80) in any module");
		return 0;
	}
	msg_debug(1, "luajit: VM code 0x%llx..0x%llx (%llu bytes) in %s, CFA rsp+%d",
		  (unsigned long long)ff.start, (unsigned long long)ff.end,
		  (unsigned long long)(ff.end - ff.start), ff.module, ff.cfa);
	size_t len = (size_t)(ff.end - ff.start);
	uint8_t *code = malloc(len);
	if (!code)
		return -LS_E_NOMEM;
	if (mem_read(&t->mem.base, ff.start, code, len) < 0) {
		free(code);
		snprintf(why, whylen, "LuaJIT VM code in %s at 0x%llx is unreadable", ff.module,
			 (unsigned long long)ff.start);
		return -LS_E_UNSUPPORTED;
	}
	struct lj_codeinfo ci;
	int rc = lj_code_derive(code, len, &ci);
	if (rc < 0) {
		free(code);
		msg_debug(1, "luajit: no VM entry pattern (mov r14,[rbp+glref]; add r14,G2DISP) in %s",
			  ff.module);
		snprintf(why, whylen,
			 "VM-like code in %s (0x%llx..0x%llx) has no LuaJIT 2.1 x86_64 entry pattern",
			 ff.module, (unsigned long long)ff.start, (unsigned long long)ff.end);
		return -LS_E_UNSUPPORTED;
	}
	unsigned host = 0;
	if (symtab_find(t->sym, "lua_setexdata", NULL, NULL) ||
	    symtab_find(t->sym, "lua_resetthread", NULL, NULL))
		host |= LJL_OPENRESTY;
	if (symtab_find(t->sym, "tarantool_L", NULL, NULL))
		host |= LJL_TARANTOOL;
	msg_debug(1, "luajit: VM code says %s refs, G2DISP %u, vmstate at g+%d, cur_L at g+%d%s%s",
		  ci.gc64 ? "GC64" : "32-bit", ci.g2disp, ci.vmstate, ci.cur_L,
		  host & LJL_OPENRESTY ? ", OpenResty exports" : "",
		  host & LJL_TARANTOOL ? ", tarantool_L" : "");
	/* the rows only name a known build; a build no row names (or any,
	 * with the test hook LUASPY_LJ_NO_ROWS=1) gets its layout derived */
	const struct lj_layout *row = lj_layout_match(&ci, host);
	const char *norows = getenv("LUASPY_LJ_NO_ROWS");
	const struct lj_layout *lay = norows && *norows && strcmp(norows, "0") != 0 ? NULL : row;
	struct lj_layout dlay;
	uint64_t dL = 0, dG = 0;
	char dname[120] = "";
	if (!lay) {
		char dwhy[160] = "";
		rc = derive_layout(t, code, len, &ff, host, row, &dlay, &dL, &dG, dname, sizeof dname,
				   dwhy, sizeof dwhy);
		if (rc < 0) {
			free(code);
			if (rc == -LS_E_NOMEM)
				return rc;
			snprintf(why, whylen,
				 "LuaJIT in %s with %s refs, G2DISP %u, vmstate g+%d, cur_L g+%d%s%s matches no known layout, and none could be derived: %s",
				 ff.module, ci.gc64 ? "GC64" : "32-bit", ci.g2disp, ci.vmstate, ci.cur_L,
				 host & LJL_OPENRESTY ? " (OpenResty)" : "",
				 host & LJL_TARANTOOL ? " (Tarantool)" : "", dwhy);
			return -LS_E_UNSUPPORTED;
		}
		lay = &dlay;
	}
	struct lj_edge edge[LJ_EDGES];
	int nedge = lj_edges_find(code, len, ff.start, lay->cf_size, edge, LJ_EDGES);
	free(code);
	if ((int)lay->cf_size != ff.cfa) {
		snprintf(why, whylen, "LuaJIT in %s: VM frame CFA rsp+%d, layout '%s' expects %d",
			 ff.module, ff.cfa, lay->name, lay->cf_size);
		return -LS_E_UNSUPPORTED;
	}
	msg_debug(1, "luajit: layout '%s' (%s)", lay->name, lay->source);
	struct vm *vm = calloc(1, sizeof *vm);
	if (!vm)
		return -LS_E_NOMEM;
	if (lay == &dlay) {
		vm->derived = dlay;
		snprintf(vm->derived_name, sizeof vm->derived_name, "%s", dname);
		vm->derived.name = vm->derived_name;
		lay = &vm->derived;
	}
	vm->lay = lay;
	vm->ol = (lay->flags & LJL_GC64) ? &lj_obj_gc64 : &lj_obj_32;
	vm->vm_start = ff.start;
	vm->vm_end = ff.end;
	vm->vm_module = ff.module;
	memcpy(vm->edge, edge, (size_t)nedge * sizeof *edge);
	vm->nedge = nedge;
	msg_debug(1, "luajit: %d register save/restore sequences in the VM code", nedge);
	if (dG && lj_add_g(vm, &t->mem.base, dG, "layout derivation") < 0) {
		/* the derived layout fails the invariants on its own state */
		snprintf(why, whylen, "LuaJIT in %s: the layout derived from state 0x%llx fails its checks",
			 ff.module, (unsigned long long)dG);
		lj_vm_free(vm);
		return -LS_E_UNSUPPORTED;
	}
	probe_sym_state(vm, t, "tarantool_L");
	probe_sym_state(vm, t, "globalL");
	/* VM_PROBE_QUICK: no heap scan here, it read up to 512 MiB (0.8-1.5 s
	 * for a 1 GiB heap). The first sample of a thread in VM code or on a
	 * trace names its state by DISPATCH (r14), one with Lua below it by
	 * a cframe; discovery scans the heap only when samples found neither. */
	vm->found.quick = !!(flags & VM_PROBE_QUICK);
	if (vm->found.ng == 0 && !vm->found.quick)
		lj_scan_heap(vm, t);
	if (vm->found.ng == 0)
		msg_debug(1, "luajit: no global_State from symbols; threads in VM code will add theirs");
	snprintf(vm->desc, sizeof vm->desc, "LuaJIT 2.1 %s, %s", lay->flags & LJL_GC64 ? "GC64" : "32-bit refs",
		 lay->name);
	*out = vm;
	return 1;
}

/* ---- discovery ---- */

/* See vm_luajit.h. */
int lj_discover(struct vm *vm, struct target *t, unsigned what)
{
	struct mem *m = &t->mem.base;
	int found = 0;
	if (what & VM_DISC_STATES) {
		int before = vm->found.ng;
		lj_adopt_candidates(vm, m);
		if (vm->found.ng == 0 && vm->found.quick && t->sym)
			lj_scan_heap(vm, t);
		found += vm->found.ng - before;
	}
	if (what & VM_DISC_NAMES) {
		int before = vm->found.nnames;
		for (int k = 0; k < vm->found.ng; k++)
			lj_learn_names(vm, m, vm->found.g[k]);
		found += vm->found.nnames - before;
	}
	return found;
}

/* See vm_luajit.h. */
int lj_learn_now(struct vm *vm, struct target *t, uint8_t ffid)
{
	struct mem *m = &t->mem.base;
	int before = vm->found.nnames, ng = vm->found.ng;
	/* a state met by this sample's capture or walk: adopting it learns
	 * its names (lj_add_g) */
	if (vm->found.ncand > 0)
		lj_adopt_candidates(vm, m);
	/* a builtin still without a name: the states known before may have
	 * loaded its library since their names were learned */
	if (ffid > 1 && !vm->found.ffname[ffid])
		for (int k = 0; k < ng; k++)
			lj_learn_names(vm, m, vm->found.g[k]);
	msg_debug(1, "luajit: names learned in a walk (builtin %d): %d new", ffid,
		  vm->found.nnames - before);
	return vm->found.nnames - before;
}
