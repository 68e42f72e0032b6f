/* merge.c: native + Lua stack merging. */
#include <stdlib.h>
#include <string.h>
#include "elf_sym.h"
#include "err.h"
#include "htab.h"
#include "intern.h"
#include "merge.h"
#include "proc_maps.h"
#include "vm.h"

void merge_native_frame(struct symtab *s, const struct native_frame *nf, struct frame *out)
{
	struct sym_info si;
	memset(out, 0, sizeof *out);
	out->kind = FRAME_NATIVE;
	out->addr = nf->pc;
	int ret = nf_is_return(nf);
	if (nf->flags & NF_RESTART)
		ret = 1; /* a restart point is a return address found on the stack */
	symtab_lookup(s, nf->pc, ret, &si);
	out->module = si.module;
	out->file = si.file;
	out->line = si.line;
	if (nf->flags & NF_SIGFRAME) {
		/* the trampoline a handler returns to, named as gdb names it;
		 * its module stays (it is libc's code) */
		out->name = intern("<signal handler called>");
		out->file = NULL;
		out->line = 0;
	} else if (si.name) {
		out->name = si.name;
	} else if (si.module) {
		/* no symbol: module and offset from its ELF addresses (of the
		 * function start when the CFI tells it), the same in every run */
		out->name = symtab_offset_name(&si, si.func_start ? si.func_start : nf->pc);
	} else {
		const struct proc_map *m = proc_maps_find(symtab_maps(s), nf->pc);
		if (m && (m->perms & MAP_X) && m->path[0] == '[')
			out->name = m->path; /* [vsyscall] */
		else if (m && (m->perms & MAP_X) &&
			 (out->name = symtab_perfmap_name(s, ret ? nf->pc - 1 : nf->pc, &out->module)))
			; /* another JIT's code, [perf-map] or [jitdump] (docs/perf-maps.md) */
		else if (m && (m->perms & MAP_X))
			out->name = intern("[jit]");
		else
			out->name = intern("[unknown]"); /* a leaf outside the maps read */
	}
}

/* Append FR to OUT, past STACK_MAX_FRAMES (merge_elide() cuts the stack
 * down at the end); a frame that finds no memory is dropped, as
 * stack_push() drops it. Bounded by the inputs: UNWIND_MAX_FRAMES native
 * frames and LUA_WALK_MAX_FRAMES Lua frames. */
static void push(struct stack *out, const struct frame *fr)
{
	size_t cap = out->cap > 0 ? (size_t)out->cap : 0;
	if (array_grow(&out->f, &cap, (size_t)out->n + 1, sizeof *out->f) < 0)
		return;
	out->cap = (int)cap;
	out->f[out->n++] = *fr;
}

/* Cut OUT down to MERGE_KEEP_FRAMES when it is longer: its innermost and
 * outermost frames stay, one FRAME_ELIDED frame "<elided N frames>"
 * stands for the N between them, so every output shows the cut. */
static void merge_elide(struct stack *out)
{
	if (out->n <= MERGE_KEEP_FRAMES)
		return;
	int inner = MERGE_KEEP_FRAMES / 2;
	int outer = MERGE_KEEP_FRAMES - inner - 1;
	int n = out->n - inner - outer;
	struct frame e = { .kind = FRAME_ELIDED, .name = internf("<elided %d frames>", n) };
	out->f[inner] = e;
	memmove(&out->f[inner + 1], &out->f[out->n - outer], (size_t)outer * sizeof out->f[0]);
	out->n = MERGE_KEEP_FRAMES;
}

/* Find the segments for native index I with the given REPLACE flag. */
static int emit_segments(const struct lua_walk *w, int i, int replace, int drop_c_of,
			 struct stack *out)
{
	int emitted = 0;
	for (int k = 0; k < w->nseg; k++) {
		const struct lua_segment *sg = &w->seg[k];
		if (sg->native_index != i || sg->replace != replace)
			continue;
		for (int j = 0; j < sg->n; j++) {
			if (j == 0 && k == drop_c_of)
				continue;
			push(out, &w->f[sg->first + j]);
		}
		emitted = 1;
	}
	return emitted;
}

/* Name FR, a native frame of W's VM module without a symbol, by its
 * role; *GC says no Lua or VM frame was met yet inside it. */
static void name_vm_code(const struct lua_walk *w, struct frame *fr, int *gc)
{
	int in_vm = fr->addr >= w->vm_start && fr->addr < w->vm_end;
	if (in_vm)
		*gc = 0;
	if (!w->vm_module || fr->module != w->vm_module || !frame_is_unnamed(fr))
		return;
	fr->name = intern(*gc ? "[LuaJIT GC]" : "[LuaJIT VM]");
}

static const struct lua_walk no_lua; /* merge_stacks(..., NULL, ...) */

/* The innermost frame of segment K of W. */
static const struct frame *seg_top(const struct lua_walk *w, int k)
{
	return &w->f[w->seg[k].first];
}

int merge_stacks(struct symtab *s, const struct native_stack *ns,
		 const struct lua_walk *w, struct stack *out)
{
	if (!w)
		w = &no_lua;
	stack_clear(out);
	/* which native frames are one activation with a segment's C function:
	 * CMATCH[i] = k when native frame i is segment k's C function, by its
	 * symbol (CBYFDE[i] = 0) or, when the symbol starts elsewhere, by the
	 * FDE covering its pc (CBYFDE[i] = 1); CMOD[i] is its module */
	int cmatch[UNWIND_MAX_FRAMES];
	char cbyfde[UNWIND_MAX_FRAMES];
	const char *cmod[UNWIND_MAX_FRAMES];
	for (int i = 0; i < ns->n; i++)
		cmatch[i] = -1;
	for (int k = 0; k < w->nseg; k++) {
		const struct lua_segment *sg = &w->seg[k];
		int i = sg->native_index;
		if (!sg->replace || sg->n == 0 || i <= 0 || i > ns->n)
			continue;
		const struct frame *c = seg_top(w, k);
		if (c->kind != FRAME_C || c->addr == 0)
			continue;
		struct sym_info si;
		const struct native_frame *nf = &ns->f[i - 1];
		int ret = nf_is_return(nf);
		symtab_lookup(s, nf->pc, ret, &si);
		if (si.func_start == c->addr)
			cbyfde[i - 1] = 0;
		else if (symtab_fde_start(s, ret ? nf->pc - 1 : nf->pc, NULL) == c->addr)
			cbyfde[i - 1] = 1;
		else
			continue;
		cmatch[i - 1] = k;
		cmod[i - 1] = si.module;
	}
	int gc = w->vm_gc; /* still inside the Lua code and the VM (leaf side) */
	for (int i = 0; i < ns->n; i++) {
		if (emit_segments(w, i, 0, -1, out))
			gc = 0;
		int dropk = -1;
		for (int k = 0; k < w->nseg; k++)
			if (w->seg[k].native_index == i && w->seg[k].replace && i > 0 && cmatch[i - 1] == k)
				dropk = k;
		if (emit_segments(w, i, 1, dropk, out)) {
			gc = 0;
			continue;
		}
		struct frame fr;
		int fused = cmatch[i] >= 0;
		if (fused && cbyfde[i]) {
			/* the symbol covering the pc is not the function's: the
			 * Lua side's name (unless it has none either), else the
			 * native frame as it is */
			const struct frame *c = seg_top(w, cmatch[i]);
			if (c->name && c->name[0] != '[') {
				fr = *c;
				if (!c->module)
					fr.module = cmod[i];
				push(out, &fr);
				continue;
			}
			fused = 0;
		}
		merge_native_frame(s, &ns->f[i], &fr);
		static const char *perf_map_mod;
		if (!perf_map_mod)
			perf_map_mod = intern("[perf-map]");
		if (w->vm_module && fr.module == perf_map_mod && !strncmp(fr.name, "TRACE_", 6)) {
			/* LuaJIT's own perf map line for a trace: the walker
			 * names traces better (docs/perf-maps.md) */
			fr.name = intern("[jit]");
			fr.module = NULL;
		}
		if (!fused)
			name_vm_code(w, &fr, &gc);
		if (fused) {
			const struct frame *c = seg_top(w, cmatch[i]);
			fr.kind = FRAME_C;
			if (c->name && !frame_is_unnamed(c) && c->module && c->module != fr.module) {
				/* the Lua side names the function this one calls
				 * for it, in another module (an FFI call) */
				fr.name = c->name;
				fr.module = c->module;
			} else if (frame_is_unnamed(&fr) && c->name && !frame_is_unnamed(c)) {
				fr.name = c->name; /* stripped: the Lua side knows it better */
			}
		}
		push(out, &fr);
	}
	/* segments anchored past the end of the native stack (unwinding stopped early) */
	for (int k = 0; k < w->nseg; k++)
		if (w->seg[k].native_index >= ns->n)
			for (int j = 0; j < w->seg[k].n; j++)
				push(out, &w->f[w->seg[k].first + j]);
	if (ns->fiber) { /* the native walk ended at a fiber stack's base */
		struct frame fb = { .kind = FRAME_ROOT, .name = intern("[fiber stack]") };
		push(out, &fb);
	}
	merge_elide(out);
	return out->n;
}

void merge_coroutine_root(const struct walk_info *info, struct frame *out)
{
	memset(out, 0, sizeof *out);
	out->kind = FRAME_ROOT;
	const struct frame *b = &info->coro_body;
	unsigned long long a = (unsigned long long)info->coro;
	if (!info->coro)
		out->name = intern("[no Lua]");
	else if (info->coro_main)
		out->name = intern("main");
	else if (b->kind != FRAME_LUA || !b->name)
		out->name = internf("coroutine 0x%llx", a);
	else if (b->file && b->firstline > 0 && strncmp(b->name, "function <", 10) != 0)
		out->name = internf("coroutine 0x%llx %s (%s:%d)", a, b->name, b->file, (int)b->firstline);
	else
		out->name = internf("coroutine 0x%llx %s", a, b->name);
}

/* ---- struct lua_walk ---- */

/* Room for NEED items of SIZE at *P (capacity *CAP), at most
 * LUA_WALK_MAX_FRAMES. 0 or -LS_E_NOMEM. */
static int walk_grow(void *p, int *cap, int need, size_t size)
{
	if (need > LUA_WALK_MAX_FRAMES)
		return -LS_E_NOMEM;
	size_t c = *cap > 0 ? (size_t)*cap : 0;
	if (array_grow(p, &c, (size_t)need, size) < 0)
		return -LS_E_NOMEM;
	*cap = (int)c;
	return 0;
}

int lua_walk_segment(struct lua_walk *w, int native_index, int replace)
{
	int rc = walk_grow(&w->seg, &w->capseg, w->nseg + 1, sizeof *w->seg);
	if (rc < 0)
		return rc;
	w->seg[w->nseg++] = (struct lua_segment){ native_index, replace, w->nf, 0 };
	return 0;
}

int lua_walk_push(struct lua_walk *w, const struct frame *fr)
{
	int rc;
	if (w->nseg == 0 && (rc = lua_walk_segment(w, 0, 1)) < 0)
		return rc;
	if ((rc = walk_grow(&w->f, &w->capf, w->nf + 1, sizeof *w->f)) < 0)
		return rc;
	w->f[w->nf++] = *fr;
	w->seg[w->nseg - 1].n++;
	return 0;
}

int lua_walk_frames(const struct lua_walk *w)
{
	return w->nf;
}

void lua_walk_reset(struct lua_walk *w)
{
	w->nf = 0;
	w->nseg = 0;
	w->vm_module = NULL;
	w->vm_start = w->vm_end = 0;
	w->vm_gc = 0;
}

void lua_walk_free(struct lua_walk *w)
{
	free(w->f);
	free(w->seg);
	memset(w, 0, sizeof *w);
}
