/* t_vm_luajit_edges.c: unit test of lj_edges_find (vm_luajit_probe.c), the
 * scan of the LuaJIT VM code for its register save and restore sequences
 * (vm_x64.dasc saveregs/restoreregs), over synthetic code: the four- and
 * six-register forms, the FFI callback's form (no push rbp), ret and jmp
 * exits, a wrong order, a wrong frame size, a sequence cut by the end of
 * the code, and random bytes; and lj_entry_window() over them, and
 * lj_stub_state() over a synthetic FFI callback page. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "proc_mem.h"
#include "vm_luajit.h"
#include "check.h"

/* push rbp, rbx, r15, r14; sub rsp, 0x28 (CFRAME_SIZE 80) */
static const uint8_t save4[] = { 0x55, 0x53, 0x41, 0x57, 0x41, 0x56, 0x48, 0x83, 0xec, 0x28 };
/* add rsp, 0x28; pop r14, r15, rbx, rbp; ret */
static const uint8_t rest4[] = { 0x48, 0x83, 0xc4, 0x28, 0x41, 0x5e, 0x41, 0x5f, 0x5b, 0x5d, 0xc3 };
/* the same, then jmp rel32 (vm_unwind_rethrow) */
static const uint8_t rest4j[] = { 0x48, 0x83, 0xc4, 0x28, 0x41, 0x5e, 0x41, 0x5f, 0x5b, 0x5d,
				  0xe9, 0x10, 0x20, 0x00, 0x00 };
/* NO_UNWIND: r13, r12 too (CFRAME_SIZE 96) */
static const uint8_t save6[] = { 0x55, 0x53, 0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54,
				 0x48, 0x83, 0xec, 0x28 };
static const uint8_t rest6[] = { 0x48, 0x83, 0xc4, 0x28, 0x41, 0x5c, 0x41, 0x5d, 0x41, 0x5e,
				 0x41, 0x5f, 0x5b, 0x5d, 0xc3 };
/* vm_ffi_callback: saveregs_ after the stub's push rbp */
static const uint8_t saveu[] = { 0xcc, 0x53, 0x41, 0x57, 0x41, 0x56, 0x48, 0x83, 0xec, 0x28 };
/* rbx and r15 swapped: not saveregs */
static const uint8_t badorder[] = { 0x55, 0x41, 0x57, 0x53, 0x41, 0x56, 0x48, 0x83, 0xec, 0x28 };

static void put(uint8_t *code, size_t at, const uint8_t *b, size_t n)
{
	memcpy(code + at, b, n);
}

static void test_forms(void)
{
	uint8_t code[1024];
	struct lj_edge e[LJ_EDGES];
	memset(code, 0x90, sizeof code);
	put(code, 100, save4, sizeof save4);
	put(code, 200, rest4, sizeof rest4);
	put(code, 300, rest4j, sizeof rest4j);
	put(code, 400, badorder, sizeof badorder);
	put(code, 500, save6, sizeof save6);
	put(code, 600, rest6, sizeof rest6);
	put(code, 700, saveu, sizeof saveu);
	int n = lj_edges_find(code, sizeof code, 0x1000, 80, e, LJ_EDGES);
	CHECK(n == 4, "%d sequences for CFRAME_SIZE 80", n);
	if (n == 4) {
		CHECK(!e[0].stub_rbp);
		/* the callback's: push rbx, push r15, push r14, sub; end */
		CHECK(e[3].addr == 0x1000 + 701 && !e[3].exit && e[3].stub_rbp && e[3].ninsn == 4);
		CHECK(e[3].off[0] == 0 && e[3].off[1] == 1 && e[3].off[3] == 5 && e[3].off[4] == 9);
		CHECK(e[3].reg[0] == UREG_RBX && e[3].reg[2] == UREG_R14 && e[3].reg[3] == -1);
		CHECK(e[0].addr == 0x1000 + 100 && !e[0].exit && e[0].ninsn == 5 && e[0].space == 0x28);
		/* instruction starts: push rbp, push rbx, push r15, push r14, sub; end */
		CHECK(e[0].off[0] == 0 && e[0].off[1] == 1 && e[0].off[2] == 2 && e[0].off[3] == 4 &&
		      e[0].off[4] == 6 && e[0].off[5] == 10);
		CHECK(e[0].reg[0] == UREG_RBP && e[0].reg[1] == UREG_RBX && e[0].reg[2] == UREG_R15 &&
		      e[0].reg[3] == UREG_R14 && e[0].reg[4] == -1);
		CHECK(e[1].addr == 0x1000 + 200 && e[1].exit && e[1].ninsn == 6);
		/* add, pop r14, pop r15, pop rbx, pop rbp, ret; end */
		CHECK(e[1].off[0] == 0 && e[1].off[1] == 4 && e[1].off[2] == 6 && e[1].off[3] == 8 &&
		      e[1].off[4] == 9 && e[1].off[5] == 10 && e[1].off[6] == 11);
		CHECK(e[1].reg[0] == -1 && e[1].reg[1] == UREG_R14 && e[1].reg[4] == UREG_RBP &&
		      e[1].reg[5] == -1);
		CHECK(e[2].addr == 0x1000 + 300 && e[2].exit && e[2].ninsn == 6 && e[2].off[6] == 15);
	}
	n = lj_edges_find(code, sizeof code, 0, 96, e, LJ_EDGES);
	CHECK(n == 2, "%d sequences for CFRAME_SIZE 96", n);
	if (n == 2) {
		CHECK(e[0].addr == 500 && !e[0].exit && e[0].ninsn == 7 && e[0].reg[5] == UREG_R12);
		CHECK(e[1].addr == 600 && e[1].exit && e[1].ninsn == 8 && e[1].reg[1] == UREG_R12);
	}
	/* at most MAX */
	CHECK(lj_edges_find(code, sizeof code, 0, 80, e, 2) == 2);
	/* with its push rbp: the whole saveregs, once */
	code[700] = 0x55;
	CHECK(lj_edges_find(code, sizeof code, 0, 80, e, LJ_EDGES) == 4 && e[3].addr == 700 && !e[3].stub_rbp);
	/* cut by the end of the code: not one */
	CHECK(lj_edges_find(save4, sizeof save4 - 1, 0, 80, e, LJ_EDGES) == 0);
	CHECK(lj_edges_find(rest4, sizeof rest4 - 1, 0, 80, e, LJ_EDGES) == 0);
	/* whole, at the very end */
	memset(code, 0x90, sizeof code);
	put(code, sizeof code - sizeof rest4, rest4, sizeof rest4);
	CHECK(lj_edges_find(code, sizeof code, 0, 80, e, LJ_EDGES) == 1);
}

/* random bytes: bounded, every sequence found well formed */
static void test_random(void)
{
	static uint8_t code[1 << 16];
	struct lj_edge e[LJ_EDGES];
	srand(13);
	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < sizeof code; i++)
			code[i] = (uint8_t)(rand() >> 7);
		/* a few real ones among the noise */
		put(code, 1000 + (size_t)round, save4, sizeof save4);
		put(code, 30000, rest4, sizeof rest4);
		int n = lj_edges_find(code, sizeof code, 0, 80, e, LJ_EDGES);
		CHECK(n >= 2 && n <= LJ_EDGES, "round %d: %d", round, n);
		for (int k = 0; k < n; k++)
			CHECK(e[k].ninsn >= 4 && e[k].ninsn <= LJ_EDGE_INSNS &&
			      e[k].addr + e[k].off[e[k].ninsn] <= sizeof code);
	}
}

/* lj_entry_window: the 128 bytes after an entry's saves (lj_vm_call &
 * co. before they store SAVE_L and link their cframe), not before the
 * sub, not after an exit's, not past another sequence. Debian's luajit
 * stores the link 0x2d-0x56 bytes on, vm_ffi_callback calls
 * lj_ccallback_enter 0x7a bytes on. */
static void test_entry_window(void)
{
	uint8_t code[1024];
	memset(code, 0x90, sizeof code);
	put(code, 100, save4, sizeof save4);   /* entry, ends at 110 */
	put(code, 300, rest4, sizeof rest4);   /* exit, ends at 311 */
	put(code, 600, save4, sizeof save4);   /* entry, ends at 610 */
	put(code, 660, rest4, sizeof rest4);   /* exit 50 bytes on */
	put(code, 800, saveu + 1, sizeof saveu - 1); /* the callback's, ends at 809 */
	struct vm *vm = calloc(1, sizeof *vm);
	vm->nedge = lj_edges_find(code, sizeof code, 0x1000, 80, vm->edge, LJ_EDGES);
	CHECK(vm->nedge == 5, "%d sequences", vm->nedge);
	CHECK(!lj_entry_window(vm, 0x1000 + 99));
	CHECK(!lj_entry_window(vm, 0x1000 + 106)); /* at the sub: unwind_edge's */
	CHECK(lj_entry_window(vm, 0x1000 + 110));
	CHECK(lj_entry_window(vm, 0x1000 + 110 + 127));
	CHECK(!lj_entry_window(vm, 0x1000 + 110 + 128));
	CHECK(!lj_entry_window(vm, 0x1000 + 311)); /* after an exit */
	CHECK(lj_entry_window(vm, 0x1000 + 659));
	CHECK(!lj_entry_window(vm, 0x1000 + 660)); /* another sequence between */
	CHECK(!lj_entry_window(vm, 0x1000 + 700));
	CHECK(lj_entry_window(vm, 0x1000 + 809 + 0x7a));
	vm->nedge = 0;
	CHECK(!lj_entry_window(vm, 0x1000 + 110)); /* no sequences known: never */
	free(vm);
}

/* lj_stub_state over a synthetic callback page (lj_ccallback.c
 * callback_mcode_init, x64): the head holds lj_vm_ffi_callback's
 * address, slots 0 and 1 are `mov al, N; jmp short`, the group's tail
 * `mov al, 31; push rbp; mov ah, 0; mov rbp, imm64; jmp [rip+x]`. */
static void test_stub(void)
{
	static uint8_t page[8192];
	memset(page, 0xcc, sizeof page);
	uint64_t at = 0x7f0000000000ull, vmcb = 0x401234;
	memcpy(page, &vmcb, 8);
	static const uint8_t slots[] = { 0xb0, 0x00, 0xeb, 0x7a, 0xb0, 0x01, 0xeb, 0x76 };
	memcpy(page + 8, slots, sizeof slots);
	static const uint8_t tail[] = { 0xb0, 0x1f, 0x55, 0xb4, 0x00, 0x48, 0xbd, 1, 2, 3, 4, 5, 6, 7, 8,
					0xff, 0x25, 0xe0, 0xef, 0xff, 0xff };
	memcpy(page + 132, tail, sizeof tail);
	struct mem_region r = { at, page, sizeof page };
	struct mem_image mi;
	mem_image_init(&mi, &r, 1);
	struct vm *vm = calloc(1, sizeof *vm);
	vm->vm_start = 0x400000;
	vm->vm_end = 0x404000;
	/* vm_ffi_callback's saveregs_ at 0x401234, as lj_edges_find gives it */
	vm->nedge = 2;
	vm->edge[0] = (struct lj_edge){ .addr = 0x401000, .ninsn = 5 };
	vm->edge[1] = (struct lj_edge){ .addr = vmcb, .ninsn = 4, .stub_rbp = 1 };
	CHECK(lj_stub_state(vm, &mi.base, at + 8) == 0);      /* mov al, 0 */
	CHECK(lj_stub_state(vm, &mi.base, at + 10) == 0);     /* jmp short */
	CHECK(lj_stub_state(vm, &mi.base, at + 134) == 0);    /* push rbp */
	CHECK(lj_stub_state(vm, &mi.base, at + 135) == 1);    /* mov ah */
	CHECK(lj_stub_state(vm, &mi.base, at + 137) == 1);    /* mov rbp, imm64 */
	CHECK(lj_stub_state(vm, &mi.base, at + 147) == 1);    /* jmp [rip+x] */
	CHECK(lj_stub_state(vm, &mi.base, at + 0) == -1);     /* the head itself */
	CHECK(lj_stub_state(vm, &mi.base, at + 200) == -1);   /* int3 */
	/* a second page: its head is no VM address */
	CHECK(lj_stub_state(vm, &mi.base, at + 4096 + 8) == -1);
	/* the head names another entry, or no callback entry is known */
	vm->edge[1].stub_rbp = 0;
	CHECK(lj_stub_state(vm, &mi.base, at + 8) == -1);
	vm->edge[1].stub_rbp = 1;
	vm->edge[1].addr = 0x401000;
	CHECK(lj_stub_state(vm, &mi.base, at + 8) == -1);
	vm->nedge = 0;
	CHECK(lj_stub_state(vm, &mi.base, at + 8) == -1);
	CHECK(lj_stub_state(vm, &mi.base, 0x1000) == -1);     /* unmapped */
	free(vm);
}

int main(void)
{
	test_forms();
	test_random();
	test_entry_window();
	test_stub();
	return check_summary("t_vm_luajit_edges");
}
