/* heap.c: per-state heap totals, the largest-object lists, the path
 * search's bookkeeping and the text summary of `luaspy heap` (heap.h). */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "heap.h"
#include "err.h"
#include "intern.h"
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
	htab_free(&s->nidx);
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

struct node_key {
	const struct heap_state *s;
	uint64_t addr;
};

static int node_eq(const void *ctx, uint32_t i)
{
	const struct node_key *k = ctx;
	return k->s->naddr[i] == k->addr;
}

static uint64_t node_hash(uint64_t addr)
{
	return htab_fnv1a_word(HTAB_FNV_INIT, addr);
}

int64_t heap_node(struct heap_state *s, uint64_t addr, int type, uint64_t bytes)
{
	if (s->graph_cut)
		return -1;
	struct node_key k = { s, addr };
	uint64_t h = node_hash(addr);
	size_t pos;
	if (s->nn >= HEAP_MAX_NODES) {
		s->graph_cut = "more than 40000000 objects";
		return -1;
	}
	if (htab_reserve(&s->nidx) < 0 ||
	    array_grow(&s->naddr, &s->capn, s->nn + 1, sizeof *s->naddr) < 0 ||
	    array_grow(&s->nself, &s->capself, s->nn + 1, sizeof *s->nself) < 0 ||
	    array_grow(&s->ntype, &s->captype, s->nn + 1, sizeof *s->ntype) < 0) {
		s->graph_cut = "out of memory";
		return -1;
	}
	int64_t i = htab_find(&s->nidx, h, node_eq, &k, &pos);
	if (i >= 0)
		return i;
	if (s->want_names) {
		if (array_grow(&s->nname, &s->capname, s->nn + 1, sizeof *s->nname) < 0) {
			s->graph_cut = "out of memory";
			return -1;
		}
		s->nname[s->nn] = NULL;
	}
	s->naddr[s->nn] = addr;
	s->nself[s->nn] = bytes > UINT32_MAX - 1 ? UINT32_MAX - 1 : (uint32_t)bytes;
	s->ntype[s->nn] = (uint8_t)type;
	htab_insert(&s->nidx, pos, h, (uint32_t)s->nn);
	return (int64_t)s->nn++;
}

void heap_node_name(struct heap_state *s, int64_t i, const char *name)
{
	if (!s->want_names || i < 0 || (size_t)i >= s->nn)
		return;
	if (array_grow(&s->nname, &s->capname, s->nn, sizeof *s->nname) < 0)
		return;
	s->nname[i] = name;
}

int64_t heap_node_find(const struct heap_state *s, uint64_t addr)
{
	struct node_key k = { s, addr };
	return htab_find(&s->nidx, node_hash(addr), node_eq, &k, NULL);
}

void heap_edges_begin(struct heap_state *s, uint32_t i)
{
	if (s->graph_cut)
		return;
	if (i != s->ebegun) {
		s->graph_cut = "internal error: edges out of order";
		return;
	}
	if (array_grow(&s->efirst, &s->capfirst, (size_t)i + 1, sizeof *s->efirst) < 0) {
		s->graph_cut = "out of memory";
		return;
	}
	s->efirst[i] = (uint32_t)s->ne;
	s->ebegun = (size_t)i + 1;
}

void heap_edge(struct heap_state *s, uint64_t to, int kind, const char *name, int64_t idx)
{
	if (s->graph_cut)
		return;
	int64_t j = heap_node_find(s, to);
	if (j < 0) {
		s->edges_lost++;
		return;
	}
	if (s->ne >= HEAP_MAX_EDGES) {
		s->graph_cut = "more than 200000000 references";
		return;
	}
	if (array_grow(&s->e, &s->cape, s->ne + 1, sizeof *s->e) < 0) {
		s->graph_cut = "out of memory";
		return;
	}
	s->e[s->ne++] = (struct heap_edge){ (uint32_t)j, (uint8_t)kind, idx, name };
}

#define NONE UINT32_MAX

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

int heap_graph_finish(struct heap_state *s)
{
	size_t n = s->nn;
	if (s->graph_cut || n == 0 || n > NONE - 1)
		return -1;
	/* the CSR: nodes whose edges were never begun have none */
	uint32_t *ef = malloc((n + 1) * sizeof *ef);
	if (!ef) {
		s->graph_cut = "out of memory";
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		ef[i] = i < s->ebegun ? s->efirst[i] : (uint32_t)s->ne;
	ef[n] = (uint32_t)s->ne;
	free(s->efirst);
	s->efirst = ef;
	s->capfirst = n + 1;

	uint32_t *pp = malloc(n * sizeof *pp), *pe = malloc(n * sizeof *pe), *queue = malloc(n * sizeof *queue);
	uint32_t *dfn = malloc(n * sizeof *dfn), *vertex = malloc(n * sizeof *vertex),
		 *parent = malloc(n * sizeof *parent), *semi = malloc(n * sizeof *semi),
		 *label = malloc(n * sizeof *label), *anc = malloc(n * sizeof *anc),
		 *idom = malloc(n * sizeof *idom), *bhead = malloc(n * sizeof *bhead),
		 *bnext = malloc(n * sizeof *bnext), *stk = malloc(n * sizeof *stk),
		 *stke = malloc(n * sizeof *stke), *pfirst = calloc(n + 1, sizeof *pfirst),
		 *pred = malloc((s->ne + 1) * sizeof *pred);
	uint64_t *ret = malloc(n * sizeof *ret);
	int rc = -1;
	if (!pp || !pe || !queue || !dfn || !vertex || !parent || !semi || !label || !anc || !idom ||
	    !bhead || !bnext || !stk || !stke || !pfirst || !pred || !ret) {
		s->graph_cut = "out of memory";
		goto out;
	}
	/* shortest paths: breadth first from the root, edges in order */
	for (size_t i = 0; i < n; i++)
		pp[i] = pe[i] = NONE;
	size_t qh = 0, qt = 0;
	pp[0] = 0;
	queue[qt++] = 0;
	while (qh < qt) {
		uint32_t v = queue[qh++];
		for (uint32_t k = ef[v]; k < ef[v + 1]; k++) {
			uint32_t w = s->e[k].to;
			if (pp[w] != NONE)
				continue;
			pp[w] = v;
			pe[w] = k;
			queue[qt++] = w;
		}
	}
	/* depth-first numbering, iterative */
	for (size_t i = 0; i < n; i++) {
		dfn[i] = NONE;
		anc[i] = NONE;
		bhead[i] = NONE;
		idom[i] = NONE;
		label[i] = (uint32_t)i;
	}
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
		uint32_t w = s->e[stke[sp - 1]++].to;
		if (dfn[w] != NONE)
			continue;
		dfn[w] = nd;
		vertex[nd++] = w;
		parent[w] = v;
		stk[sp] = w;
		stke[sp++] = ef[w];
	}
	for (size_t i = 0; i < n; i++)
		semi[i] = dfn[i];
	/* predecessors of reached nodes (CSR) */
	for (size_t v = 0; v < n; v++)
		if (dfn[v] != NONE)
			for (uint32_t k = ef[v]; k < ef[v + 1]; k++)
				pfirst[s->e[k].to + 1]++;
	for (size_t i = 0; i < n; i++)
		pfirst[i + 1] += pfirst[i];
	{
		uint32_t *fill = stke;   /* reuse: the DFS is done */
		memcpy(fill, pfirst, n * sizeof *fill);
		for (size_t v = 0; v < n; v++)
			if (dfn[v] != NONE)
				for (uint32_t k = ef[v]; k < ef[v + 1]; k++)
					pred[fill[s->e[k].to]++] = (uint32_t)v;
	}
	/* Lengauer-Tarjan: semidominators in reverse DFS order, then idoms */
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
	/* retained sizes: children before their dominator */
	for (size_t i = 0; i < n; i++)
		ret[i] = s->nself[i];
	for (uint32_t i = nd; i-- > 1;) {
		uint32_t w = vertex[i];
		ret[idom[w]] += ret[w];
	}
	s->unreached = n - nd;
	s->unreached_bytes = 0;
	for (size_t i = 0; i < n; i++)
		if (dfn[i] == NONE) {
			s->unreached_bytes += s->nself[i];
			ret[i] = 0;
		}
	/* the largest retainers: objects (not the root) by retained size */
	s->ntop = 0;
	for (uint32_t i = 1; i < nd; i++) {
		uint32_t w = vertex[i];
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
	/* tables and userdata by metatable: own bytes summed per metatable
	 * (ret[] is free to reuse as the sums: the retained sizes are kept
	 * in RET only after this) */
	{
		uint64_t *sum = calloc(n, sizeof *sum);
		uint32_t *cnt_t = calloc(n, sizeof *cnt_t), *cnt_u = calloc(n, sizeof *cnt_u);
		if (sum && cnt_t && cnt_u) {
			for (size_t v = 1; v < n; v++)
				for (uint32_t k = ef[v]; k < ef[v + 1]; k++)
					if (s->e[k].name == heap_metatable_edge) {
						uint32_t m = s->e[k].to;
						sum[m] += s->nself[v];
						if (s->ntype[v] == HEAP_UDATA)
							cnt_u[m]++;
						else
							cnt_t[m]++;
						break;
					}
			s->nbymt = 0;
			for (uint32_t m = 0; m < n; m++) {
				if (!sum[m] && !cnt_t[m] && !cnt_u[m])
					continue;
				int c = s->nbymt;
				if (c == HEAP_TOP && s->bymt[c - 1].bytes >= sum[m])
					continue;
				int j = c < HEAP_TOP ? c : HEAP_TOP - 1;
				while (j > 0 && s->bymt[j - 1].bytes < sum[m]) {
					s->bymt[j] = s->bymt[j - 1];
					j--;
				}
				s->bymt[j] = (struct heap_bymt){ m, cnt_t[m], cnt_u[m], sum[m] };
				if (c < HEAP_TOP)
					s->nbymt++;
			}
		}
		free(sum);
		free(cnt_t);
		free(cnt_u);
	}
	s->pparent = pp;
	s->pedge = pe;
	s->idom = idom;
	s->retained = ret;
	pp = pe = idom = NULL;
	ret = NULL;
	rc = 0;
out:
	free(pp); free(pe); free(queue); free(dfn); free(vertex); free(parent); free(semi);
	free(label); free(anc); free(idom); free(bhead); free(bnext); free(stk); free(stke);
	free(pfirst); free(pred); free(ret);
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
static void seg_text(const struct heap_edge *e, int first, char *out, size_t len, int collapse)
{
	/* a table key is cut at 63 bytes; any other name ("local 'buf'
	 * (/a/long/path/w.lua:30)", upvalues) keeps both ends, so that the
	 * line at its end survives a long chunk name */
	char c[64], w[256];
	const char *name = "?";
	int cut = 0;
	if (e->name && e->kind == HEAP_E_KEY) {
		name = out_clean(e->name, c, sizeof c, 0);
		cut = strnlen(e->name, sizeof c) >= sizeof c - 1;
	} else if (e->name) {
		out_clean(e->name, w, sizeof w, 0);
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
	switch (e->kind) {
	case HEAP_E_ROOT:
		snprintf(out, len, "%s%s", first ? "" : " > ", name);
		break;
	case HEAP_E_KEY:
		if (is_ident(e->name) && !cut) {
			snprintf(out, len, ".%s", e->name);
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
			snprintf(out, len, "[%" PRId64 "]", e->idx);
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
		seg_text(&s->e[chain[m]], m == n - 1 && !more, seg, sizeof seg, collapse);
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
		seg_text(&s->e[chain[m]], m == n - 1, seg, sizeof seg, 1);
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

int heap_diff_write(FILE *f, const char *old, const struct heap_state *s, int n)
{
	FILE *in = fopen(old, "r");
	if (!in)
		return -LS_E_IO;
	struct pathtab t = { 0 };
	int rc = paths_collect(&t, s, n);
	uint64_t bad = 0, total = 0;
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
	for (size_t i = 0; i < t.n; i++) {
		total += (uint64_t)t.e[i].bytes;
		t.e[i].bytes -= t.e[i].obytes;
		t.e[i].count -= t.e[i].ocount;
	}
	int64_t noise = (int64_t)(total / 1000);
	if (noise < 4096)
		noise = 4096;
	qsort(t.e, t.n, sizeof *t.e, ps_cmp);
	fprintf(f, "Growth since %s: own bytes and objects by path (integer keys as [*]);\n"
		"changes of at least %" PRId64 " bytes (4 KiB, or 0.1 %% of the %" PRIu64 " bytes now)\n",
		old, noise, total);
	int shown = 0;
	for (size_t i = 0; i < t.n; i++) {
		if (absdiff(&t.e[i]) < noise)
			break;
		char c[HEAP_PATH_MAX];
		fputs("  ", f);
		put_signed(f, t.e[i].bytes);
		fprintf(f, "  %+" PRId64 " objects  %s\n", t.e[i].count, out_clean(t.e[i].path, c, sizeof c, 0));
		shown++;
	}
	if (!shown)
		fputs("  (nothing above the noise)\n", f);
	if (bad)
		fprintf(f, "  (%" PRIu64 " lines of %s skipped: malformed or longer than 4 KiB)\n", bad, old);
	pathtab_free(&t);
	return ferror(f) ? -LS_E_IO : 0;
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

void heap_print_text(FILE *f, int pid, const char *runtime, const struct heap_state *s, int n,
		     double pause_ms)
{
	fprintf(f, "Process %d: %s, %d state%s, threads stopped for %.1f ms\n", pid,
		runtime ? runtime : "Lua", n, n == 1 ? "" : "s", pause_ms);
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
