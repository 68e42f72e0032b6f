/* img_puc.h: synthetic PUC Lua process images, shared by the unit tests
 * (tests/t_vm_puc.c) and the fuzzer's seed writer (fuzz/fuzz_puc.c).
 *
 * An image is IMG_PUC_NREG regions of IMG_PUC_REGLEN bytes, region I
 * mapped at img_puc_addr[I], with these roles:
 *   RL lua_State (5.2+: base_ci inside)  RSTK Lua stack    RCI CallInfos
 *   RCL closures (Lua at 0, C at 128)    RP Proto          RCODE code, lines, upvalue and local names
 *   RSTR strings (64 bytes apart)        RK constants
 * The walk starts at the lua_State at img_puc_addr[IMG_RL]. */
#ifndef LUASPY_IMG_PUC_H
#define LUASPY_IMG_PUC_H

#include <stdint.h>
#include "vm_puc.h"

#define IMG_PUC_NREG 8
#define IMG_PUC_REGLEN 512
enum { IMG_RL, IMG_RSTK, IMG_RCI, IMG_RCL, IMG_RP, IMG_RCODE, IMG_RSTR, IMG_RK };
extern const uint64_t img_puc_addr[IMG_PUC_NREG];

/* Write into IMG (IMG_PUC_NREG regions) the image of layout L: a Lua
 * function (chunk "@test.lua", defined at line 10) at pc 1, line 11, of
 * GETTABUP _ENV "print" (5.1: GETGLOBAL); CALL; RETURN, which called the
 * C function 0x401000 (5.1: through a C closure at RCL+128; else a light
 * C function). 5.1: CallInfo array, ci 1 the Lua frame, ci 2 the C one;
 * 5.2+: ci 0 at RCI+0 (Lua, FRESH), ci 1 at RCI+128 (C). One upvalue
 * "_ENV" (RSTR+64), one constant "print" (RSTR+128), one local "x" (pcs
 * [2, 3), RSTR+192). Walked, it gives [print] [function <test.lua:10>
 * test.lua:11]. */
void img_puc_build(const struct puc_layout *l, uint8_t (*img)[IMG_PUC_REGLEN]);

/* The same image with one more Lua frame, the caller of the first:
 * [print] [inner test.lua:11] [function <b.lua:30> b.lua]. Its Proto
 * (RK+256) and the callee's (moved to RP+256) share a slot of the
 * walker's direct-mapped Proto cache, so reading one evicts the other
 * within one walk. 0, or -1 for 5.1 rows (not built). */
int img_puc_build_shared_slot(const struct puc_layout *l, uint8_t (*img)[IMG_PUC_REGLEN]);

/* Instruction encoders: 5.4 iABC (with k), 5.1-5.3 iABC and iABx. */
uint32_t img_puc_i54(int op, int a, int b, int c, int k);
uint32_t img_puc_i53(int op, int a, int b, int c);
uint32_t img_puc_i53bx(int op, int a, int bx);

#endif
