/* unwind.c: native unwinding policy over a backend (libdw by default,
 * libunwind-ptrace with LUASPY_UNWINDER=libunwind for comparison):
 * frameless leaves inside hand-written VM code, restarts after code with
 * no CFI (JIT traces), hard bounds. */
#include <stdlib.h>
#include <string.h>
#include "elf_sym.h"
#include "err.h"
#include "proc_maps.h"
#include "unwind.h"
#include "unwind_backend.h"

struct unwinder {
	const struct unwind_backend *b;
	void *impl;
	struct symtab *sym;
};

int unwind_open(struct symtab *s, struct unwinder **out)
{
	struct unwinder *u = calloc(1, sizeof *u);
	if (!u)
		return -LS_E_NOMEM;
	const char *want = getenv("LUASPY_UNWINDER");
	u->b = want && !strcmp(want, "libunwind") ? &unwind_libunwind_backend : &unwind_libdw_backend;
	u->sym = s;
	int rc = u->b->open(s, &u->impl);
	if (rc < 0) {
		free(u);
		return rc;
	}
	*out = u;
	return 0;
}

void unwind_close(struct unwinder *u)
{
	if (!u)
		return;
	u->b->close(u->impl);
	free(u);
}

const char *unwind_backend_name(const struct unwinder *u)
{
	return u->b->name;
}

/* Is ADDR in an executable, file-backed mapping? */
static int in_file_code(const struct proc_maps *maps, uint64_t addr)
{
	const struct proc_map *m = proc_maps_find(maps, addr);
	return m && (m->perms & MAP_X) && proc_map_is_file(m);
}

/* Is ADDR in an executable mapping (file-backed or not)? */
static int in_code(const struct proc_maps *maps, uint64_t addr)
{
	const struct proc_map *m = proc_maps_find(maps, addr);
	return m && (m->perms & MAP_X);
}

/* Length of an "ff /2" (call r/m64) instruction from its ModRM byte and
 * the byte after it (the SIB byte when there is one). */
static int call_ff_len(uint8_t modrm, uint8_t sib)
{
	int mod = modrm >> 6, rm = modrm & 7, len = 2;
	if (mod == 3)
		return len;
	if (rm == 4) {
		len++;
		if (mod == 0 && (sib & 7) == 5)
			len += 4;
	}
	if (mod == 0 && rm == 5)
		len += 4;
	else if (mod == 1)
		len += 1;
	else if (mod == 2)
		len += 4;
	return len;
}

/* Do the 8 bytes B before a return address end with an indirect call
 * ("ff /2": through a register or memory)? */
static int after_indirect_call(const uint8_t b[8])
{
	for (int len = 2; len <= 7; len++) {
		int at = 8 - len;
		if (b[at] != 0xff || ((b[at + 1] >> 3) & 7) != 2)
			continue;
		if (call_ff_len(b[at + 1], at + 2 < 8 ? b[at + 2] : 0) == len)
			return 1;
	}
	return 0;
}

int unwind_after_call(const uint8_t b[8])
{
	return b[3] == 0xe8 /* call rel32 */ || after_indirect_call(b);
}

/* Is ADDR a return address: in file-backed code and just after a call
 * instruction (the bytes before it are read from the target)? Data that
 * happens to point into .text is not taken. */
static int is_return_address(const struct proc_maps *maps, struct mem *m, uint64_t addr)
{
	uint8_t b[8];
	if (!in_file_code(maps, addr) || addr < 8 || !in_file_code(maps, addr - 8) ||
	    mem_read(m, addr - 8, b, sizeof b) < 0)
		return 0;
	return unwind_after_call(b);
}

/* Functions that start a fiber's stack: the frame that runs them is the
 * outermost of that stack; what the CFI finds above it belongs to no
 * stack (boost.context's make_fcontext holds the trampoline and the
 * `finish' code that a fiber returns into; glibc's __start_context is
 * where a makecontext function returns; libcoro's coro_init starts a
 * Tarantool fiber). */
static const char *const fiber_entries[] = {
	"make_fcontext", "jump_fcontext", "ontop_fcontext", "__start_context", "coro_init",
};

/* Is native frame F (not the leaf) the entry of a fiber stack: a known
 * entry function, or a return address at the very first byte of a
 * function that no call instruction precedes (an address pushed as a
 * return address by makecontext, not by a call)? */
static int fiber_entry(struct unwinder *u, struct mem *m, const struct native_frame *f)
{
	struct sym_info si;
	int ret = nf_is_return(f);
	symtab_lookup(u->sym, f->pc, ret, &si);
	if (si.name)
		for (size_t k = 0; k < sizeof fiber_entries / sizeof fiber_entries[0]; k++)
			if (!strcmp(si.name, fiber_entries[k]))
				return 1;
	/* a pushed entry point: pc is the first byte of a function, so pc -
	 * 1 (where a return address is looked up) lies in the function
	 * before it; an ordinary return address lies inside the function of
	 * pc - 1 and costs nothing more */
	if (ret && si.func_end > f->pc)
		return 0;
	if (symtab_fde_start(u->sym, f->pc, NULL) != f->pc)
		return 0;
	uint8_t b[8];
	return f->pc >= 8 && mem_read(m, f->pc - 8, b, sizeof b) == 0 && !unwind_after_call(b);
}

/* End OUT at the base of the stack the leaf runs on (see unwind_stack):
 * the first fiber entry frame ends it; so does a frame whose sp leaves
 * the mapping of REGS->rsp, unless the walk went on to end cleanly
 * (WHOLE: a signal handler on an alternate stack returns to the thread's
 * stack that way): a fiber's base when that mapping is not the thread's
 * own stack, a cut walk when it is. Sets OUT->fiber and clears
 * OUT->truncated when the end is a fiber's base. */
static void stop_at_stack_base(struct unwinder *u, const struct proc_maps *maps, struct mem *m,
			       const struct user_regs_struct *regs, int whole, struct native_stack *out)
{
	const struct proc_map *sm = proc_maps_find(maps, regs->rsp);
	/* the thread's own stack: the main thread's [stack], or the mapping
	 * that holds its thread pointer (glibc puts struct pthread at the
	 * top of the stack it allocates a thread); leaving it is garbage,
	 * not a fiber's base */
	int own = sm && (!strcmp(sm->path, "[stack]") ||
			 (regs->fs_base && proc_maps_find(maps, regs->fs_base) == sm));
	for (int i = 1; i < out->n; i++) {
		if (sm && !whole && out->f[i].sp && (out->f[i].sp < sm->start || out->f[i].sp > sm->end)) {
			/* left the stack: frame i came from memory past its base */
			out->n = i;
			if (own) {
				out->truncated = 1;
			} else {
				out->fiber = 1;
				out->truncated = 0;
			}
			return;
		}
		if (fiber_entry(u, m, &out->f[i])) {
			out->n = i + 1;
			out->fiber = 1;
			out->truncated = 0;
			return;
		}
	}
}

/* Is PC in code the backend has no CFI for: no ELF module, or code that
 * cannot be read through M (a core's library missing on disk, or known
 * only by its separate debug file, whose .eh_frame is empty:
 * docs/core-files.md)? */
static int no_module(struct unwinder *u, struct mem *m, uint64_t pc)
{
	Elf *elf = NULL;
	uint8_t b;
	return symtab_module_at(u->sym, pc, &elf, NULL) == NULL || elf == NULL ||
	       mem_read(m, pc, &b, 1) < 0;
}

int unwind_code_missing(struct symtab *s, struct mem *m, uint64_t pc)
{
	uint8_t b;
	return symtab_module_at(s, pc, NULL, NULL) && mem_read(m, pc, &b, 1) < 0;
}

/* Could the call just before return address RET have entered code the
 * unwinder cannot read (a core's missing module)? Yes for an indirect
 * call (through a register, memory, the GOT), a direct call into code
 * with no CFI (no_module), and a direct call to a PLT stub
 * (`[endbr64] [bnd] jmp *disp(%rip)`): the callee is another module's.
 * A direct call to a readable function with CFI is not the frame above
 * the unreadable code: that function's own frame (found by the scan
 * first) would be. Such return addresses are what an earlier, deeper
 * call left on the stack: the dynamic linker's lazy binding (_dl_fixup
 * after `call _dl_lookup_symbol_x`) below a thread blocked in a missing
 * libc (docs/core-files.md). A function that tail-jumps into the
 * unreadable code defeats this: its caller's return address is then
 * passed over for an older one. */
static int may_call_unreadable(struct unwinder *u, struct mem *m, uint64_t ret)
{
	uint8_t b[8], t[7];
	if (ret < 8 || mem_read(m, ret - 8, b, sizeof b) < 0)
		return 0;
	if (after_indirect_call(b))
		return 1;
	if (b[3] != 0xe8)
		return 0;
	int32_t rel;
	memcpy(&rel, b + 4, 4);
	uint64_t target = ret + (uint64_t)(int64_t)rel;
	if (no_module(u, m, target) || mem_read(m, target, t, sizeof t) < 0)
		return 1;
	int k = 0;
	if (t[0] == 0xf3 && t[1] == 0x0f && t[2] == 0x1e && t[3] == 0xfa)
		k = 4; /* endbr64 */
	if (t[k] == 0xf2)
		k++;   /* bnd */
	return t[k] == 0xff && t[k + 1] == 0x25;
}

int unwind_stack(struct unwinder *u, pid_t tid, const struct user_regs_struct *regs,
		 struct mem *m, unwind_restart_fn restart, void *arg, struct native_stack *out)
{
	out->n = 0;
	out->truncated = 0;
	out->fiber = 0;
	const struct proc_maps *maps = symtab_maps(u->sym);
	struct user_regs_struct r = *regs;
	int retaddr = 0, whole = 0, lost = 0;
	for (int round = 0; round < 8 && out->n < UNWIND_MAX_FRAMES; round++) {
		int start = out->n;
		int rc = u->b->walk(u->impl, tid, &r, m, retaddr, out);
		if (out->n == start) {
			if (round == 0) { /* not even the first frame: keep the pc alone */
				memset(&out->f[0], 0, sizeof out->f[0]);
				out->f[0].pc = regs->rip;
				out->f[0].sp = regs->rsp;
				out->f[0].flags = NF_LEAF | NF_NOCFI;
				out->n = 1;
			}
			out->truncated = 1;
			break;
		}
		if (out->n >= UNWIND_MAX_FRAMES) {
			out->truncated = 1;
			break;
		}
		struct native_frame *last = &out->f[out->n - 1];
		if (out->n > 1 && !in_code(maps, last->pc)) {
			out->n--; /* garbage return address: see below */
			out->truncated = 1;
			break;
		}
		int lone_leaf = round == 0 && out->n == 1;
		if (rc == 0 && !(lone_leaf && !no_module(u, m, last->pc))) {
			whole = 1;
			break; /* reached the outermost frame */
		}
		if (!no_module(u, m, last->pc)) {
			/* A leaf the CFI does not describe: an internal subroutine of
			 * hand-written VM code (LuaJIT's lj_vm_mod runs inside the
			 * interpreter's frame after a call). Try it as a frameless
			 * leaf: return address at [rsp]. */
			uint64_t w;
			if (lone_leaf && mem_read_u64(m, regs->rsp, &w) == 0 &&
			    is_return_address(maps, m, w)) {
				r = *regs;
				r.rip = w;
				r.rsp = regs->rsp + 8;
				retaddr = 1;
				continue;
			}
			out->truncated = 1;
			break;
		}
		/* Code with no CFI (JIT traces): scan the stack upwards for a
		 * return address to restart at (docs/sampling.md §5.3). In a
		 * module whose code is missing (a core's), frames are lost on
		 * the way: the walk is cut short, whatever it finds after. */
		last->flags |= NF_NOCFI;
		if (symtab_module_at(u->sym, last->pc, NULL, NULL))
			lost = 1;
		uint64_t sp = last->sp, found = 0, where = 0, weak = 0, weak_at = 0;
		/* never past the end of the stack's mapping (a fiber stack's
		 * base: what lies above is another object) */
		const struct proc_map *sm = proc_maps_find(maps, sp);
		uint64_t sp_end = sm ? sm->end : sp + 4096 * 8;
		for (int i = 0; i < 4096 && sp && sp + 8 <= sp_end; i++, sp += 8) {
			uint64_t w;
			if (mem_read_u64(m, sp, &w) < 0)
				break;
			if ((!restart || restart(arg, w)) && is_return_address(maps, m, w)) {
				/* past a missing module's code (not JIT code,
				 * which runs in its caller's frame): the frame
				 * above it called into code it cannot read */
				if (lost && !may_call_unreadable(u, m, w)) {
					if (!weak) {
						weak = w;
						weak_at = sp;
					}
					continue;
				}
				found = w;
				where = sp;
				break;
			}
		}
		if (!found && weak) {
			found = weak;
			where = weak_at;
		}
		if (!found) {
			out->truncated = 1;
			break;
		}
		r = *regs;
		r.rip = found;
		r.rsp = where + 8;
		retaddr = 1;
	}
	/* 8 restarts used up (or the frames) before the outermost frame */
	if (!whole || lost)
		out->truncated = 1;
	for (int i = 1; i < out->n; i++) {
		out->f[i].flags &= ~NF_LEAF;
		/* a return address outside executable memory is garbage the
		 * CFI read off the stack (a Lua value, text): never a frame */
		if (!in_code(maps, out->f[i].pc)) {
			out->n = i;
			out->truncated = 1;
			break;
		}
	}
	stop_at_stack_base(u, maps, m, regs, whole, out);
	return out->n;
}
