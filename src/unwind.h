/* unwind.h: native unwinding behind one small interface.
 *
 * The backend (unwind_libdw.c: libdw's DWARF CFI unwinder over
 * .eh_frame/.debug_frame, vDSO included; unwind_libunwind.c for
 * comparison) walks a thread's native stack
 * from its registers, reading memory through a struct mem: normally an
 * overlay of the stack copy taken while the thread was stopped, so the
 * thread can be resumed before unwinding. Code with no CFI (LuaJIT trace
 * mcode, JIT code in anonymous mappings) does not end the walk: the copy
 * is scanned upwards for a return address into a file-backed module and
 * the walk restarts there (docs/sampling.md §5.3); only an address just
 * after a call instruction is taken. A return address outside every
 * executable mapping ends the walk (truncated): it never becomes a
 * frame. A stack never spans two mappings: a walk that leaves the
 * mapping of the leaf's rsp has passed the base of a fiber stack (or
 * read garbage) and stops there; so does a frame that is a fiber's entry
 * (docs/hosts.md §6). */
#ifndef LUASPY_UNWIND_H
#define LUASPY_UNWIND_H

#include <stdint.h>
#include <sys/user.h>
#include "proc_mem.h"

struct symtab;

#define UNWIND_MAX_FRAMES 256

/* DWARF register numbers on x86_64 for native_frame.regs[] */
enum { UREG_RBX = 0, UREG_RBP, UREG_R12, UREG_R13, UREG_R14, UREG_R15, UREG_NREGS };

#define NF_LEAF      1  /* innermost frame: pc is where it stopped, not a return address */
#define NF_RESTART   2  /* found by scanning the stack after a frame with no CFI */
#define NF_NOCFI     4  /* pc has no module / no CFI (JIT code, garbage) */
#define NF_INTERRUPTED 8 /* a signal interrupted this frame: pc is where it
                          * stopped (not a return address), as a leaf's */
#define NF_SIGFRAME 16  /* the kernel's signal frame: the handler above it
                         * returns to the trampoline (glibc __restore_rt,
                         * CIE augmentation "S") that restores the
                         * interrupted frame below; named "<signal handler
                         * called>" (docs/naming.md) */

struct native_frame;
/* 1 when F's pc is a return address (look its function and line up at pc -
 * 1), 0 when it is where the frame stopped: the leaf, or a frame a signal
 * interrupted. */
static inline int nf_is_return(const struct native_frame *f);

struct native_frame {
	uint64_t pc;                 /* leaf: current pc; others: return address */
	uint64_t sp;                 /* rsp while this frame runs (callee's CFA) */
	uint64_t regs[UREG_NREGS];   /* callee-saved registers as recovered by CFI */
	unsigned regs_valid;         /* bit i set when regs[i] is known */
	unsigned flags;              /* NF_* */
};

static inline int nf_is_return(const struct native_frame *f)
{
	return !(f->flags & (NF_LEAF | NF_INTERRUPTED));
}

struct native_stack {
	struct native_frame f[UNWIND_MAX_FRAMES]; /* innermost first */
	int n;
	int truncated;               /* the walk ended on an error, not at the outermost frame */
	int fiber;                   /* the walk ended cleanly at the base of a stack
	                              * that is not the thread's own (makecontext,
	                              * boost.context, a coroutine library): the
	                              * outermost frame is the fiber's entry; shown
	                              * as a "[fiber stack]" root (docs/hosts.md §6) */
};

/* Do the 8 code bytes B that end just before an address end in an
 * x86_64 call (e8 rel32, or ff /2 in its register and memory forms)?
 * 1 or 0. Exported for the unit test. */
int unwind_after_call(const uint8_t b[8]);

/* Optional predicate for restarts after no-CFI code: is ADDR a plausible
 * return address to restart at? (e.g. inside the LuaJIT VM). NULL means
 * any address; either way the address must be in a file-backed
 * executable mapping just after a call instruction. */
typedef int (*unwind_restart_fn)(void *arg, uint64_t addr);

struct unwinder;

/* Create an unwinder for the process whose modules S knows. 0 or -LS_E_*. */
int unwind_open(struct symtab *s, struct unwinder **out);
void unwind_close(struct unwinder *u);
/* Name of the backend in use: "libdw" (default) or "libunwind"
 * (environment LUASPY_UNWINDER=libunwind, for benchmarks). */
const char *unwind_backend_name(const struct unwinder *u);

/* Unwind thread TID from REGS reading memory through M (bounded to
 * UNWIND_MAX_FRAMES). Fills OUT; OUT->truncated is 1 when the walk did
 * not reach the outermost frame (an unwind error, UNWIND_MAX_FRAMES
 * frames, a garbage return address, 8 restarts after no-CFI code): the
 * frames found are kept, and --stats and dump say so. OUT->fiber is 1
 * (and truncated 0) when it ended at the base of a fiber stack instead:
 * an entry address pushed by makecontext (a return address at the very
 * start of a function, not after a call), a frame of a known fiber entry
 * (make_fcontext, jump_fcontext, ontop_fcontext, __start_context,
 * coro_init), or the next frame's sp out of the leaf's stack mapping
 * when that mapping is not the thread's own stack (the main thread's
 * [stack], or the mapping holding its thread pointer fs_base: glibc
 * keeps struct pthread at the top of a thread's stack). Returns frames
 * found (>= 1 when REGS has a pc) or -LS_E_*. RESTART/ARG: see
 * unwind_restart_fn. */
int unwind_stack(struct unwinder *u, pid_t tid, const struct user_regs_struct *regs,
		 struct mem *m, unwind_restart_fn restart, void *arg, struct native_stack *out);

#endif
