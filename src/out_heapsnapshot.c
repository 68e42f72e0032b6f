/* out_heapsnapshot.c: `luaspy heap -f heapsnapshot`: the Lua heap as a
 * Chrome DevTools heap snapshot (the .heapsnapshot JSON that V8 writes
 * and DevTools' Memory panel, memlab and other readers load): a meta
 * block naming the fields, then flat arrays: nodes (type, name, id,
 * self_size, edge_count, trace_node_id, detachedness), edges (type,
 * name_or_index, to_node = the target's index into nodes), strings.
 * Readers compute dominators and retained sizes themselves.
 *
 * Mapping (docs/heap.md §5): table -> object "table" (with a metatable:
 * "table <path of the metatable>"), string -> string
 * (its first 40 bytes), function -> closure "function chunk:line", C
 * function -> closure, prototype -> code, upvalue -> hidden, thread ->
 * object "thread", userdata/cdata -> native; table fields -> property
 * (string key) or element (integer key), upvalues -> context, the rest
 * -> internal; a synthetic root "(Lua states)" holds one synthetic node
 * per state, whose edges are that state's roots (_G, registry, main
 * thread). */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "heap.h"
#include "htab.h"
#include "intern.h"
#include "out.h"

enum { NT_HIDDEN, NT_ARRAY, NT_STRING, NT_OBJECT, NT_CODE, NT_CLOSURE, NT_REGEXP, NT_NUMBER,
       NT_NATIVE, NT_SYNTHETIC };
enum { ET_CONTEXT, ET_ELEMENT, ET_PROPERTY, ET_INTERNAL, ET_HIDDEN, ET_SHORTCUT, ET_WEAK };

/* The strings table: one entry per distinct pointer (names are interned
 * or static, so equal pointers are equal strings). */
struct strtab {
	const char **s;
	size_t n, cap;
	struct htab idx;
};

struct str_key { const struct strtab *t; const char *p; };

static int str_eq(const void *ctx, uint32_t i)
{
	const struct str_key *k = ctx;
	return k->t->s[i] == k->p;
}

static int64_t str_id(struct strtab *t, const char *p)
{
	struct str_key k = { t, p };
	uint64_t h = htab_fnv1a_ptr(HTAB_FNV_INIT, p);
	size_t pos;
	if (htab_reserve(&t->idx) < 0 || array_grow(&t->s, &t->cap, t->n + 1, sizeof *t->s) < 0)
		return -1;
	int64_t i = htab_find(&t->idx, h, str_eq, &k, &pos);
	if (i >= 0)
		return i;
	t->s[t->n] = p;
	htab_insert(&t->idx, pos, h, (uint32_t)t->n);
	return (int64_t)t->n++;
}

/* Node ids: readers keep them in 32-bit arrays (DevTools' Uint32Array,
 * memlab), so an id is 32 bits: (address / 4) mod 2^31, times 2, plus 1
 * (V8's objects have odd ids); the same object keeps its id in the next
 * snapshot, which is what the comparison view matches. An id already
 * given (addresses 8 GiB apart) is replaced by the next free one counted
 * down from 2^32 - 1. */
struct idset {
	uint32_t *v;
	size_t n, cap;
	struct htab idx;
	uint32_t next;
};

struct id_key { const struct idset *t; uint32_t id; };

static int id_eq(const void *ctx, uint32_t i)
{
	const struct id_key *k = ctx;
	return k->t->v[i] == k->id;
}

/* 1 when ID is new (and now taken), 0 when taken, -1 out of memory. */
static int id_take(struct idset *t, uint32_t id)
{
	struct id_key k = { t, id };
	uint64_t h = htab_fnv1a_word(HTAB_FNV_INIT, id);
	size_t pos;
	if (htab_reserve(&t->idx) < 0 || array_grow(&t->v, &t->cap, t->n + 1, sizeof *t->v) < 0)
		return -1;
	if (htab_find(&t->idx, h, id_eq, &k, &pos) >= 0)
		return 0;
	t->v[t->n] = id;
	htab_insert(&t->idx, pos, h, (uint32_t)t->n++);
	return 1;
}

static int64_t node_id(struct idset *t, uint64_t addr)
{
	uint32_t id = (uint32_t)((((addr >> 2) & 0x7fffffffu) << 1) | 1);
	int r = id_take(t, id);
	while (r == 0) {
		id = t->next;
		t->next -= 2;
		r = id_take(t, id);
	}
	return r < 0 ? -1 : (int64_t)id;
}

static int node_type(int t)
{
	switch (t) {
	case HEAP_STRING: return NT_STRING;
	case HEAP_TABLE: return NT_OBJECT;
	case HEAP_LFUNC: case HEAP_CFUNC: return NT_CLOSURE;
	case HEAP_PROTO: return NT_CODE;
	case HEAP_UPVAL: return NT_HIDDEN;
	case HEAP_THREAD: return NT_OBJECT;
	case HEAP_UDATA: case HEAP_CDATA: return NT_NATIVE;
	default: return NT_HIDDEN;
	}
}

static const char *node_default_name(int t)
{
	switch (t) {
	case HEAP_STRING: return "string";
	case HEAP_TABLE: return "table";
	case HEAP_LFUNC: return "function";
	case HEAP_CFUNC: return "C function";
	case HEAP_PROTO: return "prototype";
	case HEAP_UPVAL: return "upvalue";
	case HEAP_THREAD: return "thread";
	case HEAP_UDATA: return "userdata";
	case HEAP_CDATA: return "cdata";
	case HEAP_TRACE: return "trace";
	default: return "(root)";
	}
}

/* The edges of H are whole (heap_graph_finish built the CSR): else its
 * nodes are written without edges (the summary says why: graph_cut). */
static int graph_ok(const struct heap_state *h)
{
	return !h->graph_cut && h->efirst && h->capfirst >= h->nn + 1;
}

static void put_u64(FILE *f, uint64_t v)
{
	char b[24];
	size_t n = out_fmt_u64(b, v);
	fwrite(b, 1, n, f);
}

/* The snapshot's "meta" object: the field and type names DevTools reads
 * the flat arrays by (Chromium's heap snapshot format). */
static void put_meta(FILE *f)
{
	fputs("{\"snapshot\":{\"meta\":{\"node_fields\":[\"type\",\"name\",\"id\",\"self_size\","
	      "\"edge_count\",\"trace_node_id\",\"detachedness\"],\"node_types\":[[\"hidden\","
	      "\"array\",\"string\",\"object\",\"code\",\"closure\",\"regexp\",\"number\",\"native\","
	      "\"synthetic\",\"concatenated string\",\"sliced string\",\"symbol\",\"bigint\","
	      "\"object shape\"],\"string\",\"number\",\"number\",\"number\",\"number\",\"number\"],"
	      "\"edge_fields\":[\"type\",\"name_or_index\",\"to_node\"],\"edge_types\":[[\"context\","
	      "\"element\",\"property\",\"internal\",\"hidden\",\"shortcut\",\"weak\"],"
	      "\"string_or_number\",\"node\"],\"trace_function_info_fields\":[\"function_id\",\"name\","
	      "\"script_name\",\"script_id\",\"line\",\"column\"],\"trace_node_fields\":[\"id\","
	      "\"function_info_index\",\"count\",\"size\",\"children\"],\"sample_fields\":"
	      "[\"timestamp_us\",\"last_assigned_id\"],\"location_fields\":[\"object_index\","
	      "\"script_id\",\"line\",\"column\"]},\"node_count\":", f);
}

/* The nodes of the N states S after the root: per state its root node
 * and its objects (node K of state k at position base[k] + K), a table
 * or userdata named by its metatable's path. 0, or -1: no memory. */
static int put_nodes(FILE *f, const struct heap_state *s, int n, struct strtab *st,
		     struct idset *ids)
{
	uint64_t base = 1;
	for (int k = 0; k < n; k++) {
		const struct heap_state *h = &s[k];
		/* a table or userdata with a metatable is named by the
		 * metatable's path, "table <_G.Point>", as DevTools groups
		 * objects by constructor name: one name per metatable */
		const char **mtname = graph_ok(h) && h->pparent ? calloc(h->nn, sizeof *mtname) : NULL;
		for (size_t i = 0; i < h->nn; i++) {
			const char *name;
			if (i == 0)
				name = internf("Lua state 0x%" PRIx64, h->addr);
			else
				name = h->nname && h->nname[i] ? h->nname[i] : node_default_name(h->ntype[i]);
			if (mtname && i > 0 && (h->ntype[i] == HEAP_TABLE || h->ntype[i] == HEAP_UDATA)) {
				for (uint32_t e = h->efirst[i]; e < h->efirst[i + 1]; e++) {
					if (heap_edge_name(h, &h->e[e]) != heap_metatable_edge)
						continue;
					uint32_t m = heap_edge_to(&h->e[e]);
					if (!mtname[m]) {
						char path[HEAP_PATH_MAX];
						mtname[m] = heap_node_path(h, m, path, sizeof path) == 0 ? intern(path) : "?";
					}
					name = internf("%s <%s>", name, mtname[m]);
					break;
				}
			}
			int64_t sid = str_id(st, name);
			if (sid < 0) {
				free(mtname);
				return -1;
			}
			uint32_t ne = graph_ok(h) ? h->efirst[i + 1] - h->efirst[i] : 0;
			/* state roots: 2k + 3 (the root is 1) */
			int64_t id = node_id(ids, i == 0 ? 2u * (uint64_t)k + 2 : h->naddr[i]);
			if (id < 0) {
				free(mtname);
				return -1;
			}
			fprintf(f, ",\n%d,%" PRId64 ",%" PRId64 ",%u,%u,0,0",
				i == 0 ? NT_SYNTHETIC : node_type(h->ntype[i]), sid, id, h->nself[i], ne);
		}
		free(mtname);
		base += h->nn;
	}
	return 0;
}

/* The edges of the N states S after the root's (a node's edges follow
 * its own in node order, to_node is a node's position times 7, the
 * node fields). 0, or -1: no memory. */
static int put_edges(FILE *f, const struct heap_state *s, int n, struct strtab *st)
{
	uint64_t base;
	base = 1;
	for (int k = 0; k < n; k++) {
		const struct heap_state *h = &s[k];
		for (size_t j = 0; graph_ok(h) && j < h->ne; j++) {
			const struct heap_edge *e = &h->e[j];
			uint64_t to = (base + heap_edge_to(e)) * 7;
			const char *name = heap_edge_name(h, e);
			int et;
			int64_t ni;
			switch (heap_edge_kind(e)) {
			case HEAP_E_INDEX:
				fprintf(f, ",\n%d,%" PRId64 ",%" PRIu64, ET_ELEMENT, heap_edge_idx(h, e), to);
				continue;
			case HEAP_E_KEY:
			case HEAP_E_ROOT:
				et = ET_PROPERTY;
				break;
			default:
				et = name && !strncmp(name, "upvalue '", 9) ? ET_CONTEXT : ET_INTERNAL;
				break;
			}
			ni = str_id(st, name ? name : "");
			if (ni < 0)
				return -1;
			fprintf(f, ",\n%d,%" PRId64 ",%" PRIu64, et, ni, to);
		}
		base += h->nn;
	}
	return 0;
}

int out_heapsnapshot_write(FILE *f, const struct heap_state *s, int n)
{
	struct strtab st = { 0 };
	struct idset ids = { 0 };
	ids.next = UINT32_MAX;
	uint64_t nodes = 1 + (uint64_t)n, edges = (uint64_t)n;
	for (int k = 0; k < n; k++) {
		nodes += s[k].nn ? s[k].nn - 1 : 0;
		if (graph_ok(&s[k]))
			edges += s[k].ne;
	}
	/* strings 0..: the fixed names first */
	const char *root_name = "(Lua states)";
	if (str_id(&st, "") < 0 || str_id(&st, root_name) < 0)
		goto nomem;
	put_meta(f);
	put_u64(f, nodes);
	fputs(",\"edge_count\":", f);
	put_u64(f, edges);
	fputs(",\"trace_function_count\":0},\n\"nodes\":[", f);
	/* the root, then per state its root node and its objects; node K of
	 * state S is at position base[S] + K (its own root is K = 0) */
	fprintf(f, "%d,1,1,0,%d,0,0", NT_SYNTHETIC, n);
	if (id_take(&ids, 1) < 0)
		goto nomem;
	if (put_nodes(f, s, n, &st, &ids) < 0)
		goto nomem;
	fputs("],\n\"edges\":[", f);
	/* the root's edges: one per state */
	uint64_t base = 1;
	for (int k = 0; k < n; k++) {
		fprintf(f, "%s%d,%d,%" PRIu64, k ? "," : "", ET_ELEMENT, k + 1, base * 7);
		base += s[k].nn;
	}
	if (put_edges(f, s, n, &st) < 0)
		goto nomem;
	fputs("],\n\"trace_function_infos\":[],\"trace_tree\":[],\"samples\":[],\"locations\":[],\n"
	      "\"strings\":[", f);
	for (size_t i = 0; i < st.n; i++) {
		if (i)
			fputs(",\n", f);
		out_put_json(f, st.s[i]);
	}
	fputs("]}\n", f);
	free(st.s);
	htab_free(&st.idx);
	free(ids.v);
	htab_free(&ids.idx);
	return ferror(f) ? -LS_E_IO : 0;
nomem:
	free(st.s);
	htab_free(&st.idx);
	free(ids.v);
	htab_free(&ids.idx);
	return -LS_E_NOMEM;
}
