/* tests/t_sampler_perf_epilogue.c: perf_leaf_epilogue() (src/sampler_perf.c)
 * over synthetic code and stack copies: the caller's registers after the
 * pops, `add rsp`, `leave` and `ret` of an epilogue, and no answer for
 * code that is not one or a stack it cannot read. */
#include <stdint.h>
#include <string.h>
#include <sys/user.h>
#include "check.h"
#include "err.h"
#include "proc_mem.h"
#include "sampler_perf.h"

#define CODE 0x401000ull
#define STK 0x7ffd0000ull

static ssize_t nothing(struct mem *m, uint64_t addr, void *buf, size_t len)
{
	(void)m; (void)addr; (void)buf; (void)len;
	return -LS_E_FAULT;
}

static struct mem none = { .read = nothing };

/* Run the epilogue BYTES with the stack words W[0..N) at rsp = STK. */
static int run(const uint8_t *bytes, size_t nb, const uint64_t *w, size_t n,
	       struct user_regs_struct *in, struct user_regs_struct *out)
{
	static uint8_t code[64];
	memset(code, 0xcc, sizeof code);
	memcpy(code, bytes, nb);
	struct mem_overlay c, s;
	mem_overlay_init(&c, &none, CODE, code, sizeof code);
	mem_overlay_init(&s, &none, STK, (const uint8_t *)w, n * 8);
	in->rip = CODE;
	in->rsp = STK;
	return perf_leaf_epilogue(&c.base, &s.base, in, out);
}

int main(void)
{
	struct user_regs_struct r, o;
	/* pop r12; pop rbp; ret (cfib's epilogue at its first pop) */
	{
		static const uint8_t b[] = { 0x41, 0x5c, 0x5d, 0xc3 };
		uint64_t w[] = { 0x1212, 0xbbbb, 0x401234 };
		memset(&r, 0, sizeof r);
		r.rbx = 7;
		CHECK(run(b, sizeof b, w, 3, &r, &o) == 1);
		CHECK(o.r12 == 0x1212 && o.rbp == 0xbbbb && o.rbx == 7);
		CHECK(o.rip == 0x401234 && o.rsp == STK + 24, "rip %llx rsp %llx", o.rip, o.rsp);
	}
	/* add rsp, 8; pop rbx; rep ret */
	{
		static const uint8_t b[] = { 0x48, 0x83, 0xc4, 0x08, 0x5b, 0xf3, 0xc3 };
		uint64_t w[] = { 0xdead, 0x3333, 0x405555 };
		memset(&r, 0, sizeof r);
		CHECK(run(b, sizeof b, w, 3, &r, &o) == 1);
		CHECK(o.rbx == 0x3333 && o.rip == 0x405555 && o.rsp == STK + 24);
	}
	/* add rsp, 0x100 (imm32); ret */
	{
		static const uint8_t b[] = { 0x48, 0x81, 0xc4, 0x00, 0x01, 0x00, 0x00, 0xc3 };
		uint64_t w[34] = { 0 };
		w[32] = 0x406666;
		memset(&r, 0, sizeof r);
		CHECK(run(b, sizeof b, w, 34, &r, &o) == 1);
		CHECK(o.rip == 0x406666 && o.rsp == STK + 0x108);
	}
	/* leave; ret: rbp names the saved rbp, the return address above it */
	{
		static const uint8_t b[] = { 0xc9, 0xc3 };
		uint64_t w[] = { 1, 2, 0x7777, 0x408888 };
		memset(&r, 0, sizeof r);
		r.rbp = STK + 16;
		CHECK(run(b, sizeof b, w, 4, &r, &o) == 1);
		CHECK(o.rbp == 0x7777 && o.rip == 0x408888 && o.rsp == STK + 32);
	}
	/* ret at once */
	{
		static const uint8_t b[] = { 0xc3 };
		uint64_t w[] = { 0x409999 };
		memset(&r, 0, sizeof r);
		CHECK(run(b, sizeof b, w, 1, &r, &o) == 1);
		CHECK(o.rip == 0x409999 && o.rsp == STK + 8);
	}
	/* not an epilogue: mov rbp, rsp; ... */
	{
		static const uint8_t b[] = { 0x48, 0x89, 0xe5, 0xc3 };
		uint64_t w[] = { 0x401000 };
		memset(&r, 0, sizeof r);
		CHECK(run(b, sizeof b, w, 1, &r, &o) == 0);
	}
	/* pop rsp is no epilogue */
	{
		static const uint8_t b[] = { 0x5c, 0xc3 };
		uint64_t w[] = { 1, 2 };
		memset(&r, 0, sizeof r);
		CHECK(run(b, sizeof b, w, 2, &r, &o) == 0);
	}
	/* the return address not in the copy (nothing readable there) */
	{
		static const uint8_t b[] = { 0x5d, 0xc3 };
		uint64_t w[] = { 0xbbbb };
		memset(&r, 0, sizeof r);
		CHECK(run(b, sizeof b, w, 1, &r, &o) == 0);
	}
	/* more than 8 instructions of pops: not taken for an epilogue */
	{
		static const uint8_t b[] = { 0x5b, 0x5b, 0x5b, 0x5b, 0x5b, 0x5b, 0x5b, 0x5b, 0x5b, 0xc3 };
		uint64_t w[10] = { 0 };
		w[9] = 0x401111;
		memset(&r, 0, sizeof r);
		CHECK(run(b, sizeof b, w, 10, &r, &o) == 0);
	}
	return check_summary("t_sampler_perf_epilogue");
}
