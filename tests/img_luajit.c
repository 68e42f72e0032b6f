/* img_luajit.c: the synthetic LuaJIT image of img_luajit.h. */
#include <stdlib.h>
#include <string.h>
#include "img_luajit.h"

const uint64_t lj_img_addr[LJ_IMG_NREG] = { 0x10000, 0x20000, 0x30000, 0x40000,
					    0x50000, 0x60000, 0x70000 };
static const uint8_t zeros[16];

int lj_img_regions(const struct lj_layout *l, const uint8_t *data, size_t size,
		   struct mem_region *r)
{
	int n = 0;
	size_t off = 0;
	for (int i = 0; i < LJ_IMG_NREG && off < size; i++) {
		size_t want = i == 0 ? LJ_IMG_GGLEN : LJ_IMG_REGLEN;
		size_t len = size - off < want ? size - off : want;
		r[n++] = (struct mem_region){ lj_img_addr[i], data + off, len };
		off += len;
	}
	r[n++] = (struct mem_region){ lj_img_addr[0] + l->sizeof_L + l->g2disp - 8, zeros,
				      sizeof zeros };
	return n;
}

uint8_t *lj_img_at(struct lj_img *im, uint64_t a)
{
	for (int i = LJ_IMG_NREG - 1; i >= 0; i--)
		if (a >= lj_img_addr[i]) {
			size_t o = (i ? LJ_IMG_GGLEN + (size_t)(i - 1) * LJ_IMG_REGLEN : 0) +
				   (size_t)(a - lj_img_addr[i]);
			if (o >= sizeof im->buf)
				abort();
			return im->buf + o;
		}
	abort();
}

void lj_img_put64(struct lj_img *im, uint64_t a, uint64_t v) { memcpy(lj_img_at(im, a), &v, 8); }
void lj_img_put32(struct lj_img *im, uint64_t a, uint32_t v) { memcpy(lj_img_at(im, a), &v, 4); }

void lj_img_putref(struct lj_img *im, uint64_t a, uint64_t v)
{
	if (im->gc64)
		lj_img_put64(im, a, v);
	else
		lj_img_put32(im, a, (uint32_t)v);
}

uint64_t lj_img_tv(const struct lj_img *im, int itype, uint64_t p)
{
	if (im->gc64)
		return ((uint64_t)(int64_t)itype << 47) | p;
	return (uint64_t)(uint32_t)itype << 32 | (uint32_t)p;
}

static void mkstr(struct lj_img *im, uint64_t a, const char *s)
{
	lj_img_at(im, a)[im->ol->gct] = LJ_GCT_STR;
	lj_img_put32(im, a + im->l->str_len, (uint32_t)strlen(s));
	memcpy(lj_img_at(im, a + im->l->str_data), s, strlen(s) + 1);
}

/* one-node table at T, node at N: key string KS, value V */
static void mktab1(struct lj_img *im, uint64_t t, uint64_t n, uint64_t ks, uint64_t v)
{
	const struct lj_objlayout *ol = im->ol;
	lj_img_at(im, t)[ol->gct] = LJ_GCT_TAB;
	lj_img_putref(im, t + ol->tab_node, n);
	lj_img_put32(im, t + ol->tab_hmask, 0);
	lj_img_put64(im, n, v);
	lj_img_put64(im, n + ol->node_key, lj_img_tv(im, -5, ks));
}

static uint32_t ins(int op, int a, int b, int c)
{
	return (uint32_t)op | (uint32_t)a << 8 | (uint32_t)c << 16 | (uint32_t)b << 24;
}

static uint32_t insd(int op, int a, int d)
{
	return (uint32_t)op | (uint32_t)a << 8 | (uint32_t)d << 16;
}

/* protos: 4 instructions, one GC constant (at k - gcref), line info after
 * it; main chunk: FUNCV; GGET 0 "f"; CALL 0 1 1; RET0, f (line 3): FUNCF;
 * GGET 0 "format"; CALL 0 1 1; RET0 */
static void mkproto(struct lj_img *im, uint64_t p, int i, uint64_t s_chunk, uint64_t kstr)
{
	const struct lj_objlayout *ol = im->ol;
	uint64_t bc = p + ol->pt_size;
	uint64_t k = bc + 16 + ol->gcref, li = k;
	lj_img_at(im, p)[ol->gct] = LJ_GCT_PROTO;
	lj_img_put32(im, p + ol->pt_sizebc, 4);
	lj_img_put32(im, p + ol->pt_sizept, ol->pt_size + 16 + ol->gcref + 24);
	lj_img_putref(im, p + ol->pt_chunkname, s_chunk);
	lj_img_put32(im, p + ol->pt_firstline, i ? 3 : 0);
	lj_img_put32(im, p + ol->pt_numline, i ? 2 : 9);
	lj_img_putref(im, p + ol->pt_lineinfo, li);
	lj_img_putref(im, p + ol->pt_k, k);
	lj_img_put32(im, p + ol->pt_sizekgc, 1);
	lj_img_putref(im, k - ol->gcref, kstr);
	uint32_t code[4] = { i ? 89 : 92, insd(54, 0, 0), ins(66, 0, 1, 1), 75 };
	memcpy(lj_img_at(im, bc), code, sizeof code);
	uint8_t lines[4] = { 0, i ? 1 : 5, i ? 1 : 5, i ? 2 : 6 };
	memcpy(lj_img_at(im, li), lines, sizeof lines);
	/* upvalue names "u"; locals: "x" in slot 0 for pcs [0, 1), then a
	 * (for index) for [3, 4) */
	const uint8_t uv[4] = { 'u', 0 }, var[12] = { 'x', 0, 0, 1, 1, 3, 1, 0 };
	memcpy(lj_img_at(im, li + 4), uv, sizeof uv);
	memcpy(lj_img_at(im, li + 8), var, sizeof var);
	lj_img_putref(im, p + ol->pt_uvinfo, li + 4);
	lj_img_putref(im, p + ol->pt_varinfo, li + 8);
}

void lj_img_build(struct lj_img *im, const struct lj_layout *l)
{
	const uint64_t *A = lj_img_addr;
	memset(im->buf, 0, sizeof im->buf);
	im->l = l;
	im->gc64 = !!(l->flags & LJL_GC64);
	im->ol = im->gc64 ? &lj_obj_gc64 : &lj_obj_32;
	const struct lj_objlayout *ol = im->ol;
	uint64_t L = A[0], g = A[0] + l->sizeof_L, stack = A[1];
	uint64_t fn[3] = { A[2], A[2] + 128, A[2] + 256 }, pt[2] = { A[3], A[3] + 256 };
	uint64_t s_chunk = A[4], s_f = A[4] + 64, s_format = A[4] + 128, s_loaded = A[4] + 192,
		 s_string = A[4] + 256;
	uint64_t reg = A[5], loaded = A[5] + 128, strlib = A[5] + 256;
	/* main thread and global_State */
	lj_img_at(im, L)[ol->gct] = LJ_GCT_THREAD;
	lj_img_putref(im, L + ol->L_glref, g);
	lj_img_putref(im, L + ol->L_stack, stack);
	lj_img_put32(im, L + ol->L_stacksize, 40);
	lj_img_putref(im, g + l->g_mainthref, L);
	lj_img_at(im, g + l->g_strempty)[ol->gct] = LJ_GCT_STR;
	lj_img_put32(im, g + l->g_vmstate, 0xffffffffu);   /* interpreter */
	lj_img_putref(im, g + l->g_cur_L, L);
	/* names: registry._LOADED.string.format = builtin 77 */
	mkstr(im, s_chunk, "@t.lua");
	mkstr(im, s_f, "f");
	mkstr(im, s_format, "format");
	mkstr(im, s_loaded, "_LOADED");
	mkstr(im, s_string, "string");
	lj_img_put64(im, g + l->g_registrytv, lj_img_tv(im, -12, reg));
	mktab1(im, reg, A[6], s_loaded, lj_img_tv(im, -12, loaded));
	mktab1(im, loaded, A[6] + 64, s_string, lj_img_tv(im, -12, strlib));
	mktab1(im, strlib, A[6] + 128, s_format, lj_img_tv(im, -9, fn[2]));
	mkproto(im, pt[0], 0, s_chunk, s_f);
	mkproto(im, pt[1], 1, s_chunk, s_format);
	for (int i = 0; i < 3; i++)
		lj_img_at(im, fn[i])[ol->gct] = LJ_GCT_FUNC;
	lj_img_putref(im, fn[0] + ol->fn_pc, pt[0] + ol->pt_size);
	lj_img_putref(im, fn[1] + ol->fn_pc, pt[1] + ol->pt_size);
	lj_img_at(im, fn[2])[ol->fn_ffid] = 77;
	lj_img_put64(im, fn[2] + ol->fn_f, 0x7000000);
	/* stack, from the bottom: thread, main chunk (CP link), f (PC after
	 * the main chunk's CALL), string.format (PC after f's CALL) */
	uint64_t ret0 = pt[0] + ol->pt_size + 12, ret1 = pt[1] + ol->pt_size + 12;
	lj_img_put64(im, stack, lj_img_tv(im, -7, L));
	if (im->gc64) {
		lj_img_put64(im, stack + 8, ~0ull);
		lj_img_put64(im, stack + 16, lj_img_tv(im, -9, fn[0]));
		lj_img_put64(im, stack + 24, 16 | 5);
		lj_img_put64(im, stack + 32, lj_img_tv(im, -9, fn[1]));
		lj_img_put64(im, stack + 40, ret0);
		lj_img_put64(im, stack + 48, lj_img_tv(im, -9, fn[2]));
		lj_img_put64(im, stack + 56, ret1);
		lj_img_put64(im, L + ol->L_base, stack + 64);
		lj_img_put64(im, L + ol->L_top, stack + 64);
	} else {
		lj_img_put64(im, stack + 8, fn[0] | (uint64_t)(8 | 5) << 32);
		lj_img_put64(im, stack + 16, fn[1] | ret0 << 32);
		lj_img_put64(im, stack + 24, fn[2] | ret1 << 32);
		lj_img_put64(im, L + ol->L_base, stack + 32);
		lj_img_put64(im, L + ol->L_top, stack + 32);
	}
}
