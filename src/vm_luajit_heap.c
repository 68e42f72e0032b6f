/* vm_luajit_heap.c: the heap of LuaJIT 2.1 states for `luaspy heap`
 * (vm_ops.heap): the objects of gc.root and gc.mmudata, the interned
 * strings of the string table, each thread's open upvalues, sized as
 * lj_gc.c's gc_freefunc and the lj_*_free functions free them, beside
 * g->gc.total; and a breadth-first search over table keys from _G and
 * the registry that names the largest tables. Sizes and offsets:
 * docs/heap.md §3 (lj_obj.h, lj_gc.c, lj_tab.c, lj_func.c, lj_str.c,
 * lj_udata.c, lj_state.c). The target should be stopped (cmd_heap.c).
 * Everything read is validated and bounded: a bad header ends its list
 * and is counted, a cycle is found (Brent), huge counts are refused. */
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "heap.h"
#include "target.h"
#include "intern.h"
#include "msg.h"
#include "vm_luajit.h"

#define LH_MAX_LEN    (1ull << 31)   /* MSize: a string or userdata longer is garbage */
#define LH_MAX_SLOTS  (1u << 28)     /* array slots / hash nodes of a valid table */
#define LH_MAX_STACK  (1u << 26)     /* stack slots of a valid thread */
#define LH_MAX_STRT   (1u << 28)     /* string table buckets */
#define LH_MAX_UV     1000000        /* open upvalues of one thread */
#define LH_CHUNK      4096           /* slots / nodes / anchors read at once */

/* GC64 type tags of a TValue (itype, the upper 17 bits sign-extended) and
 * of a 32-bit-ref TValue's upper word: ~LJ_T* (lj_obj.h). */
#define LH_TSTR   0xfffffffbu
#define LH_TTAB   0xfffffff4u
#define LH_TNUMX  0xfffffff2u

struct lh {
	const struct lj_layout *lay;
	const struct lj_objlayout *ol;
	struct mem *m;
	struct heap_state *s;
	uint64_t g, mainth;
	unsigned gr;                   /* GC reference bytes: 8 or 4 */
	struct mem *live;              /* HEAP_NONBLOCKING: the uncached reader, else NULL */
};

static int lh_ptr_ok(uint64_t p)
{
	return p >= 0x1000 && p < (1ull << 47) && (p & 3) == 0;
}

static uint64_t rdref(const struct lh *h, const uint8_t *b, int off)
{
	if (h->gr == 8) {
		uint64_t v;
		memcpy(&v, b + off, 8);
		return lj_gcptr(h->ol, v);
	}
	uint32_t v;
	memcpy(&v, b + off, 4);
	return v;
}

static uint32_t rdu32(const uint8_t *b, int off)
{
	uint32_t v;
	memcpy(&v, b + off, 4);
	return v;
}

/* Table at O (header in B): array slots, hash nodes, the object's own size. */
static int tab_parts(const struct lh *h, const uint8_t *b, uint32_t *asize, uint32_t *nnode,
		     uint64_t *self)
{
	const struct lj_objlayout *ol = h->ol;
	uint32_t a = rdu32(b, ol->tab_asize), hm = rdu32(b, ol->tab_hmask);
	int8_t colo = (int8_t)b[ol->gct + 2];
	if (a > LH_MAX_SLOTS || hm >= LH_MAX_SLOTS || (hm & (hm + 1)))
		return -1;
	*asize = a;
	*nnode = hm ? hm + 1 : 0;   /* hmask 0: the shared nilnode */
	uint64_t base = h->gr == 8 ? 64 : 32;   /* sizeof(GCtab) */
	/* lj_tab_free: a colocated array is part of the table's allocation */
	*self = colo ? base + 8u * ((uint32_t)colo & 0x7f) : base;
	if (colo <= 0)
		*self += 8ull * a;
	*self += 24ull * *nnode;
	return 0;
}

/* The references of the objects, emitted right after each one's node
 * (heap.h: the walk only appends; heap_graph_finish resolves them). */
static void table_edges(struct lh *h, const uint8_t *b, uint32_t asize, uint32_t nnode);
static void func_edges(struct lh *h, uint64_t o, int64_t ni);
static void upval_edges(struct lh *h, const uint8_t *b);
static void proto_edges(struct lh *h, uint64_t o, int64_t ni);
static void thread_edges(struct lh *h, uint64_t L);
static void udata_edges(struct lh *h, uint64_t o);


static void add_string(struct lh *h, uint64_t o)
{
	uint8_t b[32];
	if (mem_read(h->m, o, b, h->lay->str_data) < 0) {
		h->s->bad++;
		return;
	}
	uint64_t len = rdu32(b, h->lay->str_len);
	if (len > LH_MAX_LEN) {
		h->s->bad++;
		return;
	}
	uint64_t bytes = h->lay->str_data + len + 1;   /* lj_str_size */
	int64_t ni;
	heap_object_begin(h->s, o, HEAP_STRING, bytes, &ni);
	if (h->s->want_names && ni >= 0) {
		char nb[40];
		size_t n = len < sizeof nb ? (size_t)len : sizeof nb;
		if (mem_read(h->m, o + h->lay->str_data, nb, n) == 0)
			heap_node_name(h->s, ni, intern_n(nb, n));
	}
	if (heap_string_wanted(h->s, len)) {
		char buf[HEAP_STR_PREVIEW];
		size_t n = len < sizeof buf ? (size_t)len : sizeof buf;
		if (mem_read(h->m, o + h->lay->str_data, buf, n) == 0)
			heap_string(h->s, o, len, bytes, buf, (int)n);
	}
}

/* Open upvalues of thread L (its openupval chain, linked by nextgc). */
static void add_open_uv(struct lh *h, uint64_t L)
{
	uint64_t uv;
	if (lj_read_ref(h->ol, h->m, L + h->ol->L_stack + h->gr, &uv) < 0)
		return;
	for (int n = 0; uv && n < LH_MAX_UV; n++) {
		if (!lh_ptr_ok(uv) || !lj_is_gct(h->ol, h->m, uv, LJ_GCT_UPVAL)) {
			h->s->bad++;
			return;
		}
		heap_object_begin(h->s, uv, HEAP_UPVAL, h->gr == 8 ? 48 : 24, NULL);   /* open: no references */
		if (lj_read_ref(h->ol, h->m, uv, &uv) < 0)
			return;
	}
}

static void add_object(struct lh *h, uint64_t o, const uint8_t *b)
{
	const struct lj_objlayout *ol = h->ol;
	struct heap_state *s = h->s;
	int gc64 = h->gr == 8;
	switch (b[ol->gct]) {
	case LJ_GCT_STR:
		add_string(h, o);
		break;
	case LJ_GCT_UPVAL:
		if (heap_object_begin(h->s, o, HEAP_UPVAL, gc64 ? 48 : 24, NULL))
			upval_edges(h, b);
		break;
	case LJ_GCT_THREAD: {
		uint32_t ss = rdu32(b, ol->L_stacksize);
		if (ss > LH_MAX_STACK) {
			s->bad++;
			break;
		}
		/* the main thread's lua_State is part of GG_State (not walked) */
		if (heap_object_begin(h->s, o, HEAP_THREAD, (o == h->mainth ? 0 : h->lay->sizeof_L) + 8ull * ss, NULL))
			thread_edges(h, o);
		add_open_uv(h, o);
		break;
	}
	case LJ_GCT_PROTO: {
		int64_t ni;
		if (heap_object_begin(h->s, o, HEAP_PROTO, rdu32(b, ol->pt_sizept), &ni))
			proto_edges(h, o, ni);
		break;
	}
	case LJ_GCT_FUNC: {
		unsigned nup = b[ol->fn_ffid + 1];
		int64_t ni;
		int more;
		if (b[ol->fn_ffid] == 0)   /* sizeLfunc */
			more = heap_object_begin(h->s, o, HEAP_LFUNC, gc64 ? 40u + 8u * nup : 20u + 4u * nup, &ni);
		else                       /* sizeCfunc */
			more = heap_object_begin(h->s, o, HEAP_CFUNC, gc64 ? 48u + 8u * nup : 32u + 8u * nup, &ni);
		if (more)
			func_edges(h, o, ni);
		break;
	}
	case LJ_GCT_TRACE:
		heap_object_begin(h->s, o, HEAP_TRACE, 0, NULL);
		break;
	case LJ_GCT_CDATA:
		heap_object_begin(h->s, o, HEAP_CDATA, gc64 ? 16 : 8, NULL);
		break;
	case LJ_GCT_TAB: {
		uint32_t a, nn;
		uint64_t self;
		if (tab_parts(h, b, &a, &nn, &self) < 0) {
			s->bad++;
			break;
		}
		heap_table(s, o, self, a, nn);
		if (heap_object_begin(h->s, o, HEAP_TABLE, self, NULL))
			table_edges(h, b, a, nn);
		break;
	}
	case LJ_GCT_UDATA: {
		uint64_t len = rdu32(b, gc64 ? 24 : 12);
		if (heap_object_begin(h->s, o, HEAP_UDATA, (gc64 ? 48 : 24) + len, NULL))   /* sizeudata */
			udata_edges(h, o);
		break;
	}
	default:
		s->bad++;
		break;
	}
}

/* Bytes of an object of type GCT that add_object() reads. */
static size_t head_bytes(const struct lh *h, unsigned gct)
{
	const struct lj_objlayout *ol = h->ol;
	int gc64 = h->gr == 8;
	switch (gct) {
	case LJ_GCT_UPVAL: return gc64 ? 48 : 24;
	case LJ_GCT_THREAD: return (size_t)ol->L_stacksize + 4;
	case LJ_GCT_PROTO: return (size_t)ol->pt_sizept + 4;
	case LJ_GCT_TAB: return gc64 ? 64 : 32;
	case LJ_GCT_UDATA: return gc64 ? 28 : 16;
	default: return 16;
	}
}

/* Walk the objects from HEAD linked by nextgc. CIRCULAR: gc.mmudata, a
 * ring given by its last element. A cycle elsewhere (Brent), an unknown
 * type or a bad pointer ends the list. */
static void walk_list(struct lh *h, uint64_t head, int circular)
{
	uint64_t o = head;
	struct heap_cycle cy = HEAP_CYCLE_INIT;
	if (circular && head && lj_read_ref(h->ol, h->m, head, &o) < 0)
		return;
	while (o && !h->s->cut) {
		uint8_t b[128];
		if (!lh_ptr_ok(o) || mem_read(h->m, o, b, 16) < 0) {
			h->s->bad++;
			return;
		}
		unsigned gct = b[h->ol->gct];
		if (gct < LJ_GCT_STR || gct > LJ_GCT_UDATA) {
			h->s->bad++;
			return;
		}
		/* the rest of the header this type's size needs, no further (an
		 * object may end its mapping) */
		size_t need = head_bytes(h, gct);
		if (need > sizeof b || (need > 16 && mem_read(h->m, o, b, need) < 0)) {
			h->s->bad++;
			return;
		}
		uint64_t bad0 = h->s->bad;
		add_object(h, o, b);
		if (h->live) {
			/* marked just before gct, a table's nomm just after; an
			 * object that changed type or failed to validate was
			 * freed: the rest of the list is not trusted */
			uint8_t now[16];
			int rc = heap_recheck(h->s, h->live, o, b, h->ol->gct - 1, h->ol->gct + 1, now);
			if (rc < 0 || (rc > 0 && now[h->ol->gct] != b[h->ol->gct]) || h->s->bad > bad0)
				return;
			if (rc > 0)
				memcpy(b, now, sizeof now);
		}
		if (circular && o == head)
			return;
		o = rdref(h, b, 0);
		if (!circular && heap_cycle_seen(&cy, o)) {
			h->s->cut = "a cycle in an object list";
			return;
		}
	}
}

/* Interned strings: the string table's anchors (the low bit of an anchor
 * flags a collision chain, lj_str.c), each a chain linked by nextgc. */
static void walk_strings(struct lh *h, uint64_t tab, uint32_t n)
{
	uint8_t b[LH_CHUNK * 8];
	uint64_t first, k;
	struct heap_chunks c;
	heap_chunks_init(&c, h->m, tab, n, h->gr, b, sizeof b);
	while (!h->s->cut && heap_chunk_next(&c, &first, &k))
		for (uint64_t j = 0; j < k && !h->s->cut; j++)
			walk_list(h, rdref(h, b, (int)(h->gr * j)) & ~(uint64_t)1, 0);
	if (c.failed)
		h->s->bad++;
}

/* ---- references (the graph's edges) ----------------------------------------- */

/* The GC object the TValue at B (8 bytes) holds, or 0: its type tag is
 * one of ~LJ_TSTR (~4) .. ~LJ_TUDATA (~12). */
static uint64_t tv_gc(const struct lh *h, const uint8_t *b)
{
	uint64_t v;
	memcpy(&v, b, 8);
	uint32_t it = h->gr == 8 ? (uint32_t)((int64_t)v >> 47) : (uint32_t)(v >> 32);
	if (it < 0xfffffff3u || it > LH_TSTR)
		return 0;
	uint64_t o = h->gr == 8 ? v & ((1ull << 47) - 1) : (uint32_t)v;
	return lh_ptr_ok(o) ? o : 0;
}

static void tvs_edges(struct lh *h, uint64_t a, uint64_t n, int kind, const char *name, int64_t base)
{
	uint8_t buf[LH_CHUNK * 8];
	uint64_t first, k;
	struct heap_chunks c;
	heap_chunks_init(&c, h->m, a, n > HEAP_MAX_TABLE_SLOTS ? HEAP_MAX_TABLE_SLOTS : n, 8, buf, sizeof buf);
	while (heap_chunk_next(&c, &first, &k))
		for (uint64_t i = 0; i < k; i++) {
			uint64_t o = tv_gc(h, buf + 8 * i);
			if (o)
				heap_edge(h->s, o, kind, name, base + (int64_t)(first + i));
		}
}

/* The name of the string at SP (interned, at most 1024 bytes), or "?". */
static const char *str_name(struct lh *h, uint64_t sp)
{
	uint8_t sb[32];
	char buf[1025];
	if (mem_read(h->m, sp, sb, h->lay->str_data) < 0)
		return "?";
	uint32_t len = rdu32(sb, h->lay->str_len);
	size_t n = len < 1024 ? len : 1024;
	if (mem_read(h->m, sp + h->lay->str_data, buf, n) < 0)
		return "?";
	return intern_n(buf, n);
}

static const char *key_read(void *ctx, uint64_t a)
{
	return str_name(ctx, a);
}

/* The references of a table (its header in B, its parts): metatable,
 * array slots, then each hash node's key (when an object) and value. */
static void table_edges(struct lh *h, const uint8_t *b, uint32_t asize, uint32_t nnode)
{
	struct heap_state *s = h->s;
	const struct lj_objlayout *ol = h->ol;
	uint8_t buf[LH_CHUNK * 24];
	uint64_t mt = rdref(h, b, ol->tab_array + 2 * (int)h->gr);
	if (mt)
		heap_edge(s, mt, HEAP_E_OTHER, heap_metatable_edge, 0);
	uint64_t arr = h->gr == 8 ? rdref(h, b, ol->tab_array) : rdu32(b, ol->tab_array);
	uint64_t node = h->gr == 8 ? rdref(h, b, ol->tab_node) : rdu32(b, ol->tab_node);
	tvs_edges(h, arr, asize, HEAP_E_INDEX, NULL, 0);
	uint64_t first, n;
	struct heap_chunks c;
	heap_chunks_init(&c, h->m, node, nnode > HEAP_MAX_TABLE_SLOTS ? HEAP_MAX_TABLE_SLOTS : nnode, 24,
			 buf, sizeof buf);
	while (heap_chunk_next(&c, &first, &n)) {
		for (uint64_t k = 0; k < n; k++) {
			const uint8_t *nd = buf + 24u * k;
			uint64_t v = tv_gc(h, nd), kv = tv_gc(h, nd + ol->node_key);
			uint64_t raw;
			memcpy(&raw, nd, 8);
			uint32_t vit = h->gr == 8 ? (uint32_t)((int64_t)raw >> 47) : (uint32_t)(raw >> 32);
			if (vit == 0xffffffffu)
				continue;   /* nil value (~LJ_TNIL): a free or dead node */
			if (kv)
				heap_edge(s, kv, HEAP_E_OTHER, "[key]", 0);
			if (!v)
				continue;
			uint64_t kr;
			memcpy(&kr, nd + ol->node_key, 8);
			uint32_t it = h->gr == 8 ? (uint32_t)((int64_t)kr >> 47) : (uint32_t)(kr >> 32);
			if (it == LH_TSTR) {
				heap_edge(s, v, HEAP_E_KEY, heap_key_name(s, kv, key_read, h), 0);
			} else if (it < LH_TNUMX) {
				double d;
				memcpy(&d, &kr, 8);
				if (d > -9e15 && d < 9e15 && d == (double)(int64_t)d)
					heap_edge(s, v, HEAP_E_INDEX, NULL, (int64_t)d);
				else
					heap_edge(s, v, HEAP_E_OTHER, "[number key]", 0);
			} else {
				heap_edge(s, v, HEAP_E_OTHER, "[value of a non-string key]", 0);
			}
		}
	}
}

/* "chunk:line" of prototype PT (chunk name without '@' or '='), interned. */
static const char *proto_label(struct lh *h, uint64_t pt)
{
	const struct lj_objlayout *ol = h->ol;
	uint8_t b[128];
	if (mem_read(h->m, pt, b, ol->pt_size) < 0)
		return "?";
	uint64_t chunk = rdref(h, b, ol->pt_chunkname);
	const char *c = chunk ? str_name(h, chunk) : "?";
	if (*c == '@' || *c == '=')
		c++;
	return internf("%.200s:%d", c, (int)rdu32(b, ol->pt_firstline));
}

/* "upvalue 'x'": name I of prototype PT (its uvinfo: sizeuv names, each
 * NUL-terminated, inside the proto's allocation), interned, or NULL. */
static const char *upval_name(struct lh *h, uint64_t pt, unsigned i)
{
	const struct lj_objlayout *ol = h->ol;
	uint8_t b[128];
	char names[1024];
	if (mem_read(h->m, pt, b, ol->pt_size) < 0)
		return NULL;
	uint32_t sizept = rdu32(b, ol->pt_sizept);
	uint64_t uvinfo = h->gr == 8 ? rdref(h, b, ol->pt_uvinfo) : rdu32(b, ol->pt_uvinfo);
	if (!uvinfo || uvinfo < pt + ol->pt_size || uvinfo >= pt + sizept)
		return NULL;
	size_t n = (size_t)(pt + sizept - uvinfo);
	if (n > sizeof names)
		n = sizeof names;
	if (mem_read(h->m, uvinfo, names, n) < 0)
		return NULL;
	size_t at = 0;
	for (unsigned k = 0; k < i; k++) {
		const char *z = memchr(names + at, 0, n - at);
		if (!z)
			return NULL;
		at = (size_t)(z - names) + 1;
	}
	const char *z = memchr(names + at, 0, n - at);
	if (!z || at >= n)
		return NULL;
	return internf("upvalue '%.*s'", (int)(z - names - (ptrdiff_t)at), names + at);
}

static void func_edges(struct lh *h, uint64_t o, int64_t ni)
{
	struct heap_state *s = h->s;
	const struct lj_objlayout *ol = h->ol;
	int gc64 = h->gr == 8;
	uint8_t b[64];
	if (mem_read(h->m, o, b, gc64 ? 48 : 24) < 0)
		return;
	unsigned nup = b[ol->fn_ffid + 1];
	uint64_t env = rdref(h, b, gc64 ? 16 : 8);
	if (env)
		heap_edge(s, env, HEAP_E_OTHER, "[env]", 0);
	if (b[ol->fn_ffid] != 0) {
		tvs_edges(h, o + (gc64 ? 48 : 32), nup, HEAP_E_OTHER, "[C upvalue]", 0);
		return;
	}
	uint64_t pc;
	memcpy(&pc, b + ol->fn_pc, 8);
	if (!gc64)
		pc &= 0xffffffffu;
	uint64_t pt = pc - ol->pt_size;
	if (lh_ptr_ok(pt))
		heap_edge(s, pt, HEAP_E_OTHER, "[prototype]", 0);
	if (s->want_names)
		heap_node_name(s, ni, internf("function %s", proto_label(h, pt)));
	heap_closure(s, pt, gc64 ? 40u + 8u * nup : 20u + 4u * nup);
	uint8_t uv[256 * 8];
	if (!nup || mem_read(h->m, o + (gc64 ? 40 : 20), uv, (size_t)h->gr * nup) < 0)
		return;
	for (unsigned i = 0; i < nup; i++) {
		uint64_t u = rdref(h, uv, (int)(h->gr * i));
		const char *nm = upval_name(h, pt, i);
		if (u)
			heap_edge(s, u, HEAP_E_OTHER, nm ? nm : "[upvalue]", 0);
	}
}

/* An upvalue (its header in B, as walk_list read it) */
static void upval_edges(struct lh *h, const uint8_t *b)
{
	if (b[h->ol->gct + 1]) {   /* closed: the value is in the upvalue */
		uint64_t v = tv_gc(h, b + (h->gr == 8 ? 16 : 8));
		if (v)
			heap_edge(h->s, v, HEAP_E_OTHER, "[value]", 0);
	}
}

static void proto_edges(struct lh *h, uint64_t o, int64_t ni)
{
	struct heap_state *s = h->s;
	const struct lj_objlayout *ol = h->ol;
	uint8_t b[128];
	if (mem_read(h->m, o, b, ol->pt_size) < 0)
		return;
	uint64_t chunk = rdref(h, b, ol->pt_chunkname);
	if (chunk)
		heap_edge(s, chunk, HEAP_E_OTHER, "[source]", 0);
	if (s->want_names)
		heap_node_name(s, ni, internf("prototype %s", proto_label(h, o)));
	uint64_t k = h->gr == 8 ? rdref(h, b, ol->pt_k) : rdu32(b, ol->pt_k);
	uint32_t nkgc = rdu32(b, ol->pt_sizekgc);
	uint32_t sizept = rdu32(b, ol->pt_sizept);
	/* the GC constants are the GCRefs just below k, inside the proto */
	if (nkgc > sizept / h->gr || k < o + (uint64_t)h->gr * nkgc)
		return;
	uint8_t buf[LH_CHUNK * 8];
	for (uint32_t j = 0; j < nkgc; j += LH_CHUNK) {
		uint32_t n = nkgc - j < LH_CHUNK ? nkgc - j : LH_CHUNK;
		uint64_t lo = k - (uint64_t)h->gr * (j + n);
		if (mem_read(h->m, lo, buf, (size_t)h->gr * n) < 0)
			return;
		for (uint32_t i = 0; i < n; i++) {
			uint64_t c = rdref(h, buf, (int)(h->gr * i));
			if (c)
				heap_edge(s, c, HEAP_E_OTHER, "[constant]", 0);
		}
	}
}

static void thread_edges(struct lh *h, uint64_t L)
{
	struct heap_state *s = h->s;
	const struct lj_objlayout *ol = h->ol;
	uint8_t b[128];
	if (lj_read_thread(ol, h->m, L, b) < 0)
		return;
	uint64_t stack = h->gr == 8 ? rdref(h, b, ol->L_stack) : rdu32(b, ol->L_stack), top;
	memcpy(&top, b + ol->L_top, 8);
	if (top > stack && (top - stack) / 8 < LH_MAX_STACK)
		tvs_edges(h, stack, (top - stack) / 8, HEAP_E_OTHER, "[stack]", 0);
	uint64_t env = rdref(h, b, ol->L_stack + 2 * (int)h->gr);
	if (env)
		heap_edge(s, env, HEAP_E_OTHER, "[env]", 0);
	uint64_t uv = rdref(h, b, ol->L_stack + (int)h->gr);
	for (int n = 0; uv && n < LH_MAX_UV; n++) {
		heap_edge(s, uv, HEAP_E_OTHER, "[open upvalue]", 0);
		if (!lh_ptr_ok(uv) || lj_read_ref(ol, h->m, uv, &uv) < 0)
			break;
	}
}

static void udata_edges(struct lh *h, uint64_t o)
{
	uint8_t b[48];
	int gc64 = h->gr == 8;
	if (mem_read(h->m, o, b, gc64 ? 40 : 20) < 0)
		return;
	uint64_t env = rdref(h, b, gc64 ? 16 : 8), mt = rdref(h, b, gc64 ? 32 : 16);
	if (mt)
		heap_edge(h->s, mt, HEAP_E_OTHER, heap_metatable_edge, 0);
	if (env)
		heap_edge(h->s, env, HEAP_E_OTHER, "[env]", 0);
}

/* The root's references: _G, the registry, the main thread. */
static void root_edges(struct lh *h, const uint8_t *gb)
{
	struct heap_state *s = h->s;
	heap_edges_begin(s, 0);
	uint64_t env = 0, reg = tv_gc(h, gb + h->lay->g_registrytv);
	if (lj_read_ref(h->ol, h->m, h->mainth + h->ol->L_stack + 2u * h->gr, &env) == 0 && env)
		heap_edge(s, env, HEAP_E_ROOT, "_G", 0);
	if (reg)
		heap_edge(s, reg, HEAP_E_ROOT, "registry", 0);
	heap_edge(s, h->mainth, HEAP_E_ROOT, "main thread", 0);
}

/* ---- one state ---------------------------------------------------------------- */

struct walk_ctx {
	struct vm *vm;
	struct mem *m;
	struct mem *live;   /* HEAP_NONBLOCKING: T's uncached reader */
};

static int state_walk(void *ctx, uint64_t g, struct heap_state *s)
{
	struct vm *vm = ((struct walk_ctx *)ctx)->vm;
	struct mem *m = ((struct walk_ctx *)ctx)->m;
	struct lh h = { vm->lay, vm->ol, m, s, g, 0, vm->ol->gcref, ((struct walk_ctx *)ctx)->live };
	const struct lj_layout *lay = vm->lay;
	uint8_t gb[1024];
	if (lay->g_registrytv + 16 > (int)sizeof gb || mem_read(m, g, gb, sizeof gb) < 0)
		return -LS_E_FAULT;
	h.mainth = rdref(&h, gb, lay->g_mainthref);
	if (!lh_ptr_ok(h.mainth))
		return -LS_E_GARBAGE;
	heap_node(s, 0, HEAP_STRTAB, 0);   /* the graph's root */
	root_edges(&h, gb);
	/* GCState: total (GCSize) then threshold, currentwhite, state: total
	 * is 17 bytes before state with GC64, 9 without (Tarantool 2.6's
	 * GCState too: state 73, root 80, docs/luajit.md §3.2) */
	int at = lay->g_gc_state - (h.gr == 8 ? 17 : 9);
	s->vm_bytes = 0;
	memcpy(&s->vm_bytes, gb + at, h.gr);   /* little-endian */
	s->vm_bytes_how = "g->gc.total";
	walk_list(&h, rdref(&h, gb, lay->g_gc_root), 0);
	/* gc.mmudata: root, sweep, gray, grayagain, weak, mmudata */
	walk_list(&h, rdref(&h, gb, lay->g_gc_root + 5 * (int)h.gr), 1);
	/* the string table: beta3 and Tarantool keep strhash/strmask at 0/8, later
	 * versions the StrInternState 32 bytes before vmstate (lj_obj.h) */
	int tab_at = (lay->flags & (LJL_SNAP8 | LJL_TARANTOOL)) ? 0 : lay->g_vmstate - 32;
	uint64_t tab;
	memcpy(&tab, gb + tab_at, 8);
	uint32_t mask = rdu32(gb, tab_at + 8);
	if (lh_ptr_ok(tab) && mask < LH_MAX_STRT) {
		s->count[HEAP_STRTAB] = 1;
		s->bytes[HEAP_STRTAB] = (uint64_t)h.gr * (mask + 1ull);
		walk_strings(&h, tab, mask + 1);
	} else {
		s->bad++;
	}
	/* g->tmpbuf, shrunk by each collection (lj_gc.c atomic): after
	 * mainthref as SBuf { char *w, *e, *b; } in the later rows; in beta3
	 * and Tarantool 2.6 after vmstate as { MRef p, e, b; } (strempty
	 * follows it: docs/luajit.md §3.2) */
	int sb, ms;
	if (lay->flags & (LJL_SNAP8 | LJL_TARANTOOL)) {
		ms = (int)h.gr;
		sb = (lay->g_vmstate + 4 + ms - 1) & ~(ms - 1);
	} else {
		ms = 8;
		sb = (lay->g_mainthref + (int)h.gr + 7) & ~7;
	}
	if (sb > 0 && sb + 3 * ms <= (int)sizeof gb) {
		uint64_t e = 0, b = 0;
		memcpy(&e, gb + sb + ms, (size_t)ms);
		memcpy(&b, gb + sb + 2 * ms, (size_t)ms);
		if (e >= b && e - b < LH_MAX_LEN) {
			s->count[HEAP_VMBUF] = 1;
			s->bytes[HEAP_VMBUF] = e - b;
		}
	}
	s->not_walked = "GG_State (main thread, global and JIT state, dispatch), JIT buffers and traces, cdata payloads";
	for (size_t i = 0; i < s->nfn; i++)
		s->fn[i].label = proto_label(&h, s->fn[i].proto);
	return 0;
}

int lj_heap(struct vm *vm, struct target *t, struct mem *m, unsigned flags, struct heap_state **out)
{
	struct walk_ctx w = { vm, m, (flags & HEAP_NONBLOCKING) ? &t->mem.base : NULL };
	return heap_walk_states(vm->found.g, vm->found.ng, flags, state_walk, &w, out);
}
