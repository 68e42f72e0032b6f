/* merge.h: combining native frames and Lua segments into one stack.
 *
 * A walker splits the Lua frames of a thread into segments, one per
 * native frame of the VM that runs them (LuaJIT: a frame whose pc is in
 * the VM code, its rsp a cframe; PUC: a luaV_execute frame), and hands
 * them to merge_stacks(), which emits, innermost first, native frames
 * with the VM frames replaced by their Lua segments. */
#ifndef LUASPY_MERGE_H
#define LUASPY_MERGE_H

#include "frame.h"
#include "unwind.h"

struct symtab;

struct lua_segment {
	int native_index;    /* index in the native stack of the frame this segment belongs to */
	int replace;         /* 1: the segment replaces that native frame (it is the VM);
	                      * 0: the segment is inserted just inside (above) it */
	struct frame *f;     /* Lua frames of the segment, innermost first */
	int n;
};

/* Symbolize native frame NF into OUT (kind FRAME_NATIVE): symbol name
 * when its size covers the pc, else "[unknown]" (file-backed) or
 * "[anon:0x...]"/"[jit]" for code outside any module. */
void merge_native_frame(struct symtab *s, const struct native_frame *nf, struct frame *out);

/* Build the merged stack of NS and SEGS (NSEGS, in any order) into OUT
 * (cleared first). When a segment's innermost frame is FRAME_C with
 * addr = the C function's address and the native frame just inside the
 * VM frame starts at that address, the two are one activation: the
 * native frame is kept, named by its symbol (or by the Lua name when it
 * has none), with kind FRAME_C, and the Lua-side copy is dropped.
 * Returns the number of frames, or -LS_E_NOMEM. */
int merge_stacks(struct symtab *s, const struct native_stack *ns,
		 const struct lua_segment *segs, int nsegs, struct stack *out);

#endif
