/* t_vm_puc.c: unit tests of the PUC Lua walker's pure parts over
 * synthetic data: lua_ident parsing, layout rows, 5.4 line decoding,
 * call-site names from hand-assembled bytecode. */
#include <stdio.h>
#include <string.h>
#include "vm_puc.h"

static int fails;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: FAIL %s\n", __FILE__, __LINE__, #c); fails++; } } while (0)

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
	/* one row per release, the moves of notes §1.8 */
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
	CHECK((l = puc_layout_find(1, 5)) && l->L_savedpc == 48 && l->ci_size == 40 &&
	      l->t_node == 32 && l->exec == PUC_EXEC_51);
	/* block invariant D = sizeof(lua_State) = LG.g - LX.l (notes §9.1) */
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

static uint32_t i54(int op, int a, int b, int c, int k)
{
	return (uint32_t)op | (uint32_t)a << 7 | (uint32_t)k << 15 | (uint32_t)b << 16 | (uint32_t)c << 24;
}
static uint32_t i54bx(int op, int a, int bx) { return (uint32_t)op | (uint32_t)a << 7 | (uint32_t)bx << 15; }
static uint32_t i53(int op, int a, int b, int c) { return (uint32_t)op | (uint32_t)a << 6 | (uint32_t)c << 14 | (uint32_t)b << 23; }
static uint32_t i53bx(int op, int a, int bx) { return (uint32_t)op | (uint32_t)a << 6 | (uint32_t)bx << 14; }

static void t_names(void)
{
	const char *name, *what;
	struct fake fk = { .up = { "_ENV", "helper" }, .k = { "print", "sub", "foo" } };
	const struct puc_layout *l54 = puc_layout_find(4, 4);
	/* GETTABUP 0 _ENV "print"; CALL 0 */
	uint32_t c1[] = { i54(11, 0, 0, 0, 0), i54(68, 0, 1, 1, 0), i54(70, 0, 1, 0, 0) };
	struct puc_nameinfo ni = { l54, c1, 3, &fk, f_local, f_up, f_k, NULL, NULL };
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
	uint32_t c6[] = { i54bx(56, 0, (1 + 16777215) << 0 >> 0), i54(9, 0, 1, 0, 0), i54(68, 0, 1, 1, 0) };
	c6[0] = 56 | (uint32_t)(1 + 16777215) << 7;   /* JMP +1 */
	ni.code = c6;
	what = puc_funcname(&ni, 2, &name);
	CHECK(what == NULL);
	/* 5.3: GETTABUP _ENV "print"; CALL; metamethod __index from GETTABLE */
	const struct puc_layout *l53 = puc_layout_find(3, 6);
	uint32_t d1[] = { i53(6, 0, 0, 0x100 | 0), i53(36, 0, 1, 1), i53(7, 1, 0, 0x100 | 2) };
	struct puc_nameinfo n3 = { l53, d1, 3, &fk, f_local, f_up, f_k, NULL, NULL };
	what = puc_funcname(&n3, 1, &name);
	CHECK(what && !strcmp(what, "global") && !strcmp(name, "print"));
	what = puc_funcname(&n3, 2, &name);
	CHECK(what && !strcmp(what, "metamethod") && !strcmp(name, "__index"));
	/* 5.1: GETGLOBAL "print"; CALL */
	const struct puc_layout *l51 = puc_layout_find(1, 5);
	uint32_t e1[] = { i53bx(5, 0, 0), i53(28, 0, 1, 1), i53(30, 0, 1, 0) };
	struct puc_nameinfo n1 = { l51, e1, 3, &fk, f_local, f_up, f_k, NULL, NULL };
	what = puc_funcname(&n1, 1, &name);
	CHECK(what && !strcmp(what, "global") && !strcmp(name, "print"));
	CHECK(puc_is_call_op(l51, e1[1]) && !puc_is_call_op(l51, e1[0]));
}

int main(void)
{
	t_ident();
	t_layout();
	t_line54();
	t_names();
	if (fails) {
		fprintf(stderr, "t_vm_puc: %d failure(s)\n", fails);
		return 1;
	}
	printf("t_vm_puc: all passed\n");
	return 0;
}
