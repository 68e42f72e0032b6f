/* unwind_libdw.c: native unwinding with libdw (dwfl_getthread_frames)
 * over a memory reader. Chosen over libunwind-ptrace by measurement
 * (docs/sampling.md §3 and §5.2: 12 us vs 31-49 us per stack, and libdw
 * unwinds the vDSO from memory where libunwind fails). */
#include <stdlib.h>
#include <string.h>
#include <elfutils/libdwfl.h>
#include "elf_sym.h"
#include "err.h"
#include "proc_maps.h"
#include "unwind.h"
#include "unwind_backend.h"

/* x86_64 DWARF register numbers */
#define DW_RBX 3
#define DW_RBP 6
#define DW_RSP 7
#define DW_R12 12
#define DW_RIP 16

struct libdw_unwinder {
	struct symtab *sym;
	int attached;
	/* per-call state */
	pid_t tid;
	Dwarf_Word dwregs[17];
	struct mem *mem;
	struct native_stack *out;
	int restart_mode;
	int start;              /* OUT->n when this walk began */
	int act_pending;        /* index of a frame past the first with
	                         * isactivation set, not yet paired; -1 none */
};

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	return 0; /* we only ever ask for one thread via get_thread */
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct libdw_unwinder *u = arg;
	*thread_argp = u;
	return tid == u->tid;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct libdw_unwinder *u = arg;
	uint64_t v;
	if (mem_read_u64(u->mem, addr, &v) < 0)
		return false;
	*result = v;
	return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct libdw_unwinder *u = arg;
	return dwfl_thread_state_registers(thread, 0, 17, u->dwregs);
}

static const Dwfl_Thread_Callbacks callbacks = {
	.next_thread = cb_next_thread,
	.get_thread = cb_get_thread,
	.memory_read = cb_memory_read,
	.set_initial_registers = cb_set_initial_registers,
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct libdw_unwinder *u = arg;
	struct native_stack *out = u->out;
	if (out->n >= UNWIND_MAX_FRAMES) {
		out->truncated = 1;
		return DWARF_CB_ABORT;
	}
	Dwarf_Addr pc;
	bool act = false;
	if (!dwfl_frame_pc(state, &pc, &act))
		return DWARF_CB_ABORT;
	/* The frame before this one is in a module whose code cannot be
	 * read (a core's library missing on disk, known at most by its
	 * separate debug file): it has no CFI, and libdw's x86_64 fallback
	 * took this frame from rbp, which that code need not hold as a
	 * frame pointer (a stale chain through the dynamic linker put
	 * check_match above wait4). Stop here: unwind_stack() scans the
	 * stack for a return address instead (docs/core-files.md). Cores
	 * only: a live process's modules are all there, and a code read per
	 * frame would cost the sampler a system call per page (and fail
	 * for perf samples drained after the process exited). */
	if (out->n > u->start && symtab_is_core(u->sym)) {
		const struct native_frame *pf = &out->f[out->n - 1];
		if (unwind_code_missing(u->sym, u->mem, pf->pc - ((pf->flags & NF_LEAF) ? 0 : 1)))
			return DWARF_CB_ABORT;
	}
	struct native_frame *f = &out->f[out->n];
	memset(f, 0, sizeof *f);
	f->pc = pc;
	if (out->n == 0)
		f->flags |= NF_LEAF;
	if (u->restart_mode) {
		f->flags |= NF_RESTART;
		u->restart_mode = 0;
	}
	Dwarf_Word v;
	if (dwfl_frame_reg(state, DW_RSP, &v) == 0)
		f->sp = v;
	static const int dw[UREG_NREGS] = { DW_RBX, DW_RBP, 12, 13, 14, 15 };
	for (int i = 0; i < UREG_NREGS; i++)
		if (dwfl_frame_reg(state, (unsigned)dw[i], &v) == 0) {
			f->regs[i] = v;
			f->regs_valid |= 1u << i;
		}
	/* a repeated (pc, sp) pair means the CFI loops: stop */
	if (out->n > 0 && out->f[out->n - 1].pc == f->pc && out->f[out->n - 1].sp == f->sp)
		return DWARF_CB_ABORT;
	/* Past a walk's first frame libdwfl sets isactivation on exactly two
	 * frames in a row: the signal trampoline (its CIE says "S") and the
	 * frame the signal interrupted (its pc is exact). */
	if (act && out->n > u->start && !(f->flags & NF_RESTART)) {
		if (u->act_pending == out->n - 1) {
			out->f[out->n - 1].flags |= NF_SIGFRAME;
			f->flags |= NF_INTERRUPTED;
			u->act_pending = -1;
		} else {
			u->act_pending = out->n;
		}
	} else {
		u->act_pending = -1;
	}
	out->n++;
	return DWARF_CB_OK;
}

static int ldw_open(struct symtab *s, void **out)
{
	struct libdw_unwinder *u = calloc(1, sizeof *u);
	if (!u)
		return -LS_E_NOMEM;
	u->sym = s;
	*out = u;
	return 0;
}

static void ldw_close(void *impl)
{
	free(impl);
}

static void set_regs(struct libdw_unwinder *u, const struct user_regs_struct *r)
{
	Dwarf_Word *d = u->dwregs;
	d[0] = r->rax; d[1] = r->rdx; d[2] = r->rcx; d[3] = r->rbx;
	d[4] = r->rsi; d[5] = r->rdi; d[6] = r->rbp; d[7] = r->rsp;
	d[8] = r->r8; d[9] = r->r9; d[10] = r->r10; d[11] = r->r11;
	d[12] = r->r12; d[13] = r->r13; d[14] = r->r14; d[15] = r->r15;
	d[16] = r->rip;
}

/* Walk from REGS, appending frames to OUT (from OUT->n on). Returns 0 when
 * the outermost frame was reached, -1 when the walk stopped on an error. */
static int ldw_walk(void *impl, pid_t tid, const struct user_regs_struct *regs, struct mem *m,
		    int first_is_retaddr, struct native_stack *out)
{
	struct libdw_unwinder *u = impl;
	Dwfl *dwfl = symtab_dwfl(u->sym);
	if (!u->attached) {
		if (!dwfl_attach_state(dwfl, NULL, symtab_pid(u->sym), &callbacks, u))
			return -1;
		u->attached = 1;
	}
	u->tid = tid;
	u->mem = m;
	u->out = out;
	u->restart_mode = first_is_retaddr;
	u->start = out->n;
	u->act_pending = -1;
	set_regs(u, regs);
	return dwfl_getthread_frames(dwfl, tid, frame_cb, u) == 0 ? 0 : -1;
}

const struct unwind_backend unwind_libdw_backend = {
	.name = "libdw",
	.open = ldw_open,
	.close = ldw_close,
	.walk = ldw_walk,
};
