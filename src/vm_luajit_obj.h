/* vm_luajit_obj.h: LuaJIT 2.1 GC objects as the walker and the probe
 * read them: type tags, the offsets that depend only on the reference
 * width (rows in vm_luajit_layout.c), and the small readers both use.
 * Sources: docs/luajit.md §3-§5. */
#ifndef LUASPY_VM_LUAJIT_OBJ_H
#define LUASPY_VM_LUAJIT_OBJ_H

#include <stdint.h>
#include "proc_mem.h"

/* GC object type tags: the gct byte of a GC object header, ~LJ_T* of
 * LuaJIT's lj_obj.h (the same in every 2.1 variant). */
enum lj_gct {
	LJ_GCT_STR = 4,          /* GCstr */
	LJ_GCT_UPVAL = 5,        /* GCupval */
	LJ_GCT_THREAD = 6,       /* lua_State */
	LJ_GCT_PROTO = 7,        /* GCproto */
	LJ_GCT_FUNC = 8,         /* GCfunc (Lua or C) */
	LJ_GCT_TRACE = 9,        /* GCtrace */
	LJ_GCT_CDATA = 10,       /* GCcdata */
	LJ_GCT_TAB = 11,         /* GCtab */
	LJ_GCT_UDATA = 12        /* GCudata */
};

/* What only depends on the reference width. */
struct lj_objlayout {
	uint8_t gcref;           /* 8 or 4 */
	uint8_t gct;             /* GC header: gct byte */
	uint8_t marked;
	/* lua_State */
	uint8_t L_dummy_ffid, L_status, L_glref, L_base, L_top, L_maxstack, L_stack,
		L_cframe, L_stacksize;
	/* GCfunc */
	uint8_t fn_ffid, fn_pc, fn_f;
	/* GCproto */
	uint8_t pt_size, pt_numparams, pt_framesize, pt_sizebc, pt_k, pt_uv, pt_sizekgc,
		pt_sizept, pt_sizeuv, pt_flags, pt_chunkname, pt_firstline, pt_numline,
		pt_lineinfo, pt_uvinfo, pt_varinfo;
	/* GCtab, Node */
	uint8_t tab_array, tab_node, tab_asize, tab_hmask, node_size, node_key, node_next;
	/* GCtrace */
	uint8_t tr_nsnap, tr_nsnap_old, tr_snap, tr_snapmap, tr_startpt, tr_startpc,
		tr_startins, tr_szmcode, tr_mcode, tr_spadjust;
};

extern const struct lj_objlayout lj_obj_gc64, lj_obj_32;

/* A GC reference RAW as a pointer: 47 bits with 64-bit refs (GC64), 32
 * otherwise. */
static inline uint64_t lj_gcptr(const struct lj_objlayout *ol, uint64_t raw)
{
	return ol->gcref == 8 ? (raw & 0x7fffffffffffull) : (raw & 0xffffffffull);
}

/* Read the GC reference at target ADDR through M into *OUT (0 on a
 * failed read). Returns 0 or the reader's -LS_E_*. */
static inline int lj_read_ref(const struct lj_objlayout *ol, struct mem *m, uint64_t addr,
			      uint64_t *out)
{
	if (ol->gcref == 8) {
		uint64_t v;
		int rc = mem_read_u64(m, addr, &v);
		*out = rc < 0 ? 0 : lj_gcptr(ol, v);
		return rc;
	}
	uint32_t v;
	int rc = mem_read_u32(m, addr, &v);
	*out = rc < 0 ? 0 : v;
	return rc;
}

/* Is the GC object at target address O of type GCT (read through M)? */
static inline int lj_is_gct(const struct lj_objlayout *ol, struct mem *m, uint64_t o,
			    enum lj_gct gct)
{
	uint8_t t;
	return mem_read_u8(m, o + ol->gct, &t) == 0 && t == gct;
}

/* Read the head of thread L (lua_State up to L_stacksize + 4 bytes, at
 * most 128) into HDR. Returns 0 or -LS_E_*. */
static inline int lj_read_thread(const struct lj_objlayout *ol, struct mem *m, uint64_t L,
				 uint8_t hdr[128])
{
	return mem_read(m, L, hdr, ol->L_stacksize + 4u);
}

/* One ULEB128 number of a prototype's debug info (varinfo, uvinfo:
 * lj_debug.c debug_read_uleb128) at *P, never past END; *P moves past
 * it. At most 5 bytes (35 bits) are taken. */
static inline uint64_t lj_uleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	int sh = 0;
	while (*p < end && sh < 35) {
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

#endif
