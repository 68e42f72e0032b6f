/* t_vm_luajit.c: unit tests for the LuaJIT walker over synthetic images:
 * code scanner and layout choice, shortsrc, global_State validation,
 * the shared image (tests/img_luajit.c) of every layout row walked frame
 * by frame, and the resumers of a coroutine found from its cframes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "proc_mem.h"
#include "vm_luajit.h"
#include "img_luajit.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); failures++; } } while (0)

static void test_code_derive(void)
{
	/* GC64 entry as in Debian luajit: mov r14,[rbp+0x10]; ...; add r14,0xf80 */
	uint8_t code[256];
	memset(code, 0x90, sizeof code);
	const uint8_t entry[] = { 0x4c, 0x8b, 0x75, 0x10, 0x48, 0x89, 0xe5, 0x49, 0x81, 0xc6, 0x80, 0x0f, 0, 0 };
	memcpy(code + 10, entry, sizeof entry);
	/* mov dword [r14-0xec8], ~0 */
	const uint8_t vs[] = { 0x41, 0xc7, 0x86, 0x38, 0xf1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	memcpy(code + 60, vs, sizeof vs);
	/* mov [r14-0xe10], rbp */
	const uint8_t cl[] = { 0x49, 0x89, 0xae, 0xf0, 0xf1, 0xff, 0xff };
	memcpy(code + 100, cl, sizeof cl);
	struct lj_codeinfo ci;
	CHECK(lj_code_derive(code, sizeof code, &ci) == 0);
	CHECK(ci.gc64 == 1 && ci.g2disp == 3968 && ci.vmstate == 184 && ci.cur_L == 368);
	const struct lj_layout *l = lj_layout_match(&ci, 0);
	CHECK(l && l->g2disp == 3968 && (l->flags & LJL_GC64));
	CHECK(lj_layout_match(&ci, LJL_OPENRESTY) == NULL);
	ci.g2disp = 1234;
	CHECK(lj_layout_match(&ci, 0) == NULL);
	/* 32-bit refs (tarantool 2.6): mov r14d,[rbp+8]; add r14d,0xc48 */
	memset(code, 0x90, sizeof code);
	const uint8_t e32[] = { 0x44, 0x8b, 0x75, 0x08, 0x41, 0x81, 0xc6, 0x48, 0x0c, 0, 0 };
	memcpy(code, e32, sizeof e32);
	CHECK(lj_code_derive(code, sizeof code, &ci) == 0);
	CHECK(ci.gc64 == 0 && ci.g2disp == 3144);
	l = lj_layout_match(&ci, LJL_TARANTOOL);
	CHECK(l && (l->flags & LJL_TARANTOOL) && l->g_cur_L == 280);
	memset(code, 0x90, sizeof code);
	CHECK(lj_code_derive(code, sizeof code, &ci) < 0);
}

static void test_shortsrc(void)
{
	char out[80];
	lj_shortsrc(out, sizeof out, "@t.lua", 6);
	CHECK(strcmp(out, "t.lua") == 0);
	lj_shortsrc(out, sizeof out, "=stdin", 6);
	CHECK(strcmp(out, "stdin") == 0);
	lj_shortsrc(out, sizeof out, "return 1\nfoo", 12);
	CHECK(strcmp(out, "[string \"return 1...\"]") == 0);
	lj_shortsrc(out, sizeof out, "x=1", 3);
	CHECK(strcmp(out, "[string \"x=1\"]") == 0);
	char longp[200] = "@";
	for (int i = 1; i < 150; i++)
		longp[i] = 'a' + i % 26;
	longp[150] = 0;
	lj_shortsrc(out, sizeof out, longp, 150);
	CHECK(strncmp(out, "...", 3) == 0 && strlen(out) == 59);
	CHECK(strcmp(out + 3, longp + 150 - 56) == 0);
}

static void test_layout_rows(void)
{
	/* rows agree with docs/luajit.md §3.2 and §3.3 (Debian 12 stock, T26, OpenResty) */
	int seen = 0;
	for (int i = 0; i < lj_nlayouts; i++) {
		const struct lj_layout *l = &lj_layouts[i];
		CHECK(l->g_jit_base > l->g_cur_L);
		if (l->g2disp == 3968 && (l->flags & LJL_GC64)) {
			CHECK(l->g_vmstate == 184 && l->g_cur_L == 368 && l->g_jit_base == 376 &&
			      l->g_mainthref == 192 && l->g_jtrace == 1112 && l->sizeof_L == 96);
			seen |= 1;
		}
		/* the Tarantool row: tests/luajit-layout-dwarf.test checks it
		 * (and lj_obj_32) against the DWARF (--rows) */
		if (l->flags & LJL_TARANTOOL)
			seen |= 2;
		if ((l->flags & LJL_OPENRESTY) && (l->flags & LJL_GC64) && l->g2disp == 4008) {
			CHECK(l->sizeof_L == 112 && l->g_cur_L == 368);
			seen |= 4;
		}
	}
	CHECK(seen == 7);
	CHECK(lj_obj_gc64.L_cframe == 80 && lj_obj_gc64.pt_size == 104);
}

/* ---- a synthetic GC64 process image: GG_State, registry, _LOADED ---- */

#define BASE 0x10000u
static uint8_t img[0x10000];
#define AT(a) (img + ((a) - BASE))
static void put64(uint64_t a, uint64_t v) { memcpy(AT(a), &v, 8); }
static void put32(uint64_t a, uint32_t v) { memcpy(AT(a), &v, 4); }
static uint64_t tv(int itype, uint64_t p) { return ((uint64_t)(int64_t)itype << 47) | p; }
static void mkstr(uint64_t a, const char *s)
{
	AT(a)[9] = 4;
	put32(a + 20, (uint32_t)strlen(s));
	memcpy(AT(a + 24), s, strlen(s) + 1);
}
/* one-node table at A with NODE: key string KS, value V */
static void mktab1(uint64_t a, uint64_t node, uint64_t ks, uint64_t v)
{
	AT(a)[9] = 11;
	put64(a + 40, node);
	put32(a + 52, 0);
	put64(node, v);
	put64(node + 8, tv(-5, ks));
}

static void test_image(void)
{
	const struct lj_layout *lay = NULL;
	for (int i = 0; i < lj_nlayouts; i++)
		if (lj_layouts[i].g2disp == 3968 && (lj_layouts[i].flags & LJL_GC64))
			lay = &lj_layouts[i];
	CHECK(lay != NULL);
	if (!lay)
		return;
	memset(img, 0, sizeof img);
	uint64_t L = BASE, g = BASE + 96;
	AT(L)[9] = 6;
	AT(L)[10] = 1;
	put64(L + 16, g);
	put64(g + lay->g_mainthref, L);
	AT(g + lay->g_strempty)[9] = 4;
	put32(g + lay->g_vmstate, 0xffffffffu);
	put64(g + lay->g_cur_L, L);
	uint64_t vm_start = 0x400000, vm_end = 0x404000;
	put64(g + lay->g2disp, vm_start + 0x100);
	put64(g + lay->g2disp - 8, 5);
	/* registry -> _LOADED -> string -> format (builtin #77) */
	uint64_t reg = 0x13000, loaded = 0x13100, strlib = 0x13200, fn = 0x13300;
	mkstr(0x14000, "_LOADED");
	mkstr(0x14100, "string");
	mkstr(0x14200, "format");
	put64(g + lay->g_registrytv, tv(-12, reg));
	mktab1(reg, 0x15000, 0x14000, tv(-12, loaded));
	mktab1(loaded, 0x15100, 0x14100, tv(-12, strlib));
	mktab1(strlib, 0x15200, 0x14200, tv(-9, fn));
	AT(fn)[9] = 8;
	AT(fn)[10] = 77;
	put64(fn + 40, 0x7000000);

	struct mem_region r = { BASE, img, sizeof img };
	struct mem_image mi;
	mem_image_init(&mi, &r, 1);
	struct vm *vm = calloc(1, sizeof *vm);
	vm->lay = lay;
	vm->ol = &lj_obj_gc64;
	vm->vm_start = vm_start;
	vm->vm_end = vm_end;
	CHECK(lj_check_g(vm, &mi.base, g) == 0);
	CHECK(lj_add_g(vm, &mi.base, g, "test") == 0 && vm->found.ng == 1);
	CHECK(vm->found.ffname[77] && strcmp(vm->found.ffname[77], "string.format") == 0);
	CHECK(vm->found.nnames == 1 && vm->found.names[0].f == 0x7000000);
	/* each invariant rejects a broken state */
	put64(g + lay->g_mainthref, L + 8);
	CHECK(lj_check_g(vm, &mi.base, g) < 0);
	put64(g + lay->g_mainthref, L);
	put32(g + lay->g_vmstate, 0xfffffff0u); /* vmstate -16 */
	CHECK(lj_check_g(vm, &mi.base, g) < 0);
	put32(g + lay->g_vmstate, 3); /* trace 3 is fine */
	CHECK(lj_check_g(vm, &mi.base, g) == 0);
	put64(g + lay->g2disp - 8, vm_start + 8); /* no dispatch boundary */
	CHECK(lj_check_g(vm, &mi.base, g) < 0);
	put64(g + lay->g2disp - 8, 5);
	put64(g + lay->g_cur_L, 0x14000); /* cur_L is a string */
	CHECK(lj_check_g(vm, &mi.base, g) < 0);
	put64(g + lay->g_cur_L, L);
	AT(g + lay->g_strempty)[9] = 5;
	CHECK(lj_check_g(vm, &mi.base, g) < 0);
	AT(g + lay->g_strempty)[9] = 4;
	CHECK(lj_check_g(vm, &mi.base, g + 8) < 0);
	CHECK(lj_check_g(vm, &mi.base, 0x99990000) < 0); /* unmapped */
	/* a table whose hash mask is absurd is refused, not iterated */
	put32(loaded + 52, 0x7fffffff);
	struct vm *vm2 = calloc(1, sizeof *vm2);
	*vm2 = (struct vm){ .lay = lay, .ol = &lj_obj_gc64, .vm_start = vm_start, .vm_end = vm_end };
	CHECK(lj_learn_names(vm2, &mi.base, g) == 0 && vm2->found.nnames == 0);
	lj_vm_free(vm);
	lj_vm_free(vm2);
}

/* Every layout row, on the image the fuzzer's seeds hold
 * (tests/img_luajit.c): main chunk (@t.lua) calls global f, which calls
 * string.format; frames, names and lines from the main thread, from
 * cur_L, and without the global_State (no library names). */
static void test_img_rows(void)
{
	static struct lj_img im;
	for (int i = 0; i < lj_nlayouts; i++) {
		const struct lj_layout *l = &lj_layouts[i];
		lj_img_build(&im, l);
		struct mem_region r[LJ_IMG_NREG + 1];
		struct mem_image mi;
		mem_image_init(&mi, r, lj_img_regions(l, im.buf, sizeof im.buf, r));
		uint64_t L = lj_img_addr[0], g = L + l->sizeof_L;
		struct frame fr[8];
		int n = lj_walk_image(l, &mi.base, g, L, fr, 8);
		CHECK(n == 3);
		if (n != 3) {
			fprintf(stderr, "row %d (%s): %d frames\n", i, l->name, n);
			continue;
		}
		CHECK(fr[0].kind == FRAME_C && strcmp(fr[0].name, "string.format") == 0);
		CHECK(fr[1].kind == FRAME_LUA && strcmp(fr[1].name, "f") == 0 && fr[1].firstline == 3 &&
		      fr[1].line == 4 && strcmp(fr[1].file, "t.lua") == 0);
		CHECK(fr[2].kind == FRAME_LUA && strcmp(fr[2].name, "main chunk") == 0 && fr[2].line == 5);
		CHECK(lj_walk_image(l, &mi.base, g, 0, fr, 8) == 3);
		n = lj_walk_image(l, &mi.base, 0, L, fr, 8);
		CHECK(n == 3 && strcmp(fr[0].name, "[builtin#77]") == 0);
	}
}

/* The GC64 image of test_img_rows walked by lj_thread_frames; a link
 * pointing up the stack; then random stack slots, proto fields and
 * thread fields must give an error or frames, never a crash or a hang. */
static void test_stack_walk(void)
{
	const struct lj_layout *lay = &lj_layouts[0];
	static struct lj_img im;
	lj_img_build(&im, lay);
	struct mem_region r[LJ_IMG_NREG + 1];
	struct mem_image mi;
	mem_image_init(&mi, r, lj_img_regions(lay, im.buf, sizeof im.buf, r));
	uint64_t L = lj_img_addr[0], stack = lj_img_addr[1];
	uint64_t pt0 = lj_img_addr[3], pt1 = lj_img_addr[3] + 256;
	struct vm *vm = calloc(1, sizeof *vm);
	vm->lay = lay;
	vm->ol = &lj_obj_gc64;
	struct frame fr[16];
	int n = lj_thread_frames(vm, &mi.base, L, fr, 16);
	CHECK(n == 3);
	if (n == 3) {
		CHECK(fr[1].kind == FRAME_LUA && strcmp(fr[1].name, "f") == 0 && fr[1].firstline == 3);
		CHECK(strcmp(fr[1].file, "t.lua") == 0);
		CHECK(strcmp(fr[2].name, "main chunk") == 0 && fr[2].line == 5);
	}
	/* a link pointing up the stack is refused, not followed */
	lj_img_put64(&im, stack + 24, (uint64_t)-16 | 5);
	CHECK(lj_thread_frames(vm, &mi.base, L, fr, 16) <= 2);
	/* fuzz: random slots and proto fields */
	static uint8_t saved[sizeof im.buf];
	memcpy(saved, im.buf, sizeof im.buf);
	srand(1);
	for (int it = 0; it < 20000; it++) {
		memcpy(im.buf, saved, sizeof im.buf);
		int k = 1 + rand() % 6;
		for (int j = 0; j < k; j++) {
			uint64_t targets[] = { stack + 8 * (rand() % 8), pt0 + 8 * (rand() % 16),
					       pt1 + 8 * (rand() % 16), L + 8 * (rand() % 12) };
			uint64_t a = targets[rand() % 4];
			uint64_t v = ((uint64_t)rand() << 33) ^ ((uint64_t)rand() << 3) ^ (uint64_t)rand();
			if (rand() % 3 == 0)
				v = lj_img_addr[rand() % LJ_IMG_NREG] + (uint64_t)(rand() % LJ_IMG_REGLEN);
			lj_img_put64(&im, a, v);
		}
		n = lj_thread_frames(vm, &mi.base, L, fr, 16);
		CHECK(n <= 16);
	}
	lj_vm_free(vm);
}

/* lj_top_frame_ok on the top frame of the test_img_rows image (the
 * builtin string.format, f = 0x7000000, outside the VM): an ASM fast
 * function is told by the instruction its pc field points to (opcode
 * from BC__MAX = 97 on: GG_State's bcff[]), not by f, which holds its C
 * fallback (lj_ffh_*): coroutine.resume's frame in the VM's
 * ff_coroutine_resume was refused (0.5-1 % of the samples of a
 * coroutine-heavy program, JIT on: "interpreter on the innermost cframe
 * without a top frame"). A C function (pc field at BC_FUNCC = 95 or
 * BC_FUNCCW = 96, or none) is a candidate only while the VM enters or
 * leaves it (NEED 4). */
static void test_asm_fastfunc(void)
{
	const struct lj_layout *lay = &lj_layouts[0];
	static struct lj_img im;
	lj_img_build(&im, lay);
	struct mem_region r[LJ_IMG_NREG + 1];
	struct mem_image mi;
	mem_image_init(&mi, r, lj_img_regions(lay, im.buf, sizeof im.buf, r));
	uint64_t stack = lj_img_addr[1], fn = lj_img_addr[2] + 256, ins = lj_img_addr[2] + 448;
	uint64_t base = stack + 64;
	struct vm *vm = calloc(1, sizeof *vm);
	vm->lay = lay;
	vm->ol = &lj_obj_gc64;
	vm->vm_start = 0x400000;
	vm->vm_end = 0x404000;
	/* a C library function without a pc field: only "any function" */
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, 0, 0) == 1);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, 0x400010, 2) == 0);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, 0, 3) == 0);
	/* LIBINIT_CF: pc field at g->bc_cfunc_int (BC_FUNCC) */
	lj_img_putref(&im, fn + lj_obj_gc64.fn_pc, ins);
	lj_img_put32(&im, ins, 95 | 3u << 8);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, 0x400010, 2) == 0);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, ins + 4, 4) == 1);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, ins + 8, 4) == 0);
	/* ASM: bcff[5], f still the C fallback outside the VM */
	lj_img_put32(&im, ins, 97 + 5);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, 0x400010, 2) == 1);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, ins + 4, 4) == 0);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, 0, 1) == 0);
	/* its return path (mode 5): the first result (true) over the link
	 * slot, PC the link; refused while the slot holds a link, and for
	 * a C function */
	uint64_t link = 0;
	memcpy(&link, lj_img_at(&im, base - 8), 8);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, link, 5) == 0);
	lj_img_put64(&im, base - 8, 0xfffeffffffffffffull);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, link, 5) == 1);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, 0, 5) == 0);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, link, 2) == 1);
	lj_img_put32(&im, ins, 95 | 3u << 8);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, link, 5) == 0);
	lj_img_put32(&im, ins, 97 + 5);
	/* a pc field pointing nowhere: not ASM */
	lj_img_putref(&im, fn + lj_obj_gc64.fn_pc, 0x99990000);
	CHECK(lj_top_frame_ok(vm, &mi.base, stack, base, 0x400010, 2) == 0);
	lj_vm_free(vm);
}

/* lj_find_resumers: three threads on one C stack, main resumed co1 (from
 * C: lua_resume in a C function, C frames between the cframes) which
 * resumed co2 (coroutine.resume: cframes adjacent); co2 runs. */
static void test_resumers(void)
{
	const struct lj_layout *lay = &lj_layouts[0];
	const struct lj_objlayout *ol = &lj_obj_gc64;
	memset(img, 0, sizeof img);
	uint64_t mainL = 0x10000, co1 = 0x10100, co2 = 0x10200;
	/* C stack, innermost first: co2's cframes X0 (a lua_call inside it,
	 * PREV = X1) and X1 (its resume), co1's Y1 right above X1, then 200
	 * bytes of C frames (one word there looks like a thread: 0x1f000),
	 * then main's Y2 */
	uint64_t x0 = 0x18000, x1 = 0x18100, y1 = x1 + lay->cf_size, y2 = y1 + lay->cf_size + 200;
	uint64_t Ls[3] = { co2, co1, mainL }, cfs[3] = { x0, y1, y2 };
	for (int i = 0; i < 3; i++) {
		AT(Ls[i])[ol->gct] = LJ_GCT_THREAD;
		put64(Ls[i] + ol->L_stack, 0x1a000 + 0x400 * (uint64_t)i);
		put64(Ls[i] + ol->L_top, 0x1a000 + 0x400 * (uint64_t)i + 64);
		put64(Ls[i] + ol->L_cframe, cfs[i] | (i < 2 ? 1 : 0)); /* CFRAME_RESUME */
	}
	put64(x0 + lay->cf_prev, x1);
	put64(x0 + lay->cf_L, co2);
	put64(x1 + lay->cf_L, co2);
	put64(y1 + lay->cf_L, co1);
	put64(y1 + lay->cf_size + 40 + lay->cf_L, 0x1f000);
	put64(y2 + lay->cf_L, mainL);

	struct mem_region r = { BASE, img, sizeof img };
	struct mem_image mi;
	mem_image_init(&mi, &r, 1);
	struct vm *vm = calloc(1, sizeof *vm);
	vm->lay = lay;
	vm->ol = ol;
	uint64_t out[3];
	uint8_t hdrs[3][128];
	int n = lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, NULL);
	CHECK(n == 2);
	CHECK(n >= 1 && out[0] == co1);
	CHECK(n >= 2 && out[1] == mainL);
	CHECK(n >= 1 && memcmp(hdrs[0], AT(co1), ol->L_stacksize + 4) == 0);
	/* at most MAX */
	CHECK(lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 1, NULL) == 1);
	/* running in main: nothing below it */
	CHECK(lj_find_resumers(vm, &mi.base, mainL, mainL, AT(mainL), out, hdrs, 3, NULL) == 0);
	/* a scan that found nothing is skipped at the same cframe next time */
	uint64_t noscan = 0;
	put64(y2 + lay->cf_L, 0);
	CHECK(lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, &noscan) == 1);
	CHECK(noscan == y1);
	put64(y2 + lay->cf_L, mainL);
	CHECK(lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, &noscan) == 1);
	noscan = 0;
	CHECK(lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, &noscan) == 2);
	CHECK(noscan == 0);
	/* main unknown: the search above main's cframe finds nothing */
	CHECK(lj_find_resumers(vm, &mi.base, co2, 0, AT(co2), out, hdrs, 3, NULL) == 2);
	/* C frames deeper than LJ_RESUME_SCAN hide main */
	put64(y2 + lay->cf_L, 0);
	put64(y1 + lay->cf_size + LJ_RESUME_SCAN + 8 + lay->cf_L, mainL);
	put64(mainL + ol->L_cframe, y1 + lay->cf_size + LJ_RESUME_SCAN + 8);
	n = lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, NULL);
	CHECK(n == 1 && out[0] == co1);
	put64(y1 + lay->cf_size + LJ_RESUME_SCAN + 8 + lay->cf_L, 0);
	put64(y2 + lay->cf_L, mainL);
	put64(mainL + ol->L_cframe, y2);
	/* a thread that does not name the cframe back is passed over */
	put64(co1 + ol->L_cframe, y1 + 8);
	n = lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, NULL);
	CHECK(n == 1 && out[0] == mainL);
	put64(co1 + ol->L_cframe, y1);
	/* a PREV link going down the stack is garbage */
	put64(x1 + lay->cf_prev, x0);
	CHECK(lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, NULL) == 0);
	put64(x1 + lay->cf_prev, 0);
	/* a SAVE_L back to the running thread, or outside the image, is no
	 * resumer */
	put64(y2 + lay->cf_L, co2);
	n = lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, NULL);
	CHECK(n == 1 && out[0] == co1);
	put64(y2 + lay->cf_L, 0x7f0000000000ull);
	n = lj_find_resumers(vm, &mi.base, co2, mainL, AT(co2), out, hdrs, 3, NULL);
	CHECK(n == 1 && out[0] == co1);
	lj_vm_free(vm);
}

/* --rows NAME: the offsets of the layout row whose name contains NAME
 * and of its object layout, one "EXPR VALUE" line each: EXPR is a gdb
 * expression (no spaces) for the same number in the DWARF of a LuaJIT
 * built that way; tests/luajit-layout-dwarf.test compares them. Left
 * out: what DWARF does not describe (cframe offsets and the lowest
 * vmstate, constants of the assembler VM) and beta3's nsnap_old. */
static int print_rows(const char *name)
{
	const struct lj_layout *l = NULL;
	for (int i = 0; i < lj_nlayouts && !l; i++)
		if (strstr(lj_layouts[i].name, name))
			l = &lj_layouts[i];
	if (!l) {
		fprintf(stderr, "t_vm_luajit: no layout row named '%s'\n", name);
		return 1;
	}
	const struct lj_objlayout *ol = (l->flags & LJL_GC64) ? &lj_obj_gc64 : &lj_obj_32;
#define OFF(t, f) "(int)&((" t "*)0)->" f
#define GG(f) "(int)&((GG_State*)0)->" f "-(int)&((GG_State*)0)->g"
	const struct { const char *expr; int v; } rows[] = {
		{ GG("dispatch"), l->g2disp }, { OFF("GG_State", "g"), l->sizeof_L },
		{ OFF("global_State", "gc.state"), l->g_gc_state },
		{ OFF("global_State", "gc.root"), l->g_gc_root },
		{ OFF("global_State", "vmstate"), l->g_vmstate },
		{ OFF("global_State", "strempty"), l->g_strempty },
		{ OFF("global_State", "mainthref"), l->g_mainthref },
		{ OFF("global_State", "registrytv"), l->g_registrytv },
		{ OFF("global_State", "cur_L"), l->g_cur_L },
		{ OFF("global_State", "jit_base"), l->g_jit_base },
		{ GG("J.trace"), l->g_jtrace },
		{ OFF("GCstr", "len"), l->str_len }, { "(int)sizeof(GCstr)", l->str_data },
		{ "(int)sizeof(GCRef)", ol->gcref },
		{ OFF("GChead", "gct"), ol->gct }, { OFF("GChead", "marked"), ol->marked },
		{ OFF("lua_State", "dummy_ffid"), ol->L_dummy_ffid },
		{ OFF("lua_State", "status"), ol->L_status }, { OFF("lua_State", "glref"), ol->L_glref },
		{ OFF("lua_State", "base"), ol->L_base }, { OFF("lua_State", "top"), ol->L_top },
		{ OFF("lua_State", "maxstack"), ol->L_maxstack },
		{ OFF("lua_State", "stack"), ol->L_stack }, { OFF("lua_State", "cframe"), ol->L_cframe },
		{ OFF("lua_State", "stacksize"), ol->L_stacksize },
		{ OFF("GCfuncC", "ffid"), ol->fn_ffid }, { OFF("GCfuncC", "pc"), ol->fn_pc },
		{ OFF("GCfuncC", "f"), ol->fn_f },
		{ "(int)sizeof(GCproto)", ol->pt_size },
		{ OFF("GCproto", "numparams"), ol->pt_numparams },
		{ OFF("GCproto", "framesize"), ol->pt_framesize },
		{ OFF("GCproto", "sizebc"), ol->pt_sizebc }, { OFF("GCproto", "k"), ol->pt_k },
		{ OFF("GCproto", "uv"), ol->pt_uv }, { OFF("GCproto", "sizekgc"), ol->pt_sizekgc },
		{ OFF("GCproto", "sizept"), ol->pt_sizept }, { OFF("GCproto", "sizeuv"), ol->pt_sizeuv },
		{ OFF("GCproto", "flags"), ol->pt_flags },
		{ OFF("GCproto", "chunkname"), ol->pt_chunkname },
		{ OFF("GCproto", "firstline"), ol->pt_firstline },
		{ OFF("GCproto", "numline"), ol->pt_numline },
		{ OFF("GCproto", "lineinfo"), ol->pt_lineinfo },
		{ OFF("GCproto", "uvinfo"), ol->pt_uvinfo }, { OFF("GCproto", "varinfo"), ol->pt_varinfo },
		{ OFF("GCtab", "array"), ol->tab_array }, { OFF("GCtab", "node"), ol->tab_node },
		{ OFF("GCtab", "asize"), ol->tab_asize }, { OFF("GCtab", "hmask"), ol->tab_hmask },
		{ "(int)sizeof(Node)", ol->node_size }, { OFF("Node", "key"), ol->node_key },
		{ OFF("Node", "next"), ol->node_next },
		{ OFF("GCtrace", "nsnap"), ol->tr_nsnap }, { OFF("GCtrace", "snap"), ol->tr_snap },
		{ OFF("GCtrace", "snapmap"), ol->tr_snapmap },
		{ OFF("GCtrace", "startpt"), ol->tr_startpt },
		{ OFF("GCtrace", "startpc"), ol->tr_startpc },
		{ OFF("GCtrace", "startins"), ol->tr_startins },
		{ OFF("GCtrace", "szmcode"), ol->tr_szmcode }, { OFF("GCtrace", "mcode"), ol->tr_mcode },
		{ OFF("GCtrace", "spadjust"), ol->tr_spadjust },
	};
#undef OFF
#undef GG
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		printf("%s %d\n", rows[i].expr, rows[i].v);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--rows") == 0)
		return print_rows(argv[2]);
	test_code_derive();
	test_shortsrc();
	test_layout_rows();
	test_image();
	test_img_rows();
	test_stack_walk();
	test_resumers();
	test_asm_fastfunc();
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("t_vm_luajit: ok\n");
	return 0;
}
