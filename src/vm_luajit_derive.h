/* vm_luajit_derive.h: a LuaJIT 2.1 layout derived from the VM's own
 * machine code and its first state, for builds no row describes.
 *
 * Two stages (docs/luajit-derive.md): lj_derive_code() reads the
 * global_State fields the VM code addresses off DISPATCH (r14) in
 * lj_vm's code (vm_x64.dasc: DISPATCH_GL(), DISPATCH_J()); then
 * lj_derive_state() settles what the code leaves open (mainthref,
 * registrytv, strempty, the GCstr header, sizeof(lua_State)) on one real
 * main lua_State and its global_State, each choice checked by an
 * invariant the probe already relies on (docs/luajit.md §8.5). */
#ifndef LUASPY_VM_LUAJIT_DERIVE_H
#define LUASPY_VM_LUAJIT_DERIVE_H

#include <stdint.h>
#include <stddef.h>
#include "vm_luajit.h"

#define LJD_LEA_MAX 16               /* lea targets kept */

/* What the VM code says, as offsets into global_State (-1 not found). */
struct lj_dcode {
	struct lj_codeinfo ci;       /* GC64, G2DISP, vmstate, cur_L (lj_code_derive) */
	int32_t jit_base;            /* mov [DISPATCH+GL(jit_base)], 0 right after cur_L */
	int32_t gc_total;            /* mov r,[GL(gc.total)]; cmp r,[GL(gc.threshold)] */
	int32_t jtrace;              /* mov r,[J(trace)]; ... mov r2,[r+idx*ref] */
	int32_t lea[LJD_LEA_MAX];    /* lea r,[DISPATCH+GL(x)] with 0 < x < cur_L:
	                              * tmpbuf and tmptv among them */
	int nlea;
};

/* Scan CODE (LEN bytes of the VM code, lj_vm_asm_begin on) for the
 * patterns above. Fills D. Returns 0 when G2DISP, vmstate and cur_L were
 * all found, -1 otherwise. Pure: no target access (unit-tested on the
 * bytes of Debian's binaries, tests/t_vm_luajit_derive.c). */
int lj_derive_code(const uint8_t *code, size_t len, struct lj_dcode *d);

/* Settle the layout on the main lua_State L of global_State G (read
 * through M): G - L is sizeof(lua_State); mainthref and registrytv are
 * the pair (next to tmptv, beta3 order, or after vmstate, 2020-06 order)
 * whose reference is L and whose TValue is a table holding the key
 * "_LOADED" under one of the two GCstr headers (len at 12|16 or 16|20);
 * strempty is the zero-length GCstr below mainthref. HOSTFLAGS:
 * LJL_OPENRESTY / LJL_TARANTOOL from the exports. Fills OUT (name and
 * source point at static text). 0, or -LS_E_GARBAGE when a step found no
 * candidate (WHY says which), -LS_E_FAULT on unreadable memory. */
int lj_derive_state(const struct lj_dcode *d, struct mem *m, uint64_t L, uint64_t g,
		    unsigned hostflags, struct lj_layout *out, char *why, size_t whylen);

/* A main lua_State for lj_derive_state without a layout: anonymous
 * writable memory (bounded: 256 MiB) scanned for a thread object whose
 * glref points 48..256 bytes after it at a global_State whose dispatch
 * table (G + G2DISP) starts with a VM code address [VM_START, VM_END)
 * and does not follow one. M reads the target; MAPS its mappings.
 * Returns 1 and fills *L, *G, 0 when none, -LS_E_NOMEM. */
struct proc_maps;
int lj_derive_find_state(const struct lj_dcode *d, struct mem *m, const struct proc_maps *maps,
			 uint64_t vm_start, uint64_t vm_end, uint64_t *L, uint64_t *G);

/* The fields of A and B that differ, as "vmstate 88/136, ..." into BUF;
 * returns how many differ (0: the same layout). */
int lj_layout_diff(const struct lj_layout *a, const struct lj_layout *b, char *buf, size_t len);

#endif
