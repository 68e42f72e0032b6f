/* fuzz/fuzz_puc.c: libFuzzer target for the PUC Lua 5.1-5.4 walker over
 * synthetic memory images (puc_walk_image): corrupted pointers, CallInfo
 * cycles, huge sizes and wrong tags must give an error or frames, never
 * a crash, a hang or a read outside the image.
 *
 * Input: byte 0 picks the layout row (mod puc_nlayouts); the rest is cut
 * into NREG regions of REGLEN bytes mapped at A[i] (the last ones short
 * or absent when the input is). Region roles, as the seeds lay them out:
 *   0 lua_State (5.2+: base_ci inside)  1 Lua stack   2 CallInfos
 *   3 closures (Lua at 0, C at 128)     4 Proto       5 code, lines, upvalue names
 *   6 strings (64 bytes apart)          7 constants
 * The walk starts at the lua_State at A[0].
 *
 * Built with -DFUZZ_PUC_SEEDS instead of libFuzzer, main() writes one
 * valid image per layout row into the directory given (the seeds in
 * fuzz/seeds/fuzz_puc/: a Lua function at pc 1 calling a C function,
 * as tests/t_vm_puc.c builds for 5.4). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frame.h"
#include "proc_mem.h"
#include "vm_puc.h"

#define NREG 8
#define REGLEN 512
static const uint64_t A[NREG] = { 0x10000, 0x20000, 0x30000, 0x40000,
				  0x50000, 0x60000, 0x70000, 0x80000 };

#ifndef FUZZ_PUC_SEEDS

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const struct puc_layout *lay = &puc_layouts[data[0] % puc_nlayouts];
	struct mem_region r[NREG];
	int n = 0;
	for (size_t off = 1; off < size && n < NREG; off += REGLEN, n++) {
		size_t len = size - off < REGLEN ? size - off : REGLEN;
		r[n] = (struct mem_region){ A[n], data + off, len };
	}
	struct mem_image im;
	mem_image_init(&im, r, n);
	struct stack st = { 0 };
	int rc = puc_walk_image(lay, &im.base, A[0], &st);
	if (rc > 0 || st.n < 0 || st.n > STACK_MAX_FRAMES)
		abort();
	/* every frame's strings must be valid (ASan checks the reads) */
	size_t sum = 0;
	for (int i = 0; i < st.n; i++) {
		if (!st.f[i].name)
			abort();
		sum += strlen(st.f[i].name);
		if (st.f[i].file)
			sum += strlen(st.f[i].file);
	}
	stack_free(&st);
	return sum == (size_t)-1;
}

#else /* seed writer */

static uint8_t img[NREG][REGLEN];
static void put64(int r, int off, uint64_t v) { memcpy(&img[r][off], &v, 8); }
static void put32(int r, int off, uint32_t v) { memcpy(&img[r][off], &v, 4); }
static void put16(int r, int off, uint16_t v) { memcpy(&img[r][off], &v, 2); }
static void putn(int r, int off, int size, uint32_t v)
{
	if (size == 1)
		img[r][off] = (uint8_t)v;
	else if (size == 2)
		put16(r, off, (uint16_t)v);
	else
		put32(r, off, v);
}
/* a TValue: value and tag (u32 or u8 at +8) */
static void put_tv(const struct puc_layout *l, int r, int off, uint64_t v, unsigned tag)
{
	put64(r, off, v);
	putn(r, off + 8, l->tv_tt_size, tag);
}

static uint32_t i54(int op, int a, int b, int c, int k)
{
	return (uint32_t)op | (uint32_t)a << 7 | (uint32_t)k << 15 | (uint32_t)b << 16 | (uint32_t)c << 24;
}
static uint32_t i53(int op, int a, int b, int c) { return (uint32_t)op | (uint32_t)a << 6 | (uint32_t)c << 14 | (uint32_t)b << 23; }
static uint32_t i53bx(int op, int a, int bx) { return (uint32_t)op | (uint32_t)a << 6 | (uint32_t)bx << 14; }

enum { RL, RSTK, RCI, RCL, RP, RCODE, RSTR, RK };

static void build(const struct puc_layout *l)
{
	memset(img, 0, sizeof img);
	int cs = l->ci_size;
	/* lua_State */
	img[RL][8] = (uint8_t)l->gct_thread;
	put64(RL, l->L_top, A[RSTK] + 64);
	put64(RL, l->L_stack, A[RSTK]);
	put64(RL, l->L_stack_last, A[RSTK] + 400);
	if (l->L_base >= 0)
		put64(RL, l->L_base, A[RSTK] + 64);
	/* stack: slot 1 = Lua closure, slot 3 = the C function */
	put_tv(l, RSTK, 16, A[RCL], l->tag_lcl);
	if (l->minor == 1)
		put_tv(l, RSTK, 48, A[RCL] + 128, l->tag_ccl);
	else
		put_tv(l, RSTK, 48, 0x401000, l->tag_lcf);
	/* closures: the Lua one, and (5.1) a C closure of 0x401000 */
	img[RCL][8] = (uint8_t)l->gct_lcl;
	put64(RCL, l->lcl_p, A[RP]);
	img[RCL][128 + 8] = (uint8_t)l->gct_ccl;
	put64(RCL, 128 + l->ccl_f, 0x401000);
	if (l->cl_isC >= 0) {
		img[RCL][l->cl_isC] = 0;
		img[RCL][128 + l->cl_isC] = 1;
	}
	if (l->L_end_ci >= 0) {
		/* 5.1: CallInfo array [base_ci, end_ci): 0 base, 1 Lua, 2 C */
		put64(RL, l->L_base_ci, A[RCI]);
		put64(RL, l->L_end_ci, A[RCI] + 4ull * (uint64_t)cs);
		put64(RL, l->L_ci, A[RCI] + 2ull * (uint64_t)cs);
		put64(RL, l->L_savedpc, A[RCODE] + 8);
		put64(RCI, l->ci_func, A[RSTK]);
		put64(RCI, cs + l->ci_func, A[RSTK] + 16);
		put64(RCI, cs + l->ci_savedpc, A[RCODE] + 8);   /* pc 1 */
		put64(RCI, 2 * cs + l->ci_func, A[RSTK] + 48);
	} else {
		/* CallInfo list: ci 0 (Lua) -> base_ci, ci 1 (C) -> ci 0 */
		put64(RL, l->L_ci, A[RCI] + 128);
		put64(RCI, l->ci_func, A[RSTK] + 16);
		put64(RCI, l->ci_previous, A[RL] + (uint64_t)l->L_base_ci);
		put64(RCI, l->ci_savedpc, A[RCODE] + 8);        /* pc 1 */
		unsigned st0 = l->cist_lua | l->cist_fresh, st1 = l->cist_c;
		putn(RCI, l->ci_callstatus, l->ci_callstatus_size, st0);
		put64(RCI, 128 + l->ci_func, A[RSTK] + 48);
		put64(RCI, 128 + l->ci_previous, A[RCI]);
		putn(RCI, 128 + l->ci_callstatus, l->ci_callstatus_size, st1);
		if (l->ci_next >= 0)
			put64(RCI, l->ci_next, A[RCI] + 128);
	}
	/* Proto: 3 instructions at lines 11 11 12, defined at 10, with one
	 * upvalue "_ENV", one constant "print", one local "x" (pc 2) */
	img[RP][8] = (uint8_t)l->p_tt_value;
	put32(RP, l->p_sizecode, 3);
	put32(RP, l->p_sizelineinfo, 3);
	put32(RP, l->p_linedefined, 10);
	put32(RP, l->p_lastlinedefined, 14);
	put32(RP, l->p_sizeupvalues, 1);
	put32(RP, l->p_sizek, 1);
	put32(RP, l->p_sizelocvars, 1);
	put64(RP, l->p_code, A[RCODE]);
	put64(RP, l->p_lineinfo, A[RCODE] + 64);
	put64(RP, l->p_upvalues, A[RCODE] + 128);
	put64(RP, l->p_locvars, A[RCODE] + 192);
	put64(RP, l->p_k, A[RK]);
	put64(RP, l->p_source, A[RSTR]);
	if (l->p_nups >= 0)
		img[RP][l->p_nups] = 1;
	uint32_t code[3];
	switch (l->isa) {
	case PUC_ISA_51:   /* GETGLOBAL 0 k0; CALL 0 1 1; RETURN */
		code[0] = i53bx(5, 0, 0), code[1] = i53(28, 0, 1, 1), code[2] = i53(30, 0, 1, 0);
		break;
	case PUC_ISA_52:   /* GETTABUP 0 _ENV k0; CALL; RETURN */
		code[0] = i53(6, 0, 0, 0x100), code[1] = i53(29, 0, 1, 1), code[2] = i53(31, 0, 1, 0);
		break;
	case PUC_ISA_53:
		code[0] = i53(6, 0, 0, 0x100), code[1] = i53(36, 0, 1, 1), code[2] = i53(38, 0, 1, 0);
		break;
	default:
		code[0] = i54(11, 0, 0, 0, 0), code[1] = i54(68, 0, 1, 1, 0), code[2] = i54(70, 0, 1, 0, 0);
		break;
	}
	memcpy(&img[RCODE][0], code, sizeof code);
	if (l->p_abslineinfo >= 0) {
		img[RCODE][64] = 1, img[RCODE][65] = 0, img[RCODE][66] = 1;
		put32(RP, l->p_sizeabslineinfo, 1);
		put64(RP, l->p_abslineinfo, A[RCODE] + 96);
		put32(RCODE, 96, 2), put32(RCODE, 100, 12);
	} else {
		put32(RCODE, 64, 11), put32(RCODE, 68, 11), put32(RCODE, 72, 12);
	}
	put64(RCODE, 128, A[RSTR] + 64);              /* upvalue 0 "_ENV" */
	put64(RCODE, 192, A[RSTR] + 192);             /* local "x", pcs [2, 3) */
	put32(RCODE, 200, 2), put32(RCODE, 204, 3);
	/* strings: "@test.lua", "_ENV", "print", "x" */
	const char *str[4] = { "@test.lua", "_ENV", "print", "x" };
	for (int i = 0; i < 4; i++) {
		size_t len = strlen(str[i]);
		img[RSTR][64 * i + 8] = (uint8_t)l->gct_sstr;
		img[RSTR][64 * i + 11] = (uint8_t)len;
		if (l->str_len == PUC_STR_SIZET)
			put64(RSTR, 64 * i + 16, len);
		memcpy(&img[RSTR][64 * i + l->ts_data], str[i], len);
	}
	put_tv(l, RK, 0, A[RSTR] + 128, l->tag_sstr);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < puc_nlayouts; i++) {
		const struct puc_layout *l = &puc_layouts[i];
		build(l);
		char path[4096];
		snprintf(path, sizeof path, "%s/row%02d-%s", argv[1], i, l->name);
		FILE *f = fopen(path, "wb");
		uint8_t row = (uint8_t)i;
		if (!f || fwrite(&row, 1, 1, f) != 1 || fwrite(img, 1, sizeof img, f) != sizeof img ||
		    fclose(f) != 0) {
			perror(path);
			return 1;
		}
		/* check it walks: two frames, named */
		struct mem_region r[NREG];
		for (int k = 0; k < NREG; k++)
			r[k] = (struct mem_region){ A[k], img[k], REGLEN };
		struct mem_image im;
		mem_image_init(&im, r, NREG);
		struct stack st = { 0 };
		int rc = puc_walk_image(l, &im.base, A[0], &st);
		printf("%s: rc %d, %d frames:", l->name, rc, st.n);
		for (int k = 0; k < st.n; k++)
			printf(" [%s %s:%d]", st.f[k].name, st.f[k].file ? st.f[k].file : "", st.f[k].line);
		printf("\n");
		stack_free(&st);
	}
	return 0;
}
#endif
