/* gc_filter.c: record --gc: which samples ran in the garbage collector
 * (gc_filter.h, docs/gc.md). */
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include "elf_sym.h"
#include "err.h"
#include "gc_filter.h"
#include "intern.h"
#include "msg.h"
#include "target.h"

/* ---- finding the collector's code ---- */

/* The collector's entry points in lgc.c: every step or cycle of PUC
 * Lua 5.1-5.4 runs under one of them (luaC_checkGC/luaC_condGC call
 * luaC_step; luaM_realloc_'s emergency collection and lua_gc call
 * luaC_fullgc; 5.2's luaC_step calls luaC_forcestep; 5.2/5.4
 * luaC_changemode runs a full cycle entering generational mode). */
static const char *const gc_entries[] = { "luaC_step", "luaC_fullgc", "luaC_forcestep", "luaC_changemode" };

static int code_add(struct gc_code *gc, uint64_t start, uint64_t end)
{
	if (end <= start)
		return 0;
	for (int i = 0; i < gc->n; i++)
		if (gc->start[i] == start)
			return 0;
	if (gc->n >= GC_MAX_RANGES)
		return -1;
	gc->start[gc->n] = start;
	gc->end[gc->n] = end;
	gc->n++;
	return 1;
}

static int by_symbols(struct target *t, struct gc_code *gc)
{
	for (size_t i = 0; i < sizeof gc_entries / sizeof gc_entries[0]; i++) {
		uint64_t size = 0, end = 0;
		uint64_t a = symtab_find(t->sym, gc_entries[i], &size, NULL);
		if (!a)
			continue;
		if (!size && symtab_fde_start(t->sym, a, &end) == a)
			size = end - a;
		if (size > 0 && size < (16u << 20)) {
			code_add(gc, a, a + size);
			msg_debug(1, "--gc: pid %d: %s at 0x%llx, %llu bytes (symbol)", (int)t->pid,
				  gc_entries[i], (unsigned long long)a, (unsigned long long)size);
		}
	}
	return gc->n;
}

/* [*LO, *HI) = target range of ELF's .text section (load BIAS applied);
 * 0 or -1. */
static int text_range(Elf *elf, uint64_t bias, uint64_t *lo, uint64_t *hi)
{
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -1;
	for (Elf_Scn *scn = elf_nextscn(elf, NULL); scn; scn = elf_nextscn(elf, scn)) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && strcmp(name, ".text") == 0) {
			*lo = sh.sh_addr + bias;
			*hi = sh.sh_addr + sh.sh_size + bias;
			return 0;
		}
	}
	return -1;
}

/* lua_gc's direct callees (lapi.c: lua_gc calls luaC_step, luaC_fullgc
 * and, 5.2-5.4, luaE_setdebt, a leaf that sets the collector's debt;
 * 5.2 luaC_forcestep, 5.2/5.4 luaC_changemode): every `call rel32`
 * (e8) or `jmp rel32` (e9, a tail call) byte pattern in lua_gc's code
 * whose target starts an FDE in .text of the same module, outside
 * lua_gc, and has no exported API name. A byte pattern inside another
 * instruction would have to land on a function's first byte to count. */
static int by_lua_gc(struct target *t, struct gc_code *gc, char *why, size_t whylen)
{
	uint64_t size = 0, end = 0;
	uint64_t f = symtab_find(t->sym, "lua_gc", &size, NULL);
	if (!f) {
		snprintf(why, whylen, "no symbol lua_gc nor luaC_step (a stripped static build?): "
			 "the collector's code cannot be told apart");
		return -LS_E_UNSUPPORTED;
	}
	if (symtab_fde_start(t->sym, f, &end) == f && end > f)
		size = end - f;
	if (!size) {
		snprintf(why, whylen, "lua_gc at 0x%llx has no size nor CFI entry", (unsigned long long)f);
		return -LS_E_UNSUPPORTED;
	}
	if (size > GC_SCAN_MAX_BYTES) {
		msg_debug(1, "--gc: lua_gc is %llu bytes: the first %u decoded", (unsigned long long)size,
			  GC_SCAN_MAX_BYTES);
		size = GC_SCAN_MAX_BYTES;
	}
	Elf *elf = NULL;
	uint64_t bias = 0, lo = 0, hi = 0;
	Dwfl_Module *mod = symtab_module_at(t->sym, f, &elf, &bias);
	if (!mod || text_range(elf, bias, &lo, &hi) < 0) {
		snprintf(why, whylen, "lua_gc at 0x%llx: its module has no .text section",
			 (unsigned long long)f);
		return -LS_E_UNSUPPORTED;
	}
	uint8_t code[GC_SCAN_MAX_BYTES];
	int rc = mem_read(&t->mem.base, f, code, (size_t)size);
	if (rc < 0) {
		snprintf(why, whylen, "lua_gc's code at 0x%llx unreadable", (unsigned long long)f);
		return rc;
	}
	for (size_t i = 0; i + 5 <= size; i++) {
		if (code[i] != 0xe8 && code[i] != 0xe9)
			continue;
		int32_t rel;
		memcpy(&rel, code + i + 1, 4);
		uint64_t to = f + i + 5 + (uint64_t)(int64_t)rel;
		uint64_t to_end = 0;
		if ((to >= f && to < f + size) || to < lo || to >= hi)
			continue;
		if (symtab_fde_start(t->sym, to, &to_end) != to || to_end <= to)
			continue;
		struct sym_info si;
		symtab_lookup(t->sym, to, 0, &si);
		if (si.name && (strncmp(si.name, "lua_", 4) == 0 || strncmp(si.name, "luaL_", 5) == 0))
			continue;
		int added = code_add(gc, to, to_end);
		if (added < 0) {
			snprintf(why, whylen, "lua_gc calls more than %d functions: not the lua_gc of lapi.c",
				 GC_MAX_RANGES);
			return -LS_E_UNSUPPORTED;
		}
		if (added)
			msg_debug(1, "--gc: pid %d: lua_gc+0x%zx calls 0x%llx (%s), %llu bytes", (int)t->pid, i,
				  (unsigned long long)to, si.name ? si.name : "no symbol",
				  (unsigned long long)(to_end - to));
	}
	if (gc->n == 0) {
		snprintf(why, whylen, "lua_gc at 0x%llx calls no function of its module", (unsigned long long)f);
		return -LS_E_UNSUPPORTED;
	}
	return 0;
}

int gc_code_find(struct target *t, int no_symbols, struct gc_code *out, char *why, size_t whylen)
{
	memset(out, 0, sizeof *out);
	if (why && whylen)
		why[0] = 0;
	if (!t->vm || t->vm_ops == &vm_luajit_ops) {
		out->luajit = 1;
		out->how = "vmstate";
		return 0;
	}
	if (!t->sym) {
		snprintf(why, whylen, "no modules read (a core file?)");
		return -LS_E_UNSUPPORTED;
	}
	/* luaC_step runs the steps allocations trigger: without its symbol
	 * the names found are not enough */
	if (!no_symbols && by_symbols(t, out) > 0 && symtab_find(t->sym, "luaC_step", NULL, NULL)) {
		out->how = "symbols";
		return 0;
	}
	memset(out, 0, sizeof *out);
	int rc = by_lua_gc(t, out, why, whylen);
	if (rc < 0) {
		memset(out, 0, sizeof *out);
		return rc;
	}
	out->how = "lua_gc callees";
	return 0;
}

int gc_code_sample_in_gc(const struct gc_code *gc, const struct walk_info *info,
			 const struct lua_walk *lw, const struct stack *st)
{
	if (gc->luajit)
		return (info->vmstate && strcmp(info->vmstate, "GC") == 0) || (lw && lw->vm_gc);
	int leaf = 1;
	for (int i = 0; st && i < st->n; i++) {
		const struct frame *fr = &st->f[i];
		/* a finalizer (__gc, Lua or C) the collector called: the code
		 * inside it is its own, not the collector's (as LuaJIT's
		 * vmstate says, docs/gc.md §2) */
		if (fr->kind == FRAME_LUA || fr->kind == FRAME_C)
			return 0;
		if (fr->kind != FRAME_NATIVE)
			continue; /* pseudo frames: vmstate, roots, elided */
		/* a caller's pc is a return address: the call is before it */
		uint64_t pc = fr->addr - (leaf ? 0 : 1);
		leaf = 0;
		for (int k = 0; k < gc->n; k++)
			if (pc >= gc->start[k] && pc < gc->end[k])
				return 1;
	}
	return 0;
}

/* ---- the session's filter ---- */

static int filter_slot(struct gc_filter *f, struct target *t, unsigned long long start, char *why,
		       size_t whylen)
{
	/* keyed by what the target cannot reuse: a new process with a
	 * recycled pid (or target struct) starts later */
	for (int i = 0; i < f->n; i++)
		if (f->tg[i].t == t && f->tg[i].pid == t->pid && f->tg[i].start == start)
			return i;
	/* full (--subprocesses of a forking program): the slots are reused
	 * in turn, a process met again is learned again */
	int i = f->n < GC_MAX_TARGETS ? f->n++ : (int)(f->reuse++ % GC_MAX_TARGETS);
	f->tg[i].t = t;
	f->tg[i].pid = t->pid;
	f->tg[i].start = start;
	f->tg[i].rc = gc_code_find(t, f->no_symbols, &f->tg[i].code, why, whylen);
	if (f->tg[i].rc == 0)
		msg_debug(1, "--gc: pid %d: the collector told by %s", (int)t->pid, f->tg[i].code.how);
	else
		msg_debug(1, "--gc: pid %d: %s", (int)t->pid, why);
	return i;
}

int gc_filter_check(struct gc_filter *f, struct target *t, unsigned long long start, char *why, size_t whylen)
{
	f->no_symbols = getenv("LUASPY_GC_NO_SYMBOLS") != NULL;
	if (!t || !t->vm)
		return 0; /* learned on the first sample */
	int i = filter_slot(f, t, start, why, whylen);
	if (f->tg[i].rc < 0) {
		/* forgotten: a later look at T tries again */
		f->tg[i].t = NULL;
		return f->tg[i].rc;
	}
	return 0;
}

int gc_filter_keep(struct gc_filter *f, struct target *t, unsigned long long start, const struct walk_info *info,
		   const struct lua_walk *lw, const struct native_stack *ns, const struct stack *st)
{
	char why[256];
	if (!t || !t->vm) { /* no Lua VM (yet): not a collector's sample */
		f->outside++;
		return 0;
	}
	int i = filter_slot(f, t, start, why, sizeof why);
	if (f->tg[i].rc < 0) {
		f->unknown++;
		return 0;
	}
	if (!gc_code_sample_in_gc(&f->tg[i].code, info, lw, st)) {
		f->outside++;
		return 0;
	}
	if (info->lua_frames <= 0 && ns && ns->truncated) {
		/* no Lua frame because the walk failed, not because C ran
		 * the step (lua_gc from a host): whose step it was is not
		 * known */
		f->cut++;
		return 0;
	}
	f->kept++;
	if (info->lua_frames <= 0)
		f->kept_no_lua++;
	return 1;
}
