/* unwind_backend.h: what a native unwinding backend provides to unwind.c
 * (unwind_libdw.c, unwind_libunwind.c). unwind.c owns the policy around
 * them: frameless leaves, restarts after code without CFI, bounds. */
#ifndef LUASPY_UNWIND_BACKEND_H
#define LUASPY_UNWIND_BACKEND_H

#include <sys/types.h>
#include <sys/user.h>
#include "proc_mem.h"
#include "unwind.h"

struct symtab;

struct unwind_backend {
	const char *name;
	/* Per-process state over the modules S knows. 0 or -LS_E_*. */
	int (*open)(struct symtab *s, void **impl);
	void (*close)(void *impl);
	/* Walk thread TID from REGS reading memory through M, appending
	 * frames to OUT from OUT->n on (flags NF_RESTART on the first one
	 * when FIRST_IS_RETADDR), stopping at UNWIND_MAX_FRAMES. Returns 0
	 * when the outermost frame was reached, -1 on an error. */
	int (*walk)(void *impl, pid_t tid, const struct user_regs_struct *regs, struct mem *m,
		    int first_is_retaddr, struct native_stack *out);
};

/* Is PC in a module of S whose code cannot be read through M (a core's
 * file missing on disk, known at most by its separate debug file: no
 * CFI)? docs/core-files.md. */
int unwind_code_missing(struct symtab *s, struct mem *m, uint64_t pc);

extern const struct unwind_backend unwind_libdw_backend;
extern const struct unwind_backend unwind_libunwind_backend;

#endif
