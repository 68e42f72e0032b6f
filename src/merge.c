/* merge.c: native + Lua stack merging. */
#include <string.h>
#include "elf_sym.h"
#include "err.h"
#include "intern.h"
#include "merge.h"
#include "proc_maps.h"

void merge_native_frame(struct symtab *s, const struct native_frame *nf, struct frame *out)
{
	struct sym_info si;
	memset(out, 0, sizeof *out);
	out->kind = FRAME_NATIVE;
	out->addr = nf->pc;
	int ret = !(nf->flags & NF_LEAF) && !(nf->flags & NF_RESTART);
	if (nf->flags & NF_RESTART)
		ret = 1; /* a restart point is a return address found on the stack */
	symtab_lookup(s, nf->pc, ret, &si);
	out->module = si.module;
	out->file = si.file;
	out->line = si.line;
	if (si.name) {
		out->name = si.name;
	} else if (si.module) {
		out->name = intern("[unknown]");
	} else {
		const struct proc_map *m = proc_maps_find(symtab_maps(s), nf->pc);
		if (m && (m->perms & MAP_X) && !proc_map_is_file(m) && m->path[0] != '[')
			out->name = intern("[jit]");
		else
			out->name = internf("[anon:0x%llx]", (unsigned long long)nf->pc);
	}
}

/* Find the segments for native index I with the given REPLACE flag. */
static int emit_segments(const struct lua_segment *segs, int nsegs, int i, int replace,
			 int drop_c_of, struct stack *out)
{
	int emitted = 0;
	for (int k = 0; k < nsegs; k++) {
		const struct lua_segment *sg = &segs[k];
		if (sg->native_index != i || sg->replace != replace)
			continue;
		for (int j = 0; j < sg->n; j++) {
			if (j == 0 && k == drop_c_of)
				continue;
			stack_push(out, &sg->f[j]);
		}
		emitted = 1;
	}
	return emitted;
}

int merge_stacks(struct symtab *s, const struct native_stack *ns,
		 const struct lua_segment *segs, int nsegs, struct stack *out)
{
	stack_clear(out);
	/* which native frames are one activation with a segment's C function */
	int cmatch[UNWIND_MAX_FRAMES];
	for (int i = 0; i < ns->n; i++)
		cmatch[i] = -1;
	for (int k = 0; k < nsegs; k++) {
		const struct lua_segment *sg = &segs[k];
		int i = sg->native_index;
		if (!sg->replace || sg->n == 0 || i <= 0 || i > ns->n)
			continue;
		const struct frame *c = &sg->f[0];
		if (c->kind != FRAME_C || c->addr == 0)
			continue;
		struct sym_info si;
		const struct native_frame *nf = &ns->f[i - 1];
		int ret = !(nf->flags & NF_LEAF);
		symtab_lookup(s, nf->pc, ret, &si);
		if (si.func_start == c->addr)
			cmatch[i - 1] = k;
	}
	for (int i = 0; i < ns->n; i++) {
		emit_segments(segs, nsegs, i, 0, -1, out);
		int dropk = -1;
		for (int k = 0; k < nsegs; k++)
			if (segs[k].native_index == i && segs[k].replace && i > 0 && cmatch[i - 1] == k)
				dropk = k;
		if (emit_segments(segs, nsegs, i, 1, dropk, out))
			continue;
		struct frame fr;
		merge_native_frame(s, &ns->f[i], &fr);
		if (cmatch[i] >= 0) {
			const struct frame *c = &segs[cmatch[i]].f[0];
			fr.kind = FRAME_C;
			if (fr.name[0] == '[' && c->name)
				fr.name = c->name; /* stripped: the Lua side knows it better */
		}
		stack_push(out, &fr);
	}
	/* segments anchored past the end of the native stack (unwinding stopped early) */
	for (int k = 0; k < nsegs; k++)
		if (segs[k].native_index >= ns->n)
			for (int j = 0; j < segs[k].n; j++)
				stack_push(out, &segs[k].f[j]);
	return out->n;
}
