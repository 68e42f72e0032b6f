/* vm_puc.h: the PUC Lua 5.1-5.4 family: layouts, the name and line
 * decoder, the image walker (tests, fuzzers). The walker files share
 * vm_puc_int.h besides.
 *
 * Layouts are data (vm_puc_layout.c): one const row per release family,
 * offsets in bytes for x86_64 with the default luaconf. Source: the
 * releases' own headers (offsetof), cross-checked with the DWARF of
 * Debian 12's liblua5.{1,3,4}-0-dbg (docs/puc-lua.md §1). The
 * walker reads offsets from the row and never tests versions with #if.
 * An offset of -1 means "field does not exist in this release". */
#ifndef LUASPY_VM_PUC_H
#define LUASPY_VM_PUC_H

#include <stdint.h>
#include <stddef.h>
#include "proc_mem.h"

/* How one luaV_execute invocation is delimited (docs/puc-lua.md §8.1). */
enum puc_exec_rule {
	PUC_EXEC_51,       /* caller not Lua, or caller's instruction not CALL/TAILCALL */
	PUC_EXEC_REENTRY,  /* bottom frame iff REENTRY bit clear (5.2, 5.3.0-1) */
	PUC_EXEC_FRESH,    /* bottom frame iff FRESH bit set (5.3.2+, 5.4.2+) */
	PUC_EXEC_EVERY,    /* every Lua frame has its own invocation (5.4.0-1) */
};

/* Instruction set family (encoding + opcode numbering). */
enum puc_isa { PUC_ISA_51, PUC_ISA_52, PUC_ISA_53, PUC_ISA_54 };

/* How a TString's length is stored. */
enum puc_strlen { PUC_STR_SIZET, PUC_STR_SHRLEN };

struct puc_layout {
	const char *name;       /* "5.4.3-5.4.8" */
	int minor;              /* 1..4 (5.minor) */
	int rel_lo, rel_hi;     /* patch releases covered, inclusive */
	enum puc_isa isa;
	enum puc_exec_rule exec;
	const char *source;     /* where the numbers come from */

	/* lua_State */
	int L_status, L_top, L_base, L_l_G, L_ci, L_savedpc, L_stack_last, L_stack,
	    L_end_ci, L_base_ci, L_nCcalls, L_errorJmp, L_size;
	int L_nCcalls_size;     /* 2 or 4 */
	int nCcalls_down;       /* 5.4.0-5.4.1 count down: don't compare */
	/* CallInfo */
	int ci_func, ci_top, ci_base, ci_previous, ci_next, ci_savedpc,
	    ci_callstatus, ci_callstatus_size, ci_tailcalls, ci_size;
	/* global_State */
	int g_frealloc, g_ud, g_strt_size, g_l_registry, g_currentwhite, g_allgc,
	    g_mainthread, g_tmname;
	unsigned white_mask;    /* the two white bits of currentwhite */
	int lx_l;               /* offset of the lua_State in the LG block */
	int lg_size;            /* sizeof(LG): the main allocation */
	/* closures */
	int cl_isC;             /* 5.1 only (u8) */
	int cl_nupvalues, ccl_f, ccl_upvalue, lcl_p;
	/* Proto */
	int p_tt_value;         /* header tt of a Proto: 9 (5.1-5.3) or 10 (5.4) */
	int p_sizeupvalues, p_sizek, p_sizecode, p_sizelineinfo, p_sizep, p_sizelocvars,
	    p_sizeabslineinfo, p_linedefined, p_lastlinedefined, p_k, p_code, p_p,
	    p_upvalues, p_lineinfo, p_abslineinfo, p_locvars, p_source, p_nups;
	int upval_stride;       /* Proto.upvalues element size: 8 (TString*) or 16 (Upvaldesc) */
	/* TString */
	enum puc_strlen str_len;
	int ts_data;            /* first character */
	/* Table / Node */
	int t_lsizenode, t_array, t_node, t_sizearray, t_metatable, node_size,
	    node_key_tt, node_key_tt_size, node_key_val;
	/* TValue tags (value of the tag word at TValue+8; 5.1-5.3 int, 5.4 u8) */
	int tv_tt_size;         /* 4 or 1 */
	unsigned tag_nil, tag_sstr, tag_lstr, tag_table, tag_lcl, tag_ccl, tag_lcf,
	    tag_thread;
	/* GC header tt (object+8) */
	unsigned gct_thread, gct_sstr, gct_lstr, gct_table, gct_lcl, gct_ccl;
	/* CallInfo status bits (0 = absent) */
	unsigned cist_lua;      /* set on Lua frames (5.2, 5.3) */
	unsigned cist_c;        /* set on C frames (5.4) */
	unsigned cist_fresh, cist_reentry, cist_hooked, cist_tail, cist_fin;
	int fin_on_caller;      /* 5.4 tests FIN on the caller, 5.3 on the callee */
	int tm_strip;           /* metamethod names drop "__" (5.4) */
	/* sizes of the arrays we read */
	int num_opcodes;
};

extern const struct puc_layout puc_layouts[];
extern const int puc_nlayouts;

/* Parse the text of lua_ident (LEN bytes) into MINOR and PATCH (-1 when
 * the text names no patch release, e.g. "Lua 5.1"). Returns 0 or -1. */
int puc_ident_parse(const char *s, size_t len, int *minor, int *patch);

/* The layout row for 5.MINOR.PATCH (PATCH -1: the newest of that minor),
 * or NULL. */
const struct puc_layout *puc_layout_find(int minor, int patch);

/* 5.4 line of instruction PC of a Proto from its lineinfo bytes
 * (LINEINFO, SIZELINEINFO entries), absolute table (ABS: pairs pc,line;
 * NABS entries) and LINEDEFINED. Mirrors luaG_getfuncline with a binary
 * search for the base entry (correct for every 5.4.x). Returns the line,
 * or -1 when PC is out of range or the line is not a valid int (garbage). */
int puc_line54(const int8_t *lineinfo, int sizelineinfo, const int32_t *abs, int nabs,
	       int linedefined, int pc);

/* Call-site name of a function called by the instruction at PC of the
 * caller's code (docs/puc-lua.md §6): WHAT receives "global", "local", "method",
 * "field", "upvalue", "constant", "for iterator", "metamethod" or NULL;
 * NAME the name. CODE has SIZECODE instructions. The callbacks give the
 * caller Proto's local names, upvalue names, constant strings and (5.1)
 * the upvalue count of child proto N. Strings returned by callbacks must
 * be our own NUL-terminated copies that stay valid (interned), never
 * target memory; the decoder compares them bounded. Metamethod names are the version's own ("__add"
 * up to 5.3, "add" in 5.4); 5.1 names none. */
struct puc_nameinfo {
	const struct puc_layout *lay;
	const uint32_t *code;
	int sizecode;
	void *arg;
	/* name of the N-th (1-based) active local at PC, or NULL */
	const char *(*localname)(void *arg, int n, int pc);
	/* name of upvalue IDX, or NULL */
	const char *(*upvalname)(void *arg, int idx);
	/* string constant K, or NULL when not a string */
	const char *(*kstr)(void *arg, int k);
	/* 5.1: nups of child Proto IDX (-1 unknown) */
	int (*child_nups)(void *arg, int idx);
};
const char *puc_funcname(const struct puc_nameinfo *ni, int pc, const char **name);
/* Instruction at PC is a call (CALL/TAILCALL; used by the 5.1 segment rule). */
int puc_is_call_op(const struct puc_layout *lay, uint32_t ins);

/* Unit tests: walk lua_State L of layout LAY in memory M (a synthetic
 * image) as capture()+walk() would, without a process, symbols or native
 * frames. Lua and C frames into OUT, innermost first. 0 or -LS_E_*. */
struct stack;
int puc_walk_image(const struct puc_layout *lay, struct mem *m, uint64_t L, struct stack *out);

#endif
