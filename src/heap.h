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
#include "htab.h"

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

#define HEAP_TOP 10              /* entries in each "largest" list */
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

/* One table reached by the path search: how it was reached. */
struct heap_path_node {
	uint64_t addr;
	int64_t parent;              /* entry index, -1 for a root */
	const char *key;             /* interned root name or string key; NULL: IDX */
	int64_t idx;                 /* integer key when KEY is NULL */
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
	const char *cut;             /* static text: the bound that stopped the walk, or NULL */
	struct heap_top_table tables[HEAP_TOP];
	int ntables;
	struct heap_top_string strings[HEAP_TOP];
	int nstrings;
	/* the path search (breadth first from the roots over table keys) */
	struct heap_path_node *pn;
	size_t npn, cappn;
	struct htab pidx;            /* table address -> pn index */
	const char *path_cut;        /* static text, or NULL */
};

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

/* Path search. heap_path_add records table ADDR reached from entry
 * PARENT (-1: a root named KEY) by string key KEY or, when KEY is NULL,
 * integer key IDX. Returns the new entry's index, -1 when ADDR was
 * already reached (first path kept: breadth-first gives the shortest),
 * or -2 when the HEAP_MAX_PATH_TABLES bound (S->path_cut) or memory
 * stops the search. Entries are visited in index order by the walker. */
int64_t heap_path_add(struct heap_state *s, uint64_t addr, int64_t parent, const char *key,
		      int64_t idx);
/* Write the path of table ADDR into BUF (LEN bytes): "_G.cache",
 * "registry._LOADED[\"x\"]", "_G.list[3]"; returns 0, or -1 when the
 * search did not reach ADDR. Keys that are not identifiers are quoted
 * and escaped; a path longer than LEN ends in "...". */
int heap_path_of(const struct heap_state *s, uint64_t addr, char *buf, size_t len);

/* Write the text summary of states S[0..N) of process PID to F. */
void heap_print_text(FILE *f, int pid, const char *runtime, const struct heap_state *s, int n,
		     double pause_ms);

#endif
