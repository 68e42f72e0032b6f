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

struct symtab;
struct proc_maps;

/* A process being profiled. */
struct target {
	pid_t pid;
	struct proc_mem mem;            /* live reader (safe while running) */
	struct symtab *sym;             /* modules and symbols (elf_sym.h) */
	struct unwinder *unw;           /* native unwinder (unwind.h) */
	struct vm *vm;                  /* the Lua VM found, or NULL */
	const struct vm_ops *vm_ops;
	char cmdline[512];
};

/* What one sample captured of one thread. */
struct thread_snap {
	pid_t tid;
	char state;                     /* scheduler state when sampled */
	struct user_regs_struct regs;
	uint64_t stack_addr;            /* target address of stack[0] (= rsp) */
	uint8_t *stack;                 /* copy of the top of the C stack */
	size_t stack_len;
	struct mem_overlay ov;          /* stack copy over the live reader */
	struct mem *mem;                /* = &ov.base: read the target through this */
	struct native_stack native;     /* unwound native frames, innermost first */
	uint8_t vm_data[512];           /* walker-private data from capture() */
	uint8_t *xbuf;                  /* copies made by snap_copy() while stopped */
	size_t xlen;                    /* bytes of xbuf in use (capacity SNAP_COPY_MAX) */
	int held;                       /* the walk runs while the thread is stopped
	                                 * (--blocking, dump): no heap scans now, ask
	                                 * for them with walk_info.discover */
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

/* What a walk learned beyond the frames. */
struct walk_info {
	const char *vmstate;            /* interned: "interpreter", "C", "GC",
	                                 * "trace exit", "recording", "trace", "idle"... or NULL */
	int trace;                      /* JIT trace number running, 0 = none */
	int lua_frames;                 /* Lua frames emitted (0: thread not in Lua) */
	int discover;                   /* the walk found no state and wants vm_ops
	                                 * discover() once the thread is released */
};

struct vm;

struct vm_ops {
	const char *family;             /* "luajit", "puc" */
	/* Look for this family's VM in T. Returns 1 and *OUT when found, 0
	 * when T holds no VM of this family, or -LS_E_UNSUPPORTED (a VM of
	 * this family in a layout we do not know) with WHY filled (one line,
	 * what was found). Logs each step with msg_debug(1, ...). */
	int (*probe)(struct target *t, struct vm **out, char *why, size_t whylen);
	/* Called while thread TS is stopped, after registers and stack copy:
	 * copy into TS->vm_data what the walk needs that changes while the
	 * thread runs (VM state, current L, base, pc...). May be NULL. */
	int (*capture)(struct vm *vm, struct target *t, struct thread_snap *ts);
	/* Produce TS's merged stack (innermost first) into OUT, from
	 * TS->native and the Lua frames. 0 or -LS_E_* (the sample is
	 * counted as an error). A thread that is not running Lua gets its
	 * native frames only and INFO->lua_frames = 0. */
	int (*walk)(struct vm *vm, struct target *t, struct thread_snap *ts,
		    struct stack *out, struct walk_info *info);
	/* One-line description: "LuaJIT 2.1 GC64 (upstream, Debian 2022)", "Lua 5.4.4". */
	const char *(*describe)(struct vm *vm);
	/* Optional: every coroutine found (dump --all-coroutines); may be NULL.
	 * Calls FN for each with its status ("running", "suspended", "normal",
	 * "dead") and its Lua stack. Bounded. Returns count or -LS_E_*. */
	int (*coroutines)(struct vm *vm, struct target *t,
			  void (*fn)(void *arg, uint64_t addr, const char *status,
				     const struct stack *st),
			  void *arg);
	/* Optional: state discovery too slow to run while a thread is held
	 * (a heap scan, up to hundreds of ms on a large heap). A walk with
	 * TS->held set that needs it sets INFO->discover instead; the sampler
	 * calls this after releasing the thread. May be NULL. */
	void (*discover)(struct vm *vm, struct target *t);
	void (*close)(struct vm *vm);
};

extern const struct vm_ops vm_luajit_ops;
extern const struct vm_ops vm_puc_ops;

/* Probe T with every family. Returns 0 (t->vm set), -LS_E_NOTLUA, or
 * -LS_E_UNSUPPORTED with WHY filled. */
int vm_probe(struct target *t, char *why, size_t whylen);

/* Set by record and top before probing: a probe may leave its slow
 * search for states (a heap scan of up to 512 MiB) to the walks, which
 * find most states from registers and do the scan only when they could
 * not. 0 (dump: one sample per thread, no later walk to catch up): the
 * probe scans at once. */
extern int vm_probe_quick;

#endif
