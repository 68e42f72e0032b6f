/* vm_puc_layout.c: PUC Lua 5.1-5.4 layouts, one const row per release
 * family (x86_64, default luaconf), plus lua_ident parsing.
 *
 * Source: offsetof() against each release's headers (lua/lua tags), and
 * the DWARF of Debian 12 liblua5.{1,3,4}-0-dbg for 5.1.5, 5.3.6, 5.4.4
 * (tests/puc-layout-dwarf.test re-checks those three). The tables these
 * rows were typed from: docs/puc-lua.md §1-§3. -1 = no such field.
 * Fields marked [unverified] are reasoned from neighbouring releases. */
#include <stdlib.h>
#include <string.h>
#include "vm_puc.h"

/* 5.1: CallInfo array, GETGLOBAL, no status bits. 5.1.0-5.1.2 differ
 * only after nCcalls (hookmask..hookcount), which the walker never reads. */
#define ROW51(nm, lo, hi, tlsize, tarr, tnode, tsza, tmt, src)                     \
	{ .name = nm, .minor = 1, .rel_lo = lo, .rel_hi = hi, .isa = PUC_ISA_51,  \
	  .exec = PUC_EXEC_51, .source = src,                                       \
	  .L_status = 10, .L_top = 16, .L_base = 24, .L_l_G = 32, .L_ci = 40,       \
	  .L_savedpc = 48, .L_stack_last = 56, .L_stack = 64, .L_end_ci = 72,       \
	  .L_base_ci = 80, .L_nCcalls = 96, .L_errorJmp = 168, .L_size = 184,       \
	  .L_nCcalls_size = 2,                                                      \
	  .ci_func = 8, .ci_top = 16, .ci_base = 0, .ci_previous = -1,              \
	  .ci_next = -1, .ci_savedpc = 24, .ci_callstatus = -1,                     \
	  .ci_callstatus_size = 0, .ci_tailcalls = 36, .ci_size = 40,               \
	  .g_frealloc = 16, .g_ud = 24, .g_strt_size = 12, .g_l_registry = 160,     \
	  .g_currentwhite = 32, .g_allgc = 40, .g_mainthread = 176, .g_tmname = 296,\
	  .white_mask = 0x03, .lx_l = 0, .lg_size = 616,                            \
	  .cl_isC = 10, .cl_nupvalues = 11, .ccl_f = 32, .ccl_upvalue = 40,         \
	  .lcl_p = 32,                                                              \
	  .p_tt_value = 9, .p_sizeupvalues = 72, .p_sizek = 76, .p_sizecode = 80,   \
	  .p_sizelineinfo = 84, .p_sizep = 88, .p_sizelocvars = 92,                 \
	  .p_sizeabslineinfo = -1, .p_linedefined = 96, .p_lastlinedefined = 100,   \
	  .p_k = 16, .p_code = 24, .p_p = 32, .p_upvalues = 56, .p_lineinfo = 40,   \
	  .p_abslineinfo = -1, .p_locvars = 48, .p_source = 64, .p_nups = 112,      \
	  .upval_stride = 8, .str_len = PUC_STR_SIZET, .ts_data = 24,               \
	  .t_lsizenode = tlsize, .t_array = tarr, .t_node = tnode,                  \
	  .t_sizearray = tsza, .t_metatable = tmt, .node_size = 40,                 \
	  .node_key_tt = 24, .node_key_tt_size = 4, .node_key_val = 16,             \
	  .tv_tt_size = 4, .tag_nil = 0, .tag_sstr = 4, .tag_lstr = 4,              \
	  .tag_table = 5, .tag_lcl = 6, .tag_ccl = 6, .tag_lcf = 0x100,             \
	  .tag_thread = 8, .gct_thread = 8, .gct_sstr = 4, .gct_lstr = 4,           \
	  .gct_table = 5, .gct_lcl = 6, .gct_ccl = 6, .num_opcodes = 38 }

/* 5.2 and 5.3 share the GC tags and the CallInfo list. */
#define TAGS5253                                                                   \
	.tv_tt_size = 4, .tag_nil = 0, .tag_sstr = 0x44, .tag_lstr = 0x54,         \
	.tag_table = 0x45, .tag_lcl = 0x46, .tag_ccl = 0x66, .tag_lcf = 0x16,      \
	.tag_thread = 0x48, .gct_thread = 8, .gct_sstr = 4, .gct_lstr = 0x14,      \
	.gct_table = 5, .gct_lcl = 6, .gct_ccl = 0x26

#define PROTO52                                                                    \
	.p_tt_value = 9, .p_sizeupvalues = 80, .p_sizek = 84, .p_sizecode = 88,    \
	.p_sizelineinfo = 92, .p_sizep = 96, .p_sizelocvars = 100,                 \
	.p_sizeabslineinfo = -1, .p_linedefined = 104, .p_lastlinedefined = 108,   \
	.p_k = 16, .p_code = 24, .p_p = 32, .p_upvalues = 56, .p_lineinfo = 40,    \
	.p_abslineinfo = -1, .p_locvars = 48, .p_source = 72, .p_nups = -1,        \
	.upval_stride = 16

#define PROTO53                                                                    \
	.p_tt_value = 9, .p_sizeupvalues = 16, .p_sizek = 20, .p_sizecode = 24,    \
	.p_sizelineinfo = 28, .p_sizep = 32, .p_sizelocvars = 36,                  \
	.p_sizeabslineinfo = -1, .p_linedefined = 40, .p_lastlinedefined = 44,     \
	.p_k = 48, .p_code = 56, .p_p = 64, .p_upvalues = 88, .p_lineinfo = 72,    \
	.p_abslineinfo = -1, .p_locvars = 80, .p_source = 104, .p_nups = -1,       \
	.upval_stride = 16

#define PROTO54                                                                    \
	.p_tt_value = 10, .p_sizeupvalues = 16, .p_sizek = 20, .p_sizecode = 24,   \
	.p_sizelineinfo = 28, .p_sizep = 32, .p_sizelocvars = 36,                  \
	.p_sizeabslineinfo = 40, .p_linedefined = 44, .p_lastlinedefined = 48,     \
	.p_k = 56, .p_code = 64, .p_p = 72, .p_upvalues = 80, .p_lineinfo = 88,    \
	.p_abslineinfo = 96, .p_locvars = 104, .p_source = 112, .p_nups = -1,      \
	.upval_stride = 16

#define TABLE5253(nodesz)                                                          \
	.t_lsizenode = 11, .t_sizearray = 12, .t_array = 16, .t_node = 24,         \
	.t_metatable = 40, .node_size = nodesz, .node_key_tt = 24,                 \
	.node_key_tt_size = 4, .node_key_val = 16

/* 5.2.0-5.2.3 keep 5.1's Table order; lua/lua dace83ea (2014-05-07,
 * "better alignment for struct 'Table'") gave 5.2.4 the order above */
#define TABLE520_523                                                               \
	.t_lsizenode = 11, .t_metatable = 16, .t_array = 24, .t_node = 32,         \
	.t_sizearray = 56, .node_size = 40, .node_key_tt = 24,                     \
	.node_key_tt_size = 4, .node_key_val = 16

/* 5.2.1-5.2.4: 'extra' left CallInfo's C part, u.l.savedpc moved to 56 */
#define ROW521(nm, lo, hi, table, src)                                             \
	{ .name = nm, .minor = 2, .rel_lo = lo, .rel_hi = hi, .isa = PUC_ISA_52,   \
	  .exec = PUC_EXEC_REENTRY, .source = src,                                 \
	  .L_status = 10, .L_top = 16, .L_base = -1, .L_l_G = 24, .L_ci = 32,      \
	  .L_savedpc = -1, .L_stack_last = 48, .L_stack = 56, .L_end_ci = -1,      \
	  .L_base_ci = 128, .L_nCcalls = 70, .L_errorJmp = 112, .L_size = 208,     \
	  .L_nCcalls_size = 2,                                                     \
	  .ci_func = 0, .ci_top = 8, .ci_base = 48, .ci_previous = 16,             \
	  .ci_next = 24, .ci_savedpc = 56, .ci_callstatus = 34,                    \
	  .ci_callstatus_size = 1, .ci_tailcalls = -1, .ci_size = 80,              \
	  .g_frealloc = 0, .g_ud = 8, .g_strt_size = 60, .g_l_registry = 64,       \
	  .g_currentwhite = 84, .g_allgc = 96, .g_mainthread = 264,                \
	  .g_tmname = 288, .white_mask = 0x03, .lx_l = 0, .lg_size = 704,          \
	  CLOSURES52, PROTO52, .str_len = PUC_STR_SIZET, .ts_data = 24, table,     \
	  TAGS5253,                                                                \
	  .cist_lua = 0x01, .cist_hooked = 0x02, .cist_reentry = 0x04,             \
	  .cist_tail = 0x40, .num_opcodes = 40 }

#define CLOSURES52 .cl_isC = -1, .cl_nupvalues = 10, .ccl_f = 24, .ccl_upvalue = 32, .lcl_p = 24

/* lua_State 5.3 (status moves to 12 with nci in 5.3.2) */
#define STATE53(st)                                                                \
	.L_status = st, .L_top = 16, .L_base = -1, .L_l_G = 24, .L_ci = 32,        \
	.L_savedpc = -1, .L_stack_last = 48, .L_stack = 56, .L_end_ci = -1,        \
	.L_base_ci = 96, .L_nCcalls = 198, .L_errorJmp = 88, .L_size = 208,        \
	.L_nCcalls_size = 2

#define CI53(cssize)                                                               \
	.ci_func = 0, .ci_top = 8, .ci_base = 32, .ci_previous = 16, .ci_next = 24,\
	.ci_savedpc = 40, .ci_callstatus = 66, .ci_callstatus_size = cssize,       \
	.ci_tailcalls = -1, .ci_size = 72

#define G53(mt)                                                                    \
	.g_frealloc = 0, .g_ud = 8, .g_strt_size = 60, .g_l_registry = 64,         \
	.g_currentwhite = 84, .g_allgc = 88, .g_mainthread = mt,                   \
	.g_tmname = (mt) + 24, .white_mask = 0x03, .lx_l = 8

#define STATE54(sl, stk, ej, bci, ncc, sz)                                         \
	.L_status = 10, .L_top = 16, .L_base = -1, .L_l_G = 24, .L_ci = 32,        \
	.L_savedpc = -1, .L_stack_last = sl, .L_stack = stk, .L_end_ci = -1,       \
	.L_base_ci = bci, .L_nCcalls = ncc, .L_errorJmp = ej, .L_size = sz,        \
	.L_nCcalls_size = 4

#define CI54                                                                       \
	.ci_func = 0, .ci_top = 8, .ci_base = -1, .ci_previous = 16, .ci_next = 24,\
	.ci_savedpc = 32, .ci_callstatus = 62, .ci_callstatus_size = 2,            \
	.ci_tailcalls = -1, .ci_size = 64

#define G54(mt, lgsz)                                                              \
	.g_frealloc = 0, .g_ud = 8, .g_strt_size = 60, .g_l_registry = 64,         \
	.g_currentwhite = 100, .g_allgc = 112, .g_mainthread = mt,                 \
	.g_tmname = (mt) + 16, .white_mask = 0x18, .lx_l = 8, .lg_size = lgsz

#define REST54                                                                     \
	CLOSURES52, PROTO54, .str_len = PUC_STR_SHRLEN, .ts_data = 24,             \
	.t_lsizenode = 11, .t_sizearray = 12, .t_array = 16, .t_node = 24,         \
	.t_metatable = 40, .node_size = 24, .node_key_tt = 9,                      \
	.node_key_tt_size = 1, .node_key_val = 16,                                 \
	.tv_tt_size = 1, .tag_nil = 0, .tag_sstr = 0x44, .tag_lstr = 0x54,         \
	.tag_table = 0x45, .tag_lcl = 0x46, .tag_ccl = 0x66, .tag_lcf = 0x16,      \
	.tag_thread = 0x48, .gct_thread = 8, .gct_sstr = 4, .gct_lstr = 0x14,      \
	.gct_table = 5, .gct_lcl = 6, .gct_ccl = 0x26, .cist_c = 0x02,             \
	.fin_on_caller = 1, .tm_strip = 1, .num_opcodes = 83

const struct puc_layout puc_layouts[] = {
	ROW51("5.1", 0, 5, 11, 24, 32, 56, 16, "src 5.1.1/5.1.5, dwarf Debian 5.1.5"),
	/* Redis's Lua 5.1.5 adds 'int readonly' to Table (docs/puc-lua.md §11) */
	ROW51("5.1-redis", 5, 5, 16, 32, 40, 64, 24, "static: redis 7.0 lua_isreadonlytable"),
	/* 5.2.0: u.l.savedpc at 48 ('extra' still in the C part: sizeof 80),
	 * shorter global_State, isC still present, 5.1's Table order */
	{ .name = "5.2.0", .minor = 2, .rel_lo = 0, .rel_hi = 0, .isa = PUC_ISA_52,
	  .exec = PUC_EXEC_REENTRY, .source = "src 5.2.0 (gcc -g ptype/o), live build of the v5.2.0 tag",
	  .L_status = 10, .L_top = 16, .L_base = -1, .L_l_G = 24, .L_ci = 32,
	  .L_savedpc = -1, .L_stack_last = 48, .L_stack = 56, .L_end_ci = -1,
	  .L_base_ci = 128, .L_nCcalls = 70, .L_errorJmp = 112, .L_size = 208,
	  .L_nCcalls_size = 2,
	  .ci_func = 0, .ci_top = 8, .ci_base = 40, .ci_previous = 16, .ci_next = 24,
	  .ci_savedpc = 48, .ci_callstatus = 34, .ci_callstatus_size = 1,
	  .ci_tailcalls = -1, .ci_size = 80,
	  .g_frealloc = 0, .g_ud = 8, .g_strt_size = 52, .g_l_registry = 56,
	  .g_currentwhite = 72, .g_allgc = 80, .g_mainthread = 240, .g_tmname = 264,
	  .white_mask = 0x03, .lx_l = 0, .lg_size = 680,
	  .cl_isC = 10, .cl_nupvalues = 11, .ccl_f = 24, .ccl_upvalue = 32, .lcl_p = 24,
	  PROTO52, .str_len = PUC_STR_SIZET, .ts_data = 24, TABLE520_523,
	  .tv_tt_size = 4, .tag_nil = 0, .tag_sstr = 0x44, .tag_lstr = 0x44,
	  .tag_table = 0x45, .tag_lcl = 0x46, .tag_ccl = 0x66, .tag_lcf = 0x16,
	  .tag_thread = 0x48, .gct_thread = 8, .gct_sstr = 4, .gct_lstr = 4,
	  .gct_table = 5, .gct_lcl = 6, .gct_ccl = 0x26,
	  .cist_lua = 0x01, .cist_hooked = 0x02, .cist_reentry = 0x04, .cist_tail = 0x40,
	  .num_opcodes = 40 },
	ROW521("5.2.1-5.2.3", 1, 3, TABLE520_523,
	       "src 5.2.1-5.2.3 (Table: v5.2.1-v5.2.3 tags), live builds of v5.2.3"),
	ROW521("5.2.4", 4, 4, TABLE5253(40), "src 5.2.4, live Debian 5.2.4"),
	/* 5.3.0: TString characters at +32, no nci, Mbuffer in global_State */
	{ .name = "5.3.0", .minor = 3, .rel_lo = 0, .rel_hi = 0, .isa = PUC_ISA_53,
	  .exec = PUC_EXEC_REENTRY, .source = "src 5.3.0 (gcc -g ptype/o), live build of the v5.3.0 tag",
	  STATE53(10), CI53(1), G53(224), .lg_size = 728,
	  CLOSURES52, PROTO53, .str_len = PUC_STR_SIZET, .ts_data = 32, TABLE5253(32),
	  TAGS5253,
	  .cist_lua = 0x02, .cist_hooked = 0x04, .cist_reentry = 0x08, .cist_tail = 0x20,
	  .num_opcodes = 47 },
	{ .name = "5.3.1", .minor = 3, .rel_lo = 1, .rel_hi = 1, .isa = PUC_ISA_53,
	  .exec = PUC_EXEC_REENTRY, .source = "src 5.3.1",
	  STATE53(10), CI53(1), G53(224), .lg_size = 1744,
	  CLOSURES52, PROTO53, .str_len = PUC_STR_SHRLEN, .ts_data = 24, TABLE5253(32),
	  TAGS5253,
	  .cist_lua = 0x02, .cist_hooked = 0x04, .cist_reentry = 0x08, .cist_tail = 0x20,
	  .num_opcodes = 47 },
	{ .name = "5.3.2-5.3.3", .minor = 3, .rel_lo = 2, .rel_hi = 3, .isa = PUC_ISA_53,
	  .exec = PUC_EXEC_FRESH, .source = "src 5.3.2, 5.3.3",
	  STATE53(12), CI53(1), G53(200), .lg_size = 1552,
	  CLOSURES52, PROTO53, .str_len = PUC_STR_SHRLEN, .ts_data = 24, TABLE5253(32),
	  TAGS5253,
	  .cist_lua = 0x02, .cist_hooked = 0x04, .cist_fresh = 0x08, .cist_tail = 0x20,
	  .num_opcodes = 47 },
	{ .name = "5.3.4-5.3.6", .minor = 3, .rel_lo = 4, .rel_hi = 6, .isa = PUC_ISA_53,
	  .exec = PUC_EXEC_FRESH, .source = "src 5.3.4-5.3.6, dwarf Debian 5.3.6",
	  STATE53(12), CI53(2), G53(200), .lg_size = 1552,
	  CLOSURES52, PROTO53, .str_len = PUC_STR_SHRLEN, .ts_data = 24, TABLE5253(32),
	  TAGS5253,
	  .cist_lua = 0x02, .cist_hooked = 0x04, .cist_fresh = 0x08, .cist_tail = 0x20,
	  .cist_fin = 0x100, .num_opcodes = 47 },
	/* 5.4.0: oldpc is a pointer; nCcalls counts down; a luaV_execute per call */
	{ .name = "5.4.0", .minor = 4, .rel_lo = 0, .rel_hi = 0, .isa = PUC_ISA_54,
	  .exec = PUC_EXEC_EVERY, .source = "src 5.4.0 (gcc -g ptype/o), live build of the v5.4.0 tag",
	  STATE54(48, 56, 88, 96, 176, 200), .nCcalls_down = 1, CI54, G54(256, 1624),
	  REST54, .cist_hooked = 0x04, .cist_tail = 0x10, .cist_fin = 0x40 },
	/* 5.4.1: no tbclist */
	{ .name = "5.4.1", .minor = 4, .rel_lo = 1, .rel_hi = 1, .isa = PUC_ISA_54,
	  .exec = PUC_EXEC_EVERY, .source = "src 5.4.1, live 5.4.1 build",
	  STATE54(40, 48, 80, 88, 168, 192), .nCcalls_down = 1, CI54, G54(264, 1624),
	  REST54, .cist_hooked = 0x04, .cist_tail = 0x10, .cist_fin = 0x40 },
	/* 5.4.2: FRESH appears, CIST bits move */
	{ .name = "5.4.2", .minor = 4, .rel_lo = 2, .rel_hi = 2, .isa = PUC_ISA_54,
	  .exec = PUC_EXEC_FRESH, .source = "src 5.4.2 (gcc -g ptype/o), live build of the v5.4.2 tag",
	  STATE54(40, 48, 80, 88, 168, 192), CI54, G54(264, 1616),
	  REST54, .cist_fresh = 0x04, .cist_hooked = 0x08, .cist_tail = 0x20, .cist_fin = 0x80 },
	/* 5.4.3-5.4.8 (5.4.5+: StkIdRel, same offsets) */
	{ .name = "5.4.3-5.4.8", .minor = 4, .rel_lo = 3, .rel_hi = 8, .isa = PUC_ISA_54,
	  .exec = PUC_EXEC_FRESH, .source = "src 5.4.3-5.4.8, dwarf Debian 5.4.4, live build of v5.4.6",
	  STATE54(40, 48, 88, 96, 176, 200), CI54, G54(264, 1624),
	  REST54, .cist_fresh = 0x04, .cist_hooked = 0x08, .cist_tail = 0x20, .cist_fin = 0x80 },
};
const int puc_nlayouts = sizeof puc_layouts / sizeof puc_layouts[0];

const struct puc_layout *puc_layout_find(int minor, int patch)
{
	const struct puc_layout *best = NULL;
	for (int i = 0; i < puc_nlayouts; i++) {
		const struct puc_layout *l = &puc_layouts[i];
		if (l->minor != minor || strstr(l->name, "redis"))
			continue;
		if (patch < 0) {
			if (!best || l->rel_hi > best->rel_hi)
				best = l;
		} else if (patch >= l->rel_lo && patch <= l->rel_hi) {
			return l;
		}
	}
	return best;
}

/* "$Lua: Lua 5.1.5 Copyright..." or "$LuaVersion: Lua 5.4.4  Copyright..." */
int puc_ident_parse(const char *s, size_t len, int *minor, int *patch)
{
	char buf[128];
	size_t n = len < sizeof buf - 1 ? len : sizeof buf - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
	const char *p = strstr(buf, "Lua 5.");
	if (!p || (strncmp(buf, "$Lua: ", 6) != 0 && strncmp(buf, "$LuaVersion: ", 13) != 0))
		return -1;
	p += 6;
	if (*p < '1' || *p > '4')
		return -1;
	*minor = *p - '0';
	*patch = -1;
	p++;
	if (*p == '.' && p[1] >= '0' && p[1] <= '9') {
		char *end;
		long v = strtol(p + 1, &end, 10);
		if (v >= 0 && v < 100)
			*patch = (int)v;
	} else if (*p != ' ') {
		return -1;
	}
	if (*minor == 1 && *patch < 0)
		*patch = 0;   /* 5.1.0 says "Lua 5.1" */
	return 0;
}
