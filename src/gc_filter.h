/* gc_filter.h: record --gc, "who makes the collector work": tell the
 * samples taken while the VM collects garbage from the others, per
 * target (docs/gc.md).
 *
 *   LuaJIT   g->vmstate == ~LJ_VMST_GC (lj_obj.h; set by lj_gc_step,
 *            lj_gc_fullgc in lj_gc.c, also when lj_gc_step_jit runs the
 *            step from a trace): walk_info.vmstate "GC".
 *   PUC Lua  a native frame's pc inside one of the collector's entry
 *            functions (lgc.c: luaC_step, luaC_fullgc; 5.2 luaC_forcestep,
 *            5.2/5.4 luaC_changemode): by symbol when the module has
 *            them (.symtab, a -dbg file), else the functions lua_gc
 *            (lapi.c, exported) calls directly, decoded from its code.
 * The Lua frames of such a sample are those of the code whose
 * allocation ran the step. */
#ifndef LUASPY_GC_FILTER_H
#define LUASPY_GC_FILTER_H

#include <stddef.h>
#include <stdint.h>
#include "vm.h"

#define GC_MAX_RANGES 8                 /* entry functions kept per target */
#define GC_MAX_TARGETS 64               /* targets remembered per filter (then reused) */
#define GC_SCAN_MAX_BYTES 4096          /* bytes of lua_gc decoded at most */

/* The collector's code in one target. */
struct gc_code {
	int luajit;                     /* 1: by vmstate, no ranges */
	int n;                          /* ranges in start[], end[] */
	uint64_t start[GC_MAX_RANGES];  /* target addresses, [start, end) */
	uint64_t end[GC_MAX_RANGES];
	const char *how;                /* static: "vmstate", "symbols",
	                                 * "lua_gc callees" */
};

/* Find the collector's code in T (T->vm set, its modules read). For PUC
 * Lua: symbols first, unless NO_SYMBOLS (tests: the stripped path on a
 * build that has them); else lua_gc's direct call targets (x86-64 `e8`
 * and `e9` rel32 in lua_gc's FDE range, at most GC_SCAN_MAX_BYTES, read
 * from T's memory) that start an FDE of the same module, are not
 * lua_gc, and carry no exported API name (lua_*, luaL_*). Returns 0
 * with *OUT, or -LS_E_UNSUPPORTED with WHY (one line) when no range
 * was found, -LS_E_* on a read error. Reads only code; never stops T. */
int gc_code_find(struct target *t, int no_symbols, struct gc_code *out, char *why, size_t whylen);

/* Was the sample in the collector? INFO and LW from the walk (LW may
 * be NULL; LuaJIT sets lw->vm_gc also when the walk found no Lua
 * frame), ST the sample's merged stack (innermost first; PUC Lua: a
 * native frame in the collector's code with no Lua or C function
 * frame inside it: a finalizer the collector called runs code of its
 * own). 1 yes, 0 no. */
int gc_code_sample_in_gc(const struct gc_code *gc, const struct walk_info *info,
			 const struct lua_walk *lw, const struct stack *st);

/* The filter of a session: one struct gc_code per target met, learned
 * on its first sample, and what was left out. */
struct gc_filter {
	int no_symbols;                 /* LUASPY_GC_NO_SYMBOLS set */
	struct {
		const struct target *t;
		pid_t pid;
		unsigned long long start; /* the process's start time: pid + start is one process */
		int rc;                 /* gc_code_find's result */
		struct gc_code code;
	} tg[GC_MAX_TARGETS];
	int n;
	unsigned reuse;                 /* next slot to reuse once tg[] is full */
	uint64_t kept;                  /* samples in the collector, kept */
	uint64_t kept_no_lua;           /* of them: no Lua frame (counted, kept) */
	uint64_t cut;                   /* in the collector, but no Lua frame and
	                                 * the native walk cut short: whose step
	                                 * it was is not known (left out) */
	uint64_t outside;               /* samples outside the collector, left out */
	uint64_t unknown;               /* samples of targets whose collector code
	                                 * was not found, left out */
};

/* Decide for one sample of target T (INFO, LW, ST as for
 * gc_code_sample_in_gc; NS its native frames, for whether their walk
 * was cut short): returns 1 to keep it (in the
 * collector), 0 to leave it out; counts either way. Learns T's code on
 * its first sample (msg_debug(1) says how), keyed by T, its pid and
 * START, its process's start time (/proc stat field 22; a reused pid
 * or target struct is another process). */
int gc_filter_keep(struct gc_filter *f, struct target *t, unsigned long long start, const struct walk_info *info,
		   const struct lua_walk *lw, const struct native_stack *ns, const struct stack *st);

/* Check T (may be NULL; START its process's start time, /proc stat
 * field 22, as for gc_filter_keep) before sampling starts, and read
 * LUASPY_GC_NO_SYMBOLS: 0 when T's collector can be told apart (or T
 * has no VM yet: learned on its first sample), else gc_code_find's
 * -LS_E_* with WHY; T is then forgotten. */
int gc_filter_check(struct gc_filter *f, struct target *t, unsigned long long start, char *why, size_t whylen);

#endif
