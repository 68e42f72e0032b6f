/* vm_puc_heap.c: the heap of PUC Lua 5.1-5.4 states for `luaspy heap`
 * (vm_ops.heap): every object of the collector's lists, sized as
 * luaC_freeobj / luaM_free free it, the VM's own byte count beside, and
 * a breadth-first search over table keys from _G and the registry that
 * names the largest tables. The sizes and list heads per release are in
 * docs/heap.md §2 (from lgc.c, lstate.c, lfunc.c, ltable.c, lstring.c of
 * each release; struct sizes from the same offsets as vm_puc_layout.c).
 * The target should be stopped (cmd_heap.c): lists are read once,
 * unlocked. Everything read is validated and bounded: a bad header is
 * counted as skipped and ends that list, a cycle in a list is found
 * (Brent) and ends it, a huge count is refused. */
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "heap.h"
#include "target.h"
#include "msg.h"
#include "vm_puc_int.h"

#define PH_MAX_LEN      (1ull << 40)  /* a string or userdata longer is garbage */
#define PH_MAX_SLOTS    (1u << 28)    /* array slots / hash nodes of a valid table */
#define PH_MAX_STACK    (1u << 24)    /* stack slots of a valid thread (LUAI_MAXSTACK 1e6) */
#define PH_MAX_CI       200000        /* CallInfos of a valid thread (MAX_CI_STEPS) */
#define PH_MAX_STRT     (1u << 28)    /* string table buckets */
#define PH_CHUNK        4096          /* TValues / nodes / pointers read at once */

/* What the heap walk needs beyond struct puc_layout, by release:
 * docs/heap.md §2. */
struct ph {
	struct vm *vm;                 /* its CallInfo reader and Proto cache name locals */
	const struct puc_layout *lay;
	struct mem *m;
	struct mem *live;              /* HEAP_NONBLOCKING: the uncached reader, else NULL */
	struct heap_state *s;
	uint64_t g, L;                 /* global_State, main thread */
	unsigned tt_proto, tt_uv;      /* 0: not a GC object (5.3 upvalues) */
	int sizeof_table, sizeof_proto, lastfree, lineinfo_size, udata_len, L_stacksize;
	uint64_t mainthread;
	/* 5.3: upvalues are not GC objects; counted once each from the closures */
	uint64_t *uv;
	size_t nuv, capuv;
	struct htab uvidx;
};

static void ph_setup(struct ph *p)
{
	const struct puc_layout *l = p->lay;
	switch (l->minor) {
	case 1:
		p->tt_proto = 9; p->tt_uv = 10; p->sizeof_proto = 120; p->lineinfo_size = 4;
		p->udata_len = 32; p->L_stacksize = 88;
		break;
	case 2:
		p->tt_proto = 9; p->tt_uv = 10; p->sizeof_proto = 128; p->lineinfo_size = 4;
		p->udata_len = 32; p->L_stacksize = 64;
		break;
	case 3:
		p->tt_proto = 9; p->tt_uv = 0; p->sizeof_proto = 120; p->lineinfo_size = 4;
		p->udata_len = 24; p->L_stacksize = 184;
		break;
	default:
		p->tt_proto = 10; p->tt_uv = 9; p->sizeof_proto = 128; p->lineinfo_size = 1;
		p->udata_len = 16; p->L_stacksize = -1;
		break;
	}
	/* lastfree follows node in every Table; sizearray (an int) ends the
	 * Table where it comes last (5.1 at 56, Redis's 5.1 at 64, 5.2.0-5.2.3) */
	p->lastfree = l->t_node + 8;
	p->sizeof_table = l->t_sizearray >= 56 ? l->t_sizearray + 8 : 56;
}

/* Room for a Table header read at once (Redis's 5.1 Table is 72 bytes). */
#define PH_TABLE_MAX 128

/* ---- sizes ------------------------------------------------------------------- */

/* The references of the objects, emitted right after each one's node
 * (heap.h: the walk only appends; heap_graph_finish resolves them). */
static void table_edges(struct ph *p, const uint8_t *h, uint32_t asize, uint32_t nnode, uint64_t node);
static void closure_edges(struct ph *p, uint64_t o, unsigned tt, int64_t ni);
static void upval_edges(struct ph *p, uint64_t o);
static void proto_edges(struct ph *p, uint64_t o, int64_t ni);
static void thread_edges(struct ph *p, uint64_t L, const uint8_t *lb);
static void udata_edges(struct ph *p, uint64_t o);


/* Bytes of the TString at O with header H (ts_data bytes); *LEN its length. */
static int str_size(struct ph *p, const uint8_t *h, uint64_t *len, uint64_t *bytes)
{
	const struct puc_layout *l = p->lay;
	if (l->str_len == PUC_STR_SHRLEN && h[8] == l->gct_sstr)
		*len = h[11];
	else
		*len = g64(h, 16);
	if (*len > PH_MAX_LEN)
		return -1;
	*bytes = (uint64_t)l->ts_data + *len + 1;
	return 0;
}

static void add_string(struct ph *p, uint64_t o, const uint8_t *h)
{
	uint64_t len, bytes;
	if (str_size(p, h, &len, &bytes) < 0) {
		p->s->bad++;
		return;
	}
	int64_t ni;
	heap_object_begin(p->s, o, HEAP_STRING, bytes, &ni);
	if (p->s->want_names && ni >= 0) {
		char nb[40];
		size_t n = len < sizeof nb ? (size_t)len : sizeof nb;
		if (mem_read(p->m, o + (uint64_t)p->lay->ts_data, nb, n) == 0)
			heap_node_name(p->s, ni, intern_n(nb, n));
	}
	if (heap_string_wanted(p->s, len)) {
		char buf[HEAP_STR_PREVIEW];
		size_t n = len < sizeof buf ? (size_t)len : sizeof buf;
		if (mem_read(p->m, o + (uint64_t)p->lay->ts_data, buf, n) == 0)
			heap_string(p->s, o, len, bytes, buf, (int)n);
	}
}

/* Array slots and hash nodes of the table at O (its first 64 bytes in H). */
static int tab_parts(struct ph *p, const uint8_t *h, uint32_t *asize, uint32_t *nnode, uint64_t *node)
{
	const struct puc_layout *l = p->lay;
	uint32_t a = g32(h, l->t_sizearray);
	if (l->minor == 4 && (h[10] & 0x80) && (a & (a - 1))) {
		/* 5.4 alimit is a hint (BITRAS): the real size is the next power of 2 */
		uint32_t r = 1;
		while (r < a && r < PH_MAX_SLOTS)
			r <<= 1;
		a = r;
	}
	uint32_t lsn = h[l->t_lsizenode];
	*node = g64(h, l->t_node);
	uint64_t lastfree = g64(h, p->lastfree);
	if (a > PH_MAX_SLOTS || lsn > 28)
		return -1;
	*asize = a;
	*nnode = 1u << lsn;
	if (l->minor >= 3) {
		if (lastfree == 0)
			*nnode = 0;   /* isdummy(t): lastfree == NULL */
	} else if (lsn == 0 && (lastfree == *node || lastfree == *node - (uint64_t)l->node_size)) {
		/* 5.1, 5.2: no hash part is the static dummynode, whose lastfree
		 * stays at it (5.1's getfreepos leaves it one node below): a real
		 * one-node part starts at node + 1 and is resized once used up */
		*nnode = 0;
	}
	return 0;
}

static void add_table(struct ph *p, uint64_t o)
{
	uint8_t h[PH_TABLE_MAX];
	uint32_t asize, nnode;
	uint64_t node;
	if ((size_t)p->sizeof_table > sizeof h || mem_read(p->m, o, h, (size_t)p->sizeof_table) < 0 ||
	    tab_parts(p, h, &asize, &nnode, &node) < 0) {
		p->s->bad++;
		return;
	}
	uint64_t bytes = (uint64_t)p->sizeof_table + (uint64_t)asize * 16 +
			 (uint64_t)nnode * (uint64_t)p->lay->node_size;
	heap_table(p->s, o, bytes, asize, nnode);
	if (heap_object_begin(p->s, o, HEAP_TABLE, bytes, NULL))
		table_edges(p, h, asize, nnode, node);
}

/* 5.3: count the closure's upvalue UV once (32 bytes: v, refcount, union). */
struct uv_key { const struct ph *p; uint64_t a; };
static int uv_eq(const void *ctx, uint32_t i)
{
	const struct uv_key *k = ctx;
	return k->p->uv[i] == k->a;
}

static void add_uv53(struct ph *p, uint64_t a)
{
	if (!ptr_ok(a))
		return;
	struct uv_key k = { p, a };
	uint64_t hh = htab_fnv1a_word(HTAB_FNV_INIT, a);
	size_t pos;
	if (htab_reserve(&p->uvidx) < 0 || array_grow(&p->uv, &p->capuv, p->nuv + 1, sizeof *p->uv) < 0)
		return;
	if (htab_find(&p->uvidx, hh, uv_eq, &k, &pos) >= 0)
		return;
	p->uv[p->nuv] = a;
	htab_insert(&p->uvidx, pos, hh, (uint32_t)p->nuv++);
	heap_add(p->s, HEAP_UPVAL, 32);
}

static void add_closure(struct ph *p, uint64_t o, unsigned tt)
{
	const struct puc_layout *l = p->lay;
	uint8_t h[48];
	if (mem_read(p->m, o, h, 16) < 0) {
		p->s->bad++;
		return;
	}
	unsigned nup = h[l->cl_nupvalues];
	int isC = l->minor == 1 ? h[l->cl_isC] != 0 : tt == l->gct_ccl;
	int64_t ni;
	if (isC) {
		if (heap_object_begin(p->s, o, HEAP_CFUNC, (uint64_t)l->ccl_upvalue + 16u * nup, &ni))
			closure_edges(p, o, tt, ni);
		return;
	}
	if (heap_object_begin(p->s, o, HEAP_LFUNC, (uint64_t)l->lcl_p + 8 + 8u * nup, &ni))
		closure_edges(p, o, tt, ni);
	if (!p->tt_uv && nup) {
		uint64_t uv[256];
		if (mem_read(p->m, o + (uint64_t)l->lcl_p + 8, uv, 8u * nup) == 0)
			for (unsigned i = 0; i < nup; i++)
				add_uv53(p, uv[i]);
	}
}

static void add_proto(struct ph *p, uint64_t o)
{
	const struct puc_layout *l = p->lay;
	uint8_t h[128];
	if (mem_read(p->m, o, h, (size_t)p->sizeof_proto) < 0) {
		p->s->bad++;
		return;
	}
	int32_t nup = (int32_t)g32(h, l->p_sizeupvalues), nk = (int32_t)g32(h, l->p_sizek),
		ncode = (int32_t)g32(h, l->p_sizecode), nline = (int32_t)g32(h, l->p_sizelineinfo),
		np = (int32_t)g32(h, l->p_sizep), nloc = (int32_t)g32(h, l->p_sizelocvars),
		nabs = l->p_sizeabslineinfo >= 0 ? (int32_t)g32(h, l->p_sizeabslineinfo) : 0;
	if (nup < 0 || nk < 0 || ncode < 0 || nline < 0 || np < 0 || nloc < 0 || nabs < 0) {
		p->s->bad++;
		return;
	}
	uint64_t b = (uint64_t)p->sizeof_proto + 4ull * (uint64_t)ncode + 8ull * (uint64_t)np +
		     16ull * (uint64_t)nk + (uint64_t)p->lineinfo_size * (uint64_t)nline +
		     8ull * (uint64_t)nabs + 16ull * (uint64_t)nloc +
		     (uint64_t)l->upval_stride * (uint64_t)nup;
	int64_t ni;
	if (heap_object_begin(p->s, o, HEAP_PROTO, b, &ni))
		proto_edges(p, o, ni);
}

static void add_udata(struct ph *p, uint64_t o)
{
	uint8_t h[48];
	if (mem_read(p->m, o, h, 40) < 0) {
		p->s->bad++;
		return;
	}
	uint64_t len = g64(h, p->udata_len), b;
	if (len > PH_MAX_LEN) {
		p->s->bad++;
		return;
	}
	if (p->lay->minor == 4) {
		unsigned nuv = g16(h, 10);
		b = (nuv == 0 ? 32u : 40u + 16u * nuv) + len;
	} else {
		b = 40 + len;
	}
	if (heap_object_begin(p->s, o, HEAP_UDATA, b, NULL))
		udata_edges(p, o);
}

/* Thread L: lua_State (+ LUAI_EXTRASPACE), its stack, its CallInfos. The
 * main thread is the LG block (lg_size, global_State included). */
static void add_thread(struct ph *p, uint64_t L)
{
	const struct puc_layout *l = p->lay;
	uint8_t lb[256];
	if (l->L_size > (int)sizeof lb || mem_read(p->m, L, lb, (size_t)l->L_size) < 0) {
		p->s->bad++;
		return;
	}
	uint64_t slots;
	uint64_t stack = g64(lb, l->L_stack), last = g64(lb, l->L_stack_last);
	if (p->L_stacksize >= 0)
		slots = g32(lb, p->L_stacksize);
	else
		slots = last >= stack ? (last - stack) / 16 + 5 : 0;  /* 5.4: stacksize + EXTRA_STACK */
	if (slots > PH_MAX_STACK) {
		p->s->bad++;
		return;
	}
	uint64_t ci_bytes = 0;
	if (l->minor == 1) {
		uint32_t size_ci = g32(lb, 92);
		if (size_ci > PH_MAX_CI) {
			p->s->bad++;
			return;
		}
		ci_bytes = (uint64_t)size_ci * (uint64_t)l->ci_size;
	} else {
		/* the CallInfo list after base_ci (luaE_freeCI) */
		uint64_t ci = g64(lb, l->L_base_ci + l->ci_next);
		for (int n = 0; ci && n < PH_MAX_CI; n++) {
			if (!ptr_ok(ci) || rd64(p->m, ci + (uint64_t)l->ci_next, &ci) < 0) {
				p->s->bad++;
				break;
			}
			ci_bytes += (uint64_t)l->ci_size;
		}
	}
	uint64_t self = L == p->mainthread ? (uint64_t)l->lg_size : (uint64_t)(l->lx_l + l->L_size);
	if (heap_object_begin(p->s, L, HEAP_THREAD, self + slots * 16 + ci_bytes, NULL))
		thread_edges(p, L, lb);
	/* 5.1, 5.2: open upvalues hang off the thread (openupval), not allgc */
	if (l->minor <= 2) {
		uint64_t uv = g64(lb, l->minor == 1 ? 152 : 96);
		for (int n = 0; uv && n < PH_MAX_CI; n++) {
			uint8_t h[16];
			if (!ptr_ok(uv) || mem_read(p->m, uv, h, sizeof h) < 0 || h[8] != p->tt_uv) {
				p->s->bad++;
				break;
			}
			heap_object_begin(p->s, uv, HEAP_UPVAL, 40, NULL);   /* open: no references */
			uv = g64(h, 0);
		}
	}
}

/* Count one object at O by its type. Returns -1 when the walk must stop. */
static int add_object(struct ph *p, uint64_t o, unsigned tt)
{
	const struct puc_layout *l = p->lay;
	if (tt == l->gct_sstr || tt == l->gct_lstr) {
		uint8_t h[32];
		if (mem_read(p->m, o, h, 24) < 0) {
			p->s->bad++;
			return 0;
		}
		add_string(p, o, h);
	} else if (tt == l->gct_table) {
		add_table(p, o);
	} else if (tt == l->gct_lcl || tt == l->gct_ccl) {
		add_closure(p, o, tt);
	} else if (tt == 7) {
		add_udata(p, o);
	} else if (tt == 8) {
		add_thread(p, o);
	} else if (tt == p->tt_proto) {
		add_proto(p, o);
	} else if (p->tt_uv && tt == p->tt_uv) {
		if (heap_object_begin(p->s, o, HEAP_UPVAL, 40, NULL))
			upval_edges(p, o);
	} else {
		p->s->bad++;
		return -1;   /* a type we do not know: the list is not trusted past it */
	}
	return p->s->cut ? -1 : 0;
}

/* Walk the list of GC objects from HEAD, linked by 'next' (offset 0).
 * CIRCULAR: a 5.1 tmudata ring (HEAD is its last element). A cycle
 * elsewhere (Brent) or an invalid pointer ends the list. */
static void walk_list(struct ph *p, uint64_t head, int circular)
{
	uint64_t o = head;
	struct heap_cycle cy = HEAP_CYCLE_INIT;
	if (circular && head) {
		if (rd64(p->m, head, &o) < 0)
			return;
	}
	while (o) {
		uint8_t h[16];
		if (!ptr_ok(o) || mem_read(p->m, o, h, sizeof h) < 0) {
			p->s->bad++;
			return;
		}
		uint64_t bad0 = p->s->bad;
		if (add_object(p, o, h[8]) < 0)
			return;
		if (p->live) {
			/* tt at 8, marked at 9, a table's flags at 10; an object
			 * that changed type or failed to validate was freed: the
			 * rest of the list is not trusted */
			uint8_t now[16];
			int rc = heap_recheck(p->s, p->live, o, h, 9, 10, now);
			if (rc < 0 || (rc > 0 && now[8] != h[8]) || p->s->bad > bad0)
				return;
			if (rc > 0)
				memcpy(h, now, sizeof h);
		}
		if (circular && o == head)
			return;
		o = g64(h, 0);
		if (!circular && heap_cycle_seen(&cy, o)) {
			p->s->cut = "a cycle in an object list";
			return;
		}
	}
}

/* 5.1, 5.2: strings hang off the string table's buckets (linked by 'next'). */
static void walk_strt(struct ph *p, uint64_t hash, uint32_t size)
{
	uint64_t b[PH_CHUNK], first, k;
	struct heap_chunks c;
	heap_chunks_init(&c, p->m, hash, size, 8, b, sizeof b);
	while (!p->s->cut && heap_chunk_next(&c, &first, &k))
		for (uint64_t j = 0; j < k; j++)
			if (b[j])
				walk_list(p, b[j], 0);
	if (c.failed)
		p->s->bad++;
}

/* ---- references (the graph's edges) ----------------------------------------- */

/* The GC object a TValue (16 bytes at TV) holds, or 0. */
static uint64_t tv_gc(const struct puc_layout *l, const uint8_t *tv)
{
	unsigned tag = tv_tag(l, tv);
	int gc = l->minor == 1 ? tag >= 4 && tag <= 8 : (tag & 0x40) != 0;
	return gc && ptr_ok(g64(tv, 0)) ? g64(tv, 0) : 0;
}

/* An edge to what TValue TV holds, if anything. */
static void tv_edge(struct ph *p, const uint8_t *tv, int kind, const char *name, int64_t idx)
{
	uint64_t o = tv_gc(p->lay, tv);
	if (o)
		heap_edge(p->s, o, kind, name, idx);
}

/* Edges to the N TValues at A (read in chunks), named KIND NAME, or
 * (KIND HEAP_E_INDEX) by position from BASE. */
static void tvs_edges(struct ph *p, uint64_t a, uint64_t n, int kind, const char *name, int64_t base)
{
	uint8_t buf[PH_CHUNK * 16];
	uint64_t first, k;
	struct heap_chunks c;
	heap_chunks_init(&c, p->m, a, n > HEAP_MAX_TABLE_SLOTS ? HEAP_MAX_TABLE_SLOTS : n, 16, buf, sizeof buf);
	while (heap_chunk_next(&c, &first, &k))
		for (uint64_t i = 0; i < k; i++)
			tv_edge(p, buf + 16 * i, kind, name, base + (int64_t)(first + i));
}

static const char *key_read(void *ctx, uint64_t a)
{
	struct ph *p = ctx;
	return intern_tstring(p->lay, p->m, a);
}

/* The references of a table (its header in H, its parts): metatable,
 * array slots, then each hash node's key (when an object) and value. */
static void table_edges(struct ph *p, const uint8_t *h, uint32_t asize, uint32_t nnode, uint64_t node)
{
	const struct puc_layout *l = p->lay;
	struct heap_state *s = p->s;
	uint8_t buf[PH_CHUNK * 40];
	if (ptr_ok(g64(h, l->t_metatable)))
		heap_edge(s, g64(h, l->t_metatable), HEAP_E_OTHER, heap_metatable_edge, 0);
	tvs_edges(p, g64(h, l->t_array), asize, HEAP_E_INDEX, NULL, 1);
	uint64_t first, n;
	struct heap_chunks c;
	heap_chunks_init(&c, p->m, node, nnode > HEAP_MAX_TABLE_SLOTS ? HEAP_MAX_TABLE_SLOTS : nnode,
			 (size_t)l->node_size, buf, sizeof buf);
	while (heap_chunk_next(&c, &first, &n)) {
		for (uint64_t k = 0; k < n; k++) {
			const uint8_t *nd = buf + (size_t)l->node_size * k;
			uint64_t v = tv_gc(l, nd);
			unsigned kt = l->node_key_tt_size == 1 ? nd[l->node_key_tt] : g32(nd, l->node_key_tt);
			uint64_t kv = g64(nd, l->node_key_val);
			if (tv_tag(l, nd) == l->tag_nil)
				continue;   /* an empty or dead entry */
			int kgc = l->minor == 1 ? kt >= 4 && kt <= 8 : (kt & 0x40) != 0;
			if (kgc && ptr_ok(kv))
				heap_edge(s, kv, HEAP_E_OTHER, "[key]", 0);
			if (!v)
				continue;
			if (kt == l->tag_sstr || kt == l->tag_lstr) {
				const char *name = heap_key_name(s, kv, key_read, p);
				heap_edge(s, v, HEAP_E_KEY, name ? name : "?", 0);
			} else if (l->minor >= 3 && kt == 3) {
				heap_edge(s, v, HEAP_E_INDEX, NULL, (int64_t)kv);
			} else if (l->minor <= 2 && kt == 3) {
				double d;
				memcpy(&d, &kv, 8);
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

/* "chunk:line" of Proto PT (source without its '@' or '='), interned. */
static const char *proto_label(struct ph *p, uint64_t pt)
{
	const struct puc_layout *l = p->lay;
	uint8_t h[128];
	if (!ptr_ok(pt) || mem_read(p->m, pt, h, (size_t)p->sizeof_proto) < 0)
		return "?";
	char src[128];
	int n = read_tstring(l, p->m, g64(h, l->p_source), src, sizeof src - 1);
	const char *c = n > 0 ? src : "?";
	if (*c == '@' || *c == '=')
		c++;
	return internf("%s:%d", c, (int)g32(h, l->p_linedefined));
}

/* Name of upvalue I of Proto PT ("upvalue 'x'"), interned; NULL if none. */
static const char *upval_name(struct ph *p, uint64_t pt, unsigned i)
{
	const struct puc_layout *l = p->lay;
	uint8_t h[128];
	if (!ptr_ok(pt) || mem_read(p->m, pt, h, (size_t)p->sizeof_proto) < 0)
		return NULL;
	uint32_t n = g32(h, l->p_sizeupvalues);
	uint64_t a = g64(h, l->p_upvalues), sa;
	if (i >= n || !ptr_ok(a) || rd64(p->m, a + (uint64_t)l->upval_stride * i, &sa) < 0)
		return NULL;
	const char *nm = intern_tstring(l, p->m, sa);
	return nm ? internf("upvalue '%s'", nm) : NULL;
}

static void closure_edges(struct ph *p, uint64_t o, unsigned tt, int64_t ni)
{
	const struct puc_layout *l = p->lay;
	struct heap_state *s = p->s;
	uint8_t h[48];
	if (mem_read(p->m, o, h, 32) < 0)
		return;
	unsigned nup = h[l->cl_nupvalues];
	int isC = l->minor == 1 ? h[l->cl_isC] != 0 : tt == l->gct_ccl;
	if (l->minor == 1 && ptr_ok(g64(h, 24)))
		heap_edge(s, g64(h, 24), HEAP_E_OTHER, "[env]", 0);
	if (isC) {
		tvs_edges(p, o + (uint64_t)l->ccl_upvalue, nup, HEAP_E_OTHER, "[C upvalue]", 0);
		return;
	}
	uint64_t pt;
	if (rd64(p->m, o + (uint64_t)l->lcl_p, &pt) < 0)
		return;
	if (ptr_ok(pt))
		heap_edge(s, pt, HEAP_E_OTHER, "[prototype]", 0);
	if (s->want_names)
		heap_node_name(s, ni, internf("function %s", proto_label(p, pt)));
	heap_closure(s, pt, (uint64_t)l->lcl_p + 8 + 8u * nup);
	uint64_t uv[256];
	if (!nup || mem_read(p->m, o + (uint64_t)l->lcl_p + 8, uv, 8u * nup) < 0)
		return;
	for (unsigned i = 0; i < nup; i++) {
		if (!ptr_ok(uv[i]))
			continue;
		const char *nm = upval_name(p, pt, i);
		if (!nm)
			nm = "[upvalue]";
		if (p->tt_uv) {
			heap_edge(s, uv[i], HEAP_E_OTHER, nm, 0);
		} else {
			/* 5.3: the UpVal is no object: the closure holds its value */
			uint64_t v;
			uint8_t tv[16];
			if (rd64(p->m, uv[i], &v) == 0 && ptr_ok(v) && mem_read(p->m, v, tv, 16) == 0)
				tv_edge(p, tv, HEAP_E_OTHER, nm, 0);
		}
	}
}

/* A closed upvalue holds its value (v points at its own u.value, +24);
 * an open one points into a stack, which holds the value. */
static void upval_edges(struct ph *p, uint64_t o)
{
	uint8_t h[40];
	if (mem_read(p->m, o, h, 40) < 0)
		return;
	if (g64(h, 16) == o + 24)
		tv_edge(p, h + 24, HEAP_E_OTHER, "[value]", 0);
}

static void proto_edges(struct ph *p, uint64_t o, int64_t ni)
{
	const struct puc_layout *l = p->lay;
	struct heap_state *s = p->s;
	uint8_t h[128];
	if (mem_read(p->m, o, h, (size_t)p->sizeof_proto) < 0)
		return;
	uint32_t nk = g32(h, l->p_sizek), np = g32(h, l->p_sizep), nup = g32(h, l->p_sizeupvalues),
		 nloc = g32(h, l->p_sizelocvars);
	if (ptr_ok(g64(h, l->p_source)))
		heap_edge(s, g64(h, l->p_source), HEAP_E_OTHER, "[source]", 0);
	if (s->want_names)
		heap_node_name(s, ni, internf("prototype %s", proto_label(p, o)));
	tvs_edges(p, g64(h, l->p_k), nk, HEAP_E_OTHER, "[constant]", 0);
	uint64_t buf[PH_CHUNK * 2], first, n;
	struct heap_chunks c;
	heap_chunks_init(&c, p->m, g64(h, l->p_p), np < HEAP_MAX_TABLE_SLOTS ? np : HEAP_MAX_TABLE_SLOTS, 8,
			 buf, sizeof buf);
	while (heap_chunk_next(&c, &first, &n))
		for (uint64_t k = 0; k < n; k++)
			if (ptr_ok(buf[k]))
				heap_edge(s, buf[k], HEAP_E_OTHER, "[inner function]", 0);
	/* debug names: upvalue names (stride 8 or 16) and local names (16) */
	uint64_t ua = g64(h, l->p_upvalues), la = g64(h, l->p_locvars);
	unsigned st = (unsigned)l->upval_stride / 8;
	for (uint32_t j = 0; j < nup && j < PH_CHUNK; j++)
		if (mem_read(p->m, ua + 8ull * st * j, buf, 8) == 0 && ptr_ok(buf[0]))
			heap_edge(s, buf[0], HEAP_E_OTHER, "[debug name]", 0);
	for (uint32_t j = 0; j < nloc && j < PH_CHUNK; j++)
		if (mem_read(p->m, la + 16ull * j, buf, 8) == 0 && ptr_ok(buf[0]))
			heap_edge(s, buf[0], HEAP_E_OTHER, "[debug name]", 0);
}

/* Edges named "local 'x' (chunk:line)" from thread L (LB: its
 * lua_State) to the values of the active locals of its Lua frames: the
 * CallInfo chain (puc_read_chain), each frame's pc and its Proto's
 * locvars (the N-th local active at pc is in slot base + N - 1,
 * luaF_getlocalname). Added before the [stack] edges, so paths name them. */
static void local_edges(struct ph *p, uint64_t L, const uint8_t *lb)
{
	const struct puc_layout *l = p->lay;
	struct vm *vm = p->vm;
	vm->nraw = 0;
	vm->raw_err = 0;
	vm->raw_tid = -1;
	if (puc_read_chain(vm, p->m, L, lb) < 0) {
		vm->nraw = 0;
		return;
	}
	for (int i = 0; i < vm->nraw; i++) {
		const struct puc_raw *r = &vm->raw[i];
		uint8_t cb[128];
		if (!r->lua || l->ci_size > (int)sizeof cb || mem_read(p->m, r->ci, cb, (size_t)l->ci_size) < 0)
			continue;
		struct puc_proto *pr = puc_proto_get(vm, p->m, r->proto);
		if (!pr || !pr->loc || r->savedpc < pr->code_addr + 4)
			continue;
		uint64_t base = l->ci_base >= 0 ? g64(cb, l->ci_base) : g64(cb, l->ci_func) + 16;
		int pc = (int)((r->savedpc - pr->code_addr) / 4) - 1;
		if (pc >= pr->sizecode || !ptr_ok(base))
			continue;
		int n = 0;
		for (int k = 0; k < pr->nloc && pr->loc[k].startpc <= pc && n < 256; k++) {
			if (pc >= pr->loc[k].endpc)
				continue;
			uint8_t tv[16];
			if (pr->loc[k].name && mem_read(p->m, base + 16ull * (uint64_t)n, tv, 16) == 0)
				tv_edge(p, tv, HEAP_E_OTHER,
					internf("local '%s' (%s:%d)", pr->loc[k].name, pr->chunk ? pr->chunk : "?",
						pr->linedefined),
					0);
			n++;
		}
	}
	vm->nraw = 0;
	puc_protos_release(vm);
}

/* The references of thread L (LB: its lua_State). */
static void thread_edges(struct ph *p, uint64_t L, const uint8_t *lb)
{
	const struct puc_layout *l = p->lay;
	struct heap_state *s = p->s;
	local_edges(p, L, lb);
	uint64_t stack = g64(lb, l->L_stack), top = g64(lb, l->L_top);
	if (top > stack && (top - stack) / 16 < PH_MAX_STACK)
		tvs_edges(p, stack, (top - stack) / 16, HEAP_E_OTHER, "[stack]", 0);
	if (l->minor == 1)
		tv_edge(p, lb + 120, HEAP_E_OTHER, "[globals]", 0);
	if (l->minor <= 2) {
		uint64_t uv = g64(lb, l->minor == 1 ? 152 : 96);
		for (int n = 0; uv && n < PH_MAX_CI; n++) {
			heap_edge(s, uv, HEAP_E_OTHER, "[open upvalue]", 0);
			if (!ptr_ok(uv) || rd64(p->m, uv, &uv) < 0)
				break;
		}
	}
}

static void udata_edges(struct ph *p, uint64_t o)
{
	const struct puc_layout *l = p->lay;
	struct heap_state *s = p->s;
	uint8_t h[48];
	if (mem_read(p->m, o, h, 40) < 0)
		return;
	uint64_t mt = g64(h, l->minor == 4 ? 24 : 16);
	if (ptr_ok(mt))
		heap_edge(s, mt, HEAP_E_OTHER, heap_metatable_edge, 0);
	if (l->minor <= 2 && ptr_ok(g64(h, 24))) {
		heap_edge(s, g64(h, 24), HEAP_E_OTHER, "[env]", 0);
	} else if (l->minor == 3) {
		uint8_t tv[16];
		memcpy(tv, h + 32, 8);
		memset(tv + 8, 0, 8);
		tv[8] = h[9];   /* ttuv_ */
		tv_edge(p, tv, HEAP_E_OTHER, "[user value]", 0);
	} else if (l->minor == 4) {
		unsigned nuv = g16(h, 10);
		tvs_edges(p, o + 40, nuv, HEAP_E_OTHER, "[user value]", 0);
	}
}

/* The root's references: _G, the registry, the main thread. */
static void root_edges(struct ph *p, const uint8_t *lb, const uint8_t *gb)
{
	const struct puc_layout *l = p->lay;
	struct heap_state *s = p->s;
	heap_edges_begin(s, 0);
	uint64_t reg = tv_gc(l, gb + l->g_l_registry), globals = 0;
	if (l->minor == 1) {
		globals = tv_gc(l, lb + 120);   /* lua_State.l_gt (5.1) */
	} else if (reg) {
		/* registry[LUA_RIDX_GLOBALS = 2], in the array part */
		uint8_t h[PH_TABLE_MAX], tv[16];
		uint32_t asize, nnode;
		uint64_t node;
		if ((size_t)p->sizeof_table <= sizeof h && mem_read(p->m, reg, h, (size_t)p->sizeof_table) == 0 &&
		    tab_parts(p, h, &asize, &nnode, &node) == 0 && asize >= 2 &&
		    mem_read(p->m, g64(h, l->t_array) + 16, tv, 16) == 0)
			globals = tv_gc(l, tv);
	}
	if (globals)
		heap_edge(s, globals, HEAP_E_ROOT, "_G", 0);
	if (reg)
		heap_edge(s, reg, HEAP_E_ROOT, "registry", 0);
	heap_edge(s, p->L, HEAP_E_ROOT, "main thread", 0);
}

/* ---- one state ---------------------------------------------------------------- */

static int heap_state_walk(struct vm *vm, struct mem *m, struct mem *live, uint64_t L, struct heap_state *s)
{
	const struct puc_layout *l = vm->lay;
	struct ph p;
	memset(&p, 0, sizeof p);
	p.vm = vm;
	p.lay = l;
	p.m = m;
	p.live = live;
	p.s = s;
	p.L = L;
	ph_setup(&p);
	uint8_t lb[256], gb[512];
	if (l->L_size > (int)sizeof lb || mem_read(m, L, lb, (size_t)l->L_size) < 0)
		return -LS_E_FAULT;
	p.g = g64(lb, l->L_l_G);
	if (!ptr_ok(p.g) || mem_read(m, p.g, gb, sizeof gb) < 0)
		return -LS_E_FAULT;
	p.mainthread = g64(gb, l->g_mainthread);
	if (p.mainthread != L)
		return -LS_E_GARBAGE;
	heap_node(s, 0, HEAP_STRTAB, 0);   /* the graph's root */
	root_edges(&p, lb, gb);
	int ag = l->g_allgc;
	if (l->minor == 1) {
		s->vm_bytes = g64(gb, 120);
		s->vm_bytes_how = "totalbytes";
		walk_list(&p, g64(gb, ag), 0);                 /* rootgc: main thread first */
		walk_list(&p, g64(gb, 80), 1);                 /* tmudata ring */
	} else {
		s->vm_bytes = g64(gb, 16) + g64(gb, 24);
		s->vm_bytes_how = "totalbytes + GCdebt";
		add_thread(&p, L);                             /* not in allgc */
		walk_list(&p, g64(gb, ag), 0);
		if (l->minor == 2) {
			walk_list(&p, g64(gb, ag + 8), 0);         /* finobj */
			walk_list(&p, g64(gb, ag + 72), 0);        /* tobefnz */
		} else {
			walk_list(&p, g64(gb, ag + 16), 0);        /* finobj */
			walk_list(&p, g64(gb, ag + 64), 0);        /* tobefnz */
			walk_list(&p, g64(gb, ag + 72), 0);        /* fixedgc */
		}
	}
	uint64_t strt = p.g + (uint64_t)l->g_strt_size - 12;
	uint32_t strt_size = g32(gb, l->g_strt_size);
	if (strt_size <= PH_MAX_STRT) {
		s->count[HEAP_STRTAB] = 1;
		s->bytes[HEAP_STRTAB] = 8ull * strt_size;
		if (l->minor <= 2)
			walk_strt(&p, g64(gb, l->g_strt_size - 12), strt_size);
	} else {
		s->bad++;
	}
	(void)strt;
	/* 5.1, 5.2: global_State.buff, the Mbuffer of concatenation and the
	 * lexer (halved by each collection, lgc.c checkSizes) */
	int buffsize = l->minor == 1 ? 104 : l->minor == 2 ? 232 : -1;
	if (buffsize > 0 && g64(gb, buffsize) < PH_MAX_LEN) {
		s->count[HEAP_VMBUF] = 1;
		s->bytes[HEAP_VMBUF] = g64(gb, buffsize);
	}
	s->not_walked = l->minor == 3 ? "upvalues no closure holds, the VM's small buffers"
				      : "the VM's small buffers";
	for (size_t i = 0; i < s->nfn; i++)
		s->fn[i].label = proto_label(&p, s->fn[i].proto);
	free(p.uv);
	htab_free(&p.uvidx);
	return 0;
}

struct walk_ctx {
	struct vm *vm;
	struct mem *m;
	struct mem *live;   /* HEAP_NONBLOCKING: T's uncached reader */
};

static int state_walk(void *ctx, uint64_t L, struct heap_state *s)
{
	struct walk_ctx *w = ctx;
	return heap_state_walk(w->vm, w->m, w->live, L, s);
}

int puc_heap(struct vm *vm, struct target *t, struct mem *m, unsigned flags, struct heap_state **out)
{
	if (vm->nstates == 0)
		return -LS_E_NOTLUA;
	if (vm->lay->minor == 2 && vm->lay->rel_hi == 0)
		return -LS_E_UNSUPPORTED;   /* 5.2.0's global_State: not described (docs/heap.md) */
	struct walk_ctx w = { vm, m, (flags & HEAP_NONBLOCKING) ? &t->mem.base : NULL };
	return heap_walk_states(vm->states, vm->nstates, flags, state_walk, &w, out);
}
