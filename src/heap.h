/* heap.h: `luaspy heap`: what a Lua state's heap holds, by object type,
 * as the VM's walker (vm_ops.heap: vm_puc_heap.c, vm_luajit_heap.c)
 * reports it object by object; the largest tables with a path from a
 * root, the largest strings. docs/heap.md says how each VM is walked
 * and sized.
 *
 * A walker fills one struct heap_state per Lua state: heap_add() for
 * every object, with the size the VM frees it with; heap_table() and
 * heap_string() offer candidates for the "largest" lists; heap_path_*
 * keep the breadth-first search from the roots over table keys that
 * names a table's path. Nothing here reads the target. */
#ifndef LUASPY_HEAP_H
#define LUASPY_HEAP_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "htab.h"
#include "proc_mem.h"

/* Object types, as the text summary groups them. */
enum heap_type {
	HEAP_STRING = 0,   /* strings (interned and long) */
	HEAP_TABLE,        /* tables: header, array part, hash part */
	HEAP_LFUNC,        /* Lua closures (with their upvalue pointers) */
	HEAP_CFUNC,        /* C closures (with their upvalue values) */
	HEAP_PROTO,        /* function prototypes with their arrays */
	HEAP_UPVAL,        /* upvalues (open and closed) */
	HEAP_THREAD,       /* threads: lua_State, stack, CallInfo list */
	HEAP_UDATA,        /* full userdata with payload */
	HEAP_CDATA,        /* LuaJIT cdata (header only) */
	HEAP_TRACE,        /* LuaJIT traces met in object lists */
	HEAP_STRTAB,       /* the string table's bucket array */
	HEAP_VMBUF,        /* the VM's own buffers (PUC 5.1/5.2 Mbuffer, LuaJIT tmpbuf) */
	HEAP_NTYPES
};

/* Printable name of type T ("tables"). */
const char *heap_type_name(int t);

#define HEAP_WANT_NAMES 0x1     /* vm_ops.heap flag: name every node (heap_node_name) */
/* vm_ops.heap flag: the target runs during the walk (--nonblocking):
 * after each object of a list is read (through the block cache), its
 * first 16 bytes are read again live (heap_recheck) and counted in
 * heap_state.changed when they differ. docs/heap.md §11. */
#define HEAP_NONBLOCKING 0x2
/* --nonblocking: a walked total further than this many percent from the
 * VM's own count is flagged in the summary. */
#define HEAP_NB_TOLERANCE_PCT 5.0
/* vm_ops.heap flags: the MiB luaspy's object graphs (all states) may
 * take, at most 2^24 - 1 (0: no bound); past it a state's graph is cut
 * (graph_cut, naming the bound): counts stay whole, no paths or
 * retained sizes. docs/heap.md §7. */
#define HEAP_MAX_MIB_FLAGS(mib) ((unsigned)(mib) << 8)
#define HEAP_FLAGS_MAX_MIB(flags) ((flags) >> 8)
/* What the graph takes at its peak, estimated per object and per
 * reference as it grows (docs/heap.md §7: the walk 17 + 12 per
 * reference, the resolution up to 28 + 12, the dominators 33 + 12,
 * the second depth-first search 37 + 8, the shortest paths 41 + 8;
 * names for -f heapsnapshot 16 more per object). Lengauer-Tarjan, when
 * semi-NCA's climbs run long, takes 57 + 12: checked then. */
#define HEAP_COST_NODE 41u
#define HEAP_COST_NODE_LT 57u
#define HEAP_COST_NAMED 16u
#define HEAP_COST_EDGE 12u

#define HEAP_TOP 10              /* entries in each "largest" list */
#define HEAP_TOP_RETAINERS 20    /* entries in the largest-retainers list */
#define HEAP_MAX_OBJECTS 50000000u /* objects counted per state; past it the walk stops (cut) */
#define HEAP_MAX_PATH_TABLES 2000000u /* tables the path search visits (about 40 bytes each) */
#define HEAP_MAX_TABLE_SLOTS (1u << 24) /* array + hash slots looked at per table by the path search */
#define HEAP_PATH_MAX 256        /* bytes of a printed path */
#define HEAP_STR_PREVIEW 48      /* bytes of a string shown */

struct heap_top_table {
	uint64_t addr, bytes;
	uint32_t asize, hsize;       /* array slots, hash nodes */
};

struct heap_top_string {
	uint64_t addr, len, bytes;
	char preview[HEAP_STR_PREVIEW];
	int npreview;                /* bytes in preview */
};

/* Edge kinds: how the path of an object is printed. */
enum heap_edge_kind {
	HEAP_E_ROOT = 0,   /* from the synthetic root: NAME ("_G", "registry") */
	HEAP_E_KEY,        /* table field with string key NAME: .name or ["..."] */
	HEAP_E_INDEX,      /* table field with integer key IDX: [idx] */
	HEAP_E_OTHER,      /* anything else: NAME ("upvalue 'cache'", "[metatable]") */
};

/* The name of every metatable edge (compared by pointer: the summary
 * groups tables and userdata by their metatable). */
extern const char heap_metatable_edge[];

/* One reference of the graph, 8 bytes (references outnumber objects):
 * read it through the accessors below (after struct heap_state). */
struct heap_edge {
	uint32_t tk;                 /* target node << 2 | enum heap_edge_kind */
	uint32_t v;                  /* HEAP_E_INDEX: the index (HEAP_BIGIDX set: the index is
				      * s->bigidx[v & ~HEAP_BIGIDX]); else the name's id in
				      * s->names (0: no name) */
};
#define HEAP_BIGIDX 0x80000000u

/* Target node of edge E. */
static inline uint32_t heap_edge_to(const struct heap_edge *e)
{
	return e->tk >> 2;
}

/* Kind of edge E (enum heap_edge_kind). */
static inline int heap_edge_kind(const struct heap_edge *e)
{
	return (int)(e->tk & 3);
}

/* Key names met during a walk, by the key string's address: field names
 * repeat, so most table edges need no read and no interning. */
#define HEAP_KEYCACHE 4096
/* Names of edges by pointer, in front of their index (few names, met
 * on most edges). */
#define HEAP_NAMECACHE 1024

/* Lua closures of one prototype. */
struct heap_fn {
	uint64_t proto;
	const char *label;           /* interned "chunk:line", or NULL */
	uint64_t closures, bytes;    /* closures of it, their bytes (not the prototype's) */
};

/* What one state's walk found. */
struct heap_state {
	uint64_t addr;               /* main lua_State (PUC) / global_State (LuaJIT) */
	uint64_t count[HEAP_NTYPES], bytes[HEAP_NTYPES];
	uint64_t objects;            /* objects counted, all types */
	uint64_t vm_bytes;           /* the VM's own count of bytes in use */
	const char *vm_bytes_how;    /* static text naming it ("totalbytes + GCdebt"), NULL: unknown */
	const char *not_walked;      /* static text: what is in the VM's count but not walked */
	uint64_t bad;                /* objects whose header or size did not validate (skipped) */
	uint64_t changed;            /* HEAP_NONBLOCKING: objects whose header changed while read */
	int nonblocking;             /* walked with HEAP_NONBLOCKING (the target ran) */
	const char *cut;             /* static text: the bound that stopped the walk, or NULL */
	struct heap_top_table tables[HEAP_TOP];
	int ntables;
	struct heap_top_string strings[HEAP_TOP];
	int nstrings;
	/* the object graph: node 0 is the synthetic root; nodes in the order
	 * the walk met them, edges per node in index order (CSR: efirst) */
	uint64_t *naddr;
	uint32_t *nself;             /* bytes (objects over 4 GiB are cut to 4 GiB - 1) */
	uint8_t *ntype;
	const char **nname;          /* HEAP_WANT_NAMES: interned names, or NULL */
	size_t nn, capn, capself, captype, capname;
	int want_names;
	uint32_t *islot;             /* address -> node + 1 (0: empty), open addressing */
	size_t icap;                 /* slots: a power of two, at most 3/4 full; 0 outside
				      * heap_graph_finish's resolution of the references */
	int indexed;                 /* heap_graph_finish has indexed the nodes */
	uint64_t dups;               /* nodes met twice (a list crossing another): dropped */
	uint32_t *efirst;            /* first edge of each node begun; nn + 1 after finish */
	size_t capfirst, ebegun;
	struct heap_edge *e;         /* the references, after heap_graph_finish */
	size_t ne;
	uint32_t *ew;                /* during the walk, 12 bytes per edge: the target address
				      * | kind << 62 (two words, low first), then the edge's V
				      * (heap_graph_finish makes E of it, in place) */
	size_t capew;
	const char **names;          /* edge names by id (V of struct heap_edge); names[0]: NULL */
	size_t nnames, capnames;
	struct htab nameidx;         /* pointer -> id */
	const char *nc_name[HEAP_NAMECACHE]; /* the last name met per cache slot, its id */
	uint32_t nc_id[HEAP_NAMECACHE];
	int64_t *bigidx;             /* indices outside 0 .. 2^31 - 1 (HEAP_BIGIDX) */
	size_t nbigidx, capbigidx;
	uint64_t edges_lost;         /* references to no object walked */
	const char *graph_cut;       /* static text or mem_cut: why the graph is incomplete, or NULL */
	uint64_t mem_limit;          /* bytes the graph may take (HEAP_COST_*), 0: no bound */
	char mem_cut[128];            /* graph_cut's text when mem_limit stopped it */
	/* heap_graph_finish(): shortest path from the root (parent node and
	 * edge), immediate dominator, retained bytes; UINT32_MAX: unreached */
	uint32_t *pparent, *pedge, *idom;
	uint64_t *retained;
	uint64_t unreached, unreached_bytes;
	uint32_t top[HEAP_TOP_RETAINERS]; /* nodes of largest retained size */
	/* tables and userdata by metatable (heap_graph_finish), largest first */
	struct heap_bymt {
		uint32_t mt;             /* the metatable's node */
		uint64_t tables, udata, bytes;
	} bymt[HEAP_TOP];
	int nbymt;
	/* functions by prototype (heap_closure) */
	struct heap_fn *fn;
	size_t nfn, capfn;
	struct htab fnidx;
	int ntop;
	uint64_t kc_addr[HEAP_KEYCACHE]; /* the walk's key names (heap_key_name) */
	const char *kc_name[HEAP_KEYCACHE];
};

/* The index of a HEAP_E_INDEX edge E of S. */
static inline int64_t heap_edge_idx(const struct heap_state *s, const struct heap_edge *e)
{
	if (e->v & HEAP_BIGIDX)
		return s->bigidx[e->v & ~HEAP_BIGIDX];
	return (int64_t)e->v;
}

/* The name of edge E of S, or NULL (an index edge has none). */
static inline const char *heap_edge_name(const struct heap_state *s, const struct heap_edge *e)
{
	if (heap_edge_kind(e) == HEAP_E_INDEX || e->v >= s->nnames)
		return NULL;
	return s->names[e->v];
}

/* Start S for the state at ADDR (zeroes it). */
void heap_state_init(struct heap_state *s, uint64_t addr);
/* Free what S holds (the path search). */
void heap_state_free(struct heap_state *s);

/* Count one object of type T, BYTES as the VM frees it. Returns 0, or
 * -1 once HEAP_MAX_OBJECTS were counted (S->cut set; stop walking). */
int heap_add(struct heap_state *s, int t, uint64_t bytes);
/* Offer table ADDR of BYTES (ASIZE array slots, HSIZE nodes) to the
 * largest-tables list. */
void heap_table(struct heap_state *s, uint64_t addr, uint64_t bytes, uint32_t asize, uint32_t hsize);
/* Is a string of LEN bytes a candidate for the largest-strings list? */
int heap_string_wanted(const struct heap_state *s, uint64_t len);
/* Offer string ADDR (LEN bytes, BYTES as freed, its first N bytes in
 * PREVIEW) to the largest-strings list. */
void heap_string(struct heap_state *s, uint64_t addr, uint64_t len, uint64_t bytes,
		 const char *preview, int n);

/* Count a Lua closure of BYTES whose prototype is PROTO (the walker sets
 * S->fn[i].label, "chunk:line", once all are counted). One entry per
 * prototype: bounded by the objects counted. */
void heap_closure(struct heap_state *s, uint64_t proto, uint64_t bytes);

/* ---- the object graph ----------------------------------------------------
 * Walkers add every object as a node (heap_object, or heap_node beside
 * heap_add), node 0 (the root, address 0) first, and right after a node
 * its references (heap_edges_begin, then heap_edge for each), the
 * root's first. The walk only appends: a reference is kept by the target
 * address it holds, so that the target is read once, while it is
 * stopped, and costs no lookup there. heap_graph_finish (after the
 * threads are released) indexes the nodes by address (a node met twice
 * is dropped, its duplicate's references with it), turns each reference
 * into a node index (those to no object walked are dropped and counted
 * in edges_lost), then computes the shortest path from the root to each
 * object (breadth first: _G before the registry), the dominator tree
 * (semi-NCA; Lengauer-Tarjan on shapes it is slow on) and the retained
 * size of every object:
 * its own bytes plus those of every object reachable only through it,
 * as Chrome DevTools and Eclipse MAT compute it. Memory, docs/heap.md §7:
 * per object 17 bytes in the walk, 37 kept and at most 24 more while
 * the dominators (semi-NCA) are computed; per reference 12 in the walk,
 * 8 kept and 4 more for the dominators. */

#define HEAP_MAX_NODES 40000000u  /* objects in the graph; past it no graph (graph_cut) */
#define HEAP_MAX_EDGES 200000000u /* references kept; past it the graph is cut */

/* Append node ADDR of TYPE and BYTES; returns its index, or -1 when the
 * graph is cut (S->graph_cut). Node 0 must be the root (ADDR 0). */
int64_t heap_node(struct heap_state *s, uint64_t addr, int type, uint64_t bytes);
/* heap_add and heap_node together: count object ADDR of TYPE and BYTES
 * and make it a node. Returns the node's index, or -1 (cut). */
int64_t heap_object(struct heap_state *s, uint64_t addr, int type, uint64_t bytes);
/* heap_object, then heap_edges_begin for it: *NI (may be NULL) gets the
 * index or -1. 1 when the object's references follow, 0 when the graph
 * is cut. */
int heap_object_begin(struct heap_state *s, uint64_t addr, int type, uint64_t bytes, int64_t *ni);
/* With S->want_names: name node I (NAME interned or static). */
void heap_node_name(struct heap_state *s, int64_t i, const char *name);
/* Index of the node at ADDR, or -1 (and always -1 before
 * heap_graph_finish: the walk builds no index). After it, a scan of the
 * nodes: for a few lookups. */
int64_t heap_node_find(const struct heap_state *s, uint64_t addr);
/* Start the references of node I: I is at least the previous one + 1
 * (nodes skipped have none), from 0. */
void heap_edges_begin(struct heap_state *s, uint32_t i);
/* Add a reference from the node begun last to the object at TO, of KIND,
 * NAME (not HEAP_E_INDEX) or IDX (HEAP_E_INDEX). TO is resolved by
 * heap_graph_finish. */
void heap_edge(struct heap_state *s, uint64_t to, int kind, const char *name, int64_t idx);
/* Index the nodes, resolve the references, and compute paths,
 * dominators, retained sizes and the largest retainers. 0, or -1 when
 * the graph is cut or out of memory (S->graph_cut says so; then no
 * retained sizes, and heap_node_find works when the index could be
 * built). */
int heap_graph_finish(struct heap_state *s);
/* Write the path of node I from the root into BUF (LEN bytes): "_G.cache",
 * "registry._LOADED.heapmod.store", "_G.f > upvalue 'cache'"; returns 0,
 * or -1 when I was not reached from the roots. Keys that are not
 * identifiers are quoted and escaped; a path longer than LEN ends in "...". */
int heap_node_path(const struct heap_state *s, uint32_t i, char *buf, size_t len);

/* out_heapsnapshot.c: write states S[0..N) (walked with HEAP_WANT_NAMES,
 * heap_graph_finish done) to F as one Chrome DevTools heap snapshot
 * (.heapsnapshot JSON: snapshot.meta, nodes, edges, strings): a synthetic
 * root with one synthetic node per state, whose edges lead to its roots.
 * Node ids are 32-bit, made from object addresses (the same object keeps
 * its id in the next snapshot: the comparison view matches them). Returns 0 or -LS_E_IO / -LS_E_NOMEM. */
int out_heapsnapshot_write(FILE *f, const struct heap_state *s, int n);

/* The path of node I as its prefixes, outermost first, integer keys as
 * [*]: OUT[0] = "_G", OUT[1] = "_G.cache", OUT[2] = "_G.cache[*]"
 * (interned; at most MAX, and the path's first 64 edges). Returns the
 * count, or -1 when I was not reached. */
int heap_node_prefixes(const struct heap_state *s, uint32_t i, const char **out, int max);

/* heap_pprof.c: write states S[0..N) (heap_graph_finish done) to F as a
 * gzipped pprof profile (profile.proto): one sample per path, its stack
 * the path's prefixes (leaf: the whole path), values inuse_objects
 * (count) and inuse_space (bytes), as go tool pprof names a heap
 * profile's. 0 or -LS_E_NOMEM / -LS_E_IO. */
int heap_pprof_write(FILE *f, const struct heap_state *s, int n);

/* ---- growth: paths files and --diff ------------------------------------
 * A paths file is text: "# luaspy heap paths 1", then one line per path
 * "BYTES<TAB>COUNT<TAB>PATH": the own bytes and count of the objects
 * whose shortest path from the roots is PATH, integer keys written [*]
 * so that the entries of one array add up. */

/* Write the paths of states S[0..N) (heap_graph_finish done) to F.
 * 0, or -LS_E_NOMEM / -LS_E_IO. */
int heap_paths_write(FILE *f, const struct heap_state *s, int n);

/* Write to F what changed between the paths file OLD (read, untrusted:
 * lines over 4 KiB or malformed are skipped and counted) and the states
 * S[0..N): per path, the change of bytes and count, largest first, those
 * above the noise (4 KiB and 0.1 % of the total bytes). Returns 0, or
 * -LS_E_IO when OLD cannot be read (errno kept), -LS_E_NOMEM. */
int heap_diff_write(FILE *f, const char *old, const struct heap_state *s, int n);

/* What one snapshot held (paths and totals by type), kept to show the
 * next one's growth (--interval). */
struct heap_prev;
/* Keep the paths and totals of S[0..N) (heap_graph_finish done) in a new
 * *OUT (heap_prev_free). 0 or -LS_E_NOMEM. */
int heap_prev_take(const struct heap_state *s, int n, struct heap_prev **out);
void heap_prev_free(struct heap_prev *p);
/* Write to F what changed between PREV and S[0..N): per type the change
 * of bytes and objects, then per path as heap_diff_write does; SINCE
 * names PREV in the headings. 0, or -LS_E_NOMEM / -LS_E_IO. */
int heap_growth_write(FILE *f, const char *since, const struct heap_prev *prev, const struct heap_state *s,
		      int n);

/* Write the text summary of states S[0..N) of process PID to F;
 * PAUSE_MS how long its threads were stopped, < 0 for a core file. */
void heap_print_text(FILE *f, int pid, const char *runtime, const struct heap_state *s, int n,
		     double pause_ms);

/* ---- helpers the walkers share ------------------------------------------ */

/* --nonblocking: read the 16 bytes at object O again through LIVE (the
 * uncached reader) into NOW16 and compare them with H16, as the walk
 * read them, bytes MARKED (the collector's colour) and VOLATILE (a
 * table's metamethod cache: PUC flags, LuaJIT nomm) aside; a difference
 * or a failed read counts one in S->changed (the list link, the type or
 * the first size fields moved while the walk read the object). Returns
 * 0 (same), 1 (changed: NOW16 holds the live bytes) or -1 (unreadable:
 * freed and unmapped). The walkers go on along the live link when the
 * type byte TT is the same (the collector relinked it), and end the
 * list otherwise. */
int heap_recheck(struct heap_state *s, struct mem *live, uint64_t o, const uint8_t *h16, int marked,
		 int volatile_off, uint8_t *now16);

/* Walk each of the N states at ADDRS with WALK(CTX, addr, state) into a
 * new array *OUT (want_names from FLAGS' HEAP_WANT_NAMES); a state whose
 * walk fails (negative error) is left out. Returns the states walked, or
 * -LS_E_NOTLUA (N is 0), -LS_E_NOMEM, -LS_E_GARBAGE (no walk succeeded). */
int heap_walk_states(const uint64_t *addrs, int n, unsigned flags,
		     int (*walk)(void *ctx, uint64_t addr, struct heap_state *s), void *ctx,
		     struct heap_state **out);

/* Cycle check of a linked list (Brent): heap_cycle_seen(C, next) after
 * each step is 1 when NEXT was met before, in O(list length) steps. */
struct heap_cycle {
	uint64_t saved, steps, power;
};
#define HEAP_CYCLE_INIT { 0, 0, 1 }
static inline int heap_cycle_seen(struct heap_cycle *c, uint64_t next)
{
	if (next && next == c->saved)
		return 1;
	if (++c->steps == c->power) {
		c->saved = next;
		c->power <<= 1;
		c->steps = 0;
	}
	return 0;
}

/* The interned name of the key string at ADDR: from the walk's cache, or
 * READ(CTX, ADDR) (which reads the target; its result is cached; NULL
 * is returned as is and not cached). */
const char *heap_key_name(struct heap_state *s, uint64_t addr,
			  const char *(*read)(void *ctx, uint64_t addr), void *ctx);

/* Reading an array of the target in chunks: N elements of SIZE bytes
 * from ADDR into BUF (BUFBYTES, at least SIZE). heap_chunk_next gives
 * the next chunk (*FIRST: index of its first element, *K: elements), or
 * NULL at the end or when a read fails (C->failed set). */
struct heap_chunks {
	struct mem *m;
	uint64_t addr, n, done, per;
	size_t size;
	uint8_t *buf;
	int failed;
};
void heap_chunks_init(struct heap_chunks *c, struct mem *m, uint64_t addr, uint64_t n, size_t size,
		      void *buf, size_t bufbytes);
const uint8_t *heap_chunk_next(struct heap_chunks *c, uint64_t *first, uint64_t *k);

#endif
