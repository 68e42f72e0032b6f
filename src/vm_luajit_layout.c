/* vm_luajit_layout.c: LuaJIT 2.1 layouts as data, and the code scanner
 * that derives the key offsets from the VM machine code.
 *
 * Numbers: docs/luajit.md §3.2-§3.7 and §5 (offsetof
 * against the named trees; [static]/[live] where the note says so). A row
 * is chosen only when the code-derived G2DISP (and vmstate/cur_L when
 * found) agree with it; anything else is refused by the probe. */
#include <string.h>
#include "vm_luajit.h"

/* Columns: name, source, flags, g2disp, sizeof_L,
 *   gc_state, gc_root, vmstate, strempty, mainthref, registrytv, cur_L, jit_base, g->J.trace,
 *   str_len, str_data,
 *   cf_size, cf_nres, cf_L, cf_pc, cf_prev, vmst_min */
#define CF64  80, 8, 16, 24, 32
#define CF32  80, 16, 24, 28, 32
const struct lj_layout lj_layouts[] = {
	/* GC64 */
	{ "upstream 2.1 GC64 2021-06..2024-04 (Debian 12 2.1.0~beta3+git20220320)",
	  "docs/luajit.md §3.6 row 394fb626 [src,static,live]", LJL_GC64 | LJL_SNAP_MCOFS, 3968, 96,
	  33, 40, 184, 120, 192, 272, 368, 376, 1112, 20, 24, CF64, -7 },
	{ "upstream 2.1 GC64 2020-09..2021-03", "docs/luajit.md §3.6 row e9af1abe [src]",
	  LJL_GC64, 3960, 96, 33, 40, 184, 120, 192, 272, 368, 376, 1112, 20, 24, CF64, -7 },
	{ "upstream 2.1 GC64 2024-04..2025-11", "docs/luajit.md §3.6 row f5affaa6 [src]",
	  LJL_GC64 | LJL_SNAP_MCOFS, 3976, 96, 33, 40, 184, 120, 192, 272, 368, 376, 1120, 20, 24,
	  CF64, -7 },
	{ "upstream 2.1 GC64 2025-11-06..09", "docs/luajit.md §3.6 row 68354f44 [src]",
	  LJL_GC64 | LJL_SNAP_MCOFS, 3992, 96, 33, 40, 184, 120, 192, 272, 368, 376, 1120, 20, 24,
	  CF64, -7 },
	{ "upstream 2.1 GC64 >= 2025-11-10 (vmthref)", "docs/luajit.md §3.6 row 5c647754 [src,live]",
	  LJL_GC64 | LJL_SNAP_MCOFS, 4000, 96, 33, 40, 184, 120, 192, 272, 376, 384, 1128, 20, 24,
	  CF64, -7 },
	{ "upstream 2.1.0-beta3 GC64 (2017..2020-05)", "docs/luajit.md §3.2 column b3-64 [src]",
	  LJL_GC64 | LJL_SNAP8, 3920, 96, 49, 56, 128, 168, 200, 208, 344, 352, 1064, 16, 24,
	  CF64, -7 },
	{ "OpenResty luajit2 GC64 v2.1-20220111..20240314", "docs/luajit.md §3.7 [src]",
	  LJL_GC64 | LJL_OPENRESTY | LJL_SNAP_MCOFS, 4008, 112,
	  33, 40, 184, 120, 192, 272, 368, 376, 1120, 20, 24, CF64, -7 },
	{ "OpenResty luajit2 GC64 v2.1-20201027..20210510", "docs/luajit.md §3.7 [src]",
	  LJL_GC64 | LJL_OPENRESTY, 4000, 112,
	  33, 40, 184, 120, 192, 272, 368, 376, 1120, 20, 24, CF64, -7 },
	/* 32-bit references */
	{ "Tarantool 2.6 LuaJIT (32-bit refs)", "docs/luajit.md §3.2 column T26 [static, DWARF]",
	  LJL_TARANTOOL, 3144, 64, 73, 80, 120, 140, 160, 168, 280, 284, 816, 12, 16, CF32, -7 },
	{ "upstream 2.1 32-bit refs 2021-06..2024-04", "docs/luajit.md §3.6 row 394fb626 [src]",
	  LJL_SNAP_MCOFS, 3176, 64, 25, 32, 136, 76, 140, 216, 288, 292, 848, 16, 20, CF32, -7 },
	{ "upstream 2.1 32-bit refs >= 2025-11-10", "docs/luajit.md §3.6 row 5c647754 [src,live]",
	  LJL_SNAP_MCOFS, 3208, 64, 25, 32, 136, 76, 140, 216, 296, 300, 864, 16, 20, CF32, -7 },
	{ "OpenResty luajit2 32-bit refs v2.1-20220111..20240314", "docs/luajit.md §3.7 [src]",
	  LJL_OPENRESTY | LJL_SNAP_MCOFS, 3216, 80,
	  25, 32, 136, 76, 140, 216, 288, 292, 856, 16, 20, CF32, -7 },
};
const int lj_nlayouts = (int)(sizeof lj_layouts / sizeof lj_layouts[0]);

/* docs/luajit.md §3.4, §3.5 and lj_obj.h GCtab/Node. */
const struct lj_objlayout lj_obj_gc64 = {
	.gcref = 8, .gct = 9, .marked = 8,
	.L_dummy_ffid = 10, .L_status = 11, .L_glref = 16, .L_base = 32, .L_top = 40,
	.L_maxstack = 48, .L_stack = 56, .L_cframe = 80, .L_stacksize = 88,
	.fn_ffid = 10, .fn_pc = 32, .fn_f = 40,
	.pt_size = 104, .pt_numparams = 10, .pt_framesize = 11, .pt_sizebc = 12, .pt_k = 32,
	.pt_uv = 40, .pt_sizekgc = 48, .pt_sizept = 56, .pt_sizeuv = 60, .pt_flags = 61,
	.pt_chunkname = 64, .pt_firstline = 72, .pt_numline = 76, .pt_lineinfo = 80,
	.pt_uvinfo = 88, .pt_varinfo = 96,
	.tab_array = 16, .tab_node = 40, .tab_asize = 48, .tab_hmask = 52,
	.node_size = 24, .node_key = 8, .node_next = 16,
	.tr_nsnap = 10, .tr_nsnap_old = 44, .tr_snap = 48, .tr_snapmap = 56, .tr_startpt = 64,
	.tr_startpc = 72, .tr_startins = 80, .tr_szmcode = 84, .tr_mcode = 88, .tr_spadjust = 102,
};
const struct lj_objlayout lj_obj_32 = {
	.gcref = 4, .gct = 5, .marked = 4,
	.L_dummy_ffid = 6, .L_status = 7, .L_glref = 8, .L_base = 16, .L_top = 24,
	.L_maxstack = 32, .L_stack = 36, .L_cframe = 48, .L_stacksize = 56,
	.fn_ffid = 6, .fn_pc = 16, .fn_f = 24,
	.pt_size = 64, .pt_numparams = 6, .pt_framesize = 7, .pt_sizebc = 8, .pt_k = 16,
	.pt_uv = 20, .pt_sizekgc = 24, .pt_sizept = 32, .pt_sizeuv = 36, .pt_flags = 37,
	.pt_chunkname = 40, .pt_firstline = 44, .pt_numline = 48, .pt_lineinfo = 52,
	.pt_uvinfo = 56, .pt_varinfo = 60,
	.tab_array = 8, .tab_node = 20, .tab_asize = 24, .tab_hmask = 28,
	.node_size = 24, .node_key = 8, .node_next = 16,
	.tr_nsnap = 6, .tr_nsnap_old = 28, .tr_snap = 32, .tr_snapmap = 40, .tr_startpt = 48,
	.tr_startpc = 52, .tr_startins = 56, .tr_szmcode = 60, .tr_mcode = 64, .tr_spadjust = 78,
};

const struct lj_layout *lj_layout_match(const struct lj_codeinfo *ci, unsigned hostflags)
{
	if (ci->gc64 < 0 || ci->g2disp == 0)
		return NULL;
	for (int i = 0; i < lj_nlayouts; i++) {
		const struct lj_layout *l = &lj_layouts[i];
		if (!!(l->flags & LJL_GC64) != ci->gc64 || l->g2disp != ci->g2disp)
			continue;
		if ((l->flags & LJL_OPENRESTY) != (hostflags & LJL_OPENRESTY))
			continue;
		if ((l->flags & LJL_TARANTOOL) && !(hostflags & LJL_TARANTOOL))
			continue;
		if (ci->vmstate >= 0 && ci->vmstate != l->g_vmstate)
			continue;
		if (ci->cur_L >= 0 && ci->cur_L != l->g_cur_L)
			continue;
		return l;
	}
	return NULL;
}

int32_t lj_rd32(const uint8_t *p)
{
	int32_t v;
	memcpy(&v, p, 4);
	return v;
}

int32_t lj_mode_of(const int32_t *v, int n)
{
	int best = -1, bestc = 0;
	for (int i = 0; i < n; i++) {
		int c = 0;
		for (int j = 0; j < n; j++)
			c += v[j] == v[i];
		if (c > bestc) {
			bestc = c;
			best = i;
		}
	}
	return best < 0 ? -1 : v[best];
}

int lj_code_derive(const uint8_t *code, size_t len, struct lj_codeinfo *ci)
{
	ci->gc64 = -1;
	ci->g2disp = 0;
	ci->vmstate = -1;
	ci->cur_L = -1;
	/* Entry: mov r14,[rbp+0x10] (4c 8b 75 10) ... add r14,imm32 (49 81 c6)
	 * or 32-bit refs: mov r14d,[rbp+8] (44 8b 75 08) ... add r14d,imm32 (41 81 c6). */
	int32_t disp[16];
	int nd = 0, gc64 = -1;
	for (size_t i = 0; i + 4 <= len && nd < 16; i++) {
		int g = -1;
		if (code[i] == 0x4c && code[i + 1] == 0x8b && code[i + 2] == 0x75 && code[i + 3] == 0x10)
			g = 1;
		else if (code[i] == 0x44 && code[i + 1] == 0x8b && code[i + 2] == 0x75 && code[i + 3] == 0x08)
			g = 0;
		if (g < 0)
			continue;
		uint8_t pfx = g ? 0x49 : 0x41;
		for (size_t j = i + 4; j + 7 <= len && j < i + 48; j++) {
			if (code[j] == pfx && code[j + 1] == 0x81 && code[j + 2] == 0xc6) {
				int32_t v = lj_rd32(code + j + 3);
				if (v > 0 && v < 0x10000) {
					disp[nd++] = v;
					if (gc64 < 0)
						gc64 = g;
					else if (gc64 != g)
						gc64 = -2;
				}
				break;
			}
		}
	}
	if (nd == 0 || gc64 < 0)
		return -1;
	int32_t g2 = lj_mode_of(disp, nd);
	ci->gc64 = gc64;
	ci->g2disp = (uint32_t)g2;
	/* vmstate: mov dword [r14+disp32], ~N  (41 c7 86 disp32 imm32), imm in [~8, ~0] */
	int32_t vs[64], cl[64];
	int nvs = 0, ncl = 0;
	for (size_t i = 0; i + 11 <= len; i++) {
		if (code[i] == 0x41 && code[i + 1] == 0xc7 && code[i + 2] == 0x86 && nvs < 64) {
			int32_t imm = lj_rd32(code + i + 7);
			int64_t o = (int64_t)g2 + lj_rd32(code + i + 3);   /* no int overflow */
			if (imm < 0 && imm >= -9 && o > 0 && o <= INT32_MAX)
				vs[nvs++] = (int32_t)o;
		}
		/* cur_L: mov [r14+disp32], rbp (49 89 ae) / ebp (41 89 ae) */
		if (code[i] == (gc64 ? 0x49 : 0x41) && code[i + 1] == 0x89 && code[i + 2] == 0xae &&
		    ncl < 64) {
			int64_t o = (int64_t)g2 + lj_rd32(code + i + 3);
			if (o > 0 && o <= INT32_MAX)
				cl[ncl++] = (int32_t)o;
		}
	}
	if (nvs)
		ci->vmstate = lj_mode_of(vs, nvs);
	if (ncl)
		ci->cur_L = lj_mode_of(cl, ncl);
	return 0;
}
