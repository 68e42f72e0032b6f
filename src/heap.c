/* heap.c: per-state heap totals, the largest-object lists, the path
 * search's bookkeeping and the text summary of `luaspy heap` (heap.h). */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "heap.h"
#include "err.h"
#include "intern.h"
#include "msg.h"
#include "out.h"

const char heap_metatable_edge[] = "[metatable]";

static const char *const type_names[HEAP_NTYPES] = {
	[HEAP_STRING] = "strings",
	[HEAP_TABLE] = "tables",
	[HEAP_LFUNC] = "Lua closures",
	[HEAP_CFUNC] = "C closures",
	[HEAP_PROTO] = "prototypes",
	[HEAP_UPVAL] = "upvalues",
	[HEAP_THREAD] = "threads",
	[HEAP_UDATA] = "userdata",
	[HEAP_CDATA] = "cdata (header only)",
	[HEAP_TRACE] = "traces",
	[HEAP_STRTAB] = "string table",
	[HEAP_VMBUF] = "VM buffers",
};

const char *heap_type_name(int t)
{
	return t >= 0 && t < HEAP_NTYPES ? type_names[t] : "?";
}

void heap_state_init(struct heap_state *s, uint64_t addr)
{
	memset(s, 0, sizeof *s);
	s->addr = addr;
}

void heap_state_free(struct heap_state *s)
{
	free(s->naddr);
	free(s->nself);
	free(s->ntype);
	free(s->nname);
	free(s->fn);
	htab_free(&s->fnidx);
	free(s->efirst);
	free(s->e);
	free(s->pparent);
	free(s->pedge);
	free(s->idom);
	free(s->retained);
	free(s->islot);
	free(s->ew);
	free(s->names);
	htab_free(&s->nameidx);
	free(s->bigidx);
	memset(s, 0, sizeof *s);
}

int heap_add(struct heap_state *s, int t, uint64_t bytes)
{
	if (s->objects >= HEAP_MAX_OBJECTS) {
		s->cut = "more than " "50000000" " objects";
		return -1;
	}
	s->objects++;
	s->count[t]++;
	s->bytes[t] += bytes;
	return 0;
}

void heap_table(struct heap_state *s, uint64_t addr, uint64_t bytes, uint32_t asize, uint32_t hsize)
{
	if (s->nonblocking && s->vm_bytes && bytes > s->vm_bytes)
		return;   /* not believed (nb_implausible counts it) */
	int n = s->ntables;
	if (n == HEAP_TOP && s->tables[n - 1].bytes >= bytes)
		return;
	int i = n < HEAP_TOP ? n : HEAP_TOP - 1;
	while (i > 0 && s->tables[i - 1].bytes < bytes) {
		s->tables[i] = s->tables[i - 1];
		i--;
	}
	s->tables[i] = (struct heap_top_table){ addr, bytes, asize, hsize };
	if (n < HEAP_TOP)
		s->ntables++;
}

int heap_string_wanted(const struct heap_state *s, uint64_t len)
{
	return s->nstrings < HEAP_TOP || s->strings[HEAP_TOP - 1].len < len;
}

void heap_string(struct heap_state *s, uint64_t addr, uint64_t len, uint64_t bytes,
		 const char *preview, int n)
{
	if (!heap_string_wanted(s, len))
		return;
	int i = s->nstrings < HEAP_TOP ? s->nstrings : HEAP_TOP - 1;
	while (i > 0 && s->strings[i - 1].len < len) {
		s->strings[i] = s->strings[i - 1];
		i--;
	}
	struct heap_top_string *e = &s->strings[i];
	e->addr = addr;
	e->len = len;
	e->bytes = bytes;
	e->npreview = n < 0 ? 0 : n > HEAP_STR_PREVIEW ? HEAP_STR_PREVIEW : n;
	memcpy(e->preview, preview, (size_t)e->npreview);
	if (s->nstrings < HEAP_TOP)
		s->nstrings++;
}

/* ---- functions by prototype ----------------------------------------------- */

struct fn_key {
	const struct heap_state *s;
	uint64_t proto;
};

static int fn_eq(const void *ctx, uint32_t i)
{
	const struct fn_key *k = ctx;
	return k->s->fn[i].proto == k->proto;
}

static int64_t fn_find(struct heap_state *s, uint64_t proto, int add)
{
	struct fn_key k = { s, proto };
	uint64_t h = htab_fnv1a_word(HTAB_FNV_INIT, proto);
	size_t pos;
	if (!add)
		return htab_find(&s->fnidx, h, fn_eq, &k, NULL);
	if (htab_reserve(&s->fnidx) < 0 || array_grow(&s->fn, &s->capfn, s->nfn + 1, sizeof *s->fn) < 0)
		return -1;
	int64_t i = htab_find(&s->fnidx, h, fn_eq, &k, &pos);
	if (i >= 0)
		return i;
	s->fn[s->nfn] = (struct heap_fn){ proto, NULL, 0, 0 };
	htab_insert(&s->fnidx, pos, h, (uint32_t)s->nfn);
	return (int64_t)s->nfn++;
}

void heap_closure(struct heap_state *s, uint64_t proto, uint64_t bytes)
{
	int64_t i = fn_find(s, proto, 1);
	if (i < 0)
		return;
	s->fn[i].closures++;
	s->fn[i].bytes += bytes;
}

static int fn_cmp(const void *a, const void *b)
{
	const struct heap_fn *x = a, *y = b;
	if (x->closures != y->closures)
		return x->closures < y->closures ? 1 : -1;
	return x->proto < y->proto ? -1 : x->proto > y->proto;
}

/* ---- the object graph ------------------------------------------------------ */

/* Would a graph of NN nodes and NE references pass S's memory bound?
 * Then S's graph is cut, saying the bound. */
static int over_limit(struct heap_state *s, size_t nn, size_t ne)
{
	uint64_t cost = (uint64_t)nn * (HEAP_COST_NODE + (s->want_names ? HEAP_COST_NAMED : 0)) +
			(uint64_t)ne * HEAP_COST_EDGE;
	if (!s->mem_limit || cost <= s->mem_limit)
		return 0;
	snprintf(s->mem_cut, sizeof s->mem_cut,
		 "the object graph would take more than %" PRIu64 " MiB (--max-memory), cut at %zu objects",
		 (s->mem_limit + (1u << 20) - 1) >> 20, s->nn);
	s->graph_cut = s->mem_cut;
	return 1;
}

int64_t heap_node(struct heap_state *s, uint64_t addr, int type, uint64_t bytes)
{
	if (s->graph_cut)
		return -1;
	if (s->nn >= HEAP_MAX_NODES) {
		s->graph_cut = "more than 40000000 objects";
		return -1;
	}
	if (over_limit(s, s->nn + 1, s->ne))
		return -1;
	if (array_grow(&s->naddr, &s->capn, s->nn + 1, sizeof *s->naddr) < 0 ||
	    array_grow(&s->nself, &s->capself, s->nn + 1, sizeof *s->nself) < 0 ||
	    array_grow(&s->ntype, &s->captype, s->nn + 1, sizeof *s->ntype) < 0 ||
	    (s->want_names && array_grow(&s->nname, &s->capname, s->nn + 1, sizeof *s->nname) < 0)) {
		s->graph_cut = "out of memory";
		return -1;
	}
	if (s->want_names)
		s->nname[s->nn] = NULL;
	s->naddr[s->nn] = addr;
	s->nself[s->nn] = bytes > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)bytes;
	s->ntype[s->nn] = (uint8_t)type;
	return (int64_t)s->nn++;
}

/* --nonblocking: what a walk of a running target may not believe: one
 * object larger than the VM's whole count (freed memory read as an
 * object: skipped, and the walker ends its list), or a walk past twice
 * that count and 16 MiB (the lists changed under it: cut). 1: refused. */
static int nb_implausible(struct heap_state *s, uint64_t bytes)
{
	if (!s->nonblocking || !s->vm_bytes)
		return 0;
	if (bytes > s->vm_bytes) {
		s->bad++;
		return 1;
	}
	uint64_t total = 0;
	for (int t = 0; t < HEAP_NTYPES; t++)
		total += s->bytes[t];
	if (total + bytes > 2 * s->vm_bytes + (16u << 20)) {
		s->cut = "twice the VM's count walked: the lists changed under the walk (--nonblocking)";
		return 1;
	}
	return 0;
}

int64_t heap_object(struct heap_state *s, uint64_t addr, int type, uint64_t bytes)
{
	if (nb_implausible(s, bytes))
		return -1;
	heap_add(s, type, bytes);
	return heap_node(s, addr, type, bytes);
}

int heap_object_begin(struct heap_state *s, uint64_t addr, int type, uint64_t bytes, int64_t *ni)
{
	int64_t i = heap_object(s, addr, type, bytes);
	if (ni)
		*ni = i;
	if (i < 0)
		return 0;
	heap_edges_begin(s, (uint32_t)i);
	return 1;
}

void heap_node_name(struct heap_state *s, int64_t i, const char *name)
{
	if (!s->want_names || i < 0 || (size_t)i >= s->nn)
		return;
	s->nname[i] = name;
}

/* The slot of an address: its bits mixed (murmur3's finalizer), since
 * object addresses share their low bits and come in runs. */
static size_t node_slot(uint64_t addr, size_t mask)
{
	uint64_t h = addr;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return (size_t)h & mask;
}

int64_t heap_node_find(const struct heap_state *s, uint64_t addr)
{
	if (!s->indexed)
		return -1;
	if (!s->icap) {   /* the index is given back once the references are resolved */
		for (size_t i = 0; i < s->nn; i++)
			if (s->naddr[i] == addr)
				return (int64_t)i;
		return -1;
	}
	size_t mask = s->icap - 1;
	for (size_t j = node_slot(addr, mask); s->islot[j]; j = (j + 1) & mask)
		if (s->naddr[s->islot[j] - 1] == addr)
			return (int64_t)s->islot[j] - 1;
	return -1;
}

void heap_edges_begin(struct heap_state *s, uint32_t i)
{
	if (s->graph_cut)
		return;
	if (i < s->ebegun) {
		s->graph_cut = "internal error: edges out of order";
		return;
	}
	if (array_grow(&s->efirst, &s->capfirst, (size_t)i + 1, sizeof *s->efirst) < 0) {
		s->graph_cut = "out of memory";
		return;
	}
	for (size_t k = s->ebegun; k <= i; k++)
		s->efirst[k] = (uint32_t)s->ne;
	s->ebegun = (size_t)i + 1;
}

static int name_eq(const void *ctx, uint32_t i)
{
	const void *const *k = ctx;
	const struct heap_state *s = k[0];
	return s->names[i] == k[1];
}

/* The id of edge name NAME (by pointer: interned or static), added when
 * new; 0 for NULL; -1 out of memory. */
static int64_t name_id(struct heap_state *s, const char *name)
{
	if (!name)
		return 0;
	size_t c = (size_t)((uintptr_t)name >> 3) & (HEAP_NAMECACHE - 1);
	if (s->nc_name[c] == name)
		return s->nc_id[c];
	if (!s->nnames) {   /* id 0: no name */
		if (array_grow(&s->names, &s->capnames, 1, sizeof *s->names) < 0)
			return -1;
		s->names[s->nnames++] = NULL;
	}
	const void *k[2] = { s, name };
	uint64_t h = htab_fnv1a_word(HTAB_FNV_INIT, (uint64_t)(uintptr_t)name);
	size_t pos;
	if (htab_reserve(&s->nameidx) < 0 ||
	    array_grow(&s->names, &s->capnames, s->nnames + 1, sizeof *s->names) < 0)
		return -1;
	int64_t i = htab_find(&s->nameidx, h, name_eq, k, &pos);
	if (i < 0) {
		i = (int64_t)s->nnames;
		s->names[s->nnames++] = name;
		htab_insert(&s->nameidx, pos, h, (uint32_t)i);
	}
	s->nc_name[c] = name;
	s->nc_id[c] = (uint32_t)i;
	return i;
}

void heap_edge(struct heap_state *s, uint64_t to, int kind, const char *name, int64_t idx)
{
	if (s->graph_cut)
		return;
	if (s->ne >= HEAP_MAX_EDGES) {
		s->graph_cut = "more than 200000000 references";
		return;
	}
	if (over_limit(s, s->nn, s->ne + 1))
		return;
	if (array_grow(&s->ew, &s->capew, 3 * (s->ne + 1), sizeof *s->ew) < 0) {
		s->graph_cut = "out of memory";
		return;
	}
	int64_t v;
	if (kind != HEAP_E_INDEX) {
		v = name_id(s, name);
	} else if (idx >= 0 && idx < (int64_t)HEAP_BIGIDX) {
		v = idx;
	} else {
		v = -1;
		if (array_grow(&s->bigidx, &s->capbigidx, s->nbigidx + 1, sizeof *s->bigidx) == 0) {
			s->bigidx[s->nbigidx] = idx;
			v = (int64_t)(HEAP_BIGIDX | s->nbigidx++);
		}
	}
	if (v < 0 || v > UINT32_MAX) {
		s->graph_cut = "out of memory";
		return;
	}
	/* addresses of objects are below 2^62 (tv_gc, lh_ptr_ok check it) */
	uint64_t a = (to & ((1ull << 62) - 1)) | (uint64_t)kind << 62;
	uint32_t *w = &s->ew[3 * s->ne];
	w[0] = (uint32_t)a;
	w[1] = (uint32_t)(a >> 32);
	w[2] = (uint32_t)v;
	s->ne++;
}

/* Index the nodes by address; a node met twice is dropped with its
 * references (the first keeps its own). Then the references become
 * struct heap_edge with node indices, in place of the walk's pairs;
 * those to no node are dropped (edges_lost). 0 or -1 (out of memory:
 * graph_cut). Runs once, after the walk. */
static int graph_index(struct heap_state *s)
{
	size_t n = s->nn, cap = 256;
	while (cap < n + n / 3 + 1)   /* at most 3/4 full */
		cap <<= 1;
	uint32_t *slot = calloc(cap, sizeof *slot);
	if (!slot) {
		s->graph_cut = "out of memory";
		return -1;
	}
	/* the CSR start of every node: nodes never begun have no edges */
	if (array_grow(&s->efirst, &s->capfirst, n + 1, sizeof *s->efirst) < 0) {
		free(slot);
		s->graph_cut = "out of memory";
		return -1;
	}
	for (size_t i = s->ebegun; i <= n; i++)
		s->efirst[i] = (uint32_t)s->ne;
	s->ebegun = n;
	size_t mask = cap - 1, nn = 0, ne = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t a = s->naddr[i];
		size_t j = node_slot(a, mask);
		int dup = 0;
		for (; slot[j]; j = (j + 1) & mask)
			if (s->naddr[slot[j] - 1] == a) {
				dup = 1;
				break;
			}
		uint32_t e0 = s->efirst[i], e1 = s->efirst[i + 1];
		if (dup) {
			s->dups++;
			continue;
		}
		/* keep node i as node nn, its edges from ne on */
		s->naddr[nn] = a;
		s->nself[nn] = s->nself[i];
		s->ntype[nn] = s->ntype[i];
		if (s->nname)
			s->nname[nn] = s->nname[i];
		s->efirst[nn] = (uint32_t)ne;
		if (ne != e0)
			memmove(&s->ew[3 * ne], &s->ew[3 * (size_t)e0], (e1 - e0) * 3 * sizeof *s->ew);
		ne += e1 - e0;
		slot[j] = (uint32_t)nn + 1;
		nn++;
	}
	s->nn = nn;
	s->efirst[nn] = (uint32_t)ne;
	s->ne = ne;
	s->ebegun = nn;
	s->islot = slot;
	s->icap = cap;
	s->indexed = 1;
	/* the references: to node indices, those to no node dropped, each
	 * 12-byte triple rewritten as an 8-byte edge at or below it */
	struct heap_edge *out = (struct heap_edge *)(void *)s->ew;
	size_t k = 0;
	for (size_t v = 0; v < nn; v++) {
		uint32_t e0 = s->efirst[v], e1 = s->efirst[v + 1];
		s->efirst[v] = (uint32_t)k;
		for (uint32_t j = e0; j < e1; j++) {
			const uint32_t *w = &s->ew[3 * (size_t)j];
			uint64_t a = (uint64_t)w[1] << 32 | w[0];
			uint32_t val = w[2];
			int64_t t = heap_node_find(s, a & ((1ull << 62) - 1));
			if (t < 0) {
				s->edges_lost++;
				continue;
			}
			out[k].tk = (uint32_t)t << 2 | (uint32_t)(a >> 62);
			out[k].v = val;
			k++;
		}
	}
	s->efirst[nn] = (uint32_t)k;
	s->ne = k;
	/* the index is no longer needed for lookups by the thousand: the
	 * summary's few (heap_node_find) scan the addresses */
	free(s->islot);
	s->islot = NULL;
	s->icap = 0;
	/* give back the rest: the edges take 8 of every 12 bytes, or none */
	if (k) {
		void *e = realloc(s->ew, k * sizeof *s->e);
		s->e = e ? e : (void *)s->ew;
	} else {
		free(s->ew);
		s->e = NULL;
	}
	s->ew = NULL;
	s->capew = 0;
	return 0;
}

#define NONE UINT32_MAX

static int bymt_cmp(const void *a, const void *b)
{
	const struct heap_bymt *x = a, *y = b;
	return x->mt < y->mt ? -1 : x->mt > y->mt;
}

/* Shortest paths from the root, breadth first, edges in order: PP[v]
 * the parent, PE[v] the edge (NONE: unreached); QUEUE has room for nn. */
static void shortest_paths(const struct heap_state *s, uint32_t *pp, uint32_t *pe, uint32_t *queue)
{
	size_t n = s->nn;
	const uint32_t *ef = s->efirst;
	for (size_t i = 0; i < n; i++)
		pp[i] = pe[i] = NONE;
	size_t qh = 0, qt = 0;
	pp[0] = 0;
	queue[qt++] = 0;
	while (qh < qt) {
		uint32_t v = queue[qh++];
		for (uint32_t k = ef[v]; k < ef[v + 1]; k++) {
			uint32_t w = heap_edge_to(&s->e[k]);
			if (pp[w] != NONE)
				continue;
			pp[w] = v;
			pe[w] = k;
			queue[qt++] = w;
		}
	}
}

/* The largest retainers: reached objects (not the root) by retained
 * size RET (DOM: NONE when unreached), into s->top; ties in node order. */
static void top_retainers(struct heap_state *s, const uint64_t *ret, const uint32_t *dom)
{
	s->ntop = 0;
	for (uint32_t w = 1; w < s->nn; w++) {
		if (dom[w] == NONE)
			continue;
		int m = s->ntop;
		if (m == HEAP_TOP_RETAINERS && ret[s->top[m - 1]] >= ret[w])
			continue;
		int j = m < HEAP_TOP_RETAINERS ? m : HEAP_TOP_RETAINERS - 1;
		while (j > 0 && ret[s->top[j - 1]] < ret[w]) {
			s->top[j] = s->top[j - 1];
			j--;
		}
		s->top[j] = w;
		if (m < HEAP_TOP_RETAINERS)
			s->ntop++;
	}
}

/* Tables and userdata by metatable, into s->bymt: own bytes summed per metatable;
 * MIX numbers the metatables met (few: one per class), their sums in
 * a small array */
static void by_metatable(struct heap_state *s)
{
	size_t n = s->nn;
	const uint32_t *ef = s->efirst;
	uint32_t *mix = malloc(n * sizeof *mix);
	struct heap_bymt *mt = NULL;
	size_t nmt = 0, capmt = 0;
	int ok = mix != NULL;
	for (size_t i = 0; ok && i < n; i++)
		mix[i] = NONE;
	for (size_t v = 1; ok && v < n; v++)
		for (uint32_t k = ef[v]; k < ef[v + 1]; k++) {
			if (heap_edge_name(s, &s->e[k]) != heap_metatable_edge)
				continue;
			uint32_t m = heap_edge_to(&s->e[k]);
			if (mix[m] == NONE) {
				if (array_grow(&mt, &capmt, nmt + 1, sizeof *mt) < 0) {
					ok = 0;
					break;
				}
				mt[nmt] = (struct heap_bymt){ m, 0, 0, 0 };
				mix[m] = (uint32_t)nmt++;
			}
			struct heap_bymt *b = &mt[mix[m]];
			b->bytes += s->nself[v];
			if (s->ntype[v] == HEAP_UDATA)
				b->udata++;
			else
				b->tables++;
			break;
		}
	/* in node order, as ties were always broken */
	if (ok && nmt)   /* (none: MT is NULL, which qsort must not get) */
		qsort(mt, nmt, sizeof *mt, bymt_cmp);
	s->nbymt = 0;
	for (size_t i = 0; ok && i < nmt; i++) {
		int c = s->nbymt;
		if (c == HEAP_TOP && s->bymt[c - 1].bytes >= mt[i].bytes)
			continue;
		int j = c < HEAP_TOP ? c : HEAP_TOP - 1;
		while (j > 0 && s->bymt[j - 1].bytes < mt[i].bytes) {
			s->bymt[j] = s->bymt[j - 1];
			j--;
		}
		s->bymt[j] = mt[i];
		if (c < HEAP_TOP)
			s->nbymt++;
	}
	free(mix);
	free(mt);
}

/* The dominators are computed by the semi-NCA variant of Lengauer and
 * Tarjan's algorithm (Georgiadis, "Linear-Time Algorithms for Dominators
 * and Related Problems", thesis, 2005; the form LLVM's
 * GenericDomTreeConstruction.h runs): semidominators as Lengauer-Tarjan
 * computes them, then each immediate dominator as the nearest common
 * ancestor, in the dominator tree built so far, of the object's
 * depth-first parent and its semidominator. It needs no buckets, and all
 * of it runs on the depth-first numbers ("numbers" below: 0 .. ND - 1,
 * the root 0), the node indices coming back at the end. Memory,
 * docs/heap.md §7: 16 bytes per object and 4 per reference listed at
 * once, then 20 for a second depth-first search. */

/* Depth-first numbering from the root, iterative: DFN[v] the number of
 * node v (all NONE on entry: unreached stays so), VERTEX[i] the node of
 * number i, PARENT[i] the number of its parent in the tree (NONE for the
 * root); CUR[i] (N entries) the next edge of the node of number i, which
 * is all the stack needs: the path is the chain of parents. Returns how
 * many were reached. */
static uint32_t dfs_number(const struct heap_state *s, uint32_t *dfn, uint32_t *vertex,
			   uint32_t *parent, uint32_t *cur)
{
	const uint32_t *ef = s->efirst;
	uint32_t nd = 1, i = 0;   /* I: the number of the node on top */
	dfn[0] = 0;
	vertex[0] = 0;
	parent[0] = NONE;
	cur[0] = ef[0];
	while (i != NONE) {
		uint32_t v = vertex[i];
		if (cur[i] >= ef[v + 1]) {
			i = parent[i];
			continue;
		}
		uint32_t w = heap_edge_to(&s->e[cur[i]++]);
		if (dfn[w] != NONE)
			continue;
		dfn[w] = nd;
		vertex[nd] = w;
		parent[nd] = i;
		cur[nd] = ef[w];
		i = nd++;
	}
	return nd;
}

/* The predecessors that Lengauer-Tarjan's EVAL must see, by number, as
 * CSR: PFIRST[i] .. PFIRST[i + 1] index *PRED, the numbers above i of
 * the objects with a reference to the object of number i, in no order
 * (PFIRST: ND + 1 entries). A predecessor numbered below i (the tree's
 * parent among them) brings its own number, which EVAL would return:
 * FWD[i] gets the least of them instead of a list (4 bytes per
 * reference saved on every tree edge and forward edge). Only reached
 * objects hold references to reached ones, and all of theirs are. 0,
 * or -1: no memory. */
static int graph_preds(const struct heap_state *s, const uint32_t *dfn, uint32_t nd, uint32_t *pfirst,
		       uint32_t **pred, uint32_t *fwd)
{
	const uint32_t *ef = s->efirst;
	size_t n = s->nn;
	memset(pfirst, 0, ((size_t)nd + 1) * sizeof *pfirst);
	for (uint32_t i = 0; i < nd; i++)
		fwd[i] = NONE;
	for (size_t v = 0; v < n; v++) {
		uint32_t i = dfn[v];
		if (i == NONE)
			continue;
		for (uint32_t k = ef[v]; k < ef[v + 1]; k++) {
			uint32_t t = dfn[heap_edge_to(&s->e[k])];
			if (t > i && i < fwd[t])
				fwd[t] = i;
			else if (t < i)
				pfirst[t]++;
		}
	}
	/* PFIRST[i]: the end of i's list, then filled from its end down to
	 * its start */
	for (uint32_t i = 1; i <= nd; i++)
		pfirst[i] += pfirst[i - 1];
	uint32_t *pr = malloc(((size_t)pfirst[nd] + 1) * sizeof *pr);
	if (!pr)
		return -1;
	for (size_t v = 0; v < n; v++) {
		uint32_t i = dfn[v];
		if (i == NONE)
			continue;
		for (uint32_t k = ef[v]; k < ef[v + 1]; k++) {
			uint32_t t = dfn[heap_edge_to(&s->e[k])];
			if (t < i)
				pr[--pfirst[t]] = i;
		}
	}
	*pred = pr;
	return 0;
}

/* Lengauer-Tarjan's EVAL over numbers: the least semidominator on the
 * path of linked objects from V up to (not including) the first object
 * not linked yet; V itself when V is not linked (its semidominator is
 * still its number). ANC[u]: the object U is linked to (NONE: not
 * linked), shortened by path halving; BEST[u]: the least semidominator
 * from U up to (not including) ANC[u], which halving keeps true with
 * no stack. */
static uint32_t snca_eval(uint32_t v, uint32_t *anc, uint32_t *best)
{
	uint32_t m = v;
	for (uint32_t u = v; anc[u] != NONE; u = anc[u]) {
		uint32_t a = anc[u];
		if (anc[a] != NONE) {
			if (best[a] < best[u])
				best[u] = best[a];
			anc[u] = anc[a];
		}
		if (best[u] < m)
			m = best[u];
	}
	return m;
}

/* Semi-NCA over the ND reached objects: IDOM[i] enters as the number of
 * i's depth-first parent and leaves as that of its immediate dominator
 * (IDOM[0] = 0); PFIRST/PRED the predecessors numbered above and BEST
 * the least one below (graph_preds), PFIRST spent: each object's
 * semidominator is kept over the start of the next one's list once its
 * own list is read; ANC (ND entries) scratch. 0, or -1 when the climbs
 * took too many steps (IDOM is then spent: Lengauer-Tarjan's turn). */
static int snca_idoms(uint32_t nd, uint32_t *idom, uint32_t *pfirst, const uint32_t *pred,
		      uint32_t *anc, uint32_t *best)
{
	/* the climbs below: one or two steps per object on heaps, but as
	 * many as the dominator tree is deep for an object whose parent is
	 * deep and whose semidominator is not (a long list ending in many
	 * objects also held from above it): past this many steps, -1 */
	uint64_t budget = 16 * ((uint64_t)nd + pfirst[nd]) + (1u << 24);
	uint32_t *semi = pfirst + 1;   /* semi[i] over pfirst[i + 1], once i's list is read */
	for (uint32_t i = 0; i < nd; i++)
		anc[i] = NONE;
	for (uint32_t i = nd; i-- > 1;) {
		uint32_t sw = best[i];   /* at most the parent's number */
		for (uint32_t k = pfirst[i]; k < pfirst[i + 1]; k++) {
			uint32_t u = snca_eval(pred[k], anc, best);
			if (u < sw)
				sw = u;
		}
		semi[i] = sw;
		best[i] = sw;
		anc[i] = idom[i];
	}
	/* the nearest common ancestor of the parent and the semidominator:
	 * up from the parent, in the tree of the objects numbered before */
	idom[0] = 0;
	for (uint32_t i = 1; i < nd; i++) {
		uint32_t c = idom[i];
		while (c > semi[i]) {
			c = idom[c];
			if (!budget--)
				return -1;
		}
		idom[i] = c;
	}
	return 0;
}

/* ---- Lengauer-Tarjan, the fallback of semi-NCA ---- */

/* Lengauer-Tarjan's EVAL with path compression, iterative: the vertex
 * of least semi on the path from V up to the forest root. */
static uint32_t lt_eval(uint32_t v, uint32_t *anc, uint32_t *label, const uint32_t *semi,
			uint32_t *stack)
{
	if (anc[v] == NONE)
		return v;
	/* compress: the chain of ancestors that have ancestors */
	size_t n = 0;
	for (uint32_t u = v; anc[anc[u]] != NONE; u = anc[u])
		stack[n++] = u;
	while (n > 0) {
		uint32_t u = stack[--n];
		if (semi[label[anc[u]]] < semi[label[u]])
			label[u] = label[anc[u]];
		anc[u] = anc[anc[u]];
	}
	return label[v];
}

/* lt_idoms's depth-first numbering from the root, iterative (STK, STKE: room for
 * nn): DFN[v] (NONE on entry for all: unreached stays so), VERTEX in
 * that order, PARENT in the tree. Returns how many were reached. */
static uint32_t lt_dfs_number(const struct heap_state *s, uint32_t *dfn, uint32_t *vertex,
			   uint32_t *parent, uint32_t *stk, uint32_t *stke)
{
	const uint32_t *ef = s->efirst;
	uint32_t nd = 0;
	size_t sp = 0;
	dfn[0] = nd;
	vertex[nd++] = 0;
	parent[0] = NONE;
	stk[sp] = 0;
	stke[sp++] = ef[0];
	while (sp > 0) {
		uint32_t v = stk[sp - 1];
		if (stke[sp - 1] >= ef[v + 1]) {
			sp--;
			continue;
		}
		uint32_t w = heap_edge_to(&s->e[stke[sp - 1]++]);
		if (dfn[w] != NONE)
			continue;
		dfn[w] = nd;
		vertex[nd++] = w;
		parent[w] = v;
		stk[sp] = w;
		stke[sp++] = ef[w];
	}
	return nd;
}

/* lt_idoms's predecessors of the reached objects (DFN[v] != NONE) of S as CSR:
 * PFIRST (N + 1 entries, zeroed) and *PRED; FILL (N entries) is
 * scratch. 0, or -1: no memory. */
static int lt_preds(const struct heap_state *s, const uint32_t *dfn, uint32_t *pfirst,
		       uint32_t **pred, uint32_t *fill)
{
	size_t n = s->nn;
	const uint32_t *ef = s->efirst;
	for (size_t v = 0; v < n; v++)
		if (dfn[v] != NONE)
			for (uint32_t k = ef[v]; k < ef[v + 1]; k++)
				pfirst[heap_edge_to(&s->e[k]) + 1]++;
	for (size_t i = 0; i < n; i++)
		pfirst[i + 1] += pfirst[i];
	uint32_t *pr = malloc(((size_t)pfirst[n] + 1) * sizeof *pr);
	if (!pr)
		return -1;
	memcpy(fill, pfirst, n * sizeof *fill);
	for (size_t v = 0; v < n; v++)
		if (dfn[v] != NONE)
			for (uint32_t k = ef[v]; k < ef[v + 1]; k++)
				pr[fill[heap_edge_to(&s->e[k])]++] = (uint32_t)v;
	*pred = pr;
	return 0;
}

/* Lengauer-Tarjan (iterative, path compression) over the N objects, ND
 * of them reached in depth-first order VERTEX with PARENT, SEMI their
 * depth-first numbers (turned into semidominators), the predecessors
 * PFIRST/PRED, STK scratch: IDOM (N entries) the immediate dominators,
 * NONE where unreached. 0, or -1: no memory. */
static int lt_idoms(size_t n, uint32_t nd, const uint32_t *vertex, const uint32_t *parent,
		       uint32_t *semi, const uint32_t *pfirst, const uint32_t *pred, uint32_t *stk,
		       uint32_t *idom)
{
	uint32_t *label = malloc(n * sizeof *label), *anc = malloc(n * sizeof *anc),
		 *bhead = malloc(n * sizeof *bhead), *bnext = malloc(n * sizeof *bnext);
	int rc = -1;
	if (!label || !anc || !bhead || !bnext)
		goto out;
	for (size_t i = 0; i < n; i++) {
		anc[i] = NONE;
		bhead[i] = NONE;
		idom[i] = NONE;
		label[i] = (uint32_t)i;
	}
	/* semidominators in reverse DFS order, then idoms */
	for (uint32_t i = nd; i-- > 1;) {
		uint32_t w = vertex[i];
		for (uint32_t k = pfirst[w]; k < pfirst[w + 1]; k++) {
			uint32_t u = lt_eval(pred[k], anc, label, semi, stk);
			if (semi[u] < semi[w])
				semi[w] = semi[u];
		}
		uint32_t sw = vertex[semi[w]];
		bnext[w] = bhead[sw];
		bhead[sw] = w;
		uint32_t p = parent[w];
		anc[w] = p;
		for (uint32_t v = bhead[p]; v != NONE;) {
			uint32_t nx = bnext[v];
			uint32_t u = lt_eval(v, anc, label, semi, stk);
			idom[v] = semi[u] < semi[v] ? u : p;
			v = nx;
		}
		bhead[p] = NONE;
	}
	for (uint32_t i = 1; i < nd; i++) {
		uint32_t w = vertex[i];
		if (idom[w] != vertex[semi[w]])
			idom[w] = idom[idom[w]];
	}
	idom[0] = 0;
	rc = 0;
out:
	free(label); free(anc); free(bhead); free(bnext);
	return rc;
}

/* graph_idoms by Lengauer and Tarjan's own form (40 bytes per object
 * and 4 per reference at once; O(m log n) on every shape): when
 * semi-NCA's climbs exceed their budget. */
static uint32_t *graph_idoms_lt(struct heap_state *s, uint32_t **vertexp, uint32_t *ndp)
{
	size_t n = s->nn;
	/* past --max-memory (HEAP_COST_NODE counts on semi-NCA): cut */
	uint64_t cost = (uint64_t)n * (HEAP_COST_NODE_LT + (s->want_names ? HEAP_COST_NAMED : 0)) +
			(uint64_t)s->ne * HEAP_COST_EDGE;
	if (s->mem_limit && cost > s->mem_limit) {
		snprintf(s->mem_cut, sizeof s->mem_cut,
			 "the dominators of this graph's shape would take more than %" PRIu64
			 " MiB (--max-memory)", (s->mem_limit + (1u << 20) - 1) >> 20);
		s->graph_cut = s->mem_cut;
		return NULL;
	}
	uint32_t *semi = malloc(n * sizeof *semi), *vertex = malloc(n * sizeof *vertex),
		 *parent = malloc(n * sizeof *parent), *stk = malloc(n * sizeof *stk),
		 *stke = malloc(n * sizeof *stke), *pfirst = calloc(n + 1, sizeof *pfirst);
	uint32_t *pred = NULL, *idom = NULL;
	if (!semi || !vertex || !parent || !stk || !stke || !pfirst)
		goto nomem;
	for (size_t i = 0; i < n; i++)
		semi[i] = NONE;
	uint32_t nd = lt_dfs_number(s, semi, vertex, parent, stk, stke);
	if (lt_preds(s, semi, pfirst, &pred, stke) < 0 || !(idom = malloc(n * sizeof *idom)) ||
	    lt_idoms(n, nd, vertex, parent, semi, pfirst, pred, stk, idom) < 0)
		goto nomem;
	*vertexp = vertex;
	*ndp = nd;
	vertex = NULL;
	goto out;
nomem:
	free(idom);
	idom = NULL;
out:
	free(semi); free(vertex); free(parent); free(stk); free(stke); free(pfirst); free(pred);
	return idom;
}

/* Immediate dominators of S's objects (N entries, malloc'ed, NONE where
 * unreached; NULL: no memory, or S->graph_cut set); *VERTEXP the nodes in depth-first order
 * (N entries, malloc'ed) and *NDP how many were reached. */
static uint32_t *graph_idoms(struct heap_state *s, uint32_t **vertexp, uint32_t *ndp)
{
	size_t n = s->nn;
	uint32_t *dfn = malloc(n * sizeof *dfn), *vertex = malloc(n * sizeof *vertex),
		 *parent = malloc(n * sizeof *parent), *pfirst = malloc((n + 1) * sizeof *pfirst);
	uint32_t *pred = NULL, *best = NULL, *idom = NULL;
	if (!dfn || !vertex || !parent || !pfirst)
		goto out;
	for (size_t i = 0; i < n; i++)
		dfn[i] = NONE;
	uint32_t nd = dfs_number(s, dfn, vertex, parent, pfirst);
	/* VERTEX is not needed until the end: the same search gives it
	 * again then, when the predecessors are gone (4 bytes per object
	 * less at the peak for a second search's time) */
	free(vertex);
	vertex = NULL;
	if (!(best = malloc(n * sizeof *best)) || graph_preds(s, dfn, nd, pfirst, &pred, best) < 0)
		goto out;
	/* DFN is spent: its room is ANC */
	int rc = snca_idoms(nd, parent, pfirst, pred, dfn, best);
	free(pred); free(best);
	pred = best = NULL;
	if (rc < 0) {
		free(parent); free(pfirst); free(dfn);
		return graph_idoms_lt(s, vertexp, ndp);
	}
	/* PARENT holds the dominators by number: the search again, with
	 * other scratch for its parents */
	uint32_t *par2 = malloc(n * sizeof *par2);
	if (!par2 || !(vertex = malloc(n * sizeof *vertex))) {
		free(par2);
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		dfn[i] = NONE;
	dfs_number(s, dfn, vertex, par2, pfirst);
	free(par2); free(pfirst); free(dfn);
	par2 = pfirst = dfn = NULL;
	if (!(idom = malloc(n * sizeof *idom)))
		goto out;
	for (size_t i = 0; i < n; i++)
		idom[i] = NONE;
	for (uint32_t i = 0; i < nd; i++)
		idom[vertex[i]] = vertex[parent[i]];
	*vertexp = vertex;
	*ndp = nd;
	vertex = NULL;
out:
	free(dfn); free(vertex); free(parent); free(pfirst); free(pred); free(best);
	return idom;
}

/* Retained sizes of S's objects (N entries, malloc'ed; NULL: no memory)
 * from IDOM (NONE: unreached), in reverse depth-first order (VERTEX, ND
 * reached) so each object comes before its dominator; the unreached
 * ones counted in S. */
static uint64_t *graph_retained(struct heap_state *s, const uint32_t *vertex, uint32_t nd,
				const uint32_t *idom)
{
	size_t n = s->nn;
	uint64_t *ret = malloc(n * sizeof *ret);
	if (!ret)
		return NULL;
	s->unreached = n - nd;
	s->unreached_bytes = 0;
	for (size_t i = 0; i < n; i++) {
		ret[i] = idom[i] == NONE ? 0 : s->nself[i];
		if (idom[i] == NONE)
			s->unreached_bytes += s->nself[i];
	}
	for (uint32_t i = nd; i-- > 1;) {
		uint32_t w = vertex[i];
		ret[idom[w]] += ret[w];
	}
	return ret;
}

int heap_graph_finish(struct heap_state *s)
{
	if (s->nn == 0 || s->nn > NONE - 1) {
		if (!s->graph_cut)
			s->graph_cut = "no objects";
		return -1;
	}
	/* the index is built even for a cut graph: the summary finds its
	 * largest tables by address */
	if (!s->indexed && graph_index(s) < 0)
		return -1;
	size_t n = s->nn;
	if (s->graph_cut)
		return -1;
	/* the dominators (16 bytes per object and 4 per reference listed
	 * while they run, 20 for the second search, 8 kept with the
	 * depth-first order), then the retained
	 * sizes (8 kept) and the shortest paths (8 kept, the depth-first
	 * order their queue). An iteration over successors
	 * (Cooper-Harvey-Kennedy) needs less but is quadratic on a long
	 * list whose nodes share a referent (a class, a metatable). */
	uint32_t *vertex = NULL, *idom = NULL, *pp = NULL, *pe = NULL, nd = 0;
	uint64_t *ret = NULL;
	int rc = -1;
	if (!(idom = graph_idoms(s, &vertex, &nd)) || !(ret = graph_retained(s, vertex, nd, idom)))
		goto nomem;
	top_retainers(s, ret, idom);
	by_metatable(s);
	pp = malloc(n * sizeof *pp);
	pe = malloc(n * sizeof *pe);
	if (!pp || !pe)
		goto nomem;
	shortest_paths(s, pp, pe, vertex);
	s->pparent = pp;
	s->pedge = pe;
	s->idom = idom;
	s->retained = ret;
	pp = pe = idom = NULL;
	ret = NULL;
	rc = 0;
	goto out;
nomem:
	if (!s->graph_cut)   /* (or the fallback's --max-memory) */
		s->graph_cut = "out of memory";
out:
	free(vertex); free(idom); free(pp); free(pe); free(ret);
	return rc;
}

static int is_ident(const char *k)
{
	if (!*k || isdigit((unsigned char)*k))
		return 0;
	for (const char *c = k; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_')
			return 0;
	return 1;
}

/* The text of edge E (FIRST: the path's first segment). */
static void seg_text(const struct heap_state *s, const struct heap_edge *e, int first, char *out, size_t len, int collapse)
{
	/* a table key is cut at 63 bytes; any other name ("local 'buf'
	 * (/a/long/path/w.lua:30)", upvalues) keeps both ends, so that the
	 * line at its end survives a long chunk name */
	char c[64], w[256];
	const char *name = "?", *en = heap_edge_name(s, e);
	int kind = heap_edge_kind(e);
	int cut = 0;
	if (en && kind == HEAP_E_KEY) {
		name = out_clean(en, c, sizeof c, 0);
		cut = strnlen(en, sizeof c) >= sizeof c - 1;
	} else if (en) {
		out_clean(en, w, sizeof w, 0);
		size_t wl = strlen(w);
		if (wl > 100) { /* about the first 40 bytes, "...", the last 57 */
			size_t head = 40, tail = wl - 57;
			while (head > 0 && ((unsigned char)w[head] & 0xc0) == 0x80)
				head--; /* whole UTF-8 characters only */
			while (tail < wl && ((unsigned char)w[tail] & 0xc0) == 0x80)
				tail++;
			memcpy(w + head, "...", 3);
			memmove(w + head + 3, w + tail, wl - tail + 1);
		}
		name = w;
	}
	switch (kind) {
	case HEAP_E_ROOT:
		snprintf(out, len, "%s%s", first ? "" : " > ", name);
		break;
	case HEAP_E_KEY:
		if (is_ident(en) && !cut) {
			snprintf(out, len, ".%s", en);
		} else {
			/* quoted like Lua source: quotes and backslashes escaped */
			char q[140];
			size_t j = 0;
			for (const char *p = name; *p && j + 3 < sizeof q; p++) {
				if (*p == '"' || *p == '\\')
					q[j++] = '\\';
				q[j++] = *p;
			}
			q[j] = 0;
			snprintf(out, len, "[\"%s%s\"]", q, cut ? "..." : "");
		}
		break;
	case HEAP_E_INDEX:
		if (collapse)
			snprintf(out, len, "[*]");
		else
			snprintf(out, len, "[%" PRId64 "]", heap_edge_idx(s, e));
		break;
	default:
		snprintf(out, len, " > %s", name);
		break;
	}
}

static int node_path(const struct heap_state *s, uint32_t i, char *buf, size_t len, int collapse);

int heap_node_path(const struct heap_state *s, uint32_t i, char *buf, size_t len)
{
	return node_path(s, i, buf, len, 0);
}

static int node_path(const struct heap_state *s, uint32_t i, char *buf, size_t len, int collapse)
{
	if (!s->pparent || i >= s->nn || s->pparent[i] == NONE || len < 8)
		return -1;
	/* the chain from the root: at most 64 edges shown, the first elided */
	uint32_t chain[64];
	int n = 0, more = 0;
	for (uint32_t j = i; j != 0; j = s->pparent[j]) {
		if (n == 64) {
			more = 1;
			break;
		}
		chain[n++] = s->pedge[j];
	}
	size_t used = 0;
	buf[0] = 0;
	if (more) {
		memcpy(buf, "...", 4);
		used = 3;
	}
	for (int m = n - 1; m >= 0; m--) {
		char seg[160];
		seg_text(s, &s->e[chain[m]], m == n - 1 && !more, seg, sizeof seg, collapse);
		size_t sl = strlen(seg);
		if (used + sl + 4 > len) {
			snprintf(buf + used, len - used, "...");
			return 0;
		}
		memcpy(buf + used, seg, sl + 1);
		used += sl;
	}
	return 0;
}

int heap_node_prefixes(const struct heap_state *s, uint32_t i, const char **out, int max)
{
	if (!s->pparent || i >= s->nn || s->pparent[i] == NONE || max < 1)
		return -1;
	uint32_t chain[64];
	int n = 0;
	for (uint32_t j = i; j != 0 && n < 64; j = s->pparent[j])
		chain[n++] = s->pedge[j];
	if (n > max)
		n = max;   /* the outermost N segments (a deeper object is counted at its ancestor at depth MAX) */
	char buf[HEAP_PATH_MAX];
	size_t used = 0;
	int k = 0;
	for (int m = n - 1; m >= 0 && k < max; m--) {
		char seg[160];
		seg_text(s, &s->e[chain[m]], m == n - 1, seg, sizeof seg, 1);
		size_t sl = strlen(seg);
		if (used + sl + 1 > sizeof buf)
			break;
		memcpy(buf + used, seg, sl + 1);
		used += sl;
		out[k++] = intern(buf);
		if (!out[k - 1])
			return -1;
	}
	return k;
}

/* ---- growth ----------------------------------------------------------------- */

struct pathsum {
	const char *path;            /* interned */
	int64_t bytes, count;        /* new, or (diff) new minus old */
	int64_t obytes, ocount;      /* diff: old */
};

struct pathtab {
	struct pathsum *e;
	size_t n, cap;
	struct htab idx;
};

struct ps_key { const struct pathtab *t; const char *p; };

static int ps_eq(const void *ctx, uint32_t i)
{
	const struct ps_key *k = ctx;
	return k->t->e[i].path == k->p;
}

static struct pathsum *ps_get(struct pathtab *t, const char *path)
{
	struct ps_key k = { t, path };
	uint64_t h = htab_fnv1a_ptr(HTAB_FNV_INIT, path);
	size_t pos;
	if (htab_reserve(&t->idx) < 0 || array_grow(&t->e, &t->cap, t->n + 1, sizeof *t->e) < 0)
		return NULL;
	int64_t i = htab_find(&t->idx, h, ps_eq, &k, &pos);
	if (i >= 0)
		return &t->e[i];
	t->e[t->n] = (struct pathsum){ path, 0, 0, 0, 0 };
	htab_insert(&t->idx, pos, h, (uint32_t)t->n);
	return &t->e[t->n++];
}

/* Sum the reached objects of S[0..N) by collapsed path into T. With
 * several states, each path starts with "state N: ". */
static int paths_collect(struct pathtab *t, const struct heap_state *s, int n)
{
	for (int k = 0; k < n; k++) {
		const struct heap_state *h = &s[k];
		if (!h->pparent)
			continue;
		for (uint32_t i = 1; i < h->nn; i++) {
			char buf[HEAP_PATH_MAX];
			if (node_path(h, i, buf, sizeof buf, 1) < 0)
				continue;
			const char *p = n > 1 ? internf("state %d: %s", k, buf) : intern(buf);
			struct pathsum *e = p ? ps_get(t, p) : NULL;
			if (!e)
				return -LS_E_NOMEM;
			e->bytes += h->nself[i];
			e->count++;
		}
	}
	return 0;
}

static void pathtab_free(struct pathtab *t)
{
	free(t->e);
	htab_free(&t->idx);
}

int heap_paths_write(FILE *f, const struct heap_state *s, int n)
{
	struct pathtab t = { 0 };
	int rc = paths_collect(&t, s, n);
	if (rc == 0) {
		fputs("# luaspy heap paths 1\n", f);
		/* a walk cut short: a comment line, skipped by --diff */
		for (int i = 0; i < n; i++)
			if (s[i].cut)
				fprintf(f, "# PARTIAL: state 0x%llx: the walk stopped at %s\n",
					(unsigned long long)s[i].addr, s[i].cut);
		for (size_t i = 0; i < t.n; i++) {
			char c[HEAP_PATH_MAX];
			/* a tab or newline in a key would break the line: out_clean
			 * makes them U+FFFD */
			fprintf(f, "%" PRId64 "\t%" PRId64 "\t%s\n", t.e[i].bytes, t.e[i].count,
				out_clean(t.e[i].path, c, sizeof c, 0));
		}
		rc = ferror(f) ? -LS_E_IO : 0;
	}
	pathtab_free(&t);
	return rc;
}

static int64_t absdiff(const struct pathsum *e)
{
	return e->bytes < 0 ? -e->bytes : e->bytes;
}

static int ps_cmp(const void *a, const void *b)
{
	int64_t x = absdiff(a), y = absdiff(b);
	if (x != y)
		return x < y ? 1 : -1;
	return strcmp(((const struct pathsum *)a)->path, ((const struct pathsum *)b)->path);
}

static void put_signed(FILE *f, int64_t b)
{
	char sign = b < 0 ? '-' : '+';
	uint64_t u = b < 0 ? (uint64_t)-b : (uint64_t)b;
	if (u >= 10ull << 20)
		fprintf(f, "%c%.1f MiB", sign, (double)u / (1 << 20));
	else if (u >= 10ull << 10)
		fprintf(f, "%c%.1f KiB", sign, (double)u / (1 << 10));
	else
		fprintf(f, "%c%" PRIu64 " B", sign, u);
}

/* The growth part of a diff: T holds per path the new (bytes, count)
 * and the old (obytes, ocount); changes above the noise, largest first,
 * under a heading naming OLD; BAD lines of OLD were skipped. */
static int diff_print(FILE *f, const char *old, struct pathtab *t, uint64_t bad)
{
	uint64_t total = 0;
	for (size_t i = 0; i < t->n; i++) {
		total += (uint64_t)t->e[i].bytes;
		t->e[i].bytes -= t->e[i].obytes;
		t->e[i].count -= t->e[i].ocount;
	}
	int64_t noise = (int64_t)(total / 1000);
	if (noise < 4096)
		noise = 4096;
	if (t->n)   /* (none: E may be NULL, which qsort must not get) */
		qsort(t->e, t->n, sizeof *t->e, ps_cmp);
	/* the index is stale once sorted: nothing looks up T after this */
	htab_clear(&t->idx);
	fprintf(f, "Growth since %s: own bytes and objects by path (integer keys as [*]);\n"
		"changes of at least %" PRId64 " bytes (4 KiB, or 0.1 %% of the %" PRIu64 " bytes now)\n",
		old, noise, total);
	int shown = 0;
	for (size_t i = 0; i < t->n; i++) {
		if (absdiff(&t->e[i]) < noise)
			break;
		char c[HEAP_PATH_MAX];
		fputs("  ", f);
		put_signed(f, t->e[i].bytes);
		fprintf(f, "  %+" PRId64 " objects  %s\n", t->e[i].count, out_clean(t->e[i].path, c, sizeof c, 0));
		shown++;
	}
	if (!shown)
		fputs("  (nothing above the noise)\n", f);
	if (bad)
		fprintf(f, "  (%" PRIu64 " lines of %s skipped: malformed or longer than 4 KiB)\n", bad, old);
	return ferror(f) ? -LS_E_IO : 0;
}

int heap_diff_write(FILE *f, const char *old, const struct heap_state *s, int n)
{
	FILE *in = fopen(old, "r");
	if (!in)
		return -LS_E_IO;
	struct pathtab t = { 0 };
	int rc = paths_collect(&t, s, n);
	uint64_t bad = 0;
	char line[4096 + 2];
	int header = 0;
	while (rc == 0 && fgets(line, sizeof line, in)) {
		size_t l = strlen(line);
		if (l && line[l - 1] != '\n' && !feof(in)) {
			/* longer than 4 KiB: skip the rest of it */
			int c;
			while ((c = fgetc(in)) != EOF && c != '\n')
				;
			bad++;
			continue;
		}
		if (l && line[l - 1] == '\n')
			line[--l] = 0;
		if (!header) {
			header = 1;
			if (strcmp(line, "# luaspy heap paths 1") != 0) {
				rc = -LS_E_GARBAGE;
				break;
			}
			continue;
		}
		if (line[0] == '#') /* a comment: PARTIAL */
			continue;
		char *e1, *e2;
		long long b = strtoll(line, &e1, 10);
		if (e1 == line || *e1 != '\t') {
			bad++;
			continue;
		}
		long long c = strtoll(e1 + 1, &e2, 10);
		if (e2 == e1 + 1 || *e2 != '\t' || b < 0 || c < 0) {
			bad++;
			continue;
		}
		const char *p = intern(e2 + 1);
		struct pathsum *e = p ? ps_get(&t, p) : NULL;
		if (!e) {
			rc = -LS_E_NOMEM;
			break;
		}
		e->obytes += b;
		e->ocount += c;
	}
	if (rc == 0 && ferror(in))
		rc = -LS_E_IO;
	fclose(in);
	if (rc == 0 && !header)
		rc = -LS_E_GARBAGE;
	if (rc < 0) {
		pathtab_free(&t);
		return rc;
	}
	rc = diff_print(f, old, &t, bad);
	pathtab_free(&t);
	return rc;
}

struct heap_prev {
	struct pathtab t;
	uint64_t count[HEAP_NTYPES], bytes[HEAP_NTYPES];
};

int heap_prev_take(const struct heap_state *s, int n, struct heap_prev **out)
{
	struct heap_prev *p = calloc(1, sizeof *p);
	if (!p)
		return -LS_E_NOMEM;
	int rc = paths_collect(&p->t, s, n);
	if (rc < 0) {
		heap_prev_free(p);
		return rc;
	}
	for (int k = 0; k < n; k++)
		for (int t = 0; t < HEAP_NTYPES; t++) {
			p->count[t] += s[k].count[t];
			p->bytes[t] += s[k].bytes[t];
		}
	*out = p;
	return 0;
}

void heap_prev_free(struct heap_prev *p)
{
	if (!p)
		return;
	pathtab_free(&p->t);
	free(p);
}

int heap_growth_write(FILE *f, const char *since, const struct heap_prev *prev, const struct heap_state *s,
		      int n)
{
	struct pathtab t = { 0 };
	int rc = paths_collect(&t, s, n);
	for (size_t i = 0; rc == 0 && i < prev->t.n; i++) {
		struct pathsum *e = ps_get(&t, prev->t.e[i].path);
		if (!e) {
			rc = -LS_E_NOMEM;
			break;
		}
		e->obytes += prev->t.e[i].bytes;
		e->ocount += prev->t.e[i].count;
	}
	if (rc < 0) {
		pathtab_free(&t);
		return rc;
	}
	/* by type: every type whose count or bytes changed */
	uint64_t count[HEAP_NTYPES] = { 0 }, bytes[HEAP_NTYPES] = { 0 };
	for (int k = 0; k < n; k++)
		for (int ty = 0; ty < HEAP_NTYPES; ty++) {
			count[ty] += s[k].count[ty];
			bytes[ty] += s[k].bytes[ty];
		}
	fprintf(f, "Growth since %s by type: bytes and objects as walked\n", since);
	int shown = 0;
	for (int ty = 0; ty < HEAP_NTYPES; ty++) {
		if (count[ty] == prev->count[ty] && bytes[ty] == prev->bytes[ty])
			continue;
		fputs("  ", f);
		put_signed(f, (int64_t)(bytes[ty] - prev->bytes[ty]));
		fprintf(f, "  %+" PRId64 " objects  %s\n", (int64_t)(count[ty] - prev->count[ty]),
			heap_type_name(ty));
		shown++;
	}
	if (!shown)
		fputs("  (no change)\n", f);
	rc = diff_print(f, since, &t, 0);
	pathtab_free(&t);
	return rc;
}

/* One word for a node's type in the retainers list. */
static const char *node_type_word(int t)
{
	static const char *const w[HEAP_NTYPES] = {
		[HEAP_STRING] = "string", [HEAP_TABLE] = "table", [HEAP_LFUNC] = "function",
		[HEAP_CFUNC] = "C function", [HEAP_PROTO] = "prototype", [HEAP_UPVAL] = "upvalue",
		[HEAP_THREAD] = "thread", [HEAP_UDATA] = "userdata", [HEAP_CDATA] = "cdata",
		[HEAP_TRACE] = "trace", [HEAP_STRTAB] = "(root)", [HEAP_VMBUF] = "buffer",
	};
	return t >= 0 && t < HEAP_NTYPES && w[t] ? w[t] : "?";
}

/* ---- text summary ---------------------------------------------------------- */

static void put_bytes(FILE *f, uint64_t b)
{
	if (b >= 10ull << 20)
		fprintf(f, "%9.1f MiB", (double)b / (1 << 20));
	else if (b >= 10ull << 10)
		fprintf(f, "%9.1f KiB", (double)b / (1 << 10));
	else
		fprintf(f, "%9" PRIu64 " B  ", b);
}

/* PREVIEW (N bytes, any bytes) as a Lua-style quoted string: printable
 * ASCII as is, quotes and backslashes escaped, others as \ddd. */
static void put_preview(FILE *f, const char *p, int n, int cut)
{
	fputc('"', f);
	for (int i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c >= 32 && c < 127)
			fputc(c, f);
		else
			fprintf(f, "\\%03u", c);
	}
	fputc('"', f);
	if (cut)
		fputs("...", f);
}

int heap_recheck(struct heap_state *s, struct mem *live, uint64_t o, const uint8_t *h16, int marked,
		 int volatile_off, uint8_t *now16)
{
	if (mem_read(live, o, now16, 16) < 0) {
		s->changed++;
		return -1;
	}
	for (int i = 0; i < 16; i++)
		if (i != marked && i != volatile_off && now16[i] != h16[i]) {
			s->changed++;
			return 1;
		}
	return 0;
}

void heap_print_text(FILE *f, int pid, const char *runtime, const struct heap_state *s, int n,
		     double pause_ms)
{
	if (pause_ms < 0) /* heap --core: nothing stopped */
		fprintf(f, "Process %d: %s, %d state%s, read from a core file\n", pid,
			runtime ? runtime : "Lua", n, n == 1 ? "" : "s");
	else
		fprintf(f, "Process %d: %s, %d state%s, threads stopped for %.1f ms%s\n", pid,
			runtime ? runtime : "Lua", n, n == 1 ? "" : "s", pause_ms,
			n > 0 && s[0].nonblocking ? " (--nonblocking: walked while it ran)" : "");
	for (int k = 0; k < n; k++) {
		const struct heap_state *st = &s[k];
		uint64_t total = 0, count = 0;
		fprintf(f, "\nState 0x%" PRIx64 "\n", st->addr);
		fprintf(f, "  %-22s %12s %13s\n", "type", "count", "bytes");
		for (int t = 0; t < HEAP_NTYPES; t++) {
			if (!st->count[t] && !st->bytes[t])
				continue;
			fprintf(f, "  %-22s %12" PRIu64 " ", heap_type_name(t), st->count[t]);
			put_bytes(f, st->bytes[t]);
			fputc('\n', f);
			total += st->bytes[t];
			count += st->count[t];
		}
		fprintf(f, "  %-22s %12" PRIu64 " ", "total walked", count);
		put_bytes(f, total);
		fprintf(f, "  (%" PRIu64 " bytes)\n", total);
		if (st->vm_bytes_how) {
			fprintf(f, "  %-22s %12s ", "VM count", "");
			put_bytes(f, st->vm_bytes);
			fprintf(f, "  (%" PRIu64 " bytes, %s", st->vm_bytes, st->vm_bytes_how);
			if (st->vm_bytes)
				fprintf(f, "; walked %.2f %%", 100.0 * (double)total / (double)st->vm_bytes);
			fputs(")\n", f);
		} else {
			fprintf(f, "  VM count: unknown for this layout\n");
		}
		if (st->not_walked)
			fprintf(f, "  not walked: %s\n", st->not_walked);
		if (st->bad)
			fprintf(f, "  skipped: %" PRIu64 " objects that did not validate\n", st->bad);
		if (st->nonblocking) {
			double pct = st->vm_bytes ? 100.0 * (double)total / (double)st->vm_bytes : 0;
			fprintf(f, "  nonblocking: %" PRIu64 " objects skipped, %" PRIu64 " changed while read\n",
				st->bad, st->changed);
			if (!st->vm_bytes_how || pct < 100.0 - HEAP_NB_TOLERANCE_PCT ||
			    pct > 100.0 + HEAP_NB_TOLERANCE_PCT)
				fprintf(f, "  FLAGGED: the total walked is %.2f %% of the VM's count, outside the "
					"%.0f %% a running target is allowed (--nonblocking)\n",
					pct, HEAP_NB_TOLERANCE_PCT);
		}
		if (st->cut)
			fprintf(f, "  PARTIAL: the walk stopped at %s\n", st->cut);
		if (st->ntables) {
			fprintf(f, "\n  Largest tables (own size: header, array and hash parts)\n");
			for (int i = 0; i < st->ntables; i++) {
				const struct heap_top_table *e = &st->tables[i];
				char path[HEAP_PATH_MAX];
				int64_t ni = heap_node_find(st, e->addr);
				if (ni < 0 || heap_node_path(st, (uint32_t)ni, path, sizeof path) < 0)
					snprintf(path, sizeof path, "(not reached from the roots)");
				fputs("  ", f);
				put_bytes(f, e->bytes);
				fprintf(f, "  0x%-12" PRIx64 " array %u, hash %u  %s\n", e->addr, e->asize,
					e->hsize, path);
			}
		}
		if (st->retained && st->ntop) {
			fprintf(f, "\n  Largest retainers (retained size: the object and all that only it keeps alive)\n");
			for (int i = 0; i < st->ntop; i++) {
				uint32_t v = st->top[i];
				char path[HEAP_PATH_MAX];
				if (heap_node_path(st, v, path, sizeof path) < 0)
					snprintf(path, sizeof path, "?");
				fputs("  ", f);
				put_bytes(f, st->retained[v]);
				fprintf(f, "  %-13s 0x%-12" PRIx64 " %s\n", node_type_word(st->ntype[v]), st->naddr[v], path);
			}
		}
		if (st->graph_cut)
			fprintf(f, "  (no retained sizes or paths: %s)\n", st->graph_cut);
		else if (st->retained && st->unreached)
			fprintf(f, "  unreached from the roots: %" PRIu64 " objects, %" PRIu64 " bytes (garbage not yet collected, or roots not walked)\n",
				st->unreached, st->unreached_bytes);
		if (st->nbymt && st->pparent) {
			fprintf(f, "\n  Tables and userdata by metatable (own bytes; the metatable by its path)\n");
			for (int i = 0; i < st->nbymt; i++) {
				const struct heap_bymt *b = &st->bymt[i];
				char path[HEAP_PATH_MAX];
				if (heap_node_path(st, b->mt, path, sizeof path) < 0)
					snprintf(path, sizeof path, "0x%" PRIx64, st->naddr[b->mt]);
				fputs("  ", f);
				put_bytes(f, b->bytes);
				fprintf(f, "  %8" PRIu64 " tables %8" PRIu64 " userdata  %s\n", b->tables, b->udata, path);
			}
		}
		if (st->nfn) {
			/* sorting a copy: the index keeps pointing at the original */
			struct heap_fn *fs = malloc(st->nfn * sizeof *fs);
			if (fs) {
				memcpy(fs, st->fn, st->nfn * sizeof *fs);
				qsort(fs, st->nfn, sizeof *fs, fn_cmp);
				fprintf(f, "\n  Functions by prototype (Lua closures, %zu prototypes with closures)\n", st->nfn);
				for (size_t i = 0; i < st->nfn && i < HEAP_TOP; i++) {
					char c[160];
					fprintf(f, "  %9" PRIu64 " closures ", fs[i].closures);
					put_bytes(f, fs[i].bytes);
					fprintf(f, "  %s\n", fs[i].label ? out_clean(fs[i].label, c, sizeof c, 0) : "?");
				}
				free(fs);
			}
		}
		if (st->nstrings) {
			fprintf(f, "\n  Largest strings\n");
			for (int i = 0; i < st->nstrings; i++) {
				const struct heap_top_string *e = &st->strings[i];
				fputs("  ", f);
				put_bytes(f, e->bytes);
				fprintf(f, "  0x%-12" PRIx64 " len %" PRIu64 "  ", e->addr, e->len);
				put_preview(f, e->preview, e->npreview, e->len > (uint64_t)e->npreview);
				fputc('\n', f);
			}
		}
	}
}

/* ---- helpers the walkers share ------------------------------------------------ */

int heap_walk_states(const uint64_t *addrs, int n, unsigned flags,
		     int (*walk)(void *ctx, uint64_t addr, struct heap_state *s), void *ctx,
		     struct heap_state **out)
{
	if (n <= 0)
		return -LS_E_NOTLUA;
	struct heap_state *s = calloc((size_t)n, sizeof *s);
	if (!s)
		return -LS_E_NOMEM;
	int k = 0;
	uint64_t left = (uint64_t)HEAP_FLAGS_MAX_MIB(flags) << 20;   /* 0: no bound */
	for (int i = 0; i < n; i++) {
		heap_state_init(&s[k], addrs[i]);
		s[k].want_names = (flags & HEAP_WANT_NAMES) != 0;
		s[k].mem_limit = left ? left : (HEAP_FLAGS_MAX_MIB(flags) ? 1 : 0);
		s[k].nonblocking = (flags & HEAP_NONBLOCKING) != 0;
		int rc = walk(ctx, addrs[i], &s[k]);
		if (left) {   /* the next state gets what this one left */
			uint64_t used = (uint64_t)s[k].nn * (HEAP_COST_NODE + (s[k].want_names ? HEAP_COST_NAMED : 0)) +
					(uint64_t)s[k].ne * HEAP_COST_EDGE;
			left = used < left ? left - used : 0;
		}
		if (rc < 0) {
			msg_debug(1, "heap: state 0x%llx: %s", (unsigned long long)addrs[i], err_text(rc));
			heap_state_free(&s[k]);
			continue;
		}
		if (s[k].nonblocking)
			msg_debug(1, "heap: state 0x%llx: %llu objects, %llu skipped, %llu changed while read",
				  (unsigned long long)addrs[i], (unsigned long long)s[k].objects,
				  (unsigned long long)s[k].bad, (unsigned long long)s[k].changed);
		else
			msg_debug(1, "heap: state 0x%llx: %llu objects, %llu skipped", (unsigned long long)addrs[i],
				  (unsigned long long)s[k].objects, (unsigned long long)s[k].bad);
		k++;
	}
	if (k == 0) {
		free(s);
		return -LS_E_GARBAGE;
	}
	*out = s;
	return k;
}

const char *heap_key_name(struct heap_state *s, uint64_t addr,
			  const char *(*read)(void *ctx, uint64_t addr), void *ctx)
{
	size_t j = (size_t)(addr >> 3) & (HEAP_KEYCACHE - 1);
	if (addr && s->kc_addr[j] == addr)
		return s->kc_name[j];
	const char *name = read(ctx, addr);
	if (name && addr) {
		s->kc_addr[j] = addr;
		s->kc_name[j] = name;
	}
	return name;
}

void heap_chunks_init(struct heap_chunks *c, struct mem *m, uint64_t addr, uint64_t n, size_t size,
		      void *buf, size_t bufbytes)
{
	c->m = m;
	c->addr = addr;
	c->n = n;
	c->done = 0;
	c->size = size;
	c->per = size ? bufbytes / size : 0;
	c->buf = buf;
	c->failed = 0;
}

const uint8_t *heap_chunk_next(struct heap_chunks *c, uint64_t *first, uint64_t *k)
{
	if (c->done >= c->n || c->per == 0 || c->failed)
		return NULL;
	uint64_t want = c->n - c->done < c->per ? c->n - c->done : c->per;
	if (mem_read(c->m, c->addr + c->size * c->done, c->buf, (size_t)(c->size * want)) < 0) {
		c->failed = 1;
		return NULL;
	}
	*first = c->done;
	*k = want;
	c->done += want;
	return c->buf;
}
