/* target.h: a process being profiled: its memory reader, modules,
 * unwinder and Lua VM, opened once and refreshed between samples. */
#ifndef LUASPY_TARGET_H
#define LUASPY_TARGET_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include "proc_mem.h"

struct symtab;
struct thread_snap;
struct unwinder;
struct vm;
struct vm_ops;
struct perf_proc;

/* A process being profiled. */
struct target {
	pid_t pid;
	struct proc_mem mem;            /* live reader (safe while running) */
	struct symtab *sym;             /* modules and symbols (elf_sym.h) */
	struct unwinder *unw;           /* native unwinder (unwind.h) */
	struct vm *vm;                  /* the Lua VM found, or NULL */
	const struct vm_ops *vm_ops;
	char cmdline[512];
	/* discovery back-off (sampler.c): walks' VM_DISC_* requests pending,
	 * when discovery last ran and how long to wait before the next */
	unsigned disc_want;
	uint64_t disc_ns, disc_wait_ns;
	struct perf_proc *perf;         /* its perf events (sampler_perf.h), or NULL */
};

/* Attach to PID: check it (proc_check), read its modules, create the
 * unwinder and (when PROBE_VM, VM_PROBE_* flags of vm.h) probe for a Lua VM. Returns 0 with *OUT
 * (t->vm may be NULL when no VM was found: VMRC then holds -LS_E_NOTLUA
 * or -LS_E_UNSUPPORTED and WHY the reason), or -LS_E_* when the process
 * can't be profiled. No ptrace: the process is never stopped here. The
 * caller owns *OUT and frees it with target_close(). */
int target_open(pid_t pid, int probe_vm, struct target **out, int *vmrc, char *why, size_t whylen);

/* Close T's perf events, VM, unwinder, modules and reader, and free T. NULL is a no-op. */
void target_close(struct target *t);

/* Re-read T's memory map and, when mappings came or went (dlopen, a new
 * thread stack), the module list. Call about once a second between
 * samples. Returns 1 when it refreshed, 0 when nothing changed, or -LS_E_*. */
int target_refresh(struct target *t);

/* Set up, in this one place, what the sample in TS reads T through:
 *   TS->mem   = &TS->ov, the copies taken while the thread is stopped:
 *               TS->stack (TS->stack_len bytes at TS->stack_addr; none
 *               when 0), then what capture() adds with snap_copy() and
 *               snap_keep() (vm.h), over
 *   TS->pages   the per-sample page cache, emptied here (whole 4 KiB
 *               pages, at most 64, each read once per sample; see
 *               proc_mem.h), over
 *   T->mem      the live reader.
 * CACHED 0 (--nonblocking): no page cache, the copies lie over T->mem
 * directly. Call once per sample, before capture(). Reads nothing. */
void target_sample_reader(struct target *t, struct thread_snap *ts, int cached);

#endif
