/* vm_luajit.c: LuaJIT 2.1 walker: capture, frame walk, names, lines,
 * JIT traces, coroutines (vm_ops for vm.h).
 *
 * The native stack anchors everything (docs/luajit.md §10): each native frame
 * whose pc is in the VM code has rsp = a cframe, whose SAVE_L names the
 * lua_State it runs; its Lua frames are walked from that thread's top
 * (or from where the previous cframe's segment ended) down to the frame
 * that consumed the cframe (link C/CP, or an FFI callback continuation).
 * A thread with no VM frame on its native stack runs no Lua, whatever
 * the VM globals say. On a JIT trace the native unwinder cannot pass the
 * mcode; the cframe of cur_L is unwound again from its saved registers.
 * Where the VM's one CFI rule (CFA = rsp+80) is wrong (VM subroutines
 * entered with `call`, the trace exit handler, a coroutine resumed from
 * compiled code), the cframe is searched for, validated (SAVE_L is a
 * live thread of a known state that names it as its cframe) and the
 * native walk restarted from it. The top frame of a thread is chosen
 * among candidate BASE/PC pairs (registers, L->base, jit_base, SAVE_PC)
 * by walking each down to its cframe boundary.
 *
 * Frame layout (lj_frame.h): GC64 two slots per frame, [base-2] function,
 * [base-1] link; 32-bit refs one slot, lo32 function, hi32 link. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <elfutils/libdwfl.h>
#include <elfutils/libdw.h>
#include "elf_sym.h"
#include "err.h"
#include "intern.h"
#include "merge.h"
#include "msg.h"
#include "proc_maps.h"
#include "vm_luajit.h"

#define SNAP_MAGIC 0x4c4a5331u
#define FB_FRAMES 256         /* first size of a walk's scratch frames (grown) */
#define MAX_SEGS 64
#define MAX_BC_SCAN 4096      /* instructions scanned back for a slot name */
#define LJ_ENTRY_WINDOW 128   /* bytes after an entry's register saves to its cframe's link */
#define LJ_FFICB_NATIVE 128   /* native frames looked through for lj_vm_ffi_call */
#define LJ_FFICALL_SIZE 4096  /* bytes of lj_vm_ffi_call's code past vm_end, at most */

/* link types (lj_frame.h) */
enum { FT_LUA = 0, FT_C = 1, FT_CONT = 2, FT_VARG = 3, FT_CP = 5, FT_PCALL = 6, FT_PCALLH = 7 };

/* bytecode opcodes of 2.1 (97 ops; lj_bc.h) used by the name finder */
enum {
	BC_ISTC = 12, BC_ISFC = 13, BC_MOV = 18, BC_NOT = 19, BC_UNM = 20, BC_LEN = 21,
	BC_POW = 37, BC_CAT = 38, BC_KSTR = 39, BC_KNIL = 44, BC_UGET = 45, BC_FNEW = 51,
	BC_TNEW = 52, BC_TDUP = 53, BC_GGET = 54, BC_GSET = 55, BC_TGETV = 56, BC_TGETS = 57,
	BC_TGETB = 58, BC_TGETR = 59, BC_TSETV = 60, BC_TSETM = 63, BC_TSETR = 64, BC_CALLM = 65,
	BC_CALL = 66, BC_CALLMT = 67, BC_CALLT = 68, BC_ITERC = 69, BC_ITERN = 70, BC_VARG = 71,
	BC_ISNEXT = 72, BC_RETM = 73, BC_RET = 74, BC_RET0 = 75, BC_RET1 = 76, BC_FORI = 77,
	BC_JITERL = 84, BC__MAX = 97
};

/* Operand A mode: 1 dst, 2 base, 0 other (lj_bc.h BCDEF). */
static int bc_amode(int op)
{
	if (op == BC_ISTC || op == BC_ISFC || (op >= BC_MOV && op <= BC_CAT) ||
	    (op >= BC_KSTR && op < BC_KNIL) || op == BC_UGET || op == BC_FNEW ||
	    op == BC_TNEW || op == BC_TDUP || op == BC_GGET || (op >= BC_TGETV && op <= BC_TGETR))
		return 1;
	if (op == BC_KNIL || op == BC_TSETM || (op >= BC_CALLM && op <= BC_RETM) ||
	    (op >= BC_FORI && op <= BC_JITERL))
		return 2;
	return 0;
}

/* Metamethod name of an opcode (bcmode_mm), NULL for none, "" for call. */
static const char *bc_mmname(int op)
{
	if (op <= 1) return "__lt";
	if (op <= 3) return "__le";
	if (op <= 11) return "__eq";
	if (op == BC_UNM) return "__unm";
	if (op == BC_LEN) return "__len";
	if (op >= 22 && op <= 36) {
		static const char *const ar[5] = { "__add", "__sub", "__mul", "__div", "__mod" };
		return ar[(op - 22) % 5];
	}
	if (op == BC_POW) return "__pow";
	if (op == BC_CAT) return "__concat";
	if (op == BC_GGET || (op >= BC_TGETV && op <= BC_TGETR)) return "__index";
	if (op == BC_GSET || (op >= BC_TSETV && op <= BC_TSETR)) return "__newindex";
	if (op >= BC_CALLM && op <= BC_ITERN) return "";
	return NULL;
}

/* ---- walk context ---- */

struct ctx {
	struct vm *vm;
	struct target *t;
	const struct lj_layout *l;
	const struct lj_objlayout *ol;
	struct mem *m;
	int fr2;
	int steps;           /* global bound on reads/iterations */
	int name_miss;       /* a C function had no name (VM_DISC_NAMES) */
	int may_learn;       /* the thread runs again (not held): a frame without
	                      * a name may learn names first (learn_first) */
	const char *why;     /* where the walk failed last (FAIL), or NULL */
	/* protos checked in this walk (rd_proto): a deep recursion meets one
	 * proto thousands of times; within one walk it is checked once */
	struct { uint64_t pt; struct lj_ptinfo *pi; } seen_pt[8];
};

/* A context reading through M (T may be NULL: no symbols). */
static struct ctx ctx_make(struct vm *vm, struct target *t, struct mem *m)
{
	return (struct ctx){ .vm = vm, .t = t, .l = vm->lay, .ol = vm->ol, .m = m,
			     .fr2 = !!(vm->lay->flags & LJL_GC64) };
}

#define STEP(c) do { if (++(c)->steps > 200000) return -LS_E_GARBAGE; } while (0)

/* Fail with E, noting why in the context C in scope (for -v -v). */
#define FAIL(e, w) (c->why = (w), (e))

static int rd_ref(struct ctx *c, uint64_t a, uint64_t *v)
{
	return lj_read_ref(c->vm->ol, c->m, a, v);
}

static int in_vm(const struct vm *vm, uint64_t pc)
{
	return pc >= vm->vm_start && pc < vm->vm_end;
}

/* Read the frame at slot F: function and link. */
static int rd_frame(struct ctx *c, uint64_t f, uint64_t *fn, int64_t *link)
{
	if (c->fr2) {
		uint64_t v[2];
		if (mem_read(c->m, f - 8, v, 16) < 0)
			return -LS_E_FAULT;
		*fn = v[0] & 0x7fffffffffffull;
		*link = (int64_t)v[1];
	} else {
		uint32_t v[2];
		if (mem_read(c->m, f, v, 8) < 0)
			return -LS_E_FAULT;
		*fn = v[0];
		*link = (int32_t)v[1];
	}
	return 0;
}

/* Continuation PC and continuation value of CONT frame F. */
static int rd_cont(struct ctx *c, uint64_t f, uint64_t *contpc, uint64_t *contv)
{
	if (c->fr2) {
		uint64_t v[2];
		if (mem_read(c->m, f - 24, v, 16) < 0)
			return -LS_E_FAULT;
		*contv = v[0];
		*contpc = v[1];
	} else {
		uint32_t v[2];
		if (mem_read(c->m, f - 8, v, 8) < 0)
			return -LS_E_FAULT;
		*contv = v[0];
		*contpc = v[1];
	}
	return 0;
}

/* ---- protos ---- */

/* Identity of chunk name string CHUNK as it is now: FNV-1a of its hash,
 * length and first bytes. Read on every walk: a closed state's protos
 * and strings come back at the same addresses in the next state, so an
 * address alone names nothing. 0 or -LS_E_FAULT. */
static int chunk_ident(struct ctx *c, uint64_t chunk, uint64_t *id)
{
	enum { HEAD = 32 };
	uint8_t b[16 + HEAD];
	unsigned at = c->l->str_len - 4u;          /* hash (u32), then len (u32) */
	unsigned dat = c->l->str_data - at;        /* data, from AT */
	if (dat + HEAD > sizeof b)
		return -LS_E_FAULT;
	size_t n = dat + HEAD;
	if (mem_read(c->m, chunk + at, b, n) < 0) {
		n = dat; /* a short string at the end of a mapping */
		if (mem_read(c->m, chunk + at, b, n) < 0)
			return -LS_E_FAULT;
	}
	uint32_t len;
	memcpy(&len, b + 4, 4);
	size_t use = dat + (len < n - dat ? len : n - dat);
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < use; i++) {
		if (i >= 8 && i < dat)
			continue; /* padding between len and data */
		h = (h ^ b[i]) * 0x100000001b3ull;
	}
	*id = h;
	return 0;
}

static int rd_proto_check(struct ctx *c, uint64_t pt, struct lj_ptinfo **out);

/* The validated proto at PT (docs/luajit.md §6): checked against the
 * target's memory once per walk (rd_proto_check), then from the walk's
 * memo, as long as the cache entry still holds PT. 0 or -LS_E_*. */
static int rd_proto(struct ctx *c, uint64_t pt, struct lj_ptinfo **out)
{
	unsigned slot = (unsigned)(pt >> 3) % 8u;
	if (pt && c->seen_pt[slot].pt == pt && c->seen_pt[slot].pi->pt == pt) {
		*out = c->seen_pt[slot].pi;
		return 0;
	}
	int rc = rd_proto_check(c, pt, out);
	if (rc == 0) {
		c->seen_pt[slot].pt = pt;
		c->seen_pt[slot].pi = *out;
	}
	return rc;
}

static int rd_proto_check(struct ctx *c, uint64_t pt, struct lj_ptinfo **out)
{
	const struct lj_objlayout *ol = c->ol;
	uint8_t h[128];
	if (!pt || (pt & 3) || mem_read(c->m, pt, h, ol->pt_size) < 0)
		return -LS_E_FAULT;
	if (h[ol->gct] != LJ_GCT_PROTO)
		return FAIL(-LS_E_GARBAGE, "not a proto");
	uint32_t sizebc, sizept;
	int32_t firstline, numline;
	memcpy(&sizebc, h + ol->pt_sizebc, 4);
	memcpy(&sizept, h + (c->fr2 ? 56 : 32), 4);
	memcpy(&firstline, h + ol->pt_firstline, 4);
	memcpy(&numline, h + ol->pt_numline, 4);
	if (sizebc == 0 || sizebc > (1u << 24) || sizept < ol->pt_size + sizebc * 4 ||
	    sizept > (64u << 20) || firstline < 0 || numline < 0)
		return FAIL(-LS_E_GARBAGE, "proto sizes out of range");
	uint64_t chunk = 0, lineinfo = 0, uvinfo = 0, varinfo = 0, k = 0;
	uint32_t sizekgc;
	memcpy(&chunk, h + ol->pt_chunkname, ol->gcref);
	memcpy(&lineinfo, h + ol->pt_lineinfo, ol->gcref);
	memcpy(&uvinfo, h + ol->pt_uvinfo, ol->gcref);
	memcpy(&varinfo, h + ol->pt_varinfo, ol->gcref);
	memcpy(&k, h + ol->pt_k, ol->gcref);
	memcpy(&sizekgc, h + ol->pt_sizekgc, 4);
	chunk = lj_gcptr(c->vm->ol, chunk);
	/* debug info lies inside the proto allocation, or is absent */
	if (lineinfo && (lineinfo < pt + ol->pt_size || lineinfo >= pt + sizept))
		return FAIL(-LS_E_GARBAGE, "proto lineinfo outside the proto");
	if (uvinfo && (uvinfo < pt + ol->pt_size || uvinfo >= pt + sizept))
		uvinfo = 0;
	if (varinfo && (varinfo < pt + ol->pt_size || varinfo >= pt + sizept))
		varinfo = 0;
	uint64_t chunkid;
	if (chunk_ident(c, chunk, &chunkid) < 0)
		return FAIL(-LS_E_GARBAGE, "chunkname unreadable");
	unsigned hsh = (unsigned)((pt >> 3) * 2654435761u) % LJ_PT_CACHE;
	struct lj_ptinfo *e = &c->vm->cache.pt[hsh];
	if (e->pt == pt && e->sizebc == sizebc && e->sizept == sizept && e->firstline == firstline &&
	    e->chunkname == chunk && e->chunkid == chunkid && e->lineinfo == lineinfo) {
		*out = e;
		return 0;
	}
	char src[1024], ss[80];
	uint32_t len;
	if (!lj_is_gct(ol, c->m, chunk, LJ_GCT_STR) ||
	    mem_read_u32(c->m, chunk + c->l->str_len, &len) < 0)
		return FAIL(-LS_E_GARBAGE, "chunkname is not a string");
	size_t rl = len < sizeof src - 1 ? len : sizeof src - 1;
	/* only the tail of an '@' name matters past 1023 bytes: read the head */
	if (mem_read(c->m, chunk + c->l->str_data, src, rl) < 0)
		return -LS_E_FAULT;
	src[rl] = 0;
	if (len > rl && src[0] == '@') {
		/* long file name: read its last part */
		if (mem_read(c->m, chunk + c->l->str_data + len - 100, src + 1, 100) < 0)
			return -LS_E_FAULT;
		rl = 101;
		src[rl] = 0;
	}
	lj_shortsrc(ss, sizeof ss, src, rl);
	e->pt = pt;
	e->sizebc = sizebc;
	e->sizept = sizept;
	e->firstline = firstline;
	e->numline = numline;
	e->lineinfo = lineinfo;
	e->uvinfo = uvinfo;
	e->varinfo = varinfo;
	e->k = lj_gcptr(c->vm->ol, k);
	e->sizekgc = sizekgc;
	e->chunkname = chunk;
	e->chunkid = chunkid;
	e->file = intern(ss);
	e->anon = firstline == 0 ? intern("main chunk") : internf("function <%s:%d>", e->file, firstline);
	*out = e;
	return 0;
}

static uint64_t pt_bc(struct ctx *c, uint64_t pt)
{
	return pt + c->ol->pt_size;
}

/* Position of the instruction before PC (lj_debug: pos = pc - bc - 1),
 * or -1 when PC is not in the proto. Handles trace-patched PCs. */
static int64_t pt_pos(struct ctx *c, uint64_t pt, const struct lj_ptinfo *pi, uint64_t pc)
{
	uint64_t bc = pt_bc(c, pt);
	if (pc < bc || (pc & 3))
		return -1;
	if (pc == bc)
		return 0; /* function entry, before FUNCF was dispatched */
	int64_t pos = (int64_t)((pc - bc) / 4) - 1;
	if (pos > (int64_t)pi->sizebc) {
		return -1;
	}
	return pos;
}

/* FIRST + DELTA, or 0 (unknown) when garbage takes it out of int32 range */
static int32_t line_add(int32_t first, int64_t delta)
{
	int64_t l = (int64_t)first + delta;
	return l < 0 || l > INT32_MAX ? 0 : (int32_t)l;
}

static int32_t pt_line(struct ctx *c, const struct lj_ptinfo *pi, int64_t pos)
{
	if (pos < 0 || pos > (int64_t)pi->sizebc || !pi->lineinfo)
		return 0;
	if (pos == pi->sizebc)
		return line_add(pi->firstline, pi->numline);
	if (pos == 0)
		return pi->firstline;
	pos--;
	if (pi->numline < 256) {
		uint8_t v;
		if (mem_read_u8(c->m, pi->lineinfo + (uint64_t)pos, &v) < 0)
			return 0;
		return line_add(pi->firstline, v);
	} else if (pi->numline < 65536) {
		uint16_t v;
		if (mem_read_u16(c->m, pi->lineinfo + (uint64_t)pos * 2, &v) < 0)
			return 0;
		return line_add(pi->firstline, v);
	}
	uint32_t v;
	if (mem_read_u32(c->m, pi->lineinfo + (uint64_t)pos * 4, &v) < 0)
		return 0;
	return line_add(pi->firstline, (int32_t)v);
}

/* ---- function names from the caller's bytecode (lj_debug_funcname) ---- */

/* Name of local SLOT live at POS, into OUT. */
static int varname(struct ctx *c, uint64_t pt, const struct lj_ptinfo *pi, uint32_t pos,
		   uint32_t slot, char *out, size_t outlen)
{
	if (!pi->varinfo)
		return 0;
	uint64_t end = pt + pi->sizept;
	size_t len = (size_t)(end - pi->varinfo);
	if (len > 65536)
		len = 65536;
	uint8_t *buf = malloc(len);
	if (!buf || mem_read(c->m, pi->varinfo, buf, len) < 0) {
		free(buf);
		return 0;
	}
	static const char *const vn[] = { "", "(for index)", "(for limit)", "(for step)",
					   "(for generator)", "(for state)", "(for control)" };
	const uint8_t *p = buf, *e = buf + len;
	uint32_t lastpc = 0;
	int found = 0;
	for (int guard = 0; p < e && guard < 100000; guard++) {
		const uint8_t *name = p;
		uint8_t v = *p;
		if (v < 7) {
			if (v == 0)
				break;
		} else {
			while (p < e && *p)
				p++;
		}
		p++;
		uint32_t startpc = lastpc + (uint32_t)lj_uleb(&p, e);
		lastpc = startpc;
		if (startpc > pos)
			break;
		uint32_t endpc = startpc + (uint32_t)lj_uleb(&p, e);
		if (pos < endpc && slot-- == 0) {
			if (v < 7)
				snprintf(out, outlen, "%s", vn[v]);
			else
				snprintf(out, outlen, "%.*s", (int)(p - name), (const char *)name);
			found = 1;
			break;
		}
	}
	free(buf);
	return found;
}

static int kgc_str(struct ctx *c, const struct lj_ptinfo *pi, uint32_t d, char *out, size_t outlen)
{
	if (d >= pi->sizekgc)
		return 0;
	uint64_t s;
	if (rd_ref(c, pi->k - (uint64_t)(d + 1) * c->ol->gcref, &s) < 0)
		return 0;
	uint32_t len;
	if (!lj_is_gct(c->ol, c->m, s, LJ_GCT_STR) ||
	    mem_read_u32(c->m, s + c->l->str_len, &len) < 0 || len >= outlen)
		return 0;
	if (mem_read(c->m, s + c->l->str_data, out, len) < 0)
		return 0;
	out[len] = 0;
	return 1;
}

static int uvname(struct ctx *c, uint64_t pt, const struct lj_ptinfo *pi, uint32_t idx, char *out,
		  size_t outlen)
{
	if (!pi->uvinfo)
		return 0;
	char buf[4096];
	size_t len = (size_t)(pt + pi->sizept - pi->uvinfo);
	if (len > sizeof buf - 1)
		len = sizeof buf - 1;
	if (mem_read(c->m, pi->uvinfo, buf, len) < 0)
		return 0;
	buf[len] = 0;
	size_t p = 0;
	while (idx && p < len) {
		if (buf[p++] == 0)
			idx--;
	}
	if (p >= len)
		return 0;
	snprintf(out, outlen, "%s", buf + p);
	return 1;
}

/* debug_slotname: what set SLOT before the instruction at POS. */
static int slotname(struct ctx *c, uint64_t pt, const struct lj_ptinfo *pi, uint32_t pos,
		    uint32_t slot, char *out, size_t outlen)
{
	uint32_t lo = pos > MAX_BC_SCAN ? pos - MAX_BC_SCAN : 0;
	uint32_t n = pos - lo + 1;
	uint32_t *ins = malloc((size_t)n * 4);
	if (!ins || mem_read(c->m, pt_bc(c, pt) + (uint64_t)lo * 4, ins, (size_t)n * 4) < 0) {
		free(ins);
		return 0;
	}
	int rc = 0;
	uint32_t ip = pos;
	for (int restart = 0; restart < 64; restart++) {
		if (varname(c, pt, pi, ip, slot, out, outlen)) {
			rc = 1;
			goto done;
		}
		int again = 0;
		while (ip > lo + 1 && --ip > 0) {
			uint32_t i = ins[ip - lo];
			int op = i & 0xff, ra = (i >> 8) & 0xff, am = bc_amode(op);
			if (op >= BC__MAX)
				goto done;
			if (am == 2) {
				if (slot >= (uint32_t)ra && (op != BC_KNIL || slot <= (i >> 16)))
					goto done;
			} else if (am == 1 && (uint32_t)ra == slot) {
				switch (op) {
				case BC_MOV:
					slot = i >> 16;
					again = 1;
					break;
				case BC_GGET:
					rc = kgc_str(c, pi, i >> 16, out, outlen);
					goto done;
				case BC_TGETS:
					rc = kgc_str(c, pi, (i >> 16) & 0xff, out, outlen);
					goto done;
				case BC_UGET:
					rc = uvname(c, pt, pi, i >> 16, out, outlen);
					goto done;
				default:
					goto done;
				}
			}
			if (again)
				break;
		}
		if (!again)
			break;
	}
done:
	free(ins);
	return rc;
}

/* Name of the function called from CALLER (a Lua function) whose call
 * instruction sits just before PC; NULL when none can be inferred. */
static const char *callee_name(struct ctx *c, uint64_t callerfn, uint64_t pc)
{
	uint8_t ffid;
	uint64_t bcp;
	if (mem_read_u8(c->m, callerfn + c->ol->fn_ffid, &ffid) < 0 || ffid != 0)
		return NULL;
	if (rd_ref(c, callerfn + c->ol->fn_pc, &bcp) < 0)
		return NULL;
	uint64_t pt = bcp - c->ol->pt_size;
	struct lj_ptinfo *pi;
	if (rd_proto(c, pt, &pi) < 0)
		return NULL;
	int64_t pos = pt_pos(c, pt, pi, pc);
	if (pos < 0 || pos >= (int64_t)pi->sizebc)
		return NULL;
	uint32_t ins;
	if (mem_read_u32(c->m, pt_bc(c, pt) + (uint64_t)pos * 4, &ins) < 0)
		return NULL;
	int op = ins & 0xff;
	const char *mm = op < BC__MAX ? bc_mmname(op) : NULL;
	if (!mm)
		return NULL;
	if (*mm)
		return intern(mm);
	/* cached by call site; the proto's shape and the instruction must
	 * match (addresses are reused) */
	struct lj_namecache *e = &c->vm->cache.nc[(unsigned)(((pt >> 3) ^ ((uint64_t)pos * 2654435761u)) %
					     LJ_NAME_CACHE)];
	if (e->used && e->pt == pt && e->pos == (uint32_t)pos && e->ins == ins &&
	    e->sizebc == pi->sizebc && e->firstline == pi->firstline && e->chunkid == pi->chunkid &&
	    e->varinfo == pi->varinfo)
		return e->name;
	uint32_t slot = (ins >> 8) & 0xff;
	if (op == BC_ITERC)
		slot -= 3;
	char nm[256];
	const char *name = NULL;
	if (slotname(c, pt, pi, (uint32_t)pos, slot, nm, sizeof nm))
		name = intern(nm);
	*e = (struct lj_namecache){ pt, (uint32_t)pos, ins, pi->sizebc, pi->firstline, pi->chunkid,
				    pi->varinfo, name, 1 };
	return name;
}

const char *lj_callee_name(struct vm *vm, struct mem *m, uint64_t callerfn, uint64_t pc)
{
	struct ctx c = ctx_make(vm, NULL, m);
	return callee_name(&c, callerfn, pc);
}

/* ---- C function names ---- */

/* Name of C function/builtin FN: by object, else (lua_CFunction only, e.g.
 * another state's copy) by its C pointer F. */
static const struct lj_fname *fname_of(struct vm *vm, uint64_t fn, uint64_t f, uint8_t ffid)
{
	for (int i = 0; i < vm->found.nnames; i++)
		if (vm->found.names[i].fn == fn)
			return &vm->found.names[i];
	if (ffid != 1 || !f)
		return NULL;
	for (int i = 0; i < vm->found.nnames; i++)
		if (vm->found.names[i].ffid == 1 && vm->found.names[i].f == f)
			return &vm->found.names[i];
	return NULL;
}

/* A C function or builtin (FFID) without a name, met by a walk of a
 * released thread (C->may_learn): learn names now, before the frame is
 * named, when a state met by this sample is not adopted yet (the first
 * sample of a record: no global_State symbol, the state found by
 * DISPATCH or a cframe) or this builtin id was never looked for (a
 * library loaded since). Each builtin id once per VM; later misses are
 * left to discovery (VM_DISC_NAMES). docs/luajit.md §8.6. */
static void learn_first(struct ctx *c, uint8_t ffid)
{
	struct vm *vm = c->vm;
	uint8_t *tried = &vm->cache.ff_tried[ffid >> 3], bit = (uint8_t)(1u << (ffid & 7));
	if (!c->may_learn || !c->t || (vm->found.ncand == 0 && (ffid <= 1 || (*tried & bit))))
		return;
	if (ffid > 1)
		*tried |= bit;
	lj_learn_now(vm, c->t, ffid);
}

/* ---- one thread's frames ---- */

struct lframe {
	struct frame fr;
	uint64_t slot;
};

/* Classify function FN: 0 Lua (*PT set), 1 C/builtin, -1 thread (dummy), <-1 error. */
static int fn_kind(struct ctx *c, uint64_t fn, uint64_t *pt, uint8_t *ffid, uint64_t *cf)
{
	uint8_t h[48];
	if (!fn || mem_read(c->m, fn, h, c->ol->fn_f + 8) < 0)
		return -2;
	if (h[c->ol->gct] == LJ_GCT_THREAD)
		return -1;
	if (h[c->ol->gct] != LJ_GCT_FUNC)
		return -3;
	*ffid = h[c->ol->fn_ffid];
	if (*ffid == 0) {
		uint64_t pc = 0;
		memcpy(&pc, h + c->ol->fn_pc, c->ol->gcref);
		pc = lj_gcptr(c->vm->ol, pc);
		*pt = pc - c->ol->pt_size;
		return 0;
	}
	memcpy(cf, h + c->ol->fn_f, 8);
	return 1;
}

/* Builtins that no library table holds, named by their neighbour: each
 * is defined just before its library function in LuaJIT 2.1's lib_base.c
 * and lib_string.c, so its builtin number is that function's minus one
 * (lj_ffdef.h order; docs/naming.md §3). */
static const char *const aux_of[] = { "ipairs", "string.gmatch", "coroutine.wrap" };

static const char *aux_name(const struct vm *vm, uint8_t ffid)
{
	const char *next = ffid < 255 ? vm->found.ffname[ffid + 1] : NULL;
	for (size_t i = 0; next && i < sizeof aux_of / sizeof aux_of[0]; i++)
		if (!strcmp(next, aux_of[i]))
			return internf("%s_aux", next);
	return NULL;
}

/* The C function an FFI call from the frame at slot SLOT goes to: its
 * first argument (at SLOT + 8, the frame's base) is a cdata whose payload
 * (after the GCcdata header: 2 references) is the function pointer, named
 * when a symbol starts there exactly (lj_obj.h GCcdata, lib_ffi.c
 * ffi_meta___call; docs/naming.md §3). Fills *SI; 1 when named, else 0. */
static int ffi_callee(struct ctx *c, uint64_t slot, struct sym_info *si)
{
	uint64_t tv, cf;
	if (!c->t || !c->t->sym || !slot || mem_read_u64(c->m, slot + 8, &tv) < 0)
		return 0;
	int it = c->fr2 ? (int)((int64_t)tv >> 47) : (int)(int32_t)(uint32_t)(tv >> 32);
	if (it != ~(int)LJ_GCT_CDATA)
		return 0;
	uint64_t cd = c->fr2 ? lj_gcptr(c->ol, tv) : (tv & 0xffffffffull);
	if (!lj_is_gct(c->ol, c->m, cd, LJ_GCT_CDATA) ||
	    mem_read_u64(c->m, cd + 2u * c->ol->gcref, &cf) < 0 || !cf || in_vm(c->vm, cf))
		return 0;
	return symtab_lookup(c->t->sym, cf, 0, si) == 0 && si->name && si->func_start == cf;
}

/* Fill FR for function FN at frame slot SLOT (0 = unknown) running at PC
 * (0 = unknown). */
static int make_frame(struct ctx *c, uint64_t fn, uint64_t slot, uint64_t pc, struct frame *fr)
{
	memset(fr, 0, sizeof *fr);
	uint64_t pt = 0, f = 0;
	uint8_t ffid = 0;
	int k = fn_kind(c, fn, &pt, &ffid, &f);
	if (k < -1)
		return FAIL(-LS_E_GARBAGE, "frame slot holds no function");
	if (k == -1)
		return 1; /* dummy frame: nothing to show */
	if (k == 0) {
		struct lj_ptinfo *pi;
		if (rd_proto(c, pt, &pi) < 0)
			return FAIL(-LS_E_GARBAGE, "bad proto of a Lua frame");
		fr->kind = FRAME_LUA;
		fr->addr = pt; /* the prototype: tells apart functions defined on one line */
		fr->file = pi->file;
		fr->firstline = pi->firstline;
		fr->line = pc ? pt_line(c, pi, pt_pos(c, pt, pi, pc)) : 0;
		fr->name = pi->anon;
		return 0;
	}
	fr->kind = FRAME_C;
	const struct lj_fname *n = fname_of(c->vm, fn, f, ffid);
	if (!n && !(ffid > 1 && c->vm->found.ffname[ffid])) {
		learn_first(c, ffid);
		n = fname_of(c->vm, fn, f, ffid);
	}
	struct sym_info ffi = { 0 };
	const char *aux = NULL;
	static const char *cdata_call;
	if (!cdata_call)
		cdata_call = intern("cdata.__call");
	if (ffid > 1 && c->vm->found.ffname[ffid] == cdata_call && ffi_callee(c, slot, &ffi)) {
		/* an FFI call (the cdata __call builtin): named by the C
		 * function it calls, with that function's module */
		fr->name = ffi.name;
		fr->module = ffi.module;
	} else if (ffid > 1 && c->vm->found.ffname[ffid]) {
		fr->name = c->vm->found.ffname[ffid];
	} else if (n) {
		fr->name = n->name;
	} else if (ffid > 1 && (aux = aux_name(c->vm, ffid)) != NULL) {
		fr->name = aux;
	} else if (ffid > 1 && ffi_callee(c, slot, &ffi)) {
		/* an FFI call (the cdata __call builtin): named by the C
		 * function it calls, with that function's module */
		fr->name = ffi.name;
		fr->module = ffi.module;
	} else {
		/* no Lua name: the C symbol, when the module has one, else
		 * module+offset (the same in every process), never the address */
		struct sym_info si = { 0 };
		int found = c->t && !in_vm(c->vm, f) && symtab_lookup(c->t->sym, f, 0, &si) == 0;
		const char *off = c->t && !in_vm(c->vm, f) ? symtab_offset_name(&si, f) : NULL;
		if (found && si.func_start == f)
			fr->name = si.name;
		else if (ffid > 1)
			fr->name = internf("[builtin#%d]", ffid);
		else if (off)
			fr->name = off;
		else
			fr->name = internf("[C 0x%llx]", (unsigned long long)f);
		fr->module = si.module;
	}
	if (!n && !(ffid > 1 && c->vm->found.ffname[ffid]) && !aux && !ffi.name)
		c->name_miss = 1;
	/* ASM fast functions live in the VM and have no native frame */
	fr->addr = in_vm(c->vm, f) ? 0 : f;
	return 0;
}

struct segwalk {
	uint64_t L, stack;
	uint64_t f;         /* next frame to emit (slot address) */
	uint64_t pc;        /* its PC, 0 unknown */
	int bottom;         /* reached the bottom of L */
	int named_pending;  /* index in out of a frame waiting for its name */
	int full;           /* walk_seg stopped because OUT was full: call again */
	struct lj_lframe *lf; /* or NULL: what dump --locals needs of OUT[i], in LF[i] */
	int endk;           /* how the last walk_seg ended: SEG_END_* */
	uint64_t link0;     /* nonzero: the link of frame F (its slot holds a result) */
};

/* How a cframe's segment ended (struct segwalk.endk): at the bottom of L
 * or the cframe's nres floor, at a frame entered through a C or CP link
 * (lua_call, lua_pcall...), or at the continuation frame of an FFI
 * callback (lj_ccallback.c callback_conv_args). */
enum { SEG_END_OPEN, SEG_END_C, SEG_END_FFICB };

/* Walk frames of SW->L from SW->f down through the end of one cframe's
 * segment. Appends to OUT (cap MAXN) and returns the count or -LS_E_*.
 * When OUT fills first, SW->full is set and SW is where the next call
 * goes on. */
static int walk_seg(struct ctx *c, struct segwalk *sw, struct frame *out, int maxn,
		    uint64_t nres_floor)
{
	int n = 0;
	uint64_t lim = sw->stack + (c->fr2 ? 8 : 0);
	c->why = NULL;
	sw->full = 0;
	sw->endk = SEG_END_OPEN;
	while (n < maxn) {
		STEP(c);
		uint64_t f = sw->f;
		if (f <= lim || f < nres_floor) {
			sw->bottom = f <= lim;
			return n;
		}
		uint64_t fn;
		int64_t link;
		if (rd_frame(c, f, &fn, &link) < 0)
			return -LS_E_FAULT;
		if (sw->link0) {
			link = (int64_t)sw->link0;
			sw->link0 = 0;
		}
		struct frame fr;
		int rc = make_frame(c, fn, f, sw->pc, &fr);
		if (rc < 0) {
			msg_debug(3, "luajit: L 0x%llx frame slot 0x%llx (stack+%llu): function 0x%llx link 0x%llx, %d frames above",
				  (unsigned long long)sw->L, (unsigned long long)f,
				  (unsigned long long)(f - sw->stack), (unsigned long long)fn,
				  (unsigned long long)link, n);
			return rc;
		}
		int emitted = rc == 0;
		if (emitted)
			out[n] = fr;
		if (emitted && sw->lf)
			sw->lf[n] = (struct lj_lframe){ fr.kind == FRAME_LUA ? fr.addr : 0, fn, f,
							sw->pc, 0, 0 };
		/* the vararg pseudo-frame points to the real frame of the same function */
		if ((link & 7) == FT_VARG) {
			uint64_t d = (uint64_t)link & ~7ull;
			if (d == 0 || d > f - sw->stack)
				return FAIL(-LS_E_GARBAGE, "vararg frame delta out of range");
			if (emitted && sw->lf)
				sw->lf[n].vdelta = d;
			f -= d;
			if (rd_frame(c, f, &fn, &link) < 0)
				return -LS_E_FAULT;
		}
		int t3 = (int)(link & 3), t7 = (int)(link & 7);
		uint64_t next;
		int end = 0;
		if (t3 == FT_LUA) {
			uint64_t pc = (uint64_t)link;
			uint32_t ins;
			if (!pc || mem_read_u32(c->m, pc - 4, &ins) < 0)
				return FAIL(-LS_E_GARBAGE, "Lua link without a call instruction");
			uint64_t a = (ins >> 8) & 0xff;
			next = f - (1 + c->fr2 + a) * 8;
			uint64_t cfn;
			int64_t clink;
			if (emitted && next > lim && rd_frame(c, next, &cfn, &clink) == 0) {
				const char *nm = callee_name(c, cfn, pc);
				if (nm && out[n].kind == FRAME_LUA)
					out[n].name = nm;
			}
			sw->pc = pc;
		} else if (t7 == FT_CONT) {
			uint64_t cpc, cv;
			if (rd_cont(c, f, &cpc, &cv) < 0)
				return -LS_E_FAULT;
			next = f - ((uint64_t)link & ~7ull);
			uint64_t cfn;
			int64_t clink;
			if (emitted && next > lim && rd_frame(c, next, &cfn, &clink) == 0) {
				const char *nm = callee_name(c, cfn, cpc);
				if (nm && out[n].kind == FRAME_LUA)
					out[n].name = nm;
			}
			sw->pc = cpc;
			if (cv <= 1 && c->fr2)
				end = 1; /* FFI callback: its own cframe */
			else if (!c->fr2 && cv == 1)
				end = 1;
		} else {
			/* C, CP, PCALL, PCALLH: delta frames */
			next = f - ((uint64_t)link & ~7ull);
			sw->pc = 0;
			if (t3 == FT_C)
				end = 1; /* C and CP: entered through a cframe */
		}
		if (next >= f)
			return FAIL(-LS_E_GARBAGE, "frame link points up the stack");
		sw->f = next;
		if (emitted)
			n++;
		if (end) {
			sw->bottom = next <= lim;
			sw->endk = t7 == FT_CONT ? SEG_END_FFICB : SEG_END_C;
			return n;
		}
	}
	sw->full = 1;
	return n;
}

/* ---- traces ---- */

static int trace_obj(struct ctx *c, uint64_t g, int tn, uint64_t *T)
{
	uint64_t arr;
	uint32_t size;
	if (mem_read_u64(c->m, g + c->l->g_jtrace, &arr) < 0 ||
	    mem_read_u32(c->m, g + c->l->g_jtrace + 12, &size) < 0)
		return -LS_E_FAULT;
	if (tn <= 0 || (uint32_t)tn >= size || size > 65536)
		return FAIL(-LS_E_GARBAGE, "trace number out of range");
	if (rd_ref(c, arr + (uint64_t)tn * c->ol->gcref, T) < 0 || !*T)
		return FAIL(-LS_E_GARBAGE, "empty trace slot");
	if (!lj_is_gct(c->ol, c->m, *T, LJ_GCT_TRACE))
		return FAIL(-LS_E_GARBAGE, "not a trace");
	return 0;
}

static int trace_mcode(struct ctx *c, uint64_t T, uint64_t *mc, uint32_t *sz)
{
	if (mem_read_u64(c->m, T + c->ol->tr_mcode, mc) < 0 ||
	    mem_read_u32(c->m, T + c->ol->tr_szmcode, sz) < 0)
		return -LS_E_FAULT;
	return 0;
}

/* Find the trace whose mcode holds ADDR: J->trace[VMSTATE] first, then all. */
static int trace_find(struct ctx *c, uint64_t g, int vmstate, uint64_t addr, uint64_t *T, int *tn)
{
	uint64_t mc;
	uint32_t sz;
	if (vmstate > 0 && trace_obj(c, g, vmstate, T) == 0 && trace_mcode(c, *T, &mc, &sz) == 0 &&
	    addr >= mc && addr < mc + sz) {
		*tn = vmstate;
		return 0;
	}
	uint64_t arr;
	uint32_t size;
	if (mem_read_u64(c->m, g + c->l->g_jtrace, &arr) < 0 ||
	    mem_read_u32(c->m, g + c->l->g_jtrace + 12, &size) < 0 || size > 65536)
		return -LS_E_FAULT;
	for (uint32_t i = 1; i < size; i++) {
		STEP(c);
		if (trace_obj(c, g, (int)i, T) == 0 && trace_mcode(c, *T, &mc, &sz) == 0 &&
		    addr >= mc && addr < mc + sz) {
			*tn = (int)i;
			return 0;
		}
	}
	return FAIL(-LS_E_GARBAGE, "no trace holds the pc");
}

int vm_luajit_traces(struct target *t, vm_trace_fn *fn, void *arg)
{
	if (!t->vm || t->vm_ops != &vm_luajit_ops)
		return -LS_E_NOTLUA;
	struct vm *vm = t->vm;
	const struct proc_maps *maps = t->sym ? symtab_maps(t->sym) : NULL;
	int count = 0;
	for (int k = 0; k < vm->found.ng; k++) {
		uint64_t g = vm->found.g[k], arr;
		uint32_t size;
		struct ctx cc = ctx_make(vm, t, &t->mem.base), *c = &cc;
		if (mem_read_u64(c->m, g + c->l->g_jtrace, &arr) < 0 ||
		    mem_read_u32(c->m, g + c->l->g_jtrace + 12, &size) < 0 || size > 65536)
			continue;
		for (uint32_t i = 1; i < size; i++) {
			uint64_t T, mc, ptref, startpc;
			uint32_t sz;
			struct lj_ptinfo *pi;
			c->steps = 0;
			if (trace_obj(c, g, (int)i, &T) < 0 || trace_mcode(c, T, &mc, &sz) < 0 ||
			    sz == 0 || sz > (16u << 20) || mc + sz < mc)
				continue;
			const struct proc_map *m = maps ? proc_maps_find(maps, mc) : NULL;
			if (maps && (!m || !(m->perms & MAP_X) || mc + sz > m->end))
				continue;
			ptref = 0;
			if (mem_read(c->m, T + c->ol->tr_startpt, &ptref, c->ol->gcref) < 0 ||
			    mem_read_u64(c->m, T + c->ol->tr_startpc, &startpc) < 0)
				continue;
			uint64_t pt = lj_gcptr(c->ol, ptref);
			if (!c->fr2)
				startpc &= 0xffffffffu; /* MRef: 32 bits without GC64 */
			if (rd_proto(c, pt, &pi) < 0)
				continue;
			struct vm_trace tr = { .g = g, .n = (int)i, .mcode = mc, .size = sz,
					       .file = pi->file, .line = 0 };
			int64_t pos = pt_pos(c, pt, pi, startpc + 4);
			if (pos >= 0)
				tr.line = pt_line(c, pi, pos);
			fn(arg, &tr);
			count++;
		}
	}
	return count;
}

/* PC of the snapshot covering ADDR in trace T (docs/luajit.md §10.5), or 0. */
static uint64_t trace_pc(struct ctx *c, uint64_t T, uint64_t addr)
{
	const struct lj_objlayout *ol = c->ol;
	uint64_t mc, snap, snapmap;
	uint32_t sz;
	uint16_t nsnap;
	if (trace_mcode(c, T, &mc, &sz) < 0)
		return 0;
	if (c->l->flags & LJL_SNAP_MCOFS) {
		if (mem_read_u16(c->m, T + ol->tr_nsnap, &nsnap) < 0 ||
		    mem_read_u64(c->m, T + ol->tr_snap, &snap) < 0 ||
		    mem_read_u64(c->m, T + ol->tr_snapmap, &snapmap) < 0 || nsnap == 0 || nsnap > 4096)
			goto start;
		uint8_t *sb = malloc((size_t)nsnap * 12);
		if (!sb)
			goto start;
		if (mem_read(c->m, snap, sb, (size_t)nsnap * 12) < 0) {
			free(sb);
			goto start;
		}
		uint64_t ofs = addr - mc;
		int best = -1;
		for (int i = 0; i < nsnap; i++) {
			uint16_t mcofs;
			memcpy(&mcofs, sb + i * 12 + 6, 2);
			if (mcofs <= ofs)
				best = i;
		}
		if (best < 0)
			best = 0;
		uint32_t mapofs;
		memcpy(&mapofs, sb + best * 12, 4);
		uint8_t nent = sb[best * 12 + 10];
		free(sb);
		uint64_t pc = 0;
		if (c->fr2) {
			if (mem_read_u64(c->m, snapmap + ((uint64_t)mapofs + nent) * 4, &pc) < 0)
				goto start;
			pc >>= 8;
		} else {
			uint32_t p32;
			if (mem_read_u32(c->m, snapmap + ((uint64_t)mapofs + nent) * 4, &p32) < 0)
				goto start;
			pc = p32;
		}
		if (pc)
			return pc + 4; /* report as "after" the instruction, like saved PCs */
	}
start:;
	uint64_t spc = 0;
	if (rd_ref(c, T + ol->tr_startpc, &spc) < 0)
		return 0;
	return spc ? spc + 4 : 0;
}

/* ---- capture ---- */

static struct lj_tidbuf *tidbuf_get(struct vm *vm, pid_t tid, int create)
{
	struct lj_tidbuf *old = &vm->cache.tb[0];
	for (int i = 0; i < LJ_TID_CACHE; i++) {
		if (vm->cache.tb[i].tid == tid)
			return &vm->cache.tb[i];
		if (vm->cache.tb[i].age < old->age)
			old = &vm->cache.tb[i];
	}
	if (!create)
		return NULL;
	old->tid = tid;
	old->g = 0;
	old->len = 0;
	old->nrecent = 0;
	old->noscan = 0;
	return old;
}

/* g->vmstate: a trace number (> 0), or ~LJ_VMST_* of lj_obj.h */
enum lj_vmstate {
	LJ_VMST_INTERP = -1, LJ_VMST_C = -2, LJ_VMST_GC = -3, LJ_VMST_EXIT = -4,
	LJ_VMST_RECORD = -5, LJ_VMST_OPT = -6, LJ_VMST_ASM = -7
};

static const char *vmstate_name(int vs)
{
	switch (vs) {
	case LJ_VMST_INTERP: return "interpreter";
	case LJ_VMST_C: return "C";
	case LJ_VMST_GC: return "GC";
	case LJ_VMST_EXIT: return "trace exit";
	case LJ_VMST_RECORD: return "recording";
	case LJ_VMST_OPT: return "optimizing";
	case LJ_VMST_ASM: return "assembling";
	case 0: return "idle";
	default: return vs > 0 ? "trace" : "unknown";
	}
}

static enum vm_state vmstate_class(int vs)
{
	switch (vs) {
	case LJ_VMST_INTERP: return VMS_INTERP;
	case LJ_VMST_C: return VMS_C;
	case LJ_VMST_GC: return VMS_GC;
	default: return vs > 0 ? VMS_TRACE : VMS_OTHER;
	}
}

/* Is PC in JIT machine code (executable, anonymous) with GC64 refs, where
 * r14 stays DISPATCH (docs/luajit.md §8.2)? With 32-bit refs a trace may reuse
 * r14: not trusted there. */
static int on_trace_gc64(const struct vm *vm, struct target *t, uint64_t pc)
{
	if (!(vm->lay->flags & LJL_GC64) || !t->sym)
		return 0;
	const struct proc_map *m = proc_maps_find(symtab_maps(t->sym), pc);
	/* no map: mcode allocated after the maps were last read */
	if (!m)
		return pc != 0;
	return (m->perms & MAP_X) && !proc_map_is_file(m) && m->path[0] != '[';
}

/* Is V one of A[0..N)? */
static int in_list(const uint64_t *a, int n, uint64_t v)
{
	for (int i = 0; i < n; i++)
		if (a[i] == v)
			return 1;
	return 0;
}

/* Keep, while the thread is stopped, the header HDR (just read) and the
 * slots in use of thread L: the walk reads them after the thread runs on,
 * and a resumer's base moves whenever its coroutine yields. 0, -1 when HDR
 * is no thread's, -2 when the copy budget is spent. */
static int keep_thread(struct vm *vm, struct target *t, struct thread_snap *ts, uint64_t L,
		       const uint8_t *hdr)
{
	const struct lj_objlayout *ol = vm->ol;
	uint64_t stack = 0, top = 0;
	memcpy(&stack, hdr + ol->L_stack, ol->gcref);
	memcpy(&top, hdr + ol->L_top, 8);
	stack &= 0x7fffffffffffull;
	if (hdr[ol->gct] != LJ_GCT_THREAD || !stack || top < stack || top - stack > (64u << 20))
		return -1;
	/* the slots in use and two above (a frame's function and link) */
	uint64_t end = top + 16, lo = end - stack > LJ_PSTACK_MAX ? end - LJ_PSTACK_MAX : stack;
	if (snap_keep(ts, L, hdr, ol->L_stacksize + 4) < 0 || snap_copy(t, ts, lo, end - lo) < 0)
		return -2;
	return 0;
}

/* Is the cframe at Y a resumer's: SAVE_L a thread (not CUR_L, not one of
 * OUT[0..N)) whose L->cframe is Y? Its header goes to HDR. */
static int resumer_at(struct vm *vm, struct mem *m, uint64_t y, uint64_t cur_L,
		      const uint64_t *out, int n, uint8_t *hdr, uint64_t *L)
{
	const struct lj_objlayout *ol = vm->ol;
	uint64_t L2 = 0, lcf = 0;
	if (lj_read_ref(vm->ol, m, y + vm->lay->cf_L, &L2) < 0 || !L2 || (L2 & 7) || L2 == cur_L ||
	    in_list(out, n, L2))
		return 0;
	if (lj_read_thread(ol, m, L2, hdr) < 0 || hdr[ol->gct] != LJ_GCT_THREAD)
		return 0;
	memcpy(&lcf, hdr + ol->L_cframe, 8);
	if ((lcf & ~3ull) != y)
		return 0;
	*L = L2;
	return 1;
}

/* See vm_luajit.h. */
int lj_find_resumers(struct vm *vm, struct mem *m, uint64_t cur_L, uint64_t main_L,
		     const uint8_t *hdr, uint64_t *out, uint8_t (*hdrs)[128], int max,
		     uint64_t *noscan)
{
	const struct lj_objlayout *ol = vm->ol;
	const struct lj_layout *l = vm->lay;
	uint64_t L = cur_L;
	int n = 0;
	while (n < max && L != main_L) {
		uint64_t cf = 0;
		memcpy(&cf, hdr + ol->L_cframe, 8);
		cf &= ~3ull;
		/* the thread's outermost cframe: PREV links go up the C stack */
		for (int k = 0; cf && k < 64; k++) {
			uint64_t p = 0;
			if (mem_read_u64(m, cf + l->cf_prev, &p) < 0)
				return n;
			p &= ~3ull;
			if (!p)
				break;
			if (p <= cf || p - cf > (8u << 20))
				return n;
			cf = p;
		}
		if (!cf)
			return n;
		/* resumed by coroutine.resume/wrap: the resumer's VM frame is
		 * right above; resumed from C (lua_resume in a C function the
		 * resumer called): its cframe is further up, past the C frames.
		 * Look at most LJ_RESUME_SCAN bytes up, reading the heads of at
		 * most LJ_RESUME_TRIES candidate threads. */
		uint64_t y = cf + l->cf_size, L2 = 0;
		int found = resumer_at(vm, m, y, cur_L, out, n, hdrs[n], &L2);
		if (!found && noscan && *noscan == cf)
			return n; /* scanned there last time, in vain */
		for (int d = 8, tries = 0; !found && d <= LJ_RESUME_SCAN && tries < LJ_RESUME_TRIES; d += 8) {
			uint64_t c = 0, prev = 0;
			if (lj_read_ref(vm->ol, m, y + d + l->cf_L, &c) < 0 ||
			    mem_read_u64(m, y + d + l->cf_prev, &prev) < 0)
				return n;
			prev &= ~3ull;
			if (!c || (c & 7) || c == cur_L || c >= (1ull << 47) ||
			    (prev && (prev <= y + d || prev - (y + d) > (8u << 20))))
				continue;
			tries++;
			found = resumer_at(vm, m, y + d, cur_L, out, n, hdrs[n], &L2);
		}
		if (!found) {
			if (noscan)
				*noscan = cf;
			return n;
		}
		out[n] = L2;
		hdr = hdrs[n++];
		L = L2;
	}
	return n;
}

/* Copy the threads below cur_L: its resumers (lj_find_resumers()), then
 * the threads the last walks of this tid met, latest first (a thread
 * resumed from C, e.g. by a host's lua_resume, names no resumer on the C
 * stack). At most LJ_PARENTS. */
static void copy_parents(struct vm *vm, struct target *t, struct thread_snap *ts,
			 struct lj_tidbuf *tb, uint64_t cur_L, const uint8_t *curhdr)
{
	uint64_t got[LJ_PARENTS];
	uint8_t hdrs[LJ_PARENTS][128];
	uint64_t main_L = 0;
	const struct lj_snap *s = (const struct lj_snap *)ts->vm_data;
	if (lj_read_ref(vm->ol, ts->mem, s->g + vm->lay->g_mainthref, &main_L) < 0)
		main_L = 0;
	/* a host that resumes from C (nginx: lua_resume from its event loop)
	 * has no resumer above the coroutine: scan there once in a while */
	if (++tb->noscan_uses > 64) {
		tb->noscan = 0;
		tb->noscan_uses = 0;
	}
	int n = lj_find_resumers(vm, ts->mem, cur_L, main_L, curhdr, got, hdrs, LJ_PARENTS,
				 &tb->noscan);
	for (int i = 0; i < n; i++)
		if (keep_thread(vm, t, ts, got[i], hdrs[i]) == -2)
			return;
	for (int i = 0; i < tb->nrecent && n < LJ_PARENTS; i++) {
		uint64_t L = tb->recent[i];
		if (L == cur_L || in_list(got, n, L) || lj_read_thread(vm->ol, ts->mem, L, hdrs[n]) < 0)
			continue;
		got[n] = L;
		int rc = keep_thread(vm, t, ts, L, hdrs[n]);
		if (rc == -2)
			return;
		if (rc == 0)
			n++;
	}
}

/* Is G a state captures may use: found, or a valid candidate? */
static int lj_state_known(const struct vm *vm, uint64_t g)
{
	for (int i = 0; i < vm->found.ng; i++)
		if (vm->found.g[i] == g)
			return 1;
	for (int i = 0; i < vm->found.ncand; i++)
		if (vm->found.cand[i].g == g)
			return vm->found.cand[i].ok;
	return 0;
}

/* Is the cframe of state G's running thread on TS's C stack (within
 * 8 MiB above rsp)? Then TS runs G's Lua code. */
static int state_on_stack(const struct vm *vm, struct mem *m, const struct thread_snap *ts,
			  uint64_t g)
{
	uint64_t cl = 0, cf = 0;
	if (lj_read_ref(vm->ol, m, g + vm->lay->g_cur_L, &cl) < 0 || !cl ||
	    mem_read_u64(m, cl + vm->ol->L_cframe, &cf) < 0)
		return 0;
	cf &= ~3ull;
	return cf >= ts->regs.rsp && cf - ts->regs.rsp < (8u << 20);
}

/* The cframe a trace runs on whose stack pointer is SP: CFRAME_SIZE_JIT
 * (CFRAME_SIZE + 16) above it plus the trace's spadjust, the trace found
 * in state G's trace list by ADDR (its mcode). 0 when ADDR is on no
 * trace of G. *TN: the trace to look at first (a hint), then the
 * trace's number. docs/luajit.md §10.5. */
static uint64_t tick_trace_cframe(struct ctx *c, uint64_t g, uint64_t addr, uint64_t sp, int *tn)
{
	uint64_t T;
	uint16_t spadj = 0;
	if (trace_find(c, g, *tn, addr, &T, tn) < 0 ||
	    mem_read_u16(c->m, T + c->ol->tr_spadjust, &spadj) < 0)
		return 0;
	return sp + 16 + spadj;
}

/* Might PC be JIT machine code: in an anonymous executable mapping, or
 * in none (mcode allocated after the maps were read)? */
static int maybe_mcode(struct target *t, uint64_t pc)
{
	const struct proc_map *m = t->sym ? proc_maps_find(symtab_maps(t->sym), pc) : NULL;
	if (!m)
		return pc != 0;
	return (m->perms & MAP_X) && !proc_map_is_file(m) && m->path[0] != '[';
}

/* Does the SAVE_L slot of L's cframe (L->cframe, read now) lie in the
 * stack copy of TS and name L? Then L ran on this thread at the tick
 * (a deeper cframe of a coroutine it resumed that has yielded since is
 * found by the walk: its SAVE_L is a suspended thread). */
static int cframe_in_copy(struct vm *vm, struct thread_snap *ts, uint64_t L)
{
	uint64_t cf = 0, l2 = 0;
	if (!L || mem_read_u64(ts->mem, L + vm->ol->L_cframe, &cf) < 0)
		return 0;
	cf &= ~3ull;
	uint64_t at = cf + vm->lay->cf_L;
	return cf && at >= ts->stack_addr && at + 8 <= ts->stack_addr + ts->stack_len &&
	       lj_read_ref(vm->ol, ts->mem, at, &l2) == 0 && l2 == L;
}

/* For a sample taken while the thread ran on (TS->after: the perf
 * sampler's copies): the lua_State that ran at the tick, from the SAVE_L
 * slot of the innermost cframe in the stack copy, not g->cur_L, which
 * the heap read after the sample says and which changes at every
 * coroutine resume. The cframe is rsp in VM code (the VM's one CFI rule,
 * docs/luajit.md §5), the trace's cframe on a trace, else that of the
 * first VM or trace frame the native unwind of the copy meets (not
 * when CUR_L's cframe names CUR_L in the copy: -1, CUR_L stays). The
 * slot must lie in the copy and name a thread of state G. Fills *L, and
 * *VMSTATE from the tick when known (LJ_VMST_INTERP in VM code, the
 * trace number on a trace; else unchanged). 0, or -1 when not found. */
static int tick_L(struct vm *vm, struct target *t, struct thread_snap *ts, uint64_t g,
		  uint64_t cur_L, uint64_t *L, int32_t *vmstate)
{
	struct ctx cc = ctx_make(vm, t, ts->mem), *c = &cc;
	uint64_t rip = ts->regs.rip, cf = 0;
	int32_t vs = *vmstate;
	int tn = vs; /* the trace running now: a hint */
	if (in_vm(vm, rip)) {
		cf = ts->regs.rsp;
		vs = LJ_VMST_INTERP;
	} else if (maybe_mcode(t, rip) && (cf = tick_trace_cframe(c, g, rip, ts->regs.rsp, &tn))) {
		vs = tn;
	} else if (t->unw && t->sym && !cframe_in_copy(vm, ts, cur_L)) {
		/* in C code called by the VM or a trace, and CUR_L's cframe
		 * does not name it in the copy: unwind the copy */
		struct native_stack *ns = malloc(sizeof *ns);
		if (!ns)
			return -1;
		int n = unwind_stack(t->unw, ts->tid, &ts->regs, ts->mem, NULL, NULL, ns);
		for (int i = 1; i < n && !cf; i++) {
			uint64_t pc = ns->f[i].pc;
			if (in_vm(vm, pc)) {
				cf = ns->f[i].sp;
				break;
			}
			if (symtab_module_at(t->sym, pc - 1, NULL, NULL))
				continue;
			/* code without CFI: a trace, else the unwind went astray */
			tn = vs;
			if (maybe_mcode(t, pc - 1) &&
			    (cf = tick_trace_cframe(c, g, pc - 1, ns->f[i].sp, &tn)))
				vs = tn;
			break;
		}
		free(ns);
	}
	if (!cf)
		return -1;
	/* in VM code, a subroutine the VM calls (vm_mod, vm_floor...) has
	 * rsp one or two return addresses below the cframe (find_cframe) */
	uint64_t lo = ts->stack_addr, hi = lo + ts->stack_len;
	for (int d = 0; d <= (in_vm(vm, rip) ? 16 : 0); d += 8) {
		uint64_t l2 = 0, g2 = 0, at = cf + (uint64_t)d + vm->lay->cf_L;
		if (at < lo || at + 8 > hi ||
		    lj_read_ref(vm->ol, ts->mem, at, &l2) < 0 || !l2 || (l2 & 7) ||
		    !lj_is_gct(vm->ol, ts->mem, l2, LJ_GCT_THREAD) ||
		    lj_read_ref(vm->ol, ts->mem, l2 + vm->ol->L_glref, &g2) < 0 || g2 != g)
			continue;
		*L = l2;
		*vmstate = vs;
		return 0;
	}
	return -1;
}

static int lj_capture(struct vm *vm, struct target *t, struct thread_snap *ts)
{
	struct lj_snap *s = (struct lj_snap *)ts->vm_data;
	memset(s, 0, sizeof *s);
	s->magic = SNAP_MAGIC;
	struct mem *m = ts->mem;
	uint64_t g = 0;
	struct lj_tidbuf *tb = tidbuf_get(vm, ts->tid, 1);
	tb->age = ++vm->cache.clock;
	/* DISPATCH (r14) = g + G2DISP in VM code, and on traces with GC64 */
	if (ts->regs.r14 > vm->lay->g2disp) {
		uint64_t cand = ts->regs.r14 - vm->lay->g2disp;
		for (int i = 0; i < vm->found.ng; i++)
			if (vm->found.g[i] == cand)
				g = cand;
		/* a new one is used now and adopted by discovery */
		if (!g && (in_vm(vm, ts->regs.rip) || on_trace_gc64(vm, t, ts->regs.rip)) &&
		    lj_state_usable(vm, &t->mem.base, cand, "DISPATCH register"))
			g = cand;
	}
	/* the state this tid ran last, while it is still known and its
	 * running thread's cframe is still on this thread's stack (the tid's
	 * thread may have closed it, or be another thread) */
	if (!g && tb->g && lj_state_known(vm, tb->g) && state_on_stack(vm, m, ts, tb->g))
		g = tb->g;
	/* the states known, and those met but not adopted yet */
	int nk = g ? 0 : vm->found.ng + vm->found.ncand;
	if (!g && nk == 1)
		g = vm->found.ng ? vm->found.g[0] : vm->found.cand[0].ok ? vm->found.cand[0].g : 0;
	/* several states: the one whose running thread's cframe is on this
	 * thread's stack */
	for (int i = 0; !g && nk > 1 && i < nk; i++) {
		uint64_t k = i < vm->found.ng ? vm->found.g[i] : vm->found.cand[i - vm->found.ng].g;
		if ((i < vm->found.ng || vm->found.cand[i - vm->found.ng].ok) && state_on_stack(vm, m, ts, k))
			g = k;
	}
	if (!g)
		return 0;
	tb->g = g;
	s->g = g;
	const struct lj_layout *l = vm->lay;
	int32_t vs;
	uint64_t cj[2] = { 0, 0 };
	if (mem_read(m, g + l->g_vmstate, &vs, 4) < 0 ||
	    mem_read(m, g + l->g_cur_L, cj, l->g_jit_base - l->g_cur_L + vm->ol->gcref) < 0)
		return 0;
	s->vmstate = vs;
	if (vm->ol->gcref == 8) {
		s->cur_L = cj[0] & 0x7fffffffffffull;
		s->jit_base = cj[1];
	} else {
		uint32_t a[2];
		memcpy(a, cj, 8);
		s->cur_L = a[0];
		s->jit_base = a[1];
	}
	s->have = 1;
	/* a perf sample: the thread that ran at the tick, not the one
	 * running now; g->jit_base is the one running now's */
	uint64_t tl = 0;
	int32_t tvs = s->vmstate;
	if (ts->after && tick_L(vm, t, ts, g, s->cur_L, &tl, &tvs) == 0 && tl != s->cur_L) {
		msg_debug(3, "luajit: tid %d: SAVE_L 0x%llx ran at the tick, g->cur_L 0x%llx now",
			  (int)ts->tid, (unsigned long long)tl, (unsigned long long)s->cur_L);
		s->cur_L = tl;
		s->vmstate = tvs;
		s->jit_base = 0;
	}
	/* copy cur_L's stack: the walk runs after the thread resumed */
	uint64_t L = s->cur_L;
	uint8_t hdr[128];
	if (!L || lj_read_thread(vm->ol, m, L, hdr) < 0)
		return 0;
	/* the coroutine that ran at the tick has yielded since: its frames
	 * are no longer the sample's (LUA_YIELD, lj_state.c) */
	if (tl == L && hdr[vm->ol->L_status] == 1)
		return -LS_E_TORN;
	copy_parents(vm, t, ts, tb, L, hdr);
	uint64_t stack = 0;
	uint32_t ssz;
	memcpy(&stack, hdr + vm->ol->L_stack, vm->ol->gcref);
	memcpy(&ssz, hdr + vm->ol->L_stacksize, 4);
	size_t len = (size_t)ssz * 8;
	if (len > LJ_LSTACK_MAX)
		len = LJ_LSTACK_MAX;
	if (!tb->buf)
		tb->buf = malloc(LJ_LSTACK_MAX + 256);
	if (!tb->buf || !stack)
		return 0;
	memcpy(tb->buf, hdr, vm->ol->L_stacksize + 4);
	ssize_t got = m->read(m, stack, tb->buf + 256, len);
	if (got <= 0)
		return 0;
	tb->addr = stack;
	tb->len = (size_t)got;
	s->lstack = (int)(tb - vm->cache.tb) + 1;
	(void)t;
	return 0;
}

/* ---- the walk ---- */

/* Overlays for the stack copy and cur_L's header made at capture. */
struct lj_overlays {
	struct mem_overlay hdr, stk;
};

static struct mem *setup_mem(struct vm *vm, struct thread_snap *ts, struct lj_overlays *ov)
{
	struct lj_snap *s = (struct lj_snap *)ts->vm_data;
	if (s->magic != SNAP_MAGIC || !s->lstack || s->lstack > LJ_TID_CACHE)
		return ts->mem;
	struct lj_tidbuf *tb = &vm->cache.tb[s->lstack - 1];
	if (tb->tid != ts->tid || !tb->buf || !tb->len)
		return ts->mem;
	mem_overlay_init(&ov->stk, ts->mem, tb->addr, tb->buf + 256, tb->len);
	mem_overlay_init(&ov->hdr, &ov->stk.base, s->cur_L, tb->buf, vm->ol->L_stacksize + 4);
	return &ov->hdr.base;
}

/* Is CF a cframe whose SAVE_L is a thread of a known (or new, valid) state? */
static int cframe_L(struct ctx *c, uint64_t cf, uint64_t *L, uint64_t *g)
{
	if (!cf || (cf & 7))
		return FAIL(-LS_E_GARBAGE, "misaligned cframe");
	if (rd_ref(c, cf + c->l->cf_L, L) < 0 || !*L)
		return -LS_E_FAULT;
	uint8_t st;
	if (!lj_is_gct(c->ol, c->m, *L, LJ_GCT_THREAD))
		return FAIL(-LS_E_GARBAGE, "SAVE_L is not a thread");
	/* a yielded coroutine runs nowhere: this is a stale cframe (the C
	 * stack is reused at the same addresses by the next resume) */
	if (mem_read_u8(c->m, *L + c->ol->L_status, &st) < 0 || st == 1) {
		uint64_t b = 0, st2 = 0;
		mem_read_u64(c->m, *L + c->ol->L_base, &b);
		mem_read_u64(c->m, *L + c->ol->L_stack, &st2);
		msg_debug(3, "luajit: cframe 0x%llx: SAVE_L 0x%llx status %u base stack+%lld", (unsigned long long)cf,
			  (unsigned long long)*L, st, (long long)(b - (st2 & 0x7fffffffffffull)));
		return FAIL(-LS_E_GARBAGE, "SAVE_L is a suspended coroutine");
	}
	if (rd_ref(c, *L + c->ol->L_glref, g) < 0)
		return -LS_E_FAULT;
	if (lj_state_usable(c->vm, &c->t->mem.base, *g, "cframe anchor"))
		return 0;
	return FAIL(-LS_E_GARBAGE, "thread of an unknown, invalid state");
}

/* Is the C-kind function FN (fn_kind() 1) an ASM fast function, whose
 * code runs in the VM with no native frame of its own? Its pc field
 * points into GG_State's bcff[], whose instructions have opcodes from
 * BC__MAX on; a library function written in C (LIBINIT_CF) points to
 * g->bc_cfunc_int (BC_FUNCC), any other C function to bc_cfunc_ext
 * (BC_FUNCCW): lj_lib.c lj_lib_register(), lj_dispatch.c. Its f field
 * is no help: it holds the C fallback (lj_ffh_*), outside the VM.
 * 1 yes, 0 no or unreadable. docs/luajit.md §10.4. */
static int fn_asm(struct ctx *c, uint64_t fn)
{
	uint64_t fpc = 0;
	uint32_t ins;
	if (rd_ref(c, fn + c->ol->fn_pc, &fpc) < 0 || !fpc || mem_read_u32(c->m, fpc, &ins) < 0)
		return 0;
	return (ins & 0xff) >= BC__MAX;
}

/* The pc candidate is inside the bytecode of the Lua function at BASE?
 * NEED_LUA 0: any function's frame; 1: a Lua function's with PC in it;
 * 2: that, or an ASM fast function's (code in the VM); 3: a Lua
 * function's, PC unknown; 4: a C function's that the VM is entering or
 * leaving: PC is the function's pc field (ins_call loads it, then steps
 * past the BC_FUNCC/FUNCCW instruction there) or the frame's link (the
 * return path loads it): vm_x64.dasc ins_call, vm_returnc; 5: an ASM
 * fast function's whose link slot holds its first result (a TValue, not
 * a link: GC64 only), PC its link: the VM's return path (vm_x64.dasc
 * ff_coroutine_resume stores true at BASE-8, then moves the results
 * down to BASE-16 in vm_return/BC_RET_Z with the link in PC). */
static int base_ok(struct ctx *c, uint64_t stack, uint64_t base, uint64_t pc, int need_lua)
{
	if (!base || (base & 7) || base <= stack + 8 * (1 + c->fr2) || base - stack > (64u << 20))
		return 0;
	uint64_t fn, pt = 0, f;
	int64_t link;
	uint8_t ffid;
	if (rd_frame(c, base - 8, &fn, &link) < 0)
		return 0;
	int k = fn_kind(c, fn, &pt, &ffid, &f);
	if (k == 1 && need_lua == 4) {
		uint64_t fpc = 0;
		if (!pc || fn_asm(c, fn) || rd_ref(c, fn + c->ol->fn_pc, &fpc) < 0)
			return 0;
		return pc == fpc || pc == fpc + 4 || pc == (uint64_t)link;
	}
	if (k == 1 && need_lua == 5)
		return c->fr2 && (uint64_t)link >> 47 && pc && fn_asm(c, fn);
	if (k == 1)
		return !need_lua || (need_lua == 2 && fn_asm(c, fn));
	if (k != 0 || need_lua >= 4)
		return 0;
	struct lj_ptinfo *pi;
	if (rd_proto(c, pt, &pi) < 0)
		return 0;
	if (need_lua == 3)
		return 1; /* a Lua function's frame, PC unknown */
	int64_t pos = pt_pos(c, pt, pi, pc);
	return pos >= 0 && pos < (int64_t)pi->sizebc;
}

/* Is thread P in coroutine.resume(C) or a coroutine.wrap function of C?
 * (its top frame's first argument, or the C function's first upvalue) */
static int resumes(struct ctx *c, uint64_t p, uint64_t child)
{
	uint64_t base = 0, fn, tv = 0;
	int64_t link;
	if (mem_read_u64(c->m, p + c->ol->L_base, &base) < 0 || !base || (base & 7) ||
	    rd_frame(c, base - 8, &fn, &link) < 0)
		return 0;
	uint8_t ffid;
	if (!lj_is_gct(c->ol, c->m, fn, LJ_GCT_FUNC) ||
	    mem_read_u8(c->m, fn + c->ol->fn_ffid, &ffid) < 0 || ffid == 0)
		return 0;
	if (mem_read_u64(c->m, base, &tv) == 0 && lj_gcptr(c->vm->ol, tv) == child)
		return 1;
	/* GCfuncC upvalue[0]: after f (8 bytes) */
	if (mem_read_u64(c->m, fn + c->ol->fn_f + 8, &tv) == 0 && lj_gcptr(c->vm->ol, tv) == child)
		return 1;
	return 0;
}

/* Scratch frames of a walk, grown as deep stacks need. */
struct fbuf {
	struct frame *f;
	int cap;
	struct lj_lframe *lf;  /* parallel to F when the walk keeps them (want_vars) */
	int want_lf;
};

/* walk_seg() into FB->f[AT..], growing FB as needed: all frames of one
 * cframe's segment, up to LUA_WALK_MAX_FRAMES in FB. Returns the count
 * or -LS_E_* (-LS_E_NOMEM past the bound). */
static int walk_seg_grow(struct ctx *c, struct segwalk *sw, struct fbuf *fb, int at,
			 uint64_t nres_floor)
{
	int n = 0;
	for (;;) {
		if (fb->want_lf && !fb->lf && fb->cap > 0 &&
		    !(fb->lf = calloc((size_t)fb->cap, sizeof *fb->lf)))
			return -LS_E_NOMEM;
		sw->lf = fb->lf ? fb->lf + at + n : NULL;
		int m = walk_seg(c, sw, fb->f + at + n, fb->cap - at - n, nres_floor);
		sw->lf = NULL;
		if (m < 0)
			return m;
		n += m;
		if (!sw->full)
			return n;
		if (fb->cap >= LUA_WALK_MAX_FRAMES)
			return FAIL(-LS_E_NOMEM, "more than LUA_WALK_MAX_FRAMES Lua frames");
		int nc = fb->cap ? 2 * fb->cap : FB_FRAMES;
		if (nc > LUA_WALK_MAX_FRAMES)
			nc = LUA_WALK_MAX_FRAMES;
		struct frame *q = realloc(fb->f, (size_t)nc * sizeof *q);
		if (!q)
			return -LS_E_NOMEM;
		fb->f = q;
		if (fb->want_lf) {
			struct lj_lframe *ql = realloc(fb->lf, (size_t)nc * sizeof *ql);
			if (!ql)
				return -LS_E_NOMEM;
			fb->lf = ql;
		}
		fb->cap = nc;
	}
}

/* The Lua frames of cur_L without native anchors (--lua-only, and the
 * running coroutine of dump --all-coroutines): then every frame of cur_L
 * down to the bottom of its stack (a caller of a C frame has no known
 * pc: line 0). The top frame is the first candidate that walks cleanly:
 * on a JIT trace (vmstate > 0) L->base is as of the last call out of the
 * VM (a C function such as string.gsub that called back into Lua), so
 * the trace's BASE comes first: rdx while the pc is in the trace's
 * mcode, with the pc of its snapshot, else the BASE it was entered with
 * (g->jit_base), and a continuation frame two slots up from either
 * (docs/luajit.md §10.5); stopped in VM code, BASE/PC in rdx/rbx; the GC
 * called from a trace, jit_base; then L->base. Fills FB, count in *NF;
 * FB->f[0].trace is the trace. */
static int lua_only_walk(struct ctx *c, struct thread_snap *ts, const struct lj_snap *s, int have,
			 struct fbuf *fb, int *nf)
{
	*nf = 0;
	if (!have || !s->cur_L)
		return 0; /* not running Lua */
	uint64_t L = s->cur_L;
	uint8_t hdr[128];
	if (lj_read_thread(c->ol, c->m, L, hdr) < 0)
		return -LS_E_FAULT;
	uint64_t stack = 0, base = 0;
	memcpy(&stack, hdr + c->ol->L_stack, c->ol->gcref);
	memcpy(&base, hdr + c->ol->L_base, 8);
	stack = lj_gcptr(c->vm->ol, stack);
	uint64_t mask = c->fr2 ? ~0ull : 0xffffffffull;
	uint64_t rdx = ts->regs.rdx & mask, rip = ts->regs.rip;
	struct { uint64_t base, pc; int mode; } cand[10];
	int ncand = 0, tn = 0;
#define CAND(b_, p_, m_) do { if (ncand < 10) { cand[ncand].base = (b_); cand[ncand].pc = (p_); \
				cand[ncand++].mode = (m_); } } while (0)
	if (s->vmstate > 0) {
		uint64_t T = 0, tpc = 0;
		int on_mcode = !in_vm(c->vm, rip) && trace_find(c, s->g, s->vmstate, rip, &T, &tn) == 0;
		/* stopped in a signal handler that interrupted the trace (a
		 * kernel core of Tarantool, whose SIGSEGV handler runs first):
		 * the trace's pc is the one lj_walk found in a deeper native
		 * frame; its rdx is not known */
		int deep = 0;
		if (!on_mcode && !in_vm(c->vm, rip) && s->trace_addr &&
		    trace_find(c, s->g, s->vmstate, s->trace_addr, &T, &tn) == 0) {
			rip = s->trace_addr;
			on_mcode = deep = 1;
		}
		if (on_mcode)
			tpc = trace_pc(c, T, rip);
		else
			tn = s->vmstate;
		if (on_mcode && tpc && !deep)
			CAND(rdx, tpc, 1);
		if (on_mcode && !deep)
			CAND(rdx, 0, 3);
		if (s->jit_base && tpc)
			CAND(s->jit_base, tpc, 1);
		if (s->jit_base)
			CAND(s->jit_base, 0, 3);
		if (on_mcode && !deep)
			CAND(rdx + 16, 0, 3);
		if (s->jit_base)
			CAND(s->jit_base + 16, 0, 3);
	}
	if (in_vm(c->vm, rip))
		CAND(rdx, ts->regs.rbx & mask, 2);
	/* the GC entered from a trace: the trace's BASE (docs/luajit.md §7) */
	if (s->vmstate <= 0 && s->jit_base)
		CAND(s->jit_base, 0, 3);
	CAND(base, 0, 0);
	CAND(base, 0, 3);
#undef CAND
	for (int k = 0; k < ncand; k++) {
		if (!base_ok(c, stack, cand[k].base, cand[k].pc, cand[k].mode))
			continue;
		struct segwalk sw = { .L = L, .stack = stack, .f = cand[k].base - 8, .pc = cand[k].pc };
		int n = 0, steps = c->steps;
		for (int round = 0; round < MAX_SEGS && !sw.bottom; round++) {
			int m = walk_seg_grow(c, &sw, fb, n, 0);
			if (m < 0) {
				if (n == 0)
					break; /* try the next candidate */
				*nf = n;
				return m;
			}
			if (m == 0)
				break;
			n += m;
		}
		if (n > 0) {
			if (tn > 0 && (cand[k].mode == 1 || cand[k].base == s->jit_base ||
				       cand[k].base == rdx))
				fb->f[0].trace = tn;
			*nf = n;
			return 0;
		}
		c->steps = steps;
	}
	return FAIL(-LS_E_GARBAGE, "no consistent top frame (Lua only)");
}

/* One walk of one thread: what it reads through and what it builds.
 * Lives on the caller's stack (nothing static): walks are reentrant. */
struct wctx {
	struct ctx c;                /* reader over the copies made at capture */
	struct thread_snap *ts;
	const struct lj_snap *s;
	int have;                    /* S's global_State fields were read */
	struct native_stack *ns;     /* = &ts->native, rewritten past restarts */
	struct native_stack *tmp;    /* restart unwinds (allocated on first use) */
	struct lua_walk *lw;         /* the segments produced */
	struct walk_info *info;
	struct fbuf fb;              /* scratch frames of one segment */
	int nf;                      /* Lua frames produced so far */
	int nsegs;                   /* segments produced so far */
	/* where the VM frames start, and the trace the thread was stopped on */
	int first_vm;                /* native index of the first VM frame, -1 none */
	int nocfi;                   /* native index of the first pc outside any module, -1 */
	int synth;                   /* the native stack was restarted at cur_L's cframe */
	int stub;                    /* frame 0 is an FFI callback stub, unwound by unwind_stub() */
	int trace_n;                 /* trace number running, 0 none */
	uint64_t trace_T, trace_addr;
	/* the thread being walked, the threads met */
	struct segwalk sw;
	uint64_t seenL[MAX_SEGS];
	int nseen;
	uint64_t met[LJ_RECENT];     /* innermost first, for copy_parents() */
	int nmet;
	int innermost;               /* no Lua frame emitted yet */
	uint64_t chain_next;         /* PREV of the last cframe walked */
	int moved;                   /* the innermost VM frame was moved to cur_L's cframe */
	uint64_t hint_L, hint_base;  /* BASE of hint_L's next cframe, known from registers */
};

/* Unwind again from cframe CF (rip at the VM start, where the VM's CFI
 * rule holds) and put its frames from SKIP on at native index AT on.
 * Returns the frames unwound (0: none, the native stack is unchanged)
 * or -LS_E_NOMEM. */
static int restart_unwind(struct wctx *w, uint64_t cf, int at, int skip)
{
	if (!w->tmp && !(w->tmp = malloc(sizeof *w->tmp)))
		return -LS_E_NOMEM;
	struct user_regs_struct r = w->ts->regs;
	r.rip = w->c.vm->vm_start;
	r.rsp = cf;
	int n2 = unwind_stack(w->c.t->unw, w->ts->tid, &r, w->ts->mem, NULL, NULL, w->tmp);
	if (n2 <= 0)
		return 0;
	int k = at, j;
	for (j = skip; j < n2 && k < UNWIND_MAX_FRAMES; j++)
		w->ns->f[k++] = w->tmp->f[j];
	w->ns->n = k;
	/* frames the buffer had no room for cut the stack too */
	w->ns->truncated = w->tmp->truncated || j < n2;
	return n2;
}

/* The register of user_regs_struct R that UREG_* REG names. */
static unsigned long long *ureg_of(struct user_regs_struct *r, int reg)
{
	switch (reg) {
	case UREG_RBX: return &r->rbx;
	case UREG_RBP: return &r->rbp;
	case UREG_R12: return &r->r12;
	case UREG_R13: return &r->r13;
	case UREG_R14: return &r->r14;
	default: return &r->r15;
	}
}

/* Frame 0 stays; the frames above it become those unwound from R (its
 * caller's registers, worked out by the rule that found frame 0 where
 * its CFI is wrong or missing). Returns the frames unwound (> 0), 0 when
 * none were (the native stack is left as it was), or -LS_E_NOMEM. */
static int callers_from(struct wctx *w, const struct user_regs_struct *r)
{
	struct native_stack *ns = w->ns;
	if (!w->tmp && !(w->tmp = malloc(sizeof *w->tmp)))
		return -LS_E_NOMEM;
	int n2 = unwind_stack(w->c.t->unw, w->ts->tid, r, w->ts->mem, NULL, NULL, w->tmp);
	if (n2 <= 0)
		return 0;
	int at = 1, j;
	for (j = 0; j < n2 && at < UNWIND_MAX_FRAMES; j++)
		ns->f[at++] = w->tmp->f[j];
	ns->f[1].flags &= ~NF_LEAF;
	ns->n = at;
	ns->truncated = w->tmp->truncated || j < n2;
	return n2;
}

/* The thread stopped (native frame 0, a leaf in the VM) inside one of the
 * VM's register save or restore sequences (struct lj_edge: the pushes of
 * lj_vm_call & co. or of vm_ffi_callback before their sub rsp, or the
 * pops and ret after vm_leave_unw's add rsp), where the VM's one CFI rule (CFA = rsp +
 * CFRAME_SIZE) is wrong: the unwinder took a saved register or a stale
 * slot for the return address and the sample had no frame at all
 * (table.sort with a Lua comparator enters and leaves the VM through
 * lj_vm_call for every comparison: ~2 % of its samples). No cframe of
 * this entry is linked (not yet, or no more): the thread is in its C
 * caller (lua_call) as far as Lua is concerned. So unwind again from the
 * caller: CFA = rsp + 8 per register pushed so far (or still to pop) + 8,
 * the registers still to pop read from their slots (the others hold the
 * caller's values), and leave frame 0 out of the VM frames walked (it is
 * shown as VM code, with no Lua frames of its own). docs/luajit.md §10.7.
 * 0 (the native stack rewritten, or not this case) or -LS_E_NOMEM. */
static int unwind_edge(struct wctx *w)
{
	struct native_stack *ns = w->ns;
	const struct vm *vm = w->c.vm;
	if (ns->n < 1 || !(ns->f[0].flags & NF_LEAF) || !in_vm(vm, ns->f[0].pc) || !w->c.t ||
	    !w->c.t->unw)
		return 0;
	uint64_t pc = ns->f[0].pc;
	const struct lj_edge *e = NULL;
	int k = -1;
	for (int j = 0; j < vm->nedge && !e; j++) {
		const struct lj_edge *x = &vm->edge[j];
		if (pc < x->addr || pc >= x->addr + x->off[x->ninsn])
			continue;
		for (int q = 0; q < x->ninsn; q++)
			if (pc == x->addr + x->off[q])
				k = q;
		if (k < 0)
			return 0; /* not at an instruction of it: not where a thread stops */
		e = x;
	}
	/* an exit's add rsp has not run yet: the CFI rule still holds */
	if (!e || (e->exit && k == 0))
		return 0;
	struct user_regs_struct r = w->ts->regs;
	int slots; /* registers on the stack below the return address */
	if (!e->exit) {
		/* pushed so far: all still hold the caller's values, but rbp
		 * after the callback stub's push (it holds g now) */
		slots = k + e->stub_rbp;
		uint64_t v;
		if (e->stub_rbp) {
			if (mem_read_u64(w->ts->mem, r.rsp + 8u * (unsigned)k, &v) < 0)
				return 0;
			r.rbp = v; /* the caller's, from the stub's slot */
		}
	} else {
		int npop = e->ninsn - 2; /* add rsp, the pops, ret/jmp */
		slots = npop - (k - 1);
		for (int q = 0; q < slots; q++) {
			uint64_t v;
			if (mem_read_u64(w->ts->mem, r.rsp + 8u * (unsigned)q, &v) < 0)
				return 0;
			*ureg_of(&r, e->reg[k + q]) = v;
		}
	}
	uint64_t cfa = r.rsp + 8u * (unsigned)slots + 8u, ret;
	if (mem_read_u64(w->ts->mem, cfa - 8, &ret) < 0)
		return 0;
	r.rip = ret;
	r.rsp = cfa;
	int n2 = callers_from(w, &r);
	if (n2 <= 0)
		return n2;
	msg_debug(3, "luajit: native frame 0 (pc 0x%llx) in the VM's register %s, instruction %d: "
		  "CFA rsp+%d, %d caller frames", (unsigned long long)pc, e->exit ? "restore" : "save",
		  k, 8 * slots + 8, n2);
	w->first_vm = -1;
	for (int i = 1; i < ns->n; i++)
		if (in_vm(vm, ns->f[i].pc)) {
			w->first_vm = i;
			break;
		}
	return 0;
}

int lj_stub_state(const struct vm *vm, struct mem *m, uint64_t pc)
{
	uint64_t head = 0;
	uint8_t b[2];
	int cb = 0;
	if (mem_read_u64(m, pc & ~0xfffull, &head) < 0 || pc < (pc & ~0xfffull) + 8)
		return -1;
	/* the head is vm_ffi_callback: its saveregs_ (no push rbp) */
	for (int j = 0; j < vm->nedge; j++)
		if (vm->edge[j].stub_rbp && !vm->edge[j].exit && vm->edge[j].addr == head)
			cb = 1;
	if (!cb || mem_read(m, pc, b, 2) < 0)
		return -1;
	if (b[0] == 0xb0 || b[0] == 0xeb || b[0] == 0x55)
		return 0;  /* mov al; jmp short; push rbp */
	if (b[0] == 0xb4 || (b[0] == 0x48 && b[1] == 0xbd) || (b[0] == 0xff && b[1] == 0x25))
		return 1;  /* mov ah; mov rbp, imm64; jmp [rip+x] */
	return -1;
}

/* Frame 0 stopped in an FFI callback stub (lj_ccallback.c
 * callback_mcode_init, x64): a page of anonymous code that starts with
 * the address of lj_vm_ffi_callback, then per slot `mov al, SLOT; jmp
 * short` to its group's tail `mov al, SLOT; push rbp; mov ah, SLOT>>8;
 * mov rbp, g; jmp [page]`. It has no CFI: the unwinder took it for a
 * trace and the sample was an error (42 % of the errors of an FFI qsort
 * with a Lua comparator). The C caller's return address is at rsp, or
 * at rsp+8 above the caller's rbp once rbp is pushed (the instruction at
 * rip is mov ah, mov rbp or the jmp). The callback's cframe does not
 * exist yet: unwinding again from the caller, frame 0 kept, puts the
 * Lua frames on the FFI call's VM frame. 0 (rewritten, or not this case)
 * or -LS_E_NOMEM. docs/luajit.md §10.6. */
static int unwind_stub(struct wctx *w)
{
	struct native_stack *ns = w->ns;
	const struct vm *vm = w->c.vm;
	if (ns->n < 1 || !(ns->f[0].flags & NF_LEAF) || in_vm(vm, ns->f[0].pc) || !w->c.t ||
	    !w->c.t->unw || !w->c.t->sym)
		return 0;
	uint64_t pc = ns->f[0].pc;
	int pushed;
	if (symtab_module_at(w->c.t->sym, pc, NULL, NULL) || (pushed = lj_stub_state(vm, w->ts->mem, pc)) < 0)
		return 0;
	struct user_regs_struct r = w->ts->regs;
	uint64_t ret, rbp;
	if (mem_read_u64(w->ts->mem, r.rsp + 8u * (unsigned)pushed, &ret) < 0 ||
	    (pushed && mem_read_u64(w->ts->mem, r.rsp, &rbp) < 0))
		return 0;
	if (pushed)
		r.rbp = rbp;
	r.rip = ret;
	r.rsp += 8u * (unsigned)pushed + 8u;
	int n2 = callers_from(w, &r);
	if (n2 <= 0)
		return n2;
	msg_debug(3, "luajit: native frame 0 (pc 0x%llx) in an FFI callback stub, rbp %s: %d caller frames",
		  (unsigned long long)pc, pushed ? "pushed" : "not pushed", n2);
	w->stub = 1;
	return 0;
}

/* The native walk met JIT code (native frame W->nocfi, no CFI) and there
 * is no cframe of cur_L to unwind again from. The frames the unwinder
 * found past machine code came from no CFI (its frame-pointer guess on a
 * trace's registers: return addresses left on the stack by earlier
 * calls) and the VM frames among them anchor Lua frames in a wrong
 * order: `spin;[unknown];lua_pcall;[jit]` with spin outside lua_pcall,
 * ~0.5 % of the samples of trace-heavy code, counted as good. So they
 * are cut (the native stack ends truncated at the JIT frame), and on a
 * trace of this VM the sample is an error: its Lua part is lost. 0 when
 * the code is not this VM's JIT code (no stack cut), else -LS_E_GARBAGE. */
static int no_restart(struct wctx *w)
{
	struct ctx *c = &w->c;
	struct native_stack *ns = w->ns;
	int nocfi = w->nocfi;
	uint64_t pc = ns->f[nocfi].pc;
	const struct proc_map *m = c->t->sym ? proc_maps_find(symtab_maps(c->t->sym), pc) : NULL;
	/* JIT code: an anonymous executable mapping, or one made after the
	 * maps were read; [vdso] and [vsyscall] are not */
	if (m && (!(m->perms & MAP_X) || proc_map_is_file(m) || m->path[0] == '['))
		return 0;
	int on_trace = w->have && w->s->vmstate > 0;
	uint64_t T;
	int tn;
	if (!on_trace && !(w->have && trace_find(c, w->s->g, w->s->vmstate, pc, &T, &tn) == 0))
		return 0;
	msg_debug(2, "luajit: native frame %d (pc 0x%llx) on a trace, no cframe of cur_L: %d native frames past it cut",
		  nocfi, (unsigned long long)pc, ns->n - nocfi - 1);
	ns->n = nocfi + 1;
	ns->truncated = 1;
	w->first_vm = -1;
	return FAIL(-LS_E_GARBAGE, "on a trace without a cframe of cur_L to unwind from");
}

/* Find the first VM frame, and a thread on a JIT trace: the native walk
 * stops (or goes astray) at the mcode, which has no CFI; restart from
 * cur_L's cframe and find the trace that holds the pc
 * (docs/luajit.md §10.5). Returns 0 or -LS_E_NOMEM. */
static int restart_after_trace(struct wctx *w)
{
	struct ctx *c = &w->c;
	const struct lj_snap *s = w->s;
	struct native_stack *ns = w->ns;
	w->first_vm = w->nocfi = -1;
	for (int i = 0; i < ns->n; i++) {
		if (in_vm(c->vm, ns->f[i].pc)) {
			w->first_vm = i;
			break;
		}
		if (w->nocfi < 0 && !(i == 0 && w->stub) &&
		    !symtab_module_at(c->t->sym, ns->f[i].pc - (i ? 1 : 0), NULL, NULL))
			w->nocfi = i;
	}
	uint64_t cf = 0, L2, g2;
	if (w->nocfi < 0)
		return 0;
	if (!w->have || !s->cur_L || mem_read_u64(c->m, s->cur_L + c->ol->L_cframe, &cf) < 0)
		return no_restart(w);
	cf &= ~3ull;
	if (cframe_L(c, cf, &L2, &g2) < 0 || L2 != s->cur_L)
		return no_restart(w);
	int nocfi = w->nocfi;
	uint64_t sp = ns->f[nocfi].sp;
	w->trace_addr = ns->f[nocfi].pc;
	int n2 = restart_unwind(w, cf, nocfi, 0);
	if (n2 < 0)
		return n2;
	if (n2 > 0) {
		ns->f[nocfi].flags &= ~NF_LEAF;
		w->first_vm = nocfi;
		w->synth = 1;
	}
	msg_debug(3, "luajit: on trace: native frame %d pc 0x%llx sp 0x%llx, cframe 0x%llx (cframe - sp = %lld)",
		  nocfi, (unsigned long long)w->trace_addr, (unsigned long long)sp,
		  (unsigned long long)cf, (long long)(cf - sp));
	if (trace_find(c, s->g, s->vmstate, w->trace_addr, &w->trace_T, &w->trace_n) < 0) {
		w->trace_n = 0;
		w->trace_T = 0;
	} else if (msg_verbose >= 3) {
		uint16_t spadj = 0;
		mem_read_u16(c->m, w->trace_T + c->ol->tr_spadjust, &spadj);
		msg_debug(3, "luajit: trace %d spadjust %u", w->trace_n, spadj);
	}
	return 0;
}

/* -v -v -v: what native frame I and the memory at CF looked like when
 * no cframe was found there. */
static void debug_no_cframe(struct wctx *w, int i, uint64_t cf, uint64_t L)
{
	struct ctx *c = &w->c;
	const struct lj_snap *s = w->s;
	const struct native_stack *ns = w->ns;
	msg_debug(3, "luajit: vmstate %d, native frames %d, first VM %d, nocfi %d, synth %d, trace %d, cur_L 0x%llx, segment L 0x%llx bottom %d, resumes %d",
		  w->have ? s->vmstate : 99, ns->n, w->first_vm, w->nocfi, w->synth, w->trace_n,
		  (unsigned long long)(w->have ? s->cur_L : 0), (unsigned long long)w->sw.L, w->sw.bottom,
		  (L && w->sw.L) ? resumes(c, L, w->sw.L) : -1);
	if (msg_verbose < 3)
		return;
	for (int j = 0; j < ns->n && j < 8; j++)
		msg_debug(3, "luajit:   #%d pc 0x%llx sp 0x%llx%s flags %u", j,
			  (unsigned long long)ns->f[j].pc, (unsigned long long)ns->f[j].sp,
			  in_vm(c->vm, ns->f[j].pc) ? " VM" : "", ns->f[j].flags);
	uint64_t q[12] = { 0 };
	mem_read(c->m, cf, q, sizeof q);
	uint8_t g1 = 0xee, g2 = 0xee;
	mem_read_u8(c->m, q[2] + c->ol->gct, &g1);
	mem_read_u8(&c->t->mem.base, q[2] + c->ol->gct, &g2);
	msg_debug(3, "luajit:   SAVE_L gct overlay %u live %u, cur_L 0x%llx", g1, g2,
		  (unsigned long long)(w->have ? s->cur_L : 0));
	msg_debug(3, "luajit:   [rsp] %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx %llx",
		  (unsigned long long)q[0], (unsigned long long)q[1], (unsigned long long)q[2],
		  (unsigned long long)q[3], (unsigned long long)q[4], (unsigned long long)q[5],
		  (unsigned long long)q[6], (unsigned long long)q[7], (unsigned long long)q[8],
		  (unsigned long long)q[9], (unsigned long long)q[10], (unsigned long long)q[11]);
}

/* Is PC in the first LJ_ENTRY_WINDOW bytes after an entry's register
 * saves (struct lj_edge, not exit), with no other sequence between?
 * There lj_vm_call, lj_vm_pcall, lj_vm_cpcall, lj_vm_resume and
 * vm_ffi_callback store SAVE_L and link their cframe into L->cframe
 * (vm_resume then sets the coroutine's status; vm_ffi_callback leaves
 * both to lj_ccallback_enter): at most 0x7b bytes on in Debian's luajit
 * 2.1 (vm_x64.dasc). docs/luajit.md §10.7. */
int lj_entry_window(const struct vm *vm, uint64_t pc)
{
	uint64_t end = 0; /* the nearest entry's end at or below PC */
	for (int j = 0; j < vm->nedge; j++) {
		const struct lj_edge *e = &vm->edge[j];
		uint64_t x = e->addr + e->off[e->ninsn];
		if (!e->exit && x <= pc && x > end)
			end = x;
	}
	if (!end || pc - end >= LJ_ENTRY_WINDOW)
		return 0;
	for (int j = 0; j < vm->nedge; j++)
		if (vm->edge[j].addr >= end && vm->edge[j].addr <= pc)
			return 0; /* another sequence between: PC is past that entry */
	return 1;
}

/* The cframe of VM native frame I: its rsp, or, where the VM's one CFI
 * rule (CFA = rsp+80) is off, one found nearby; then the native stack is
 * unwound again from it. Fills *CF, *L (its SAVE_L) and *G. 0, 1 when
 * frame 0 is a VM entry whose cframe is not linked yet (lj_entry_window():
 * no Lua frames of its own), or -LS_E_* when there is none. */
static int find_cframe(struct wctx *w, int i, uint64_t *cf, uint64_t *L, uint64_t *g)
{
	struct ctx *c = &w->c;
	*cf = w->ns->f[i].sp;
	*L = *g = 0;
	if (cframe_L(c, *cf, L, g) == 0)
		return 0;
	/* stopped in a VM entry after its register saves, before it stored
	 * SAVE_L or linked its cframe (or resumed the coroutine it names),
	 * or in the C function vm_ffi_callback calls there to do it
	 * (lj_ccallback_enter): no Lua frame is this cframe's yet, they go
	 * on the next VM frame. Searching up put them on table.sort's
	 * cframe, where none fitted (lj_vm_call), or on the cframe of the
	 * FFI call's caller, with the native frames between dropped: one
	 * cframe out (docs/luajit.md §10.6) */
	const struct native_frame *nf = &w->ns->f[i];
	if (w->innermost && lj_entry_window(c->vm, nf->pc - ((nf->flags & NF_LEAF) ? 0 : 1))) {
		msg_debug(3, "luajit: native frame %d (pc 0x%llx) in a VM entry, its cframe not linked yet (%s)",
			  i, (unsigned long long)nf->pc, c->why ? c->why : "?");
		return 1;
	}
	/* The VM calls a few internal subroutines (vm_mod, vm_floor...) with
	 * `call`: stopped there, rsp is the cframe minus one or two return
	 * addresses. The trace exit handler pushes the registers (and runs
	 * below the trace's spill slots) under the cframe the trace runs on:
	 * innermost, that is cur_L's; below the frames of a cframe already
	 * walked, it is that cframe's PREV (lj_trace_exit drives the
	 * collector, whose finalizers run in a cframe of their own:
	 * docs/luajit.md §10.5). */
	uint64_t ccf = 0;
	if (w->innermost && w->have && w->s->cur_L &&
	    mem_read_u64(c->m, w->s->cur_L + c->ol->L_cframe, &ccf) == 0)
		ccf &= ~3ull;
	else if (!w->innermost)
		ccf = w->chain_next;
	/* ... and a parent thread that resumed a coroutine from a trace has
	 * its cframe further up: accept an address whose SAVE_L is a thread
	 * that names it as its cframe */
	for (int d = 8; d <= 32 + 1024; d += 8) {
		uint64_t try = d <= 24 ? *cf + d : d == 32 ? ccf : *cf + d - 32;
		if (d == 32 && (!ccf || ccf <= *cf || ccf - *cf > 8192))
			continue;
		if (d > 32) {
			uint64_t l2 = 0, lcf2 = 0;
			if (!w->sw.L || rd_ref(c, try + c->l->cf_L, &l2) < 0 || !l2 ||
			    !lj_is_gct(c->ol, c->m, l2, LJ_GCT_THREAD) ||
			    mem_read_u64(c->m, l2 + c->ol->L_cframe, &lcf2) < 0 || (lcf2 & ~3ull) != try)
				continue;
		}
		if (cframe_L(c, try, L, g) < 0)
			continue;
		msg_debug(3, "luajit: native frame %d: cframe at rsp+%lld", i, (long long)(try - *cf));
		if (d >= 32)
			w->moved = 1;
		*cf = try;
		int rc = restart_unwind(w, try, i + 1, 1);
		if (rc < 0)
			return rc;
		w->ns->f[i].sp = try;
		break;
	}
	int rc = cframe_L(c, *cf, L, g);
	if (rc == 0)
		return 0;
	debug_no_cframe(w, i, *cf, *L);
	msg_debug(2, "luajit: native frame %d (pc 0x%llx) in the VM: rsp 0x%llx is no cframe (%s)",
		  i, (unsigned long long)w->ns->f[i].pc, (unsigned long long)*cf, c->why ? c->why : "?");
	return FAIL(-LS_E_GARBAGE, "VM frame without a cframe");
}

/* Is the cframe CF of VM native frame I an FFI callback's
 * (lj_vm_ffi_callback)? lj_ccallback_enter() sets its nres to 0 and its
 * errfunc (the i32 after nres) to -1 before it links it into L->cframe,
 * and LuaJIT lets C code called through the FFI enter Lua only by a
 * callback: so a cframe with both whose native callers, before the next
 * VM frame, include lj_vm_ffi_call (the VM's second CFI record, which
 * starts where the VM code of vm_start..vm_end ends) is one: 1. Without
 * both values it is not one: 0. With them but called from other C code
 * (a C module calling a callback pointer), or stale values in a cframe
 * that does not set them (lj_vm_call): not known, -1, and its segment
 * is not checked. docs/luajit.md §10.6. */
static int ffi_callback_cframe(struct wctx *w, int i, uint64_t cf)
{
	struct ctx *c = &w->c;
	int32_t v[2];
	if (mem_read(c->m, cf + c->l->cf_nres, v, sizeof v) < 0 || v[0] != 0 || v[1] != -1)
		return 0;
	if (!c->t || !c->t->sym)
		return -1;
	for (int j = i + 1; j < w->ns->n && j <= i + LJ_FFICB_NATIVE; j++) {
		uint64_t pc = w->ns->f[j].pc;
		if (in_vm(c->vm, pc))
			break;
		if (pc > c->vm->vm_end && pc - c->vm->vm_end < LJ_FFICALL_SIZE &&
		    symtab_fde_start(c->t->sym, pc - 1, NULL) == c->vm->vm_end)
			return 1;
	}
	return -1;
}

/* Does a segment that ended as SW did fit a cframe that is (ISCB 1), is
 * not (0) or may be (-1) an FFI callback's? A callback's frames end at
 * its continuation frame, the frames of any other cframe never do: a
 * walk that does not fit started from frames of another cframe (the
 * callback's frame not yet set up or already dropped, or a BASE left
 * over from it). */
static int seg_fits(const struct segwalk *sw, int iscb)
{
	if (iscb < 0)
		return 1;
	return iscb ? sw->endk == SEG_END_FFICB : sw->endk != SEG_END_FFICB;
}

/* Candidate (BASE, PC, check) triples for the top frame of thread L,
 * best first; returns how many (at most MAX). */
struct topcand {
	uint64_t base, pc;
	int mode;                    /* base_ok()'s NEED_LUA */
};

static int top_candidates(struct wctx *w, int i, uint64_t cf, uint64_t L, uint64_t base,
			  int iscb, struct topcand *cand, int max, int *glue)
{
	struct ctx *c = &w->c;
	const struct lj_snap *s = w->s;
	int nc = 0;
#define CAND(b_, p_, m_) do { if (nc < max) cand[nc++] = (struct topcand){ (b_), (p_), (m_) }; } while (0)
	uint64_t savepc = 0;
	rd_ref(c, cf + c->l->cf_pc, &savepc);
	if (savepc == L)
		savepc = 0;
	int cur = w->have && L == s->cur_L;
	uint64_t mask = c->fr2 ? ~0ull : 0xffffffffull;
	uint64_t rdx = w->ts->regs.rdx & mask, rbx = w->ts->regs.rbx & mask;
	*glue = 0;
	if (w->innermost && cur && (w->trace_n || w->synth)) {
		/* on a trace: BASE is rdx while in mcode (it moves when the
		 * trace returns below its start), else the BASE the trace was
		 * entered with */
		uint64_t tpc = w->trace_n ? trace_pc(c, w->trace_T, w->trace_addr) : 0;
		if (w->nocfi == 0) {
			CAND(rdx, tpc, 1);
			CAND(rdx, 0, 3);
		}
		if (s->jit_base) {
			CAND(s->jit_base, tpc, 1);
			CAND(s->jit_base, 0, 3);
		}
		/* a continuation frame (trace stitching) pushed above that
		 * BASE: its function is two slots up */
		if (w->nocfi == 0)
			CAND(rdx + 16, 0, 3);
		if (s->jit_base)
			CAND(s->jit_base + 16, 0, 3);
	} else if (w->innermost && i == 0) {
		/* stopped in VM code: BASE = rdx, PC = rbx; a Lua function or
		 * an ASM fast function runs there; at a call/return BASE is
		 * set before PC */
		CAND(rdx, rbx, 2);
		/* an ASM fast function returning: its first result covers
		 * its link, which PC holds (mode 5) */
		CAND(rdx, rbx, 5);
		/* coroutine.resume's ASM code after it stored L->base: BASE
		 * one slot up keeps the resumed thread on the stack for the
		 * GC (vm_x64.dasc ff_coroutine_resume) */
		if (rdx == base + 8)
			CAND(base, 0, 2);
		/* BC_FUNCC/FUNCCW before or after the C function's own
		 * frame: L->base may already be its BASE, so without this
		 * the next VM frame would take the frames of this cframe */
		CAND(rdx, rbx, 4);
		/* PC holds a frame link (a delta and a type), not a bytecode
		 * address, on the VM's return paths */
		int pc_is_link = rbx < (64u << 20);
		/* returning through ->vm_return and ->cont_dispatch, BASE
		 * already the caller's: the caller's PC is the one its call
		 * out to C stored in SAVE_PC, when that lies in its prototype */
		if (savepc && pc_is_link)
			CAND(rdx, savepc, 1);
		CAND(rdx, 0, 3);
		/* a C function returning to a continuation frame (a stitched
		 * trace called it): ->vm_return has turned PC, the link of
		 * the frame at BASE, into link ^ FRAME_C (type CONT ^ C) and
		 * the C function's frame is intact until ->cont_dispatch
		 * (vm_x64.dasc). Its link in memory says so */
		int64_t lk = 0;
		uint64_t fn0 = 0;
		if (pc_is_link && (rbx & 3) == 3 && rdx > 16 && rd_frame(c, rdx - 8, &fn0, &lk) == 0 &&
		    (uint64_t)lk == (rbx ^ 1))
			CAND(rdx, 0, 0);
		/* returning to a Lua caller (vm_returnc, BC_RET_Z): PC is the
		 * link of the frame at BASE, whose slots the results may
		 * already cover; the caller's base is below by the call
		 * instruction's A, as walk_seg() steps */
		uint32_t ins;
		if (rbx && !(rbx & 3) && mem_read_u32(c->m, rbx - 4, &ins) == 0 &&
		    rdx > (1 + c->fr2 + ((ins >> 8) & 0xff)) * 8)
			CAND(rdx - (1 + c->fr2 + ((ins >> 8) & 0xff)) * 8, rbx, 1);
		/* calling out to C (vmeta_tsetv & co. before lj_meta_tset,
		 * fast function fallbacks): BASE was just stored in L->base
		 * and rdx already holds an argument (CARG3); PC is still in
		 * rbx (vm_x64.dasc: `mov L:RB->base, BASE; mov CARG3, RC`...
		 * `mov SAVE_PC, PC; call`). Taken as glue, the frames went on
		 * the cframe below: lua_cpcall > main chunk > sorter */
		CAND(base, rbx, 1);
		/* lj_vm_ffi_callback between lj_ccallback_enter() and the
		 * call: BASE is not loaded yet, L->base is the callback's */
		if (iscb > 0)
			CAND(base, 0, 3);
		*glue = 1;
	} else {
		const struct native_frame *nf = &w->ns->f[i];
		uint64_t vrbx = (nf->regs_valid & (1u << UREG_RBX)) ? nf->regs[UREG_RBX] & mask : 0;
		CAND(base, vrbx, 1);
		CAND(base, savepc, 1);
		if (w->innermost && cur && s->vmstate == LJ_VMST_INTERP) {
			CAND(rdx, vrbx, 1);
			CAND(rdx, savepc, 1);
		}
		CAND(base, 0, 0);
		CAND(base, 0, 3);
	}
#undef CAND
	return nc;
}

/* Pick the top frame of thread L (new in this walk) at VM native frame
 * I: the first candidate whose frames walk cleanly down to the cframe
 * wins and starts W->sw. 1 when found, 0 for VM entry/exit glue (no Lua
 * frame of this cframe yet), or -LS_E_*. */
/* ->vm_return of a Lua function called from C (lj_vm_call: table.sort's
 * comparator), stopped moving the results down (vmstate C): they already
 * cover the function slot at BASE-16, and L->base is still the returning
 * frame's until the VM stores the previous base, which PC (rbx) holds
 * meanwhile (`and PC, -8; sub PC, BASE; neg PC`): BASE minus the link's
 * delta, just below BASE. Then the next cframe of L starts there (a hint,
 * as for ->cont_ffi_callback). 1 when set. docs/luajit.md §10.7. */
static int return_to_c(struct wctx *w, uint64_t L, uint64_t stack, uint64_t rdx)
{
	struct ctx *c = &w->c;
	uint64_t prev = w->ts->regs.rbx & (c->fr2 ? ~0ull : 0xffffffffull);
	if (!w->have || w->s->vmstate != LJ_VMST_C || L != w->s->cur_L || !in_vm(c->vm, w->ts->regs.rip) ||
	    prev >= rdx || rdx - prev > (64u << 10) || (prev & 7) || !base_ok(c, stack, prev, 0, 0))
		return 0;
	w->hint_L = L;
	w->hint_base = prev;
	return 1;
}

static int pick_top_frame(struct wctx *w, int i, uint64_t cf, uint64_t L, uint64_t stack,
			  uint64_t base, uint64_t floor, int iscb)
{
	struct ctx *c = &w->c;
	struct topcand cand[12];
	int glue;
	int nc = top_candidates(w, i, cf, L, base, iscb, cand, 12, &glue);
	int misfit = 0;
	for (int k = 0; k < nc; k++) {
		if (!base_ok(c, stack, cand[k].base, cand[k].pc, cand[k].mode)) {
			msg_debug(3, "luajit: top candidate %d: base 0x%llx pc 0x%llx mode %d: not a frame",
				  k, (unsigned long long)cand[k].base, (unsigned long long)cand[k].pc, cand[k].mode);
			continue;
		}
		uint64_t link0 = cand[k].mode == 5 ? cand[k].pc : 0;
		uint64_t pc0 = cand[k].mode == 5 ? 0 : cand[k].pc;
		struct segwalk t2 = { .L = L, .stack = stack, .f = cand[k].base - 8, .pc = pc0, .link0 = link0 };
		int steps = c->steps;
		if (walk_seg_grow(c, &t2, &w->fb, 0, floor) < 0) {
			msg_debug(3, "luajit: top candidate %d: base 0x%llx pc 0x%llx mode %d: walk failed (%s)",
				  k, (unsigned long long)cand[k].base, (unsigned long long)cand[k].pc, cand[k].mode,
				  c->why ? c->why : "?");
			c->steps = steps;
			continue;
		}
		if (!seg_fits(&t2, iscb)) {
			misfit++;
			continue;
		}
		w->sw = (struct segwalk){ .L = L, .stack = stack, .f = cand[k].base - 8, .pc = pc0,
					  .link0 = link0 };
		return 1;
	}
	/* VM entry/exit glue has no Lua frame of its own, unless the
	 * native frame was moved up to cur_L's cframe: then the VM code
	 * ran off that cframe (the prologue of lj_vm_ffi_callback, the
	 * trace exit handler) and which frames are that cframe's is not
	 * known: its frames would be put on the cframe below */
	if (glue && !w->moved) {
		/* ->cont_ffi_callback: the callback returned, BASE (rdx) is
		 * its caller's (the FFI call's frame) and L->base may still be
		 * a frame of the callback: the next cframe starts at rdx */
		uint64_t rdx = w->ts->regs.rdx & (c->fr2 ? ~0ull : 0xffffffffull);
		if (iscb > 0 && base_ok(c, stack, rdx, 0, 0)) {
			w->hint_L = L;
			w->hint_base = rdx;
			msg_debug(3, "luajit: native frame %d: FFI callback returning, the next cframe from BASE 0x%llx",
				  i, (unsigned long long)rdx);
		} else if (iscb <= 0 && return_to_c(w, L, stack, rdx)) {
			msg_debug(3, "luajit: native frame %d: returning to C, the next cframe from the previous BASE 0x%llx",
				  i, (unsigned long long)w->hint_base);
		}
		return 0;
	}
	/* a callback's cframe linked while its function's frame is not set
	 * up yet (lj_ccallback_enter) or no more (lj_ccallback_leave): the
	 * frames found belong to the cframe below, as in other entry glue */
	if (iscb > 0 && misfit && !w->moved)
		return 0;
	const struct lj_snap *s = w->s;
	msg_debug(2, "luajit: no top frame: native %d innermost %d cur %d trace %u synth %d vmstate %d nc %d misfit %d rip %s",
		  i, w->innermost, w->have && L == s->cur_L, (unsigned)w->trace_n, w->synth,
		  (int)(w->have ? s->vmstate : 99), nc, misfit, in_vm(c->vm, w->ts->regs.rip) ? "vm" : "other");
	return FAIL(-LS_E_GARBAGE, "no consistent top frame");
}

/* Append a segment for native frame I holding FB[0..N). */
static int append_segment(struct wctx *w, int i, const struct frame *fb, int n)
{
	int rc = lua_walk_segment(w->lw, i, 1);
	for (int j = 0; j < n && rc == 0; j++)
		rc = lua_walk_push(w->lw, &fb[j]);
	/* dump --locals: out of memory there loses the values, not the walk */
	if (rc == 0 && n > 0 && w->fb.lf && fb == w->fb.f) {
		for (int j = 0; j < n; j++)
			w->fb.lf[j].trace = fb[j].trace;
		lj_lframes_keep(w->c.vm, w->ts->tid, w->fb.lf, n);
	}
	w->nsegs++;
	w->nf += n;
	return rc;
}

/* record --coroutines (vm.h: walk_info.coro): the thread the innermost
 * Lua frames ran in is the first L with frames; each of its segments
 * moves its body (the outermost Lua frame of FB[0..N)) down, kept when
 * the walk reached L's bottom (BOTTOM). The main thread is the
 * lua_State just below global_State G in GG_State (lj_state.c). */
static void note_coro(struct walk_info *info, const struct ctx *c, uint64_t L, uint64_t g,
		      const struct frame *fb, int n, int bottom)
{
	if (n <= 0 || (info->coro && info->coro != L))
		return;
	info->coro = L;
	info->coro_main = g && L == g - c->l->sizeof_L;
	memset(&info->coro_body, 0, sizeof info->coro_body);
	for (int j = n - 1; bottom && j >= 0; j--)
		if (fb[j].kind == FRAME_LUA) {
			info->coro_body = fb[j];
			break;
		}
}

/* The Lua frames of VM native frame I: its cframe, the thread it runs,
 * that thread's top frame when it is new in this walk, then its frames
 * down to the frame that consumed the cframe, as one segment. 0 or
 * -LS_E_* (the walk stops). */
static int walk_vm_frame(struct wctx *w, int i)
{
	struct ctx *c = &w->c;
	uint64_t cf, L, g;
	int rc = find_cframe(w, i, &cf, &L, &g);
	if (rc < 0)
		return rc;
	if (rc == 1)
		return append_segment(w, i, NULL, 0); /* an entry in progress */
	if (w->have && w->nmet < LJ_RECENT && !in_list(w->met, w->nmet, L))
		w->met[w->nmet++] = L;
	int32_t nres = 0;
	mem_read_u32(c->m, cf + c->l->cf_nres, (uint32_t *)&nres);
	uint8_t hdr[128];
	if (lj_read_thread(c->ol, c->m, L, hdr) < 0)
		return -LS_E_FAULT;
	uint64_t stack = 0, base = 0, lcf = 0;
	memcpy(&stack, hdr + c->ol->L_stack, c->ol->gcref);
	memcpy(&base, hdr + c->ol->L_base, 8);
	memcpy(&lcf, hdr + c->ol->L_cframe, 8);
	if (w->hint_L == L && w->hint_base) {
		base = w->hint_base;
		w->hint_L = w->hint_base = 0;
	}
	/* the cframe this VM frame should be: L->cframe for L's innermost,
	 * else PREV of the previous one. A VM frame deeper than that is a VM
	 * entry or exit in progress: it has no Lua frames yet/any more. */
	uint64_t expect = L != w->sw.L ? (lcf & ~3ull) : w->chain_next;
	if (expect && cf < expect)
		return append_segment(w, i, NULL, 0);
	w->chain_next = 0;
	if (mem_read_u64(c->m, cf + c->l->cf_prev, &w->chain_next) == 0)
		w->chain_next &= ~3ull;
	uint64_t floor = nres < 0 ? stack + (uint64_t)(-(int64_t)nres) : 0;
	int iscb = ffi_callback_cframe(w, i, cf);
	if (L != w->sw.L) {
		if (in_list(w->seenL, w->nseen, L))
			return FAIL(-LS_E_GARBAGE, "thread met twice");
		w->sw = (struct segwalk){ .L = L, .stack = stack };
		rc = pick_top_frame(w, i, cf, L, stack, base, floor, iscb);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			/* VM entry/exit glue: L's frames start at the next VM
			 * frame. Not so while the interpreter runs on L's own
			 * innermost cframe after an entry stored its SAVE_PC (L
			 * or 0 until the first call out, CTState for a callback:
			 * docs/luajit.md §10.6): L's top frames are this cframe's, and found by
			 * no candidate here they would go on the cframe below */
			uint64_t spc = 0;
			rd_ref(c, cf + c->l->cf_pc, &spc);
			if (iscb <= 0 && w->have && w->s->vmstate == LJ_VMST_INTERP && L == w->s->cur_L &&
			    (lcf & ~3ull) == cf && spc && spc != L && base_ok(c, stack, base, 0, 0)) {
				msg_debug(3, "luajit: interpreter without a top frame: rip vm+0x%llx rdx 0x%llx rbx 0x%llx L->base 0x%llx SAVE_PC 0x%llx",
					  (unsigned long long)(w->ts->regs.rip - c->vm->vm_start),
					  (unsigned long long)w->ts->regs.rdx, (unsigned long long)w->ts->regs.rbx,
					  (unsigned long long)base, (unsigned long long)spc);
				return FAIL(-LS_E_GARBAGE, "interpreter on the innermost cframe without a top frame");
			}
			memset(&w->sw, 0, sizeof w->sw);
			return append_segment(w, i, NULL, 0);
		}
		w->seenL[w->nseen++] = L;
	} else {
		/* continuing L below the previous cframe's segment */
		uint64_t savepc = 0;
		rd_ref(c, cf + c->l->cf_pc, &savepc);
		w->sw.pc = savepc == L ? 0 : savepc;
	}
	int n = walk_seg_grow(c, &w->sw, &w->fb, 0, floor);
	if (n < 0)
		return n;
	if (!seg_fits(&w->sw, iscb)) {
		msg_debug(2, "luajit: native frame %d: cframe 0x%llx %s an FFI callback's, its frames end %s",
			  i, (unsigned long long)cf, iscb > 0 ? "is" : "is not",
			  w->sw.endk == SEG_END_FFICB ? "at a callback's continuation" : "elsewhere");
		return FAIL(-LS_E_GARBAGE, "frames of a cframe end as another kind's");
	}
	if (w->innermost && n > 0 && w->trace_n) {
		w->fb.f[0].trace = w->trace_n;
		w->info->trace = w->trace_n;
	}
	if ((rc = append_segment(w, i, w->fb.f, n)) < 0)
		return rc;
	note_coro(w->info, c, L, g, w->fb.f, n, w->sw.bottom);
	if (w->innermost) {
		struct lj_tidbuf *tb = tidbuf_get(c->vm, w->ts->tid, 0);
		if (tb)
			tb->g = g;
	}
	w->innermost = 0;
	return 0;
}

/* Remember in the tid's cache the threads this walk met first, then the
 * older ones it did not meet (a failed walk forgets nothing), for the
 * next capture's copy_parents(). */
static void remember_threads(struct wctx *w)
{
	struct lj_tidbuf *tb = tidbuf_get(w->c.vm, w->ts->tid, 0);
	if (!w->have || !tb)
		return;
	for (int i = 0; i < tb->nrecent && w->nmet < LJ_RECENT; i++)
		if (!in_list(w->met, w->nmet, tb->recent[i]))
			w->met[w->nmet++] = tb->recent[i];
	memcpy(tb->recent, w->met, (size_t)w->nmet * sizeof *w->met);
	tb->nrecent = w->nmet;
}

/* vm_ops.walk (vm.h). The native stack anchors the segments; without it
 * (--lua-only, --nonblocking) cur_L is walked alone. */
static int lj_walk(struct vm *vm, struct target *t, struct thread_snap *ts, struct lua_walk *lw,
		   struct walk_info *info)
{
	struct lj_overlays ov;
	struct wctx w = { .c = ctx_make(vm, t, setup_mem(vm, ts, &ov)), .ts = ts,
			  .s = (const struct lj_snap *)ts->vm_data, .ns = &ts->native, .lw = lw,
			  .info = info, .innermost = 1 };
	struct ctx *c = &w.c;
	w.have = w.s->magic == SNAP_MAGIC && w.s->have;
	c->may_learn = !ts->held;
	memset(info, 0, sizeof *info);
	w.fb.want_lf = ts->want_vars;
	lj_lframes_keep(vm, ts->want_vars ? ts->tid : -1, NULL, 0);
	/* the VM's own code without symbols is named by its role (merge.h) */
	lw->vm_module = vm->vm_module;
	lw->vm_start = vm->vm_start;
	lw->vm_end = vm->vm_end;
	lw->vm_gc = w.have && w.s->vmstate == LJ_VMST_GC;
	int rc = unwind_stub(&w);
	if (rc == 0)
		rc = restart_after_trace(&w);
	/* the trace's pc in a deeper native frame, for the coroutine walk
	 * of dump --all-coroutines (lua_only_walk) */
	if (w.have && w.trace_n && w.nocfi > 0)
		((struct lj_snap *)ts->vm_data)->trace_addr = w.trace_addr;
	if (rc == 0)
		rc = unwind_edge(&w);
	if (rc == 0 && ts->native.n == 0) {
		/* --lua-only / --nonblocking: no native frames to anchor the
		 * segments; cur_L alone, top to bottom, as one segment */
		int n = 0;
		rc = lua_only_walk(c, ts, w.s, w.have, &w.fb, &n);
		if (n > 0) {
			int rc2 = append_segment(&w, 0, w.fb.f, n);
			rc = rc < 0 ? rc : rc2;
			note_coro(info, c, w.s->cur_L, w.s->g, w.fb.f, n, rc == 0);
		}
	}
	for (int i = w.first_vm; rc == 0 && ts->native.n > 0 && i >= 0 && i < w.ns->n &&
	     w.nsegs < MAX_SEGS; i++)
		if (in_vm(vm, w.ns->f[i].pc))
			rc = walk_vm_frame(&w, i);
	remember_threads(&w);
	free(w.fb.f);
	free(w.fb.lf);
	free(w.tmp);
	/* what discovery should do after this walk: learn names again
	 * (modules required after the probe), adopt the states this walk or
	 * a capture met, or look for one when none is known */
	if (c->name_miss)
		info->discover |= VM_DISC_NAMES;
	if (vm->found.ncand > 0 || (vm->found.ng == 0 && vm->found.quick && t->sym))
		info->discover |= VM_DISC_STATES;
	if (rc < 0)
		msg_debug(2, "luajit: tid %d: walk stopped: %s (%s)", (int)ts->tid, err_text(rc),
			  c->why ? c->why : "?");
	if (rc < 0 && w.nsegs == 0)
		return rc;
	info->lua_frames = w.nf;
	/* g->vmstate: a trace number, or a state (GC, trace exit...) that may
	 * also have been entered from a trace (info->trace says which) */
	if (w.have && w.nsegs > 0) {
		info->vmstate = intern(vmstate_name(w.s->vmstate));
		info->state = vmstate_class(w.s->vmstate);
	} else if (w.trace_n) {
		info->vmstate = intern("trace");
		info->state = VMS_TRACE;
	}
	if (info->trace > 0)
		info->state = VMS_TRACE;
	/* a walk that failed half-way is an error sample, not a short stack */
	return rc;
}

/* ---- coroutines ---- */

/* All Lua frames of thread L from BASE down (no native stack: cframe
 * boundaries are crossed without PCs for the frames below them). */
static int thread_frames(struct ctx *c, uint64_t L, uint64_t stack, uint64_t base,
			 struct frame *out, int max)
{
	if (!base || (base & 7) || base <= stack || base - stack > (64u << 20))
		return -LS_E_GARBAGE;
	struct segwalk sw = { .L = L, .stack = stack, .f = base - 8 };
	int n = 0;
	for (int seg = 0; seg < 256 && n < max && !sw.bottom; seg++) {
		uint64_t before = sw.f;
		int k = walk_seg(c, &sw, out + n, max - n, 0);
		if (k < 0)
			return n ? n : k;
		n += k;
		if (sw.f == before)
			break;
		sw.pc = 0;
	}
	return n;
}

int lj_thread_frames(struct vm *vm, struct mem *m, uint64_t L, struct frame *out, int max)
{
	struct ctx c = ctx_make(vm, NULL, m);
	uint8_t h[128];
	if (lj_read_thread(vm->ol, m, L, h) < 0)
		return -LS_E_FAULT;
	if (h[vm->ol->gct] != LJ_GCT_THREAD)
		return -LS_E_GARBAGE;
	uint64_t stack = 0, base = 0;
	memcpy(&stack, h + vm->ol->L_stack, vm->ol->gcref);
	memcpy(&base, h + vm->ol->L_base, 8);
	return thread_frames(&c, L, lj_gcptr(vm->ol, stack), base, out, max);
}

int lj_top_frame_ok(struct vm *vm, struct mem *m, uint64_t stack, uint64_t base, uint64_t pc,
		    int need)
{
	struct ctx c = ctx_make(vm, NULL, m);
	return base_ok(&c, stack, base, pc, need);
}

/* All Lua frames of thread L from BASE down into FB (grown up to
 * LUA_WALK_MAX_FRAMES), as thread_frames(). Count in *NF; 0 or -LS_E_*
 * (*NF then holds the frames walked before the error). */
static int coro_frames(struct ctx *c, uint64_t L, uint64_t stack, uint64_t base,
		       struct fbuf *fb, int *nf)
{
	*nf = 0;
	if (!base || (base & 7) || base <= stack || base - stack > (64u << 20))
		return FAIL(-LS_E_GARBAGE, "L->base out of its stack");
	struct segwalk sw = { .L = L, .stack = stack, .f = base - 8 };
	/* every segment moves down the stack (walk_seg refuses a link that
	 * does not): the walk ends at the bottom, bounded by STEP */
	while (!sw.bottom) {
		uint64_t before = sw.f;
		int k = walk_seg_grow(c, &sw, fb, *nf, 0);
		if (k < 0)
			return k;
		*nf += k;
		if (sw.f == before)
			break;
		sw.pc = 0;
	}
	return 0;
}

/* The held thread that runs coroutine L of state G now, or NULL. */
static const struct thread_snap *held_runner(const struct thread_snap *held, int nheld,
					     uint64_t g, uint64_t L)
{
	for (int i = 0; i < nheld; i++) {
		const struct lj_snap *s = (const struct lj_snap *)held[i].vm_data;
		if (s->magic == SNAP_MAGIC && s->have && s->g == g && s->cur_L == L)
			return &held[i];
	}
	return NULL;
}

/* vm_ops.coroutines (vm.h): every thread on the GC root list of each
 * state. The running one (g->cur_L) is walked as --lua-only walks it,
 * from the registers of the held thread that runs it (L->base is stale
 * there); the others from L->base. A stack deeper than
 * MERGE_KEEP_FRAMES keeps both ends around "<elided N frames>"
 * (merge_stacks()). */
#define LJ_CORO_VISIT (1 << 20)        /* GC objects visited per state by lj_coroutines() */

static int lj_coroutines(struct vm *vm, struct target *t, const struct thread_snap *held,
			 int nheld, vm_coroutine_fn *fn, void *arg, const char **cut)
{
	*cut = NULL;
	struct ctx c = ctx_make(vm, t, &t->mem.base);
	int count = 0;
	struct stack st = { 0 };
	struct fbuf fb = { .want_lf = 1 };  /* dump --locals of each coroutine */
	struct lua_walk lw = { 0 };
	struct native_stack *none = calloc(1, sizeof *none);
	if (!none)
		return -LS_E_NOMEM;
	for (int gi = 0; gi < vm->found.ng; gi++) {
		uint64_t g = vm->found.g[gi], o, curL;
		if (rd_ref(&c, g + c.l->g_gc_root, &o) < 0 || rd_ref(&c, g + c.l->g_cur_L, &curL) < 0)
			continue;
		int guard;
		for (guard = 0; o && guard < LJ_CORO_VISIT; guard++) {
			uint8_t h[16];
			if (mem_read(c.m, o, h, 16) < 0)
				break;
			uint64_t next = 0;
			memcpy(&next, h, c.ol->gcref);
			next = lj_gcptr(vm->ol, next);
			uint8_t lh[128];
			if (h[c.ol->gct] == LJ_GCT_THREAD && lj_read_thread(c.ol, c.m, o, lh) == 0) {
				uint64_t stack = 0, base = 0, top = 0;
				memcpy(&stack, lh + c.ol->L_stack, c.ol->gcref);
				stack = lj_gcptr(vm->ol, stack);
				memcpy(&base, lh + c.ol->L_base, 8);
				memcpy(&top, lh + c.ol->L_top, 8);
				uint8_t status = lh[c.ol->L_status];
				const char *sts;
				if (o == curL)
					sts = "running";
				else if (status == 1)
					sts = "suspended";
				else if (status != 0)
					sts = "dead";
				else if (base > stack + 8 * (1 + c.fr2))
					sts = "normal";
				else if (top == base)
					sts = "dead";
				else
					sts = "suspended";
				const struct thread_snap *run = o == curL ? held_runner(held, nheld, g, o) : NULL;
				int n = 0, rc;
				c.steps = 0;
				c.why = NULL;
				if (run)
					rc = lua_only_walk(&c, (struct thread_snap *)run,
							   (const struct lj_snap *)run->vm_data, 1, &fb, &n);
				else
					rc = coro_frames(&c, o, stack, base, &fb, &n);
				if (rc < 0)
					msg_debug(2, "luajit: coroutine 0x%llx: walk stopped after %d frames: %s (%s)",
						  (unsigned long long)o, n, err_text(rc), c.why ? c.why : "?");
				stack_clear(&st);
				lua_walk_reset(&lw);
				int rc2 = n > 0 ? lua_walk_segment(&lw, 0, 1) : 0;
				for (int k = 0; k < n && rc2 == 0; k++)
					rc2 = lua_walk_push(&lw, &fb.f[k]);
				if (rc2 < 0 || merge_stacks(t ? t->sym : NULL, none, &lw, &st) < 0)
					rc = -LS_E_NOMEM;
				lj_lframes_keep(vm, LJ_LF_CORO, NULL, 0);
				if (n > 0 && fb.lf) {
					for (int k = 0; k < n; k++)
						fb.lf[k].trace = fb.f[k].trace;
					lj_lframes_keep(vm, LJ_LF_CORO, fb.lf, n);
				}
				if (n > 0 || rc < 0 || o == g - c.l->sizeof_L) {
					fn(arg, o, intern(sts), &st, rc < 0 ? rc : 0);
					count++;
				}
			}
			if (next == o)
				break;
			o = next;
		}
		if (guard == LJ_CORO_VISIT && o)
			*cut = "more than 1048576 GC objects in a state";
	}
	stack_free(&st);
	lua_walk_free(&lw);
	free(fb.f);
	free(fb.lf);
	lj_lframes_keep(vm, -1, NULL, 0);
	free(none);
	return count;
}

static const char *lj_describe(struct vm *vm)
{
	return vm->desc;
}

static void lj_close(struct vm *vm)
{
	free(vm->cache.lf);
	lj_vm_free(vm);
}

const struct vm_ops vm_luajit_ops = {
	.family = "luajit",
	.probe = lj_probe,
	.capture = lj_capture,
	.walk = lj_walk,
	.describe = lj_describe,
	.coroutines = lj_coroutines,
	.discover = lj_discover,
	.locals = lj_locals,
	.close = lj_close,
	.heap = lj_heap,
};
