/* img_puc.c: synthetic PUC Lua process images (tests/t_vm_puc.c and
 * fuzz/fuzz_puc.c, which writes them as its seeds). See img_puc.h. */
#include <string.h>
#include "img_puc.h"

const uint64_t img_puc_addr[IMG_PUC_NREG] = { 0x10000, 0x20000, 0x30000, 0x40000,
					      0x50000, 0x60000, 0x70000, 0x80000 };

static void put64(uint8_t (*img)[IMG_PUC_REGLEN], int r, int off, uint64_t v) { memcpy(&img[r][off], &v, 8); }
static void put32(uint8_t (*img)[IMG_PUC_REGLEN], int r, int off, uint32_t v) { memcpy(&img[r][off], &v, 4); }
static void put16(uint8_t (*img)[IMG_PUC_REGLEN], int r, int off, uint16_t v) { memcpy(&img[r][off], &v, 2); }
static void putn(uint8_t (*img)[IMG_PUC_REGLEN], int r, int off, int size, uint32_t v)
{
	if (size == 1)
		img[r][off] = (uint8_t)v;
	else if (size == 2)
		put16(img, r, off, (uint16_t)v);
	else
		put32(img, r, off, v);
}
/* a TValue: value and tag (u32 or u8 at +8) */
static void put_tv(uint8_t (*img)[IMG_PUC_REGLEN], const struct puc_layout *l, int r, int off, uint64_t v, unsigned tag)
{
	put64(img, r, off, v);
	putn(img, r, off + 8, l->tv_tt_size, tag);
}

uint32_t img_puc_i54(int op, int a, int b, int c, int k)
{
	return (uint32_t)op | (uint32_t)a << 7 | (uint32_t)k << 15 | (uint32_t)b << 16 | (uint32_t)c << 24;
}
uint32_t img_puc_i53(int op, int a, int b, int c) { return (uint32_t)op | (uint32_t)a << 6 | (uint32_t)c << 14 | (uint32_t)b << 23; }
uint32_t img_puc_i53bx(int op, int a, int bx) { return (uint32_t)op | (uint32_t)a << 6 | (uint32_t)bx << 14; }

void img_puc_build(const struct puc_layout *l, uint8_t (*img)[IMG_PUC_REGLEN])
{
	memset(img, 0, IMG_PUC_NREG * sizeof *img);
	int cs = l->ci_size;
	/* lua_State */
	img[IMG_RL][8] = (uint8_t)l->gct_thread;
	put64(img, IMG_RL, l->L_top, img_puc_addr[IMG_RSTK] + 64);
	put64(img, IMG_RL, l->L_stack, img_puc_addr[IMG_RSTK]);
	put64(img, IMG_RL, l->L_stack_last, img_puc_addr[IMG_RSTK] + 400);
	if (l->L_base >= 0)
		put64(img, IMG_RL, l->L_base, img_puc_addr[IMG_RSTK] + 64);
	/* stack: slot 1 = Lua closure, slot 3 = the C function */
	put_tv(img, l, IMG_RSTK, 16, img_puc_addr[IMG_RCL], l->tag_lcl);
	if (l->minor == 1)
		put_tv(img, l, IMG_RSTK, 48, img_puc_addr[IMG_RCL] + 128, l->tag_ccl);
	else
		put_tv(img, l, IMG_RSTK, 48, 0x401000, l->tag_lcf);
	/* closures: the Lua one, and (5.1) a C closure of 0x401000 */
	img[IMG_RCL][8] = (uint8_t)l->gct_lcl;
	put64(img, IMG_RCL, l->lcl_p, img_puc_addr[IMG_RP]);
	img[IMG_RCL][128 + 8] = (uint8_t)l->gct_ccl;
	put64(img, IMG_RCL, 128 + l->ccl_f, 0x401000);
	if (l->cl_isC >= 0) {
		img[IMG_RCL][l->cl_isC] = 0;
		img[IMG_RCL][128 + l->cl_isC] = 1;
	}
	if (l->L_end_ci >= 0) {
		/* 5.1: CallInfo array [base_ci, end_ci): 0 base, 1 Lua, 2 C */
		put64(img, IMG_RL, l->L_base_ci, img_puc_addr[IMG_RCI]);
		put64(img, IMG_RL, l->L_end_ci, img_puc_addr[IMG_RCI] + 4ull * (uint64_t)cs);
		put64(img, IMG_RL, l->L_ci, img_puc_addr[IMG_RCI] + 2ull * (uint64_t)cs);
		put64(img, IMG_RL, l->L_savedpc, img_puc_addr[IMG_RCODE] + 8);
		put64(img, IMG_RCI, l->ci_func, img_puc_addr[IMG_RSTK]);
		put64(img, IMG_RCI, cs + l->ci_func, img_puc_addr[IMG_RSTK] + 16);
		put64(img, IMG_RCI, cs + l->ci_savedpc, img_puc_addr[IMG_RCODE] + 8);   /* pc 1 */
		put64(img, IMG_RCI, 2 * cs + l->ci_func, img_puc_addr[IMG_RSTK] + 48);
	} else {
		/* CallInfo list: ci 0 (Lua) -> base_ci, ci 1 (C) -> ci 0 */
		put64(img, IMG_RL, l->L_ci, img_puc_addr[IMG_RCI] + 128);
		put64(img, IMG_RCI, l->ci_func, img_puc_addr[IMG_RSTK] + 16);
		put64(img, IMG_RCI, l->ci_previous, img_puc_addr[IMG_RL] + (uint64_t)l->L_base_ci);
		put64(img, IMG_RCI, l->ci_savedpc, img_puc_addr[IMG_RCODE] + 8);        /* pc 1 */
		unsigned st0 = l->cist_lua | l->cist_fresh, st1 = l->cist_c;
		putn(img, IMG_RCI, l->ci_callstatus, l->ci_callstatus_size, st0);
		put64(img, IMG_RCI, 128 + l->ci_func, img_puc_addr[IMG_RSTK] + 48);
		put64(img, IMG_RCI, 128 + l->ci_previous, img_puc_addr[IMG_RCI]);
		putn(img, IMG_RCI, 128 + l->ci_callstatus, l->ci_callstatus_size, st1);
		if (l->ci_next >= 0)
			put64(img, IMG_RCI, l->ci_next, img_puc_addr[IMG_RCI] + 128);
	}
	/* Proto: 3 instructions at lines 11 11 12, defined at 10, with one
	 * upvalue "_ENV", one constant "print", one local "x" (pc 2) */
	img[IMG_RP][8] = (uint8_t)l->p_tt_value;
	put32(img, IMG_RP, l->p_sizecode, 3);
	put32(img, IMG_RP, l->p_sizelineinfo, 3);
	put32(img, IMG_RP, l->p_linedefined, 10);
	put32(img, IMG_RP, l->p_lastlinedefined, 14);
	put32(img, IMG_RP, l->p_sizeupvalues, 1);
	put32(img, IMG_RP, l->p_sizek, 1);
	put32(img, IMG_RP, l->p_sizelocvars, 1);
	put64(img, IMG_RP, l->p_code, img_puc_addr[IMG_RCODE]);
	put64(img, IMG_RP, l->p_lineinfo, img_puc_addr[IMG_RCODE] + 64);
	put64(img, IMG_RP, l->p_upvalues, img_puc_addr[IMG_RCODE] + 128);
	put64(img, IMG_RP, l->p_locvars, img_puc_addr[IMG_RCODE] + 192);
	put64(img, IMG_RP, l->p_k, img_puc_addr[IMG_RK]);
	put64(img, IMG_RP, l->p_source, img_puc_addr[IMG_RSTR]);
	if (l->p_nups >= 0)
		img[IMG_RP][l->p_nups] = 1;
	uint32_t code[3];
	switch (l->isa) {
	case PUC_ISA_51:   /* GETGLOBAL 0 k0; CALL 0 1 1; RETURN */
		code[0] = img_puc_i53bx(5, 0, 0), code[1] = img_puc_i53(28, 0, 1, 1), code[2] = img_puc_i53(30, 0, 1, 0);
		break;
	case PUC_ISA_52:   /* GETTABUP 0 _ENV k0; CALL; RETURN */
		code[0] = img_puc_i53(6, 0, 0, 0x100), code[1] = img_puc_i53(29, 0, 1, 1), code[2] = img_puc_i53(31, 0, 1, 0);
		break;
	case PUC_ISA_53:
		code[0] = img_puc_i53(6, 0, 0, 0x100), code[1] = img_puc_i53(36, 0, 1, 1), code[2] = img_puc_i53(38, 0, 1, 0);
		break;
	default:
		code[0] = img_puc_i54(11, 0, 0, 0, 0), code[1] = img_puc_i54(68, 0, 1, 1, 0), code[2] = img_puc_i54(70, 0, 1, 0, 0);
		break;
	}
	memcpy(&img[IMG_RCODE][0], code, sizeof code);
	if (l->p_abslineinfo >= 0) {
		img[IMG_RCODE][64] = 1, img[IMG_RCODE][65] = 0, img[IMG_RCODE][66] = 1;
		put32(img, IMG_RP, l->p_sizeabslineinfo, 1);
		put64(img, IMG_RP, l->p_abslineinfo, img_puc_addr[IMG_RCODE] + 96);
		put32(img, IMG_RCODE, 96, 2), put32(img, IMG_RCODE, 100, 12);
	} else {
		put32(img, IMG_RCODE, 64, 11), put32(img, IMG_RCODE, 68, 11), put32(img, IMG_RCODE, 72, 12);
	}
	put64(img, IMG_RCODE, 128, img_puc_addr[IMG_RSTR] + 64);              /* upvalue 0 "_ENV" */
	put64(img, IMG_RCODE, 192, img_puc_addr[IMG_RSTR] + 192);             /* local "x", pcs [2, 3) */
	put32(img, IMG_RCODE, 200, 2), put32(img, IMG_RCODE, 204, 3);
	/* strings: "@test.lua", "_ENV", "print", "x" */
	const char *str[4] = { "@test.lua", "_ENV", "print", "x" };
	for (int i = 0; i < 4; i++) {
		size_t len = strlen(str[i]);
		img[IMG_RSTR][64 * i + 8] = (uint8_t)l->gct_sstr;
		img[IMG_RSTR][64 * i + 11] = (uint8_t)len;
		if (l->str_len == PUC_STR_SIZET)
			put64(img, IMG_RSTR, 64 * i + 16, len);
		memcpy(&img[IMG_RSTR][64 * i + l->ts_data], str[i], len);
	}
	put_tv(img, l, IMG_RK, 0, img_puc_addr[IMG_RSTR] + 128, l->tag_sstr);
}


/* a short string STR at region R, offset OFF */
static void put_sstr(uint8_t (*img)[IMG_PUC_REGLEN], const struct puc_layout *l, int r, int off,
		     const char *str)
{
	size_t len = strlen(str);
	img[r][off + 8] = (uint8_t)l->gct_sstr;
	img[r][off + 11] = (uint8_t)len;
	if (l->str_len == PUC_STR_SIZET)
		put64(img, r, off + 16, len);
	memcpy(&img[r][off + l->ts_data], str, len);
}

int img_puc_build_shared_slot(const struct puc_layout *l, uint8_t (*img)[IMG_PUC_REGLEN])
{
	const uint64_t *A = img_puc_addr;
	if (l->L_end_ci >= 0)
		return -1;   /* 5.1: a CallInfo array, not built here */
	img_puc_build(l, img);
	/* f's Proto moves to RP+256; g's, a copy with its own constants,
	 * chunk and lines, goes to RK+256: 0x50100 and 0x80100 are equal
	 * modulo 16 KiB */
	memcpy(&img[IMG_RP][256], &img[IMG_RP][0], 128);
	put64(img, IMG_RCL, l->lcl_p, A[IMG_RP] + 256);
	memcpy(&img[IMG_RK][256], &img[IMG_RP][0], 128);
	put32(img, IMG_RK, 256 + l->p_linedefined, 30);
	put32(img, IMG_RK, 256 + l->p_lastlinedefined, 34);
	put64(img, IMG_RK, 256 + l->p_k, A[IMG_RK] + 128);
	put64(img, IMG_RK, 256 + l->p_source, A[IMG_RSTR] + 256);
	put_tv(img, l, IMG_RK, 128, A[IMG_RSTR] + 320, l->tag_sstr);
	put_sstr(img, l, IMG_RSTR, 256, "@b.lua");
	put_sstr(img, l, IMG_RSTR, 320, "inner");
	/* g's closure (RCL+256), its stack slot (RSTK+80), its CallInfo
	 * (RCI+256, at pc 1 too), first of its invocation; f's now follows */
	img[IMG_RCL][256 + 8] = (uint8_t)l->gct_lcl;
	put64(img, IMG_RCL, 256 + l->lcl_p, A[IMG_RK] + 256);
	put_tv(img, l, IMG_RSTK, 80, A[IMG_RCL] + 256, l->tag_lcl);
	put64(img, IMG_RCI, 256 + l->ci_func, A[IMG_RSTK] + 80);
	put64(img, IMG_RCI, 256 + l->ci_previous, A[IMG_RL] + (uint64_t)l->L_base_ci);
	put64(img, IMG_RCI, 256 + l->ci_savedpc, A[IMG_RCODE] + 8);
	putn(img, IMG_RCI, 256 + l->ci_callstatus, l->ci_callstatus_size, l->cist_lua | l->cist_fresh);
	put64(img, IMG_RCI, l->ci_previous, A[IMG_RCI] + 256);
	putn(img, IMG_RCI, l->ci_callstatus, l->ci_callstatus_size, l->cist_lua | l->cist_reentry);
	if (l->ci_next >= 0)
		put64(img, IMG_RCI, 256 + l->ci_next, A[IMG_RCI]);
	return 0;
}
