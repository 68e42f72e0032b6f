/* unwind_libdw.c: native unwinding with libdw (dwfl_getthread_frames)
 * over a memory reader. Chosen over libunwind-ptrace by measurement
 * (sampling.md: 12 us vs 31-49 us per stack, and libdw unwinds the vDSO
 * from memory where libunwind fails). */
#include <stdlib.h>
#include <string.h>
#include <elfutils/libdwfl.h>
#include "elf_sym.h"
#include "err.h"
#include "proc_maps.h"
#include "unwind.h"

/* x86_64 DWARF register numbers */
#define DW_RBX 3
#define DW_RBP 6
#define DW_RSP 7
#define DW_R12 12
#define DW_RIP 16

struct unwinder {
	struct symtab *sym;
	int attached;
	/* per-call state */
	pid_t tid;
	Dwarf_Word dwregs[17];
	struct mem *mem;
	struct native_stack *out;
	int restart_mode;
};

static pid_t cb_next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	return 0; /* we only ever ask for one thread via get_thread */
}

static bool cb_get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct unwinder *u = arg;
	*thread_argp = u;
	return tid == u->tid;
}

static bool cb_memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct unwinder *u = arg;
	uint64_t v;
	if (mem_read_u64(u->mem, addr, &v) < 0)
		return false;
	*result = v;
	return true;
}

static bool cb_set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct unwinder *u = arg;
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
	struct unwinder *u = arg;
	struct native_stack *out = u->out;
	if (out->n >= UNWIND_MAX_FRAMES) {
		out->truncated = 1;
		return DWARF_CB_ABORT;
	}
	Dwarf_Addr pc;
	bool act = false;
	if (!dwfl_frame_pc(state, &pc, &act))
		return DWARF_CB_ABORT;
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
	out->n++;
	return DWARF_CB_OK;
}

int unwind_open(struct symtab *s, struct unwinder **out)
{
	struct unwinder *u = calloc(1, sizeof *u);
	if (!u)
		return -LS_E_NOMEM;
	u->sym = s;
	*out = u;
	return 0;
}

void unwind_close(struct unwinder *u)
{
	free(u);
}

static void set_regs(struct unwinder *u, const struct user_regs_struct *r)
{
	Dwarf_Word *d = u->dwregs;
	d[0] = r->rax; d[1] = r->rdx; d[2] = r->rcx; d[3] = r->rbx;
	d[4] = r->rsi; d[5] = r->rdi; d[6] = r->rbp; d[7] = r->rsp;
	d[8] = r->r8; d[9] = r->r9; d[10] = r->r10; d[11] = r->r11;
	d[12] = r->r12; d[13] = r->r13; d[14] = r->r14; d[15] = r->r15;
	d[16] = r->rip;
}

static int default_restart(const struct proc_maps *maps, uint64_t addr)
{
	const struct proc_map *m = proc_maps_find(maps, addr);
	return m && (m->perms & MAP_X) && proc_map_is_file(m);
}

/* Does the last frame sit in code we have no CFI for? */
static int in_nocfi(struct unwinder *u, uint64_t pc)
{
	return dwfl_addrmodule(symtab_dwfl(u->sym), pc) == NULL;
}

int unwind_stack(struct unwinder *u, pid_t tid, const struct user_regs_struct *regs,
		 struct mem *m, unwind_restart_fn restart, void *arg, struct native_stack *out)
{
	Dwfl *dwfl = symtab_dwfl(u->sym);
	if (!u->attached) {
		if (!dwfl_attach_state(dwfl, NULL, symtab_pid(u->sym), &callbacks, u))
			return -LS_E_UNWIND;
		u->attached = 1;
	}
	out->n = 0;
	out->truncated = 0;
	u->tid = tid;
	u->mem = m;
	u->out = out;
	u->restart_mode = 0;
	set_regs(u, regs);
	const struct proc_maps *maps = symtab_maps(u->sym);
	for (int round = 0; round < 8; round++) {
		int start = out->n;
		int rc = dwfl_getthread_frames(dwfl, tid, frame_cb, u);
		if (out->n == start) {
			/* not even the first frame: record the pc alone */
			if (round == 0 && out->n < UNWIND_MAX_FRAMES) {
				memset(&out->f[0], 0, sizeof out->f[0]);
				out->f[0].pc = regs->rip;
				out->f[0].sp = regs->rsp;
				out->f[0].flags = NF_LEAF | NF_NOCFI;
				out->n = 1;
			}
			break;
		}
		if (out->n >= UNWIND_MAX_FRAMES)
			break;
		struct native_frame *last = &out->f[out->n - 1];
		if (rc == 0 && !(round == 0 && out->n == 1 && !in_nocfi(u, last->pc)))
			break; /* reached the outermost frame */
		if (!in_nocfi(u, last->pc)) {
			/* A leaf whose CFI does not describe it (an internal
			 * subroutine of hand-written VM code, such as LuaJIT's
			 * lj_vm_mod called inside the interpreter's frame): try it as
			 * a frameless leaf, return address at [rsp]. */
			uint64_t w;
			if (round == 0 && out->n == 1 && mem_read_u64(m, regs->rsp, &w) == 0 &&
			    default_restart(maps, w)) {
				struct user_regs_struct r2 = *regs;
				r2.rip = w;
				r2.rsp = regs->rsp + 8;
				set_regs(u, &r2);
				u->restart_mode = 1;
				continue;
			}
			out->truncated = 1;
			break;
		}
		last->flags |= NF_NOCFI;
		/* scan the stack upwards for a return address to restart at */
		uint64_t sp = last->sp, found = 0, where = 0;
		for (int i = 0; i < 4096 && sp; i++, sp += 8) {
			uint64_t w;
			if (mem_read_u64(m, sp, &w) < 0)
				break;
			if (restart ? restart(arg, w) : default_restart(maps, w)) {
				found = w;
				where = sp;
				break;
			}
		}
		if (!found) {
			out->truncated = 1;
			break;
		}
		struct user_regs_struct r2 = *regs;
		r2.rip = found;
		r2.rsp = where + 8;
		set_regs(u, &r2);
		/* the restarted leaf is a return address: mark it so symbolization uses pc-1 */
		u->restart_mode = 1;
	}
	/* frames after a restart's first are ordinary; fix the leaf flag of restarts */
	for (int i = 1; i < out->n; i++)
		out->f[i].flags &= ~NF_LEAF;
	return out->n;
}
