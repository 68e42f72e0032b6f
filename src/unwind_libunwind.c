/* unwind_libunwind.c: native unwinding with libunwind-ptrace, for
 * comparison with libdw (bench/). Unwind info is found by libunwind's
 * _UPT_find_proc_info (it maps the ELF files named in /proc/PID/maps);
 * memory and registers come from our reader and the stopped registers,
 * not from PTRACE_PEEKDATA. The address space caches unwind info
 * (UNW_CACHE_GLOBAL). Known limit: no vDSO unwind info
 * (docs/sampling.md §5.2). */
#include <stdlib.h>
#include <string.h>
#include <libunwind-ptrace.h>
#include "elf_sym.h"
#include "err.h"
#include "unwind.h"
#include "unwind_backend.h"

struct lu_unwinder {
	unw_addr_space_t as;
	void *upt;                     /* _UPT context for find_proc_info */
	struct symtab *sym;
	/* per walk */
	struct mem *mem;
	const struct user_regs_struct *regs;
};

/* The unwinder of the walk in progress: libunwind passes the _UPT
 * context, not ours, as ARG to access_mem when _UPT_find_proc_info reads
 * unwind tables from the target. */
static struct lu_unwinder *cur;

static int lu_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
			 void *arg)
{
	struct lu_unwinder *u = cur;
	if (write)
		return -UNW_EINVAL;
	uint64_t v;
	if (mem_read_u64(u->mem, addr, &v) < 0)
		return -UNW_EINVAL;
	*val = v;
	return 0;
}

static int lu_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write,
			 void *arg)
{
	struct lu_unwinder *u = arg;
	const struct user_regs_struct *r = u->regs;
	if (write)
		return -UNW_EINVAL;
	switch (reg) {
	case UNW_X86_64_RAX: *val = r->rax; break;
	case UNW_X86_64_RDX: *val = r->rdx; break;
	case UNW_X86_64_RCX: *val = r->rcx; break;
	case UNW_X86_64_RBX: *val = r->rbx; break;
	case UNW_X86_64_RSI: *val = r->rsi; break;
	case UNW_X86_64_RDI: *val = r->rdi; break;
	case UNW_X86_64_RBP: *val = r->rbp; break;
	case UNW_X86_64_RSP: *val = r->rsp; break;
	case UNW_X86_64_R8: *val = r->r8; break;
	case UNW_X86_64_R9: *val = r->r9; break;
	case UNW_X86_64_R10: *val = r->r10; break;
	case UNW_X86_64_R11: *val = r->r11; break;
	case UNW_X86_64_R12: *val = r->r12; break;
	case UNW_X86_64_R13: *val = r->r13; break;
	case UNW_X86_64_R14: *val = r->r14; break;
	case UNW_X86_64_R15: *val = r->r15; break;
	case UNW_X86_64_RIP: *val = r->rip; break;
	default: return -UNW_EBADREG;
	}
	return 0;
}

static int lu_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			     int need_unwind_info, void *arg)
{
	struct lu_unwinder *u = arg;
	return _UPT_find_proc_info(as, ip, pi, need_unwind_info, u->upt);
}

static void lu_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	struct lu_unwinder *u = arg;
	_UPT_put_unwind_info(as, pi, u->upt);
}

static int lu_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dil, void *arg)
{
	return -UNW_ENOINFO;
}

static int lu_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
			   void *arg)
{
	return -UNW_EBADREG;
}

static int lu_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	return -UNW_EINVAL;
}

static int lu_get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
			    unw_word_t *off, void *arg)
{
	return -UNW_ENOINFO; /* symbolization is elf_sym's job (sized symbols only) */
}

static unw_accessors_t accessors = {
	.find_proc_info = lu_find_proc_info,
	.put_unwind_info = lu_put_unwind_info,
	.get_dyn_info_list_addr = lu_get_dyn_info_list_addr,
	.access_mem = lu_access_mem,
	.access_reg = lu_access_reg,
	.access_fpreg = lu_access_fpreg,
	.resume = lu_resume,
	.get_proc_name = lu_get_proc_name,
};

static int lu_open(struct symtab *s, void **out)
{
	struct lu_unwinder *u = calloc(1, sizeof *u);
	if (!u)
		return -LS_E_NOMEM;
	u->sym = s;
	u->as = unw_create_addr_space(&accessors, 0);
	u->upt = _UPT_create(symtab_pid(s));
	if (!u->as || !u->upt) {
		if (u->as)
			unw_destroy_addr_space(u->as);
		if (u->upt)
			_UPT_destroy(u->upt);
		free(u);
		return -LS_E_NOMEM;
	}
	unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
	*out = u;
	return 0;
}

static void lu_close(void *impl)
{
	struct lu_unwinder *u = impl;
	unw_destroy_addr_space(u->as);
	_UPT_destroy(u->upt);
	free(u);
}

/* Is IP the x86-64 rt_sigreturn trampoline a signal handler returns to
 * (mov $15,%rax; syscall: glibc's and musl's __restore_rt)?
 * unw_is_signal_frame() of libunwind 1.6 says no for Debian 12's glibc
 * 2.36, whose trampoline is followed by a nopl (checked by
 * tests/dump-signal-frame.test). */
static int is_sigreturn(struct mem *m, uint64_t ip)
{
	static const uint8_t seq[9] = { 0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05 };
	uint8_t b[sizeof seq];
	return mem_read(m, ip, b, sizeof b) == 0 && !memcmp(b, seq, sizeof seq);
}

static int lu_walk(void *impl, pid_t tid, const struct user_regs_struct *regs, struct mem *m,
		   int first_is_retaddr, struct native_stack *out)
{
	struct lu_unwinder *u = impl;
	unw_cursor_t c;
	cur = u;
	u->mem = m;
	u->regs = regs;
	if (unw_init_remote(&c, u->as, u) < 0)
		return -1;
	int first = 1, interrupted = 0;
	for (;;) {
		if (out->n >= UNWIND_MAX_FRAMES)
			return -1;
		unw_word_t ip, sp, v;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || unw_get_reg(&c, UNW_REG_SP, &sp) < 0)
			return -1;
		struct native_frame *f = &out->f[out->n];
		memset(f, 0, sizeof *f);
		f->pc = ip;
		f->sp = sp;
		if (out->n == 0)
			f->flags |= NF_LEAF;
		if (first && first_is_retaddr)
			f->flags |= NF_RESTART;
		static const int regno[UREG_NREGS] = { UNW_X86_64_RBX, UNW_X86_64_RBP, UNW_X86_64_R12,
						       UNW_X86_64_R13, UNW_X86_64_R14, UNW_X86_64_R15 };
		for (int i = 0; i < UREG_NREGS; i++)
			if (unw_get_reg(&c, regno[i], &v) == 0) {
				f->regs[i] = v;
				f->regs_valid |= 1u << i;
			}
		if (out->n > 0 && out->f[out->n - 1].pc == ip && out->f[out->n - 1].sp == sp)
			return -1;
		if (interrupted)
			f->flags |= NF_INTERRUPTED;
		interrupted = unw_is_signal_frame(&c) > 0 || is_sigreturn(m, ip);
		if (interrupted)
			f->flags |= NF_SIGFRAME; /* the next frame is the one it interrupted */
		out->n++;
		first = 0;
		int r = unw_step(&c);
		if (r == 0)
			return 0;
		if (r < 0)
			return -1;
	}
}

const struct unwind_backend unwind_libunwind_backend = {
	.name = "libunwind",
	.open = lu_open,
	.close = lu_close,
	.walk = lu_walk,
};
