/* vm.h: the interface every Lua VM family implements (vm_luajit*.c,
 * vm_puc*.c), and the target process they work on.
 *
 * Life of a sample for one thread (sampler.c):
 *   stopped:  registers, copy of the top of the C stack, ops->capture()
 *   resumed:  native unwind from the copy (unwind.h), ops->walk() turns
 *             native frames + Lua frames into one merged stack (merge.h)
 * Walkers read the target only through struct mem and treat everything
 * they read as untrusted: bounded loops, validated pointers and tags, an
 * error for the sample instead of a guess. */
#ifndef LUASPY_VM_H
#define LUASPY_VM_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/user.h>
#include "frame.h"
#include "proc_mem.h"
#include "unwind.h"
#include "merge.h"
#include "target.h"

struct symtab;
struct proc_maps;

/* What one sample captured of one thread. */
struct thread_snap {
	pid_t tid;
	char state;                     /* scheduler state when sampled */
	struct user_regs_struct regs;
	uint64_t stack_addr;            /* target address of stack[0] (= rsp) */
	uint8_t *stack;                 /* copy of the top of the C stack */
	size_t stack_len;
	struct mem_overlay ov;          /* stack copy over the page cache */
	struct mem_cache pages;         /* per-sample page cache over the live
	                                 * reader (target_sample_reader) */
	struct mem *mem;                /* = &ov.base: read the target through this */
	struct native_stack native;     /* unwound native frames, innermost first */
	struct lua_walk lw;             /* the walk's Lua segments (vm_ops.walk) */
	uint8_t vm_data[512];           /* walker-private data from capture() */
	uint8_t *xbuf;                  /* copies made by snap_copy() while stopped */
	size_t xlen;                    /* bytes of xbuf in use (capacity SNAP_COPY_MAX) */
	int held;                       /* the walk runs while the thread is stopped
	                                 * (--blocking, dump): no heap scans now, ask
	                                 * for them with walk_info.discover */
	int after;                      /* capture() runs after the sample, the
	                                 * thread running on (the perf sampler's
	                                 * copies): the registers and the stack
	                                 * copy are the sample's, the heap is
	                                 * not; 0 for ptrace samples */
	int want_vars;                  /* set by the caller before the sample (dump
	                                 * --locals): the walk keeps what
	                                 * vm_ops.locals needs of its Lua frames */
};

#define SNAP_COPY_MAX (256u * 1024)    /* bytes snap_copy() may copy per sample */

/* For capture(): while the thread is stopped, copy LEN bytes at target
 * ADDR (e.g. the Lua stack slots in use, a CallInfo chain) so that later
 * reads of that range through TS->mem see this consistent copy instead of
 * the running target. At most SNAP_COPY_MAX bytes per sample and 19
 * regions besides the C stack. Returns bytes copied (may be short at an
 * unmapped end) or -LS_E_* (-LS_E_NOMEM when the budget is spent). */
ssize_t snap_copy(struct target *t, struct thread_snap *ts, uint64_t addr, size_t len);

/* For capture(): like snap_copy() for LEN bytes at target ADDR that the
 * walker has just read into DATA while the thread is stopped (no second
 * read). 0, or -LS_E_NOMEM when the budget or the regions are spent. */
int snap_keep(struct thread_snap *ts, uint64_t addr, const void *data, size_t len);

/* What the VM was doing when sampled, as a class (session stats, top).
 * The walker's label (walk_info.vmstate) says more. */
enum vm_state {
	VMS_INTERP = 0,                 /* interpreting bytecode */
	VMS_TRACE,                      /* running JIT-compiled code (a trace) */
	VMS_C,                          /* in a C function called from Lua */
	VMS_GC,                         /* in the garbage collector */
	VMS_OTHER,                      /* anything else, or not known */
	VMS_NCLASSES
};

/* What a walk wants discovery (vm_ops.discover) to do once the thread is
 * released; bits of walk_info.discover. */
#define VM_DISC_STATES 0x1              /* Lua ran on a state not known: look for states */
#define VM_DISC_NAMES  0x2              /* a C function had no name: learn names again */
#define VM_DISC_COROS  0x4              /* a coroutine not known: refresh the list */

/* What a walk learned beyond the frames. */
struct walk_info {
	const char *vmstate;            /* interned: "interpreter", "C", "GC",
	                                 * "trace exit", "recording", "trace", "idle"... or NULL */
	enum vm_state state;            /* the class of vmstate (VMS_OTHER when NULL) */
	int trace;                      /* JIT trace number running, 0 = none */
	int lua_frames;                 /* Lua frames emitted (0: thread not in Lua) */
	unsigned discover;              /* VM_DISC_* wanted after the release */
	/* record --coroutines (merge_coroutine_root, docs/coroutines.md):
	 * the Lua thread (lua_State) the innermost Lua frame ran in */
	uint64_t coro;                  /* its address, 0 = not known (no Lua frame) */
	int coro_main;                  /* 1: a state's main thread (LuaJIT: the
	                                 * lua_State in GG_State, lj_state.c; PUC:
	                                 * G(L)->mainthread) */
	struct frame coro_body;         /* its outermost Lua frame walked, the body
	                                 * function when the walk reached the
	                                 * thread's bottom (kind FRAME_LUA), else
	                                 * kind 0 */
};

struct vm;
struct heap_state;

/* Called by vm_ops.coroutines for each coroutine: its address, status,
 * Lua stack, and 0 or the -LS_E_* that stopped its walk (ST then holds
 * the frames walked before it). */
typedef void vm_coroutine_fn(void *arg, uint64_t addr, const char *status,
			     const struct stack *st, int err);

/* One variable of a Lua frame, as vm_ops.locals reports it. */
struct vm_var {
	int upvalue;                    /* 0 local (or vararg, temporary), 1 upvalue */
	const char *name;               /* "n", "(vararg)", "(temporary)"; NULL: no
	                                 * debug info (stripped prototype) */
	uint64_t func_proto;            /* the value is a Lua function: its prototype
	                                 * (names a coroutine's body), else 0 */
	const char *value;              /* printable ASCII (vm_value_*() below:
	                                 * vm_locals_value.c): 42, "a\"b", table: 0x... */
};

/* Called by vm_ops.locals for each Lua frame of the walk, innermost
 * first: PROTO is the prototype's address (= frame.addr of its FRAME_LUA
 * frame), LINE its current line (0 unknown), VARS[0..NVARS) its active
 * locals then upvalues; NOTE is NULL or one line about what is missing
 * ("stripped: no local names", "pc unknown: locals not shown"). The
 * strings live until FN returns. */
typedef void vm_vars_fn(void *arg, uint64_t proto, int32_t line, const struct vm_var *vars,
			int nvars, const char *note);

/* Value texts for struct vm_var (vm_locals_value.c). */
/* Lua's own text of string S, quoted and escaped for any terminal and
 * any JSON or SVG consumer: LEN bytes of it were read, FULL_LEN is its
 * real length (a cut string ends in `..." (N bytes)`). Printable ASCII
 * stays (`"` and `\` escaped), \n \r \t as such, every other byte
 * (control, invalid or valid UTF-8 alike) as \xNN. Writes at most
 * OUTLEN bytes with the NUL into OUT; returns OUT. */
char *vm_value_string(char *out, size_t outlen, const void *s, size_t len, size_t full_len);

/* A number as Lua's tostring prints it: "%.14g"; FLOAT_MARK (5.3, 5.4
 * floats) adds ".0" to a float that looks like an integer; inf, -inf,
 * nan (LuaJIT, 5.1: "nan" or "-nan" as printf gives). Returns OUT. */
char *vm_value_number(char *out, size_t outlen, double v, int float_mark);

struct vm_ops {
	const char *family;             /* "luajit", "puc" */
	/* Look for this family's VM in T. Returns 1 and *OUT when found, 0
	 * when T holds no VM of this family, or -LS_E_UNSUPPORTED (a VM of
	 * this family in a layout we do not know) with WHY filled (one line,
	 * what was found). FLAGS: VM_PROBE_* as given to vm_probe(). Logs
	 * each step with msg_debug(1, ...). */
	int (*probe)(struct target *t, unsigned flags, struct vm **out, char *why, size_t whylen);
	/* Called while thread TS is stopped, after registers and stack copy:
	 * copy into TS->vm_data what the walk needs that changes while the
	 * thread runs (VM state, current L, base, pc...). May be NULL. */
	int (*capture)(struct vm *vm, struct target *t, struct thread_snap *ts);
	/* Walk TS's Lua frames into W (empty on entry) as segments anchored
	 * to TS->native (merge.h); the sampler merges them with the native
	 * frames, once. The walker reads discovery state and asks for the
	 * rest in INFO->discover; one exception: LuaJIT's walk of a thread
	 * already released (not --blocking) that meets a C function or
	 * builtin with no name learns the names of the states it met first
	 * (lj_learn_now, docs/luajit.md §8.6), so that a record's first
	 * sample is named like the others. It may rewrite
	 * TS->native from a restart point on (LuaJIT: past trace mcode,
	 * which has no CFI). Returns 0, or -LS_E_* (an error sample). A
	 * thread not running Lua: 0, no segments, INFO->lua_frames = 0. */
	int (*walk)(struct vm *vm, struct target *t, struct thread_snap *ts,
		    struct lua_walk *w, struct walk_info *info);
	/* One-line description: "LuaJIT 2.1 GC64 (upstream, Debian 2022)", "Lua 5.4.4". */
	const char *(*describe)(struct vm *vm);
	/* Optional: every coroutine found (dump --all-coroutines); may be NULL.
	 * Calls FN for each with its status ("running", "suspended", "normal",
	 * "dead") and its Lua stack (one deeper than MERGE_KEEP_FRAMES keeps
	 * both ends around "<elided N frames>"). HELD[0..NHELD) are the
	 * threads of T the caller holds stopped for the whole call, as
	 * sampled (registers, capture()): then the list is one moment with
	 * their stacks, and a coroutine running on one of them is walked from
	 * its registers. Bounded: when a bound stops the list, *CUT says
	 * which (static text, e.g. "more than 4096 coroutines"), else NULL.
	 * Returns count or -LS_E_*. */
	int (*coroutines)(struct vm *vm, struct target *t, const struct thread_snap *held,
			  int nheld, vm_coroutine_fn *fn, void *arg, const char **cut);
	/* Optional: discovery, never inside a stop window or a walk: finding
	 * states (a heap scan, up to hundreds of ms on a large heap), learning
	 * C function names again, refreshing coroutines. WHAT is the VM_DISC_*
	 * bits walks asked for since the last call. The sampler calls it after
	 * the release, at most as often as its back-off allows (sampler.c).
	 * Returns how many new things it found (states, names...): 0 makes the
	 * back-off longer. May be NULL. */
	int (*discover)(struct vm *vm, struct target *t, unsigned what);
	/* Optional (dump --locals): the variables of the Lua frames of the
	 * last walk() of TS, which ran with TS->want_vars set: calls FN once
	 * per Lua frame, innermost first. Call it while TS's thread is still
	 * stopped (the values are read now, through TS->mem) and before any
	 * other capture or walk. TS NULL: from inside a vm_coroutine_fn
	 * callback, the frames of the coroutine it reports (read live: call
	 * it while the threads are held). Strings are cut at STR_MAX_BYTES bytes (the
	 * cut is shown), every read is bounded and validated. Names from the
	 * prototype's debug info (PUC: locvars by pc, luaF_getlocalname in
	 * lfunc.c; LuaJIT: varinfo, debug_varname in lj_debug.c; docs/locals.md).
	 * Returns the frames reported or -LS_E_*. May be NULL. */
	int (*locals)(struct vm *vm, struct target *t, struct thread_snap *ts,
		      size_t str_max_bytes, vm_vars_fn *fn, void *arg);
	void (*close)(struct vm *vm);
	/* Optional (luaspy heap): walk the heap of every state known, reading
	 * through M (a block cache over T's reader), FLAGS HEAP_WANT_* of
	 * heap.h (HEAP_WANT_NAMES: name every node, for -f heapsnapshot);
	 * the caller keeps the
	 * threads of T stopped meanwhile. Fills *OUT with a calloc'ed array of
	 * one struct heap_state per state walked (heap.h), objects and
	 * references added (the caller runs heap_graph_finish once the
	 * threads run again, frees each with heap_state_free, then the array). Returns how many, or
	 * -LS_E_* (UNSUPPORTED: a layout whose heap is not described).
	 * Sizes and lists per release: docs/heap.md. May be NULL. */
	int (*heap)(struct vm *vm, struct target *t, struct mem *m, unsigned flags,
		    struct heap_state **out);
};

extern const struct vm_ops vm_luajit_ops;
extern const struct vm_ops vm_puc_ops;

/* Flags of vm_probe() and vm_ops.probe (target_open() takes them too,
 * 0 meaning no probe at all). */
#define VM_PROBE       0x1              /* look for a VM */
#define VM_PROBE_QUICK 0x2              /* record, top: the probe may leave its slow
                                         * search for states (a heap scan of up to
                                         * 512 MiB) to discovery (vm_ops.discover),
                                         * which runs it only when the samples found
                                         * no state from registers or cframes. Without
                                         * it (dump: one sample per thread, no later
                                         * discovery to catch up) the probe scans at once. */

/* One JIT trace of a LuaJIT VM, as vm_luajit_traces() reads it. */
struct vm_trace {
	uint64_t g;                     /* the global_State it belongs to */
	int n;                          /* trace number (GCtrace.traceno) */
	uint64_t mcode;                 /* target address of its machine code */
	uint32_t size;                  /* bytes of machine code (szmcode) */
	const char *file;               /* interned short source of its start
	                                 * prototype ("app.lua"), never NULL */
	int line;                       /* line of its start instruction
	                                 * (lj_debug_line), 0 unknown */
};
typedef void vm_trace_fn(void *arg, const struct vm_trace *tr);

/* Call FN for every JIT trace of every LuaJIT state found in T (a running
 * target: no thread is stopped; each trace is read and checked on its
 * own: a GCtrace object, mcode in an executable mapping of T, 1 byte to
 * 16 MiB of it, a valid start prototype, lj_trace.c's J->trace[] holds
 * it; one torn or flushed is skipped). Returns the traces reported (>= 0),
 * or -LS_E_NOTLUA when T's VM is not LuaJIT. Layout: lj_jit.h (GCtrace,
 * J->trace, J->sizetrace; docs/luajit.md §3.5). */
int vm_luajit_traces(struct target *t, vm_trace_fn *fn, void *arg);

/* Probe T with every family, with FLAGS (VM_PROBE_*). Returns 0 (t->vm
 * set), -LS_E_NOTLUA, or -LS_E_UNSUPPORTED with WHY filled. */
int vm_probe(struct target *t, unsigned flags, char *why, size_t whylen);

#endif
