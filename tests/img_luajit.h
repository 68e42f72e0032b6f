/* img_luajit.h: a synthetic LuaJIT 2.1 process image for any layout row,
 * shared by tests/t_vm_luajit.c and fuzz/fuzz_luajit.c (whose seeds it
 * writes, fuzz/seeds/fuzz_luajit/rowNN).
 *
 * The image is LJ_IMG_NREG regions at lj_img_addr[]: region 0 of
 * LJ_IMG_GGLEN bytes (main lua_State, global_State right behind it), then
 * LJ_IMG_REGLEN bytes each for 1 the Lua stack, 2 functions (128 bytes
 * apart), 3 protos (256 apart), 4 strings (64 apart), 5 tables (128
 * apart), 6 their nodes (64 apart); stored back to back in one buffer.
 * lj_img_build() lays out a main chunk (@t.lua) calling Lua function f
 * (line 3) calling the builtin string.format (#77), named through the
 * registry's _LOADED, with an upvalue name and local names: walked from
 * the main thread it gives [string.format] [f t.lua:4] [main chunk t.lua:5]. */
#ifndef LUASPY_IMG_LUAJIT_H
#define LUASPY_IMG_LUAJIT_H

#include <stddef.h>
#include <stdint.h>
#include "proc_mem.h"
#include "vm_luajit.h"

#define LJ_IMG_NREG 7
#define LJ_IMG_GGLEN 1280
#define LJ_IMG_REGLEN 512
#define LJ_IMG_SIZE (LJ_IMG_GGLEN + (LJ_IMG_NREG - 1) * LJ_IMG_REGLEN)

extern const uint64_t lj_img_addr[LJ_IMG_NREG];

/* An image being built for one layout row. */
struct lj_img {
	uint8_t buf[LJ_IMG_SIZE];
	const struct lj_layout *l;
	const struct lj_objlayout *ol;
	int gc64;
};

/* Clear IM and build the image above for layout L. */
void lj_img_build(struct lj_img *im, const struct lj_layout *l);

/* The bytes of target address A in IM (aborts outside the image). */
uint8_t *lj_img_at(struct lj_img *im, uint64_t a);
void lj_img_put64(struct lj_img *im, uint64_t a, uint64_t v);
void lj_img_put32(struct lj_img *im, uint64_t a, uint32_t v);
/* A GC reference (8 or 4 bytes, as the row's width). */
void lj_img_putref(struct lj_img *im, uint64_t a, uint64_t v);
/* A TValue of internal type ITYPE (-5 string, -9 function...) pointing to P. */
uint64_t lj_img_tv(const struct lj_img *im, int itype, uint64_t p);

/* The memory regions of DATA (SIZE bytes laid out as IM.buf, possibly
 * short) for layout L into R (room for LJ_IMG_NREG + 1), plus 16 zero
 * bytes around the dispatch table (g + G2DISP - 8). Returns the count. */
int lj_img_regions(const struct lj_layout *l, const uint8_t *data, size_t size,
		   struct mem_region *r);

#endif
