/* fuzz/fuzz_luajit.c: libFuzzer target for the LuaJIT 2.1 walker over
 * synthetic memory images (lj_walk_image: global_State validation,
 * registry/_LOADED name learning, one thread's frames with names and
 * lines; the search for resumers from its cframes). Corrupted pointers,
 * link cycles, huge sizes and wrong tags
 * must give an error or frames, never a crash, a hang or a read outside
 * the image.
 *
 * Input: byte 0 picks the layout row (mod lj_nlayouts); byte 1: bit 0
 * walks g's cur_L instead of the main thread, bit 1 skips the
 * global_State (walks the main thread alone). The rest: region 0 of
 * GGLEN bytes at A[0] (main lua_State, global_State right behind it),
 * then NREG-1 regions of REGLEN bytes (short or absent when the input
 * is). Roles as the seeds lay them out:
 *   1 Lua stack   2 functions (128 bytes apart)   3 protos (256 apart)
 *   4 strings (64 apart)   5 tables (128 apart)   6 their nodes (64 apart)
 * The 16 bytes around the dispatch table (g + G2DISP - 8) read as zeros.
 *
 * Built with -DFUZZ_LUAJIT_SEEDS instead of libFuzzer, main() writes one
 * valid image per layout row into the directory given (the seeds in
 * fuzz/seeds/fuzz_luajit/): a main chunk calling Lua function f calling
 * the builtin string.format, as tests/t_vm_luajit.c builds for GC64,
 * with upvalue and local names. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frame.h"
#include "proc_mem.h"
#include "vm_luajit.h"

#define NREG 7
#define GGLEN 1280
#define REGLEN 512
#define MAXF 64
static const uint64_t A[NREG] = { 0x10000, 0x20000, 0x30000, 0x40000, 0x50000, 0x60000, 0x70000 };
static const uint8_t zeros[16];

/* regions for input DATA (after the 2 header bytes); returns the count */
static int regions(const struct lj_layout *lay, const uint8_t *data, size_t size,
		   struct mem_region *r)
{
	int n = 0;
	size_t off = 0;
	for (int i = 0; i < NREG && off < size; i++) {
		size_t want = i == 0 ? GGLEN : REGLEN;
		size_t len = size - off < want ? size - off : want;
		r[n++] = (struct mem_region){ A[i], data + off, len };
		off += len;
	}
	r[n++] = (struct mem_region){ A[0] + lay->sizeof_L + lay->g2disp - 8, zeros, sizeof zeros };
	return n;
}

#ifndef FUZZ_LUAJIT_SEEDS

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const struct lj_layout *lay = &lj_layouts[data[0] % lj_nlayouts];
	struct mem_region r[NREG + 1];
	int n = regions(lay, data + 2, size - 2, r);
	struct mem_image im;
	mem_image_init(&im, r, n);
	uint64_t L = A[0], g = A[0] + lay->sizeof_L;
	if (data[1] & 1)
		L = 0;
	if (data[1] & 2)
		g = 0, L = A[0];
	struct frame fr[MAXF];
	int k = lj_walk_image(lay, &im.base, g, L, fr, MAXF);
	if (k > MAXF)
		abort();
	/* the threads below the main lua_State's cframes (capture's search
	 * for resumers), main thread unknown */
	uint64_t res[4];
	int nr = lj_resumers_image(lay, &im.base, A[0], 0, res, 4);
	if (nr > 4)
		abort();
	size_t sum = 0;
	for (int i = 0; i < k; i++) {
		if (!fr[i].name)
			abort();
		sum += strlen(fr[i].name);
		if (fr[i].file)
			sum += strlen(fr[i].file);
	}
	return sum == (size_t)-1;
}

#else /* seed writer */

static uint8_t img[GGLEN + (NREG - 1) * REGLEN];
static uint8_t *at(uint64_t a)
{
	for (int i = NREG - 1; i >= 0; i--)
		if (a >= A[i])
			return img + (i ? GGLEN + (size_t)(i - 1) * REGLEN : 0) + (a - A[i]);
	abort();
}
static void put64(uint64_t a, uint64_t v) { memcpy(at(a), &v, 8); }
static void put32(uint64_t a, uint32_t v) { memcpy(at(a), &v, 4); }
static const struct lj_objlayout *ol;
static int gc64;
static void putref(uint64_t a, uint64_t v)
{
	if (gc64)
		put64(a, v);
	else
		put32(a, (uint32_t)v);
}
/* a TValue of internal type ITYPE pointing to P */
static uint64_t tv(int itype, uint64_t p)
{
	if (gc64)
		return ((uint64_t)(int64_t)itype << 47) | p;
	return (uint64_t)(uint32_t)itype << 32 | (uint32_t)p;
}
static void mkstr(const struct lj_layout *l, uint64_t a, const char *s)
{
	at(a)[ol->gct] = LJ_GCT_STR;
	put32(a + l->str_len, (uint32_t)strlen(s));
	memcpy(at(a + l->str_data), s, strlen(s) + 1);
}
/* one-node table at T, node at N: key string KS, value V */
static void mktab1(uint64_t t, uint64_t n, uint64_t ks, uint64_t v)
{
	at(t)[ol->gct] = LJ_GCT_TAB;
	putref(t + ol->tab_node, n);
	put32(t + ol->tab_hmask, 0);
	put64(n, v);
	put64(n + ol->node_key, tv(-5, ks));
}
static uint32_t ins(int op, int a, int b, int c) { return (uint32_t)op | (uint32_t)a << 8 | (uint32_t)c << 16 | (uint32_t)b << 24; }
static uint32_t insd(int op, int a, int d) { return (uint32_t)op | (uint32_t)a << 8 | (uint32_t)d << 16; }

static void build(const struct lj_layout *l)
{
	memset(img, 0, sizeof img);
	gc64 = !!(l->flags & LJL_GC64);
	ol = gc64 ? &lj_obj_gc64 : &lj_obj_32;
	uint64_t L = A[0], g = A[0] + l->sizeof_L, stack = A[1];
	uint64_t fn[3] = { A[2], A[2] + 128, A[2] + 256 }, pt[2] = { A[3], A[3] + 256 };
	uint64_t s_chunk = A[4], s_f = A[4] + 64, s_format = A[4] + 128, s_loaded = A[4] + 192,
		 s_string = A[4] + 256;
	uint64_t reg = A[5], loaded = A[5] + 128, strlib = A[5] + 256;
	/* main thread and global_State */
	at(L)[ol->gct] = LJ_GCT_THREAD;
	putref(L + ol->L_glref, g);
	putref(L + ol->L_stack, stack);
	put32(L + ol->L_stacksize, 40);
	putref(g + l->g_mainthref, L);
	at(g + l->g_strempty)[ol->gct] = LJ_GCT_STR;
	put32(g + l->g_vmstate, 0xffffffffu);   /* interpreter */
	putref(g + l->g_cur_L, L);
	/* names: registry._LOADED.string.format = builtin 77 */
	mkstr(l, s_chunk, "@t.lua");
	mkstr(l, s_f, "f");
	mkstr(l, s_format, "format");
	mkstr(l, s_loaded, "_LOADED");
	mkstr(l, s_string, "string");
	put64(g + l->g_registrytv, tv(-12, reg));
	mktab1(reg, A[6], s_loaded, tv(-12, loaded));
	mktab1(loaded, A[6] + 64, s_string, tv(-12, strlib));
	mktab1(strlib, A[6] + 128, s_format, tv(-9, fn[2]));
	/* protos: 4 instructions, one GC constant (at k - gcref), line info
	 * after it; main chunk: FUNCV; GGET 0 "f"; CALL 0 1 1; RET0,
	 * f (line 3): FUNCF; GGET 0 "format"; CALL 0 1 1; RET0 */
	for (int i = 0; i < 2; i++) {
		uint64_t p = pt[i], bc = p + ol->pt_size;
		uint64_t k = bc + 16 + ol->gcref, li = k;
		at(p)[ol->gct] = LJ_GCT_PROTO;
		put32(p + ol->pt_sizebc, 4);
		put32(p + ol->pt_sizept, ol->pt_size + 16 + ol->gcref + 24);
		putref(p + ol->pt_chunkname, s_chunk);
		put32(p + ol->pt_firstline, i ? 3 : 0);
		put32(p + ol->pt_numline, i ? 2 : 9);
		putref(p + ol->pt_lineinfo, li);
		putref(p + ol->pt_k, k);
		put32(p + ol->pt_sizekgc, 1);
		putref(k - ol->gcref, i ? s_format : s_f);
		uint32_t code[4] = { i ? 89 : 92, insd(54, 0, 0), ins(66, 0, 1, 1), 75 };
		memcpy(at(bc), code, sizeof code);
		uint8_t lines[4] = { 0, i ? 1 : 5, i ? 1 : 5, i ? 2 : 6 };
		memcpy(at(li), lines, sizeof lines);
		/* upvalue names "u"; locals: "x" in slot 0 for pcs [0, 1),
		 * then a (for index) for [3, 4) */
		const uint8_t uv[4] = { 'u', 0 }, var[12] = { 'x', 0, 0, 1, 1, 3, 1, 0 };
		memcpy(at(li + 4), uv, sizeof uv);
		memcpy(at(li + 8), var, sizeof var);
		putref(p + ol->pt_uvinfo, li + 4);
		putref(p + ol->pt_varinfo, li + 8);
	}
	for (int i = 0; i < 3; i++)
		at(fn[i])[ol->gct] = LJ_GCT_FUNC;
	putref(fn[0] + ol->fn_pc, pt[0] + ol->pt_size);
	putref(fn[1] + ol->fn_pc, pt[1] + ol->pt_size);
	at(fn[2])[ol->fn_ffid] = 77;
	put64(fn[2] + ol->fn_f, 0x7000000);
	/* stack, from the bottom: thread, main chunk (CP link), f (PC after
	 * the main chunk's CALL), string.format (PC after f's CALL) */
	uint64_t ret0 = pt[0] + ol->pt_size + 12, ret1 = pt[1] + ol->pt_size + 12;
	put64(stack, tv(-7, L));
	if (gc64) {
		put64(stack + 8, ~0ull);
		put64(stack + 16, tv(-9, fn[0]));
		put64(stack + 24, 16 | 5);
		put64(stack + 32, tv(-9, fn[1]));
		put64(stack + 40, ret0);
		put64(stack + 48, tv(-9, fn[2]));
		put64(stack + 56, ret1);
		put64(L + ol->L_base, stack + 64);
		put64(L + ol->L_top, stack + 64);
	} else {
		put64(stack + 8, fn[0] | (uint64_t)(8 | 5) << 32);
		put64(stack + 16, fn[1] | ret0 << 32);
		put64(stack + 24, fn[2] | ret1 << 32);
		put64(L + ol->L_base, stack + 32);
		put64(L + ol->L_top, stack + 32);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < lj_nlayouts; i++) {
		const struct lj_layout *l = &lj_layouts[i];
		build(l);
		char path[4096];
		snprintf(path, sizeof path, "%s/row%02d", argv[1], i);
		FILE *f = fopen(path, "wb");
		uint8_t hdr[2] = { (uint8_t)i, 0 };
		if (!f || fwrite(hdr, 1, 2, f) != 2 || fwrite(img, 1, sizeof img, f) != sizeof img ||
		    fclose(f) != 0) {
			perror(path);
			return 1;
		}
		struct mem_region r[NREG + 1];
		int n = regions(l, img, sizeof img, r);
		struct mem_image im;
		mem_image_init(&im, r, n);
		struct frame fr[MAXF];
		int k = lj_walk_image(l, &im.base, A[0] + l->sizeof_L, A[0], fr, MAXF);
		printf("%s: %d frames:", l->name, k);
		for (int j = 0; j < k; j++)
			printf(" [%s %s:%d]", fr[j].name, fr[j].file ? fr[j].file : "", fr[j].line);
		printf("\n");
	}
	return 0;
}
#endif
