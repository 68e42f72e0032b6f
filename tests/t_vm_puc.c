/* t_vm_puc.c: unit tests of the PUC Lua walker over synthetic data:
 * lua_ident parsing, layout rows, 5.4 line decoding, call-site names from
 * hand-assembled bytecode, and walks of synthetic images (img_puc.c),
 * hostile ones included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "err.h"
#include "frame.h"
#include "img_puc.h"
#include "proc_mem.h"
#include "vm_puc.h"


static void t_ident(void)
{
	int mi, pa;
	const char *s54 = "$LuaVersion: Lua 5.4.4  Copyright (C) 1994-2022 Lua.org, PUC-Rio $"
			  "$LuaAuthors: R. Ierusalimschy, L. H. de Figueiredo, W. Celes $";
	CHECK(puc_ident_parse(s54, strlen(s54), &mi, &pa) == 0 && mi == 4 && pa == 4);
	const char *s51 = "$Lua: Lua 5.1.5 Copyright (C) 1994-2012 Lua.org, PUC-Rio $\n$Authors: x $\n";
	CHECK(puc_ident_parse(s51, strlen(s51), &mi, &pa) == 0 && mi == 1 && pa == 5);
	const char *s510 = "$Lua: Lua 5.1 Copyright (C) 1994-2006 Lua.org, PUC-Rio $\n";
	CHECK(puc_ident_parse(s510, strlen(s510), &mi, &pa) == 0 && mi == 1 && pa == 0);
	const char *s55 = "$LuaVersion: Lua 5.5.0  Copyright (C) 1994-2025 Lua.org, PUC-Rio $";
	CHECK(puc_ident_parse(s55, strlen(s55), &mi, &pa) < 0);
	CHECK(puc_ident_parse("LuaJIT 2.1", 10, &mi, &pa) < 0);
}

static void t_layout(void)
{
	const struct puc_layout *l;
	/* one row per release, the moves of docs/puc-lua.md §1.8 */
	CHECK((l = puc_layout_find(4, 4)) && l->L_stack == 48 && l->L_base_ci == 96 &&
	      l->L_errorJmp == 88 && l->g_mainthread == 264 && l->cist_tail == 0x20);
	CHECK((l = puc_layout_find(4, 0)) && l->L_stack == 56 && l->g_mainthread == 256 &&
	      l->exec == PUC_EXEC_EVERY && l->cist_tail == 0x10);
	CHECK((l = puc_layout_find(4, 1)) && l->L_errorJmp == 80 && l->L_size == 192);
	CHECK((l = puc_layout_find(4, 2)) && l->L_size == 192 && l->cist_fresh == 0x04);
	CHECK((l = puc_layout_find(4, 8)) && l->L_size == 200);
	CHECK(puc_layout_find(4, 9) == NULL || puc_layout_find(4, 9)->rel_hi < 9);
	CHECK((l = puc_layout_find(3, 6)) && l->L_status == 12 && l->g_mainthread == 200 &&
	      l->ci_callstatus_size == 2 && l->cist_fresh == 0x08);
	CHECK((l = puc_layout_find(3, 0)) && l->ts_data == 32 && l->L_status == 10 &&
	      l->exec == PUC_EXEC_REENTRY);
	CHECK((l = puc_layout_find(3, 3)) && l->ci_callstatus_size == 1);
	CHECK((l = puc_layout_find(2, 0)) && l->ci_savedpc == 48 && l->g_mainthread == 240);
	CHECK((l = puc_layout_find(2, 4)) && l->ci_savedpc == 56 && l->g_mainthread == 264);
	/* Table: 5.1's order up to 5.2.3, 5.3's from 5.2.4 (docs/puc-lua.md §1.7) */
	CHECK((l = puc_layout_find(2, 0)) && l->ci_size == 80 && l->t_metatable == 16 &&
	      l->t_array == 24 && l->t_node == 32 && l->t_sizearray == 56);
	for (int p = 1; p <= 3; p++)
		CHECK((l = puc_layout_find(2, p)) && l->ci_savedpc == 56 && l->ci_size == 80 &&
		      l->t_metatable == 16 && l->t_array == 24 && l->t_node == 32 &&
		      l->t_sizearray == 56);
	CHECK((l = puc_layout_find(2, 4)) && l->t_metatable == 40 && l->t_array == 16 &&
	      l->t_node == 24 && l->t_sizearray == 12);
	CHECK((l = puc_layout_find(2, -1)) && l->rel_hi == 4);
	CHECK((l = puc_layout_find(1, 5)) && l->L_savedpc == 48 && l->ci_size == 40 &&
	      l->t_node == 32 && l->exec == PUC_EXEC_51);
	/* block invariant D = sizeof(lua_State) = LG.g - LX.l (docs/puc-lua.md §9.1) */
	int want_D[][3] = { { 1, 5, 184 }, { 2, 4, 208 }, { 3, 6, 208 }, { 4, 0, 200 },
			    { 4, 1, 192 }, { 4, 2, 192 }, { 4, 4, 200 } };
	for (size_t i = 0; i < sizeof want_D / sizeof want_D[0]; i++)
		CHECK((l = puc_layout_find(want_D[i][0], want_D[i][1])) && l->L_size == want_D[i][2]);
	for (int i = 0; i < puc_nlayouts; i++) {
		l = &puc_layouts[i];
		CHECK(l->ci_size <= 128 && l->L_size <= 256 && l->g_tmname + 8 <= 512);
	}
}

static void t_line54(void)
{
	/* linedefined 10; pcs 0..5 deltas +1,+1,ABS,+2,-1,+0; abs (2 -> 40) */
	int8_t li[] = { 1, 1, -128, 2, -1, 0 };
	int32_t abs[] = { 2, 40 };
	CHECK(puc_line54(li, 6, abs, 1, 10, 0) == 11);
	CHECK(puc_line54(li, 6, abs, 1, 10, 1) == 12);
	CHECK(puc_line54(li, 6, abs, 1, 10, 2) == 40);
	CHECK(puc_line54(li, 6, abs, 1, 10, 3) == 42);
	CHECK(puc_line54(li, 6, abs, 1, 10, 4) == 41);
	CHECK(puc_line54(li, 6, abs, 1, 10, 5) == 41);
	CHECK(puc_line54(li, 6, abs, 1, 10, 6) == -1);
	CHECK(puc_line54(li, 6, NULL, 0, 10, 1) == 12);
	/* many absolute entries: binary search picks the last <= pc */
	int8_t li2[300];
	int32_t abs2[6] = { 0, 100, 128, 500, 256, 900 };
	for (int i = 0; i < 300; i++)
		li2[i] = (i == 0 || i == 128 || i == 256) ? -128 : 1;
	CHECK(puc_line54(li2, 300, abs2, 3, 1, 0) == 100);
	CHECK(puc_line54(li2, 300, abs2, 3, 1, 127) == 227);
	CHECK(puc_line54(li2, 300, abs2, 3, 1, 130) == 502);
	CHECK(puc_line54(li2, 300, abs2, 3, 1, 299) == 943);
}

/* names: synthetic Protos */
struct fake { const char *loc[8]; int locs, loce; const char *up[4]; const char *k[8]; };
static const char *f_local(void *a, int n, int pc)
{
	struct fake *f = a;
	return (n >= 1 && n <= 8 && pc >= f->locs && pc < f->loce) ? f->loc[n - 1] : NULL;
}
static const char *f_up(void *a, int i) { return i >= 0 && i < 4 ? ((struct fake *)a)->up[i] : NULL; }
static const char *f_k(void *a, int i) { return i >= 0 && i < 8 ? ((struct fake *)a)->k[i] : NULL; }

#define i54 img_puc_i54
#define i53 img_puc_i53
#define i53bx img_puc_i53bx

static void t_names(void)
{
	const char *name, *what;
	struct fake fk = { .up = { "_ENV", "helper" }, .k = { "print", "sub", "foo" } };
	const struct puc_layout *l54 = puc_layout_find(4, 4);
	/* GETTABUP 0 _ENV "print"; CALL 0 */
	uint32_t c1[] = { i54(11, 0, 0, 0, 0), i54(68, 0, 1, 1, 0), i54(70, 0, 1, 0, 0) };
	struct puc_nameinfo ni = { l54, c1, 3, &fk, f_local, f_up, f_k, NULL };
	what = puc_funcname(&ni, 1, &name);
	CHECK(what && !strcmp(what, "global") && !strcmp(name, "print"));
	/* GETUPVAL 0 1; CALL */
	uint32_t c2[] = { i54(9, 0, 1, 0, 0), i54(68, 0, 1, 1, 0) };
	ni.code = c2; ni.sizecode = 2;
	what = puc_funcname(&ni, 1, &name);
	CHECK(what && !strcmp(what, "upvalue") && !strcmp(name, "helper"));
	/* SELF 0 1 k"sub"; CALL */
	uint32_t c3[] = { i54(20, 0, 1, 1, 1), i54(68, 0, 2, 1, 0) };
	ni.code = c3;
	what = puc_funcname(&ni, 1, &name);
	CHECK(what && !strcmp(what, "method") && !strcmp(name, "sub"));
	/* local: register 0 is an active local "cb" */
	struct fake fl = { .loc = { "cb" }, .locs = 0, .loce = 10 };
	ni.arg = &fl; ni.code = c2;
	what = puc_funcname(&ni, 1, &name);
	CHECK(what && !strcmp(what, "local") && !strcmp(name, "cb"));
	/* metamethod: MMBIN with event TM_ADD (6) -> "add" in 5.4 */
	uint32_t c4[] = { i54(34, 0, 1, 2, 0), i54(46, 1, 2, 6, 0) };
	ni.arg = &fk; ni.code = c4;
	what = puc_funcname(&ni, 1, &name);
	CHECK(what && !strcmp(what, "metamethod") && !strcmp(name, "add"));
	/* GETFIELD on a table register: field */
	uint32_t c5[] = { i54(11, 0, 0, 2, 0), i54(14, 0, 0, 1, 0), i54(68, 0, 1, 1, 0) };
	ni.code = c5; ni.sizecode = 3;
	what = puc_funcname(&ni, 2, &name);
	CHECK(what && !strcmp(what, "field") && !strcmp(name, "sub"));
	/* a jump over the writer makes it unknown */
	uint32_t c6[] = { 56 | (uint32_t)(1 + 16777215) << 7,   /* JMP +1 */
			  i54(9, 0, 1, 0, 0), i54(68, 0, 1, 1, 0) };
	ni.code = c6;
	what = puc_funcname(&ni, 2, &name);
	CHECK(what == NULL);
	/* 5.3: GETTABUP _ENV "print"; CALL; metamethod __index from GETTABLE */
	const struct puc_layout *l53 = puc_layout_find(3, 6);
	uint32_t d1[] = { i53(6, 0, 0, 0x100 | 0), i53(36, 0, 1, 1), i53(7, 1, 0, 0x100 | 2) };
	struct puc_nameinfo n3 = { l53, d1, 3, &fk, f_local, f_up, f_k, NULL };
	what = puc_funcname(&n3, 1, &name);
	CHECK(what && !strcmp(what, "global") && !strcmp(name, "print"));
	what = puc_funcname(&n3, 2, &name);
	CHECK(what && !strcmp(what, "metamethod") && !strcmp(name, "__index"));
	/* 5.1: GETGLOBAL "print"; CALL */
	const struct puc_layout *l51 = puc_layout_find(1, 5);
	uint32_t e1[] = { i53bx(5, 0, 0), i53(28, 0, 1, 1), i53(30, 0, 1, 0) };
	struct puc_nameinfo n1 = { l51, e1, 3, &fk, f_local, f_up, f_k, NULL };
	what = puc_funcname(&n1, 1, &name);
	CHECK(what && !strcmp(what, "global") && !strcmp(name, "print"));
	CHECK(puc_is_call_op(l51, e1[1]) && !puc_is_call_op(l51, e1[0]));
}

/* untrusted bytecode: random instructions, registers, constants and
 * jumps must never read outside the arrays or loop (run under ASan in
 * the sanitizer build) */
static int f_child(void *a, int i) { (void)a; return i & 7; }
static int known_what(const char *w)
{
	static const char *const kinds[] = { "global", "local", "method", "field", "upvalue",
					     "constant", "for iterator", "metamethod" };
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (!strcmp(w, kinds[i]))
			return 1;
	return 0;
}
static void t_fuzz(void)
{
	static uint32_t code[512];
	int8_t li[512];
	int32_t abs[64];
	uint64_t x = 88172645463325252ull;
	struct fake fk = { .loc = { "a", "b", "c" }, .locs = 0, .loce = 400,
			   .up = { "_ENV", "u" }, .k = { "k0", "k1", NULL, "k3" } };
	for (int round = 0; round < 20000; round++) {
		int n = 1 + (int)(x % 511);
		for (int i = 0; i < n; i++) {
			x ^= x << 13; x ^= x >> 7; x ^= x << 17;
			code[i] = (uint32_t)x;
			li[i] = (int8_t)(x >> 32);
		}
		for (int i = 0; i < 64; i++)
			abs[i] = (int32_t)((x >> (i % 32)) & 1023) - 10;
		const struct puc_layout *l = &puc_layouts[round % puc_nlayouts];
		struct puc_nameinfo ni = { l, code, n, &fk, f_local, f_up, f_k, f_child };
		const char *name;
		for (int pc = -2; pc < n + 2; pc += 1 + (int)(x % 17)) {
			const char *what = puc_funcname(&ni, pc, &name);
			/* a kind the decoder knows, and a name from the
			 * callbacks or its own literals, never a wild one */
			if (what) {
				CHECK(known_what(what) && name && strlen(name) < 32);
			} else if (pc < 0 || pc >= n) {
				CHECK(name == NULL);
			}
		}
		for (int pc = -1; pc <= n; pc++) {
			int line = puc_line54(li, n, abs, (int)(x % 32), 5, pc);   /* 32 pairs */
			CHECK(line >= -1 && (pc >= 0 && pc < n ? 1 : line == -1));
		}
	}
}

/* The synthetic image of tests/img_puc.c for every layout row: a Lua
 * function at pc 1 (the CALL of global 'print', line 11) and the C
 * function it called. Then, on the 5.4 row, the same image with a
 * CallInfo cycle, torn tags, a relative func and a wild savedpc, and
 * garbage in every region. */
static uint8_t img[IMG_PUC_NREG][IMG_PUC_REGLEN];
static void put64(int r, int off, uint64_t v) { memcpy(&img[r][off], &v, 8); }

static int walk_img(const struct puc_layout *l, struct stack *st)
{
	struct mem_region r[IMG_PUC_NREG];
	for (int i = 0; i < IMG_PUC_NREG; i++)
		r[i] = (struct mem_region){ img_puc_addr[i], img[i], sizeof img[i] };
	struct mem_image im;
	mem_image_init(&im, r, IMG_PUC_NREG);
	return puc_walk_image(l, &im.base, img_puc_addr[IMG_RL], st);
}

static void t_image(void)
{
	const uint64_t *A = img_puc_addr;
	struct stack st = { 0 };
	for (int i = 0; i < puc_nlayouts; i++) {
		const struct puc_layout *l = &puc_layouts[i];
		img_puc_build(l, img);
		int rc = walk_img(l, &st);
		if (rc != 0 || st.n != 2)
			fprintf(stderr, "image walk %s: rc %d (%s), %d frames\n", l->name, rc,
				err_text(rc), st.n);
		CHECK(rc == 0 && st.n == 2);
		if (rc == 0 && st.n == 2) {
			CHECK(st.f[0].kind == FRAME_C && !strcmp(st.f[0].name, "print") &&
			      st.f[0].addr == 0x401000);
			CHECK(st.f[1].kind == FRAME_LUA && st.f[1].line == 11 && st.f[1].firstline == 10 &&
			      !strcmp(st.f[1].file, "test.lua") &&
			      !strcmp(st.f[1].name, "function <test.lua:10>"));
		}
	}
	/* two Protos of one stack in one Proto cache slot, every 5.2+ row */
	int nslot = 0;
	for (int i = 0; i < puc_nlayouts; i++) {
		const struct puc_layout *l = &puc_layouts[i];
		if (img_puc_build_shared_slot(l, img) < 0)
			continue;
		nslot++;
		int rc = walk_img(l, &st);
		CHECK(rc == 0 && st.n == 3);
		if (rc != 0 || st.n != 3) {
			fprintf(stderr, "shared-slot image %s: rc %d, %d frames\n", l->name, rc, st.n);
			continue;
		}
		CHECK(!strcmp(st.f[0].name, "print"));
		CHECK(!strcmp(st.f[1].name, "inner") && !strcmp(st.f[1].file, "test.lua") &&
		      st.f[1].line == 11 && st.f[1].firstline == 10);
		CHECK(!strcmp(st.f[2].name, "function <b.lua:30>") && !strcmp(st.f[2].file, "b.lua") &&
		      st.f[2].firstline == 30);
	}
	CHECK(nslot >= 10);
	const struct puc_layout *l = puc_layout_find(4, 4);
	img_puc_build(l, img);
	CHECK(walk_img(l, &st) == 0 && st.n == 2);
	/* a CallInfo cycle (ci 0's previous is ci 1): bounded, never a loop */
	put64(IMG_RCI, l->ci_previous, A[IMG_RCI] + 128);
	int rc = walk_img(l, &st);
	CHECK(rc <= 0 && st.n <= 1100);
	put64(IMG_RCI, l->ci_previous, A[IMG_RL] + (uint64_t)l->L_base_ci);
	/* torn: the Lua slot's tag says C closure, or a 5.4.5+ relative func */
	img[IMG_RSTK][16 + 8] = (uint8_t)l->tag_ccl;
	CHECK(walk_img(l, &st) == -LS_E_TORN);
	img[IMG_RSTK][16 + 8] = (uint8_t)l->tag_lcl;
	put64(IMG_RCI, l->ci_func, 16);
	CHECK(walk_img(l, &st) == -LS_E_TORN);
	put64(IMG_RCI, l->ci_func, A[IMG_RSTK] + 16);
	/* savedpc outside the code */
	put64(IMG_RCI, l->ci_savedpc, A[IMG_RCODE] + 400);
	CHECK(walk_img(l, &st) == -LS_E_TORN);
	put64(IMG_RCI, l->ci_savedpc, A[IMG_RCODE] + 8);
	CHECK(walk_img(l, &st) == 0 && st.n == 2);
	/* garbage everywhere: random bytes in every region, never a crash;
	 * a walk gives an error or named frames */
	uint64_t x = 0x9E3779B97F4A7C15ull;
	for (int round = 0; round < 3000; round++) {
		int reg = (int)(x % IMG_PUC_NREG);
		for (int k = 0; k < 6; k++) {
			x ^= x << 13; x ^= x >> 7; x ^= x << 17;
			img[reg][x % IMG_PUC_REGLEN] = (uint8_t)(x >> 40);
		}
		rc = walk_img(&puc_layouts[round % puc_nlayouts], &st);
		CHECK(rc <= 0 && st.n <= 1100);
		for (int k = 0; rc == 0 && k < st.n; k++)
			CHECK(st.f[k].name != NULL);
	}
	stack_free(&st);
}

/* The name decoder's path (getobjname through puc_walk_image) over a
 * hostile 5.4 image (issue 13 item 1: SIGSEGV in strcmp inside
 * getobjname under torn memory). A C function called as global "print"
 * from Lua function f (chunk a.lua), itself called as global "inner"
 * from g (chunk b.lua). f's and g's Protos sit 16 KiB apart, so they
 * share a slot of the walker's direct-mapped Proto cache: reading g's
 * evicts f's while the walk still uses it (before the fix: freed, and
 * getobjname's upvalue names read from the freed copy; ASan reports a
 * heap-use-after-free). The Protos also carry what torn memory gives:
 * local names through wild and unaligned pointers, a string claiming
 * 1 MiB whose bytes run to the end of its region unterminated, an
 * upvalue name pointer into nothing, a constant tagged string pointing
 * at garbage. Names must come out right or not at all, bounded. */
enum { NR = 10, NLEN = 1024 };
static uint8_t nimg[NR][NLEN];
static void nput64(int r, int off, uint64_t v) { memcpy(&nimg[r][off], &v, 8); }
static void nput32(int r, int off, uint32_t v) { memcpy(&nimg[r][off], &v, 4); }
static void nput16(int r, int off, uint16_t v) { memcpy(&nimg[r][off], &v, 2); }

static void t_image_names(void)
{
	enum { RL, RSTK, RCI, RCL, RPF, RPG, RCODE, RSTR, RK, RJUNK };
	const uint64_t A[NR] = { 0x100000, 0x110000, 0x120000, 0x130000,
				 0x140000, 0x144000,   /* same Proto cache slot */
				 0x150000, 0x160000, 0x170000, 0x180000 };
	const struct puc_layout *l = puc_layout_find(4, 4);
	memset(nimg, 0, sizeof nimg);
	/* lua_State: ci -> the C frame */
	nimg[RL][8] = (uint8_t)l->gct_thread;
	nput64(RL, l->L_top, A[RSTK] + 96);
	nput64(RL, l->L_ci, A[RCI] + 128);
	nput64(RL, l->L_stack, A[RSTK]);
	nput64(RL, l->L_stack_last, A[RSTK] + 800);
	/* stack: g's closure, f's closure, the light C function */
	nput64(RSTK, 16, A[RCL]);
	nimg[RSTK][16 + 8] = (uint8_t)l->tag_lcl;
	nput64(RSTK, 48, A[RCL] + 128);
	nimg[RSTK][48 + 8] = (uint8_t)l->tag_lcl;
	nput64(RSTK, 80, 0x401000);
	nimg[RSTK][80 + 8] = (uint8_t)l->tag_lcf;
	/* CallInfos: 0 g (FRESH), 1 f, 2 C */
	uint64_t prev[3] = { A[RL] + (uint64_t)l->L_base_ci, A[RCI], A[RCI] + 64 };
	uint64_t func[3] = { A[RSTK] + 16, A[RSTK] + 48, A[RSTK] + 80 };
	uint16_t st[3] = { (uint16_t)l->cist_fresh, 0, (uint16_t)l->cist_c };
	for (int i = 0; i < 3; i++) {
		nput64(RCI, 64 * i + l->ci_func, func[i]);
		nput64(RCI, 64 * i + l->ci_previous, prev[i]);
		nput16(RCI, 64 * i + l->ci_callstatus, st[i]);
		if (i < 2)   /* both at pc 1, the CALL */
			nput64(RCI, 64 * i + l->ci_savedpc, A[RCODE] + 256 * (uint64_t)i + 8);
	}
	/* closures: g at 0, f at 128 */
	nimg[RCL][8] = (uint8_t)l->gct_lcl;
	nput64(RCL, l->lcl_p, A[RPG]);
	nimg[RCL][128 + 8] = (uint8_t)l->gct_lcl;
	nput64(RCL, 128 + l->lcl_p, A[RPF]);
	/* strings, 64 bytes apart: "@b.lua" "@a.lua" "_ENV" "print" "inner";
	 * then at 320 one claiming 1 MiB, unterminated to the region's end */
	const char *str[5] = { "@b.lua", "@a.lua", "_ENV", "print", "inner" };
	for (int i = 0; i < 5; i++) {
		nimg[RSTR][64 * i + 8] = (uint8_t)l->gct_lstr;   /* long: size_t length */
		nput64(RSTR, 64 * i + 16, strlen(str[i]));
		memcpy(&nimg[RSTR][64 * i + l->ts_data], str[i], strlen(str[i]));
	}
	nimg[RSTR][320 + 8] = (uint8_t)l->gct_lstr;
	nput64(RSTR, 320 + 16, 1u << 20);
	memset(&nimg[RSTR][320 + l->ts_data], 'x', NLEN - 320 - (size_t)l->ts_data);
	/* junk region: not a string anywhere */
	memset(nimg[RJUNK], 0xa5, NLEN);
	/* Protos: g (index 0, RPG) and f (index 1, RPF); code at RCODE+256i */
	for (int i = 0; i < 2; i++) {
		int r = i ? RPF : RPG, c = 256 * i;
		uint64_t code = A[RCODE] + (uint64_t)c;
		nimg[r][8] = (uint8_t)l->p_tt_value;
		nput32(r, l->p_sizecode, 3);
		nput32(r, l->p_sizelineinfo, 3);
		nput32(r, l->p_linedefined, 10 + 10 * i);
		nput32(r, l->p_lastlinedefined, 14 + 10 * i);
		nput32(r, l->p_sizeupvalues, 2);
		nput32(r, l->p_sizek, 2);
		nput32(r, l->p_sizelocvars, 4);
		nput64(r, l->p_code, code);
		nput64(r, l->p_lineinfo, code + 64);
		nput64(r, l->p_upvalues, code + 128);
		nput64(r, l->p_locvars, code + 160);
		nput64(r, l->p_k, A[RK] + 64 * (uint64_t)i);
		nput64(r, l->p_source, A[RSTR] + 64 * (uint64_t)i);
		nput32(RCODE, c + 0, i54(11, 0, 0, 0, 0));   /* GETTABUP 0 _ENV k0 */
		nput32(RCODE, c + 4, i54(68, 0, 1, 1, 0));   /* CALL 0 */
		nput32(RCODE, c + 8, i54(70, 0, 1, 0, 0));   /* RETURN */
		nimg[RCODE][c + 64] = 1, nimg[RCODE][c + 65] = 0, nimg[RCODE][c + 66] = 1;
		/* upvalue 0 "_ENV" (Upvaldesc: name first), 1 into nothing */
		nput64(RCODE, c + 128, A[RSTR] + 128);
		nput64(RCODE, c + 144, 0x7ff000001000ull);
		/* locals, none active at pc 1 but all read: wild, unaligned,
		 * the unterminated 1 MiB string, junk */
		uint64_t ln[4] = { 0x7ff000002000ull, A[RSTR] + 3, A[RSTR] + 320, A[RJUNK] + 64 };
		for (int k = 0; k < 4; k++) {
			nput64(RCODE, c + 160 + 16 * k, ln[k]);
			nput32(RCODE, c + 160 + 16 * k + 8, 5);
			nput32(RCODE, c + 160 + 16 * k + 12, 6);
		}
		/* k0: g calls "inner", f calls "print"; k1: a string into junk */
		nput64(RK, 64 * i, A[RSTR] + (i ? 192 : 256));
		nimg[RK][64 * i + 8] = (uint8_t)l->tag_lstr;
		nput64(RK, 64 * i + 16, A[RJUNK] + 8);
		nimg[RK][64 * i + 16 + 8] = (uint8_t)l->tag_lstr;
	}
	struct mem_region r[NR];
	for (int i = 0; i < NR; i++)
		r[i] = (struct mem_region){ A[i], nimg[i], NLEN };
	struct mem_image im;
	mem_image_init(&im, r, NR);
	struct stack st3 = { 0 };
	int rc = puc_walk_image(l, &im.base, A[RL], &st3);
	if (rc != 0 || st3.n != 3)
		fprintf(stderr, "names image walk: rc %d (%s), %d frames\n", rc, err_text(rc), st3.n);
	CHECK(rc == 0 && st3.n == 3);
	for (int k = 0; getenv("T_VM_PUC_DEBUG") && k < st3.n; k++)
		fprintf(stderr, "frame %d: %s %s:%d (%d)\n", k, st3.f[k].name,
			st3.f[k].file ? st3.f[k].file : "", st3.f[k].line, st3.f[k].firstline);
	if (rc == 0 && st3.n == 3) {
		CHECK(st3.f[0].kind == FRAME_C && !strcmp(st3.f[0].name, "print"));
		CHECK(st3.f[1].kind == FRAME_LUA && !strcmp(st3.f[1].name, "inner") &&
		      !strcmp(st3.f[1].file, "a.lua") && st3.f[1].firstline == 20 && st3.f[1].line == 21);
		CHECK(st3.f[2].kind == FRAME_LUA && !strcmp(st3.f[2].name, "function <b.lua:10>") &&
		      !strcmp(st3.f[2].file, "b.lua") && st3.f[2].firstline == 10);
	}
	/* the constant "print" through the unterminated string: no name,
	 * never a read past it */
	nput64(RK, 64, A[RSTR] + 320);
	rc = puc_walk_image(l, &im.base, A[RL], &st3);
	CHECK(rc == 0 && st3.n == 3);
	if (rc == 0 && st3.n == 3) {
		CHECK(strlen(st3.f[0].name) <= 1024 + 2);
		CHECK(!strcmp(st3.f[1].name, "inner"));
	}
	/* torn names: garbage over the strings and the name tables, walked
	 * again and again (ASan checks every read) */
	uint64_t x = 0x2545F4914F6CDD1Dull;
	for (int round = 0; round < 4000; round++) {
		int reg = round % 2 ? RSTR : (round % 4 ? RCODE : RK);
		for (int k = 0; k < 4; k++) {
			x ^= x << 13; x ^= x >> 7; x ^= x << 17;
			nimg[reg][x % NLEN] = (uint8_t)(x >> 40);
		}
		rc = puc_walk_image(l, &im.base, A[RL], &st3);
		CHECK(rc <= 0 && st3.n <= 3);
		for (int k = 0; rc == 0 && k < st3.n; k++)
			CHECK(st3.f[k].name && strlen(st3.f[k].name) < 2048);
	}
	stack_free(&st3);
}

/* --rows MINOR PATCH: the row's offsets as "struct field offset" lines,
 * named as in the DWARF (tests/puc-layout-dwarf.test compares them). */
static int print_rows(int minor, int patch)
{
	const struct puc_layout *l = puc_layout_find(minor, patch);
	if (!l)
		return 1;
#define P(st, fld, v) do { if ((v) >= 0) printf("%s %s %d\n", st, fld, (v)); } while (0)
	P("lua_State", "status", l->L_status);
	P("lua_State", "top", l->L_top);
	P("lua_State", "base", l->L_base);
	P("lua_State", "l_G", l->L_l_G);
	P("lua_State", "ci", l->L_ci);
	P("lua_State", "savedpc", l->L_savedpc);
	P("lua_State", "stack_last", l->L_stack_last);
	P("lua_State", "stack", l->L_stack);
	P("lua_State", "end_ci", l->L_end_ci);
	P("lua_State", "base_ci", l->L_base_ci);
	P("lua_State", "nCcalls", l->L_nCcalls);
	P("lua_State", "errorJmp", l->L_errorJmp);
	P("CallInfo", "func", l->ci_func);
	P("CallInfo", "top", l->ci_top);
	P("CallInfo", "base", l->ci_base);
	P("CallInfo", "previous", l->ci_previous);
	P("CallInfo", "next", l->ci_next);
	P("CallInfo", "savedpc", l->ci_savedpc);
	P("CallInfo", "callstatus", l->ci_callstatus);
	P("CallInfo", "tailcalls", l->ci_tailcalls);
	P("global_State", "frealloc", l->g_frealloc);
	P("global_State", "ud", l->g_ud);
	P("global_State", "l_registry", l->g_l_registry);
	P("global_State", "currentwhite", l->g_currentwhite);
	P("global_State", l->minor == 1 ? "rootgc" : "allgc", l->g_allgc);
	P("global_State", "mainthread", l->g_mainthread);
	P("global_State", "tmname", l->g_tmname);
	P("CClosure", "nupvalues", l->cl_nupvalues);
	P("CClosure", "f", l->ccl_f);
	P("CClosure", "upvalue", l->ccl_upvalue);
	P("LClosure", "p", l->lcl_p);
	P("Proto", "sizeupvalues", l->p_sizeupvalues);
	P("Proto", "sizek", l->p_sizek);
	P("Proto", "sizecode", l->p_sizecode);
	P("Proto", "sizelineinfo", l->p_sizelineinfo);
	P("Proto", "sizep", l->p_sizep);
	P("Proto", "sizelocvars", l->p_sizelocvars);
	P("Proto", "sizeabslineinfo", l->p_sizeabslineinfo);
	P("Proto", "linedefined", l->p_linedefined);
	P("Proto", "lastlinedefined", l->p_lastlinedefined);
	P("Proto", "k", l->p_k);
	P("Proto", "code", l->p_code);
	P("Proto", "p", l->p_p);
	P("Proto", "upvalues", l->p_upvalues);
	P("Proto", "lineinfo", l->p_lineinfo);
	P("Proto", "abslineinfo", l->p_abslineinfo);
	P("Proto", "locvars", l->p_locvars);
	P("Proto", "source", l->p_source);
	P("Proto", "nups", l->p_nups);
	P("Table", "lsizenode", l->t_lsizenode);
	P("Table", "array", l->t_array);
	P("Table", "node", l->t_node);
	P("Table", l->minor == 4 ? "alimit" : "sizearray", l->t_sizearray);
	P("Table", "metatable", l->t_metatable);
	printf("sizeof lua_State %d\nsizeof CallInfo %d\n", l->L_size, l->ci_size);
#undef P
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "--rows") == 0)
		return print_rows(atoi(argv[2]), atoi(argv[3]));
	t_ident();
	t_layout();
	t_line54();
	t_names();
	t_fuzz();
	t_image();
	t_image_names();
	return check_summary("t_vm_puc");
}
