/* merge.h: combining native frames and Lua segments into one stack.
 *
 * A walker splits the Lua frames of a thread into segments, one per
 * native frame of the VM that runs them (LuaJIT: a frame whose pc is in
 * the VM code, its rsp a cframe; PUC: a luaV_execute frame), and hands
 * them (struct lua_walk) to the sampler, which calls merge_stacks() once:
 * it emits, innermost first, native frames
 * with the VM frames replaced by their Lua segments. */
#ifndef LUASPY_MERGE_H
#define LUASPY_MERGE_H

#include "frame.h"
#include "unwind.h"

struct symtab;

/* One run of Lua frames: W->f[first .. first + n), innermost first. */
struct lua_segment {
	int native_index;    /* index in the native stack of the frame this segment belongs to */
	int replace;         /* 1: the segment replaces that native frame (it is the VM);
	                      * 0: the segment is inserted just inside (above) it */
	int first;           /* index of its innermost frame in lua_walk.f */
	int n;
};

/* What a walk produced: its frames and the segments that place them.
 * Owned by the sampler, reused between samples (lua_walk_reset), grown as
 * needed up to LUA_WALK_MAX_FRAMES frames. */
struct lua_walk {
	struct frame *f;
	int nf, capf;
	struct lua_segment *seg;
	int nseg, capseg;
	/* how merge_stacks() names the VM's own native code where it has no
	 * symbol (stripped libluajit): set by the walker, cleared by
	 * lua_walk_reset() (docs/naming.md §2) */
	const char *vm_module;  /* interned basename of the module holding
	                         * the VM, or NULL (no naming) */
	uint64_t vm_start, vm_end; /* its assembler VM code (lj_vm_*), or 0, 0 */
	int vm_gc;              /* the sample's vmstate is GC */
};

#define LUA_WALK_MAX_FRAMES (1 << 20)   /* 40 MiB of frames: past it, -LS_E_NOMEM */

/* Frames a merged stack keeps at most: past it, merge_stacks() keeps its
 * innermost and outermost frames and puts one FRAME_ELIDED frame
 * "<elided N frames>" in between. Below STACK_MAX_FRAMES, so that the
 * sampler's pseudo frames (vmstate, thread and process roots) still fit. */
#define MERGE_KEEP_FRAMES (STACK_MAX_FRAMES - 8)

/* Start a new segment for native frame NATIVE_INDEX (REPLACE as above);
 * lua_walk_push() appends to it. Returns 0 or -LS_E_NOMEM. */
int lua_walk_segment(struct lua_walk *w, int native_index, int replace);
/* Append FR to the newest segment (one is opened at native index 0,
 * replace 1, when there is none). Returns 0 or -LS_E_NOMEM. */
int lua_walk_push(struct lua_walk *w, const struct frame *fr);
/* Lua frames in W. */
int lua_walk_frames(const struct lua_walk *w);
void lua_walk_reset(struct lua_walk *w);
void lua_walk_free(struct lua_walk *w);


/* Symbolize native frame NF into OUT (kind FRAME_NATIVE): symbol name
 * when its size covers the pc, else "MODULE+0xOFF" (OFF: ELF address of
 * the function start from the CFI, else of the pc; stable across runs),
 * the target's perf map or jitdump name with module "[perf-map]" or
 * "[jitdump]" for anonymous executable memory they cover
 * (symtab_perfmap_name(); in merge_stacks()
 * a "TRACE_" name gives way to "[jit]" when a LuaJIT walker ran), else
 * "[jit]" for anonymous executable memory, "[unknown]" for a pc in no
 * mapping read. Never an absolute address. */
void merge_native_frame(struct symtab *s, const struct native_frame *nf, struct frame *out);

/* Build the merged stack of NS and W's segments (in any order) into OUT
 * (cleared first). When a segment's innermost frame is FRAME_C with
 * addr = the C function's address and the native frame just inside the
 * VM frame starts at that address, the two are one activation and the
 * Lua-side copy is dropped. By the native frame's symbol: the native
 * frame is kept, named by its symbol (or by the Lua name when it has
 * none), with kind FRAME_C. By the FDE covering its pc only
 * (symtab_fde_start(): the symbol there is another function's, e.g. a
 * stripped static one): the Lua-side frame takes the native frame's
 * place with the native module, unless its name is a "[...]" stand-in,
 * then the native frame stays as it is.
 * A native frame without a symbol in W->vm_module is named by its role
 * (module kept): "[LuaJIT GC]" when W->vm_gc and no Lua frame or VM
 * frame is inside it, else "[LuaJIT VM]".
 * A stack longer than MERGE_KEEP_FRAMES is cut in its middle (above).
 * W may be NULL (native frames only). Returns the number of frames. */
int merge_stacks(struct symtab *s, const struct native_stack *ns,
		 const struct lua_walk *w, struct stack *out);

struct walk_info;
/* record --coroutines: the root frame (FRAME_ROOT) into OUT for the Lua
 * thread a sample ran in, from the walk's INFO (vm.h: coro, coro_main,
 * coro_body): "main" for a state's main thread, "coroutine 0xADDR BODY"
 * for a coroutine, BODY as dump --all-coroutines names it without
 * variables: "function <w.lua:2>", or "worker (w.lua:2)" when the frame
 * has a name; "coroutine 0xADDR" when the walk did not reach its body;
 * "[no Lua]" when the sample had no Lua frame. The name is made from
 * this sample's address and body every time (nothing cached: an address
 * a new coroutine reuses gets its own body's name). docs/coroutines.md. */
void merge_coroutine_root(const struct walk_info *info, struct frame *out);

#endif
