/* t_vm_luajit.c: unit tests for the LuaJIT walker over synthetic images:
 * code scanner and layout choice, shortsrc, global_State validation,
 * and a small GC64 stack image walked frame by frame. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "vm_luajit.h"

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
	/* rows agree with luajit.md 3.2/3.3 (Debian 12 stock, T26, OpenResty) */
	int seen = 0;
	for (int i = 0; i < lj_nlayouts; i++) {
		const struct lj_layout *l = &lj_layouts[i];
		CHECK(l->g_jit_base > l->g_cur_L);
		if (l->g2disp == 3968 && (l->flags & LJL_GC64)) {
			CHECK(l->g_vmstate == 184 && l->g_cur_L == 368 && l->g_jit_base == 376 &&
			      l->g_mainthref == 192 && l->g_jtrace == 1112 && l->sizeof_L == 96);
			seen |= 1;
		}
		if (l->flags & LJL_TARANTOOL) {
			CHECK(l->g2disp == 3144 && l->g_vmstate == 120 && l->g_cur_L == 280 &&
			      l->g_mainthref == 160 && l->g_gc_root == 80 && l->sizeof_L == 64);
			seen |= 2;
		}
		if ((l->flags & LJL_OPENRESTY) && (l->flags & LJL_GC64) && l->g2disp == 4008) {
			CHECK(l->sizeof_L == 112 && l->g_cur_L == 368);
			seen |= 4;
		}
	}
	CHECK(seen == 7);
	CHECK(lj_obj_gc64.L_cframe == 80 && lj_obj_32.L_cframe == 48);
	CHECK(lj_obj_gc64.pt_size == 104 && lj_obj_32.pt_size == 64);
}

int main(void)
{
	test_code_derive();
	test_shortsrc();
	test_layout_rows();
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("t_vm_luajit: ok\n");
	return 0;
}
