/* frame.h: one frame of a merged native+Lua stack, and a growable stack.
 *
 * A frame is a small value. Strings are interned (intern.h) and live for
 * the whole run, so frames can be copied freely and compared by pointer.
 */
#ifndef LUASPY_FRAME_H
#define LUASPY_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum frame_kind {
	FRAME_NATIVE = 0, /* native code found by unwinding (CFI) */
	FRAME_LUA,        /* a Lua function (bytecode) */
	FRAME_C,          /* a C function called from Lua (lua_CFunction,
	                   * builtin, FFI target) */
	FRAME_VMSTATE,    /* pseudo frame: VM state leaf ([GC], [JIT trace 3]) */
	FRAME_ROOT,       /* pseudo frame: process or thread root */
	FRAME_ELIDED,     /* pseudo frame: "<elided N frames>", where merge_stacks()
	                   * cut the middle of a stack too deep to keep */
	FRAME_KIND_MAX
};

struct frame {
	uint8_t kind;          /* enum frame_kind */
	int32_t line;          /* current line (Lua) or source line (native), 0 = unknown */
	int32_t firstline;     /* Lua: line where the function is defined, 0 = unknown */
	int32_t trace;         /* LuaJIT trace number running this frame, 0 = none */
	uint64_t addr;         /* native/C: pc (or function address); Lua: the
	                        * prototype's address in the target (GCproto,
	                        * Proto), 0 unknown: it tells apart functions
	                        * defined on one line (docs/naming.md §1); not
	                        * part of a frame's identity in a profile */
	const char *name;      /* interned, never NULL: "fib", "string.format", "[unknown]" */
	const char *file;      /* interned chunkname or source file, or NULL */
	const char *module;    /* interned basename of the ELF module, or NULL */
};

/* Stack of frames, innermost first (index 0 = leaf). */
struct stack {
	struct frame *f;
	int n;
	int cap;
};

#define STACK_MAX_FRAMES 4096  /* frames kept per stack (192 KiB) */
#define STACK_ELIDE_FRAMES 1024 /* frames a full stack cuts from its middle at once */

/* Append a copy of FR to ST. A full stack (STACK_MAX_FRAMES) first cuts
 * STACK_ELIDE_FRAMES frames from its middle into one FRAME_ELIDED frame
 * "<elided N frames>" (N counts every frame cut there), so its innermost
 * and outermost frames stay. Returns 0, or -1 when memory is exhausted
 * (the frame is dropped). */
int stack_push(struct stack *st, const struct frame *fr);
void stack_clear(struct stack *st);
void stack_free(struct stack *st);

/* Human label of a frame, as shown by dump, top and the outputs:
 *   Lua:    "fib (app.lua:12)"       (line omitted when 0)
 *   C:      "string.format"  or  "cfib (cfib.so)"
 *   native: "clock_gettime (libc.so.6)"
 *   unnamed native/C code: "libfoo.so+0x1a2b3" (module and ELF offset,
 *           the module is not repeated), "[jit]", "[unknown]"
 *   vmstate/root/elided: the name itself.
 * Writes at most LEN bytes including the NUL into BUF; returns BUF.
 * WITH_LINE = 0 drops the ":line" part (per-function aggregation). */
char *frame_label(const struct frame *fr, char *buf, size_t len, int with_line);

/* Does FR carry a stand-in rather than a name: NULL, "[unknown]", an
 * address ("[C 0x...]") or "MODULE+0xOFF"? 1 or 0. ("[builtin#N]",
 * "[jit]" name what the code is: they count as names.) */
int frame_is_unnamed(const struct frame *fr);

/* Name of a frame kind for JSON ("native", "lua", "c", "vmstate", "root",
 * "elided"). */
const char *frame_kind_name(int kind);

#endif
