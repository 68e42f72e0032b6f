/* vm_puc_int.h: what the files of the PUC Lua walker share (vm_puc.c,
 * vm_puc_probe.c, vm_puc_walk.c, vm_puc_proto.c, vm_puc_image.c): limits,
 * struct vm and who owns which part of it, the small bounded readers, and
 * the functions one file gives another. Not for other modules: vm_puc.h
 * is the family's interface (it is included beside vm_luajit.h, which
 * has its own struct vm). */
#ifndef LUASPY_VM_PUC_INT_H
#define LUASPY_VM_PUC_INT_H

#include <stdint.h>
#include <string.h>
#include "htab.h"
#include "intern.h"
#include "limit.h"
#include "vm.h"
#include "vm_puc.h"

/* Limits. A table that grows says its bound in memory; one that is cut
 * counts what it drops (limit.h: one -v line, a --stats count). */
#define MAX_STATES     4096    /* main states kept per process: vm->states grows
                                * up to it (32 KiB); past it limit_hit() */
#define MAX_COROS      65536   /* coroutines listed from the allgc walk: vm->coros
                                * grows up to it (512 KiB); past it limit_hit() */
#define MAX_GC_VISIT   400000  /* objects visited per allgc walk; past it limit_hit() */
#define MAX_CI_STEPS   200000  /* CallInfo links followed per thread: a longer
                                * chain is -LS_E_GARBAGE (LUAI_MAXSTACK 1e6 slots
                                * holds fewer frames) */
#define MAX_RAW        MAX_CI_STEPS /* CallInfos copied per sample: vm->raw grows
                                * up to it (64 B each, 12.8 MiB at most, only for
                                * a chain that deep); merge_stacks() elides the
                                * middle of a stack that long */
#define MAX_THREADS_L  200     /* nested lua_States walked per OS thread, and the
                                * resume chain followed: LUAI_MAXCCALLS (200),
                                * since lua_resume refuses to nest deeper (ldo.c);
                                * past it limit_hit() */
#define MAX_EXEC       8       /* luaV_execute code ranges; past it limit_hit() */
#define MAX_CNAMES     20000   /* C function names from _LOADED (320 KiB);
                                * past it limit_hit() */
#define PROTO_CACHE    1024    /* Proto cache slots (direct mapped) */
#define MAX_SIZECODE   (1 << 22)
#define STR_MAX        1024
#define PUC_STR_(x) #x
#define PUC_XSTR(x) PUC_STR_(x)     /* a limit's number as a string literal */
#define GC_BLOCK       (64u << 10) /* read-ahead for the allgc walk */

/* one CallInfo as copied by capture() */
struct puc_raw {
	uint64_t L;          /* lua_State it belongs to */
	uint64_t ci;         /* CallInfo address */
	uint64_t cl;         /* closure address (0 for a light C function) */
	uint64_t proto;      /* Lua: Proto* */
	uint64_t cfn;        /* C: lua_CFunction */
	uint64_t savedpc;
	uint32_t status;     /* callstatus (5.2+) */
	int32_t tailcalls;   /* 5.1 */
	uint8_t lua;         /* 1 Lua function, 0 C function */
	uint8_t first;       /* first (innermost) frame of its lua_State */
	uint8_t last;        /* outermost frame of its lua_State */
};

struct puc_proto {
	uint64_t addr, code_addr, source_addr;
	int sizecode, linedefined, lastlinedefined;
	const char *chunk;   /* formatted chunk name (interned) */
	uint32_t *code;
	int32_t *line;       /* line per pc, NULL when stripped */
	int nloc;
	struct { const char *name; int startpc, endpc; } *loc;
	int nup;
	const char **upname;
	int nk;
	uint64_t k_addr;
	int np;
	uint64_t p_addr;
	/* call-site names by pc, computed on first use (the Proto is
	 * immutable while its header matches); "" = no name */
	const char **cs_name, **cs_what;
};

struct cname { uint64_t f; const char *name; };
/* a lua_State that may run on the thread captured, and its errorJmp */
struct puc_cand { uint64_t L, ej; };
struct range { uint64_t lo, hi; };

struct vm {
	/* What the probe found (puc_probe) and discovery adds to
	 * (puc_discover, after the release): the walk reads these and never
	 * writes them. */
	const struct puc_layout *lay;
	int minor, patch;
	char desc[96];
	uint64_t ident;
	const char *lua_module;        /* module holding lua_ident */
	uint64_t *states;              /* main lua_States (grown, MAX_STATES) */
	int nstates;
	size_t capstates;
	uint64_t *coros;               /* other threads (allgc walk; grown, MAX_COROS) */
	int ncoros;
	size_t capcoros;
	const char *coros_cut;         /* the last allgc walk stopped at a bound: which */
	struct cname *cn;
	int ncn;
	uint64_t co_resume;            /* coroutine.resume */
	uint64_t co_yield;             /* coroutine.yield */
	struct range exec[MAX_EXEC];   /* luaV_execute code (symbols, opcode table) */
	int nexec;
	const char *exec_how;
	uint64_t resume_fn;            /* lua_resume */

	/* The walker's own state and caches (capture, walk; puc_coroutines
	 * walks with them too): discovery never reads them. */
	struct puc_proto *pcache[PROTO_CACHE];
	/* Protos evicted from pcache during the walk in progress: its frames
	 * may still point at them; freed when it ends (puc_protos_release).
	 * A walk reads at most MAX_RAW Protos: grown as needed. */
	struct puc_proto **retired;
	int nretired;
	size_t capretired;
	/* capture scratch: raw frames of the last captured thread (grown,
	 * MAX_RAW), and the states tried (grown as seen) */
	pid_t raw_tid;
	int nraw, raw_err;
	struct puc_raw *raw;
	size_t capraw;
	uint64_t *cseen;
	struct puc_cand *cand;
	size_t capcseen, capcand;
	unsigned pcreg_votes[UREG_NREGS]; /* which register held luaV_execute's pc */
	/* luaV_execute ranges learned from C-function anchors (stripped
	 * binaries where the probe found none) */
	struct range wexec[MAX_EXEC];
	int nwexec;

	/* Function ranges by pc (puc_fde_of), for probe and walk alike: a
	 * cache of what the modules' ELF tables say, never of target memory. */
	struct { uint64_t pc, lo, hi; } fde[256];
};

/* ---- small readers (bounded: every string is NUL-terminated by us) ---- */


static inline int rd64(struct mem *m, uint64_t a, uint64_t *v) { return mem_read_u64(m, a, v); }
static inline int rd8(struct mem *m, uint64_t a, uint8_t *v) { return mem_read_u8(m, a, v); }

static inline uint64_t g64(const uint8_t *b, int off) { uint64_t v; memcpy(&v, b + off, 8); return v; }
static inline uint32_t g32(const uint8_t *b, int off) { uint32_t v; memcpy(&v, b + off, 4); return v; }
static inline uint16_t g16(const uint8_t *b, int off) { uint16_t v; memcpy(&v, b + off, 2); return v; }

static inline int ptr_ok(uint64_t p)
{
	return p >= 0x1000 && p < (1ull << 47) && (p & 7) == 0;
}

/* tag of a TValue copied into B (16 bytes) */
static inline unsigned tv_tag(const struct puc_layout *lay, const uint8_t *b)
{
	return lay->tv_tt_size == 1 ? b[8] : g32(b, 8);
}

/* Read the TString at A into BUF (at most MAX bytes); returns length or -1. */
static inline int read_tstring(const struct puc_layout *lay, struct mem *m, uint64_t a, char *buf,
			size_t max)
{
	uint8_t h[32];
	if (!ptr_ok(a) || lay->ts_data > 32 || mem_read(m, a, h, (size_t)lay->ts_data) < 0)
		return -1;
	uint64_t len;
	if (h[8] != lay->gct_sstr && h[8] != lay->gct_lstr)
		return -1;
	if (lay->str_len == PUC_STR_SHRLEN && h[8] == lay->gct_sstr)
		len = h[11];
	else
		len = g64(h, 16);
	if (len > (1u << 24))
		return -1;
	size_t n = len < max ? (size_t)len : max;
	if (n && mem_read(m, a + (uint64_t)lay->ts_data, buf, n) < 0)
		return -1;
	buf[n] = 0;
	return (int)n;
}

static inline const char *intern_tstring(const struct puc_layout *lay, struct mem *m, uint64_t a)
{
	char buf[STR_MAX + 1];
	int n = read_tstring(lay, m, a, buf, STR_MAX);
	return n < 0 ? NULL : intern_n(buf, (size_t)n);
}


/* state_active: is L inside a Lua call (ci != base_ci)? LB: its lua_State copy. */
static inline int state_active(const struct puc_layout *lay, uint64_t L, const uint8_t *lb)
{
	uint64_t ci = g64(lb, lay->L_ci);
	if (lay->L_end_ci >= 0)
		return ci != g64(lb, lay->L_base_ci);
	return ci != L + (uint64_t)lay->L_base_ci;
}

/* ---- vm_puc_probe.c: states, C function names, luaV_execute ---------------- */

/* Main states: symbols (globalL, lctx), a .data/.bss pre-pass, then the
 * allocation-block invariant over the heap (docs/puc-lua.md §9). First
 * forgets the states of VM->states no longer valid (closed), then adds
 * those found (up to MAX_STATES) at its end. Returns how many were added.
 * Slow (a heap scan): never inside a stop window. */
int puc_find_states(struct vm *vm, struct target *t);
/* C function names from the _LOADED table of state L into VM->cn. */
void puc_load_cnames(struct vm *vm, struct target *t, uint64_t L);
/* The name package.loaded gives C function F, or NULL. */
const char *puc_cname_find(const struct vm *vm, uint64_t f);
/* coroutine.resume and coroutine.yield from the names learned. */
void puc_set_co_names(struct vm *vm);
/* List the coroutines (allgc walk) into VM->coros again; returns how many
 * were not listed before. */
int puc_refresh_coros(struct vm *vm, struct mem *m);
/* Start and end (*END) of the function (CFI FDE) covering PC, or 0;
 * cached in VM->fde (the walker's cache). */
uint64_t puc_fde_of(struct vm *vm, struct target *t, uint64_t pc, uint64_t *end);
/* Function start of native frame NF (symbol, else its FDE), or 0. */
uint64_t puc_native_start(struct vm *vm, struct target *t, const struct native_frame *nf);
/* vm_ops.probe */
int puc_probe(struct target *t, unsigned flags, struct vm **out, char *why, size_t whylen);

/* ---- vm_puc_locals.c: dump --locals ----------------------------------------- */

/* vm_ops.locals (vm.h): the Lua frames of VM->raw (TS's last capture). */
int puc_locals(struct vm *vm, struct target *t, struct thread_snap *ts, size_t str_max,
	       vm_vars_fn *fn, void *arg);

/* ---- vm_puc.c -------------------------------------------------------------- */

/* Free VM and every table it grew (states, coroutines, names, Protos,
 * capture scratch). NULL is allowed. */
void puc_vm_free(struct vm *vm);

/* ---- vm_puc_proto.c: Protos and call-site names --------------------------- */

/* The Proto at A, from the cache (VM->pcache) when its header still
 * matches; NULL when A is not a valid Proto. Valid until the walk ends
 * (puc_protos_release): a Proto the cache evicts meanwhile (another one
 * in its slot, or the same address read again with another header) is
 * retired, not freed. */
struct puc_proto *puc_proto_get(struct vm *vm, struct mem *m, uint64_t a);
/* End of a walk: free the Protos retired during it. */
void puc_protos_release(struct vm *vm);
/* Free every cached and retired Proto. */
void puc_protos_free(struct vm *vm);
/* Name (interned) of the function called by instruction PC of caller
 * Proto P, *WHAT its kind ("global", "method"...), or NULL (cached per pc). */
const char *puc_callsite_name(struct vm *vm, struct mem *m, struct puc_proto *p, int pc,
			      const char **what);

/* ---- vm_puc_walk.c: capture and walk --------------------------------------- */

/* The coroutine that L is running through coroutine.resume/wrap, or 0. */
uint64_t puc_resume_child(struct vm *vm, struct mem *m, uint64_t L);
/* Copy the CallInfo chain of L (LB: its lua_State copy) into VM->raw.
 * 0 or -LS_E_*. */
int puc_read_chain(struct vm *vm, struct mem *m, uint64_t L, const uint8_t *lb);
/* vm_ops.capture and vm_ops.walk */
int puc_capture(struct vm *vm, struct target *t, struct thread_snap *ts);
int puc_walk(struct vm *vm, struct target *t, struct thread_snap *ts, struct lua_walk *lw,
	     struct walk_info *info);
/* One walk of the frames in VM->raw into LW, no retry (coroutines, images). */
int puc_walk_raw(struct vm *vm, struct target *t, struct thread_snap *ts, struct lua_walk *lw,
		 struct walk_info *info);

/* ---- vm_puc_heap.c ---------------------------------------------------------- */

/* vm_ops.heap (vm.h) for PUC Lua: every main state's objects, sizes and
 * largest tables and strings (docs/heap.md §2). */
int puc_heap(struct vm *vm, struct target *t, struct mem *m, unsigned flags,
	     struct heap_state **out);

#endif
