/* vm_luajit.h: LuaJIT 2.1 walker internals (vm_luajit*.c only).
 *
 * Layouts are data (vm_luajit_layout.c): one const row per variant for
 * what moves between versions (global_State, GG_State, cframe), one row
 * per reference width for what only depends on GC64 (lua_State, GCfunc,
 * GCproto, GCstr, GCtab, GCtrace).
 * Sources: docs/luajit.md §3-§5 (checked against Debian 12 binaries where marked). */
#ifndef LUASPY_VM_LUAJIT_H
#define LUASPY_VM_LUAJIT_H

#include <stdint.h>
#include <stddef.h>
#include <libelf.h>
#include "vm.h"
#include "vm_luajit_obj.h"

/* Layout row flags */
#define LJL_GC64        0x01  /* 64-bit GC refs, two-slot frames (LJ_FR2) */
#define LJL_OPENRESTY   0x02  /* openresty/luajit2 (lua_State has exdata) */
#define LJL_TARANTOOL   0x04  /* tarantool/luajit fork */
#define LJL_SNAP_MCOFS  0x08  /* SnapShot has mcofs (>= 2021-03-23) */
#define LJL_SNAP8       0x10  /* 8-byte SnapShot, nsnap at old offset (beta3) */

/* What changes between versions of one reference width. */
struct lj_layout {
	const char *name;        /* "upstream 2.1 GC64 2021-06..2024-04 (Debian 12)" */
	const char *source;      /* evidence: "docs/luajit.md §3.6 [src,static,live]" */
	unsigned flags;          /* LJL_* */
	uint16_t g2disp;         /* GG_G2DISP: DISPATCH - g */
	uint16_t sizeof_L;       /* sizeof(lua_State) = offset of g in GG_State */
	/* global_State */
	uint16_t g_gc_state;     /* u8, currentwhite = this - 1 */
	uint16_t g_gc_root;      /* GCRef */
	uint16_t g_vmstate;      /* i32 */
	uint16_t g_strempty;     /* GCstr header */
	uint16_t g_mainthref;    /* GCRef */
	uint16_t g_registrytv;   /* TValue */
	uint16_t g_cur_L;        /* GCRef */
	uint16_t g_jit_base;     /* MRef */
	uint16_t g_jtrace;       /* g -> J.trace (GCRef *), J.sizetrace = +12 */
	/* GCstr */
	uint8_t str_len;         /* offset of len (u32) */
	uint8_t str_data;        /* sizeof(GCstr): data follows */
	/* cframe (x86_64 POSIX) */
	uint8_t cf_size;         /* CFRAME_SIZE */
	uint8_t cf_nres;         /* i32 */
	uint8_t cf_L;            /* SAVE_L */
	uint8_t cf_pc;           /* SAVE_PC */
	uint8_t cf_prev;         /* previous cframe (8 bytes) */
	int8_t vmst_min;         /* lowest valid negative vmstate (-7 upstream) */
};

extern const struct lj_layout lj_layouts[];
extern const int lj_nlayouts;

/* What the VM code said (docs/luajit.md §8.4); 0 fields = not found. */
struct lj_codeinfo {
	int gc64;                /* 1, 0, or -1 unknown */
	uint32_t g2disp;
	int32_t vmstate;         /* global_State offsets derived from the code, -1 unknown */
	int32_t cur_L;
};

/* Pick the row matching CI and the symbol flags (LJL_OPENRESTY,
 * LJL_TARANTOOL in HOSTFLAGS). Returns the row or NULL. */
const struct lj_layout *lj_layout_match(const struct lj_codeinfo *ci, unsigned hostflags);

/* Scan VM machine code CODE (LEN bytes) for the entry, vmstate and cur_L
 * patterns. Fills CI. Returns 0 when G2DISP was found, -1 otherwise. */
int lj_code_derive(const uint8_t *code, size_t len, struct lj_codeinfo *ci);
/* Helpers of the code scans (vm_luajit_layout.c, vm_luajit_derive.c):
 * the little-endian int32 at P (an x86 disp32 or imm32), and the most
 * frequent of the N values V (small N; -1 when N is 0). */
int32_t lj_rd32(const uint8_t *p);
int32_t lj_mode_of(const int32_t *v, int n);

/* ---- the VM found in a process ---- */

#define LJ_MAX_STATES 4096          /* states kept per process, and candidates queued:
                                     * found.g and found.cand grow up to it (32 KiB +
                                     * 96 KiB); a state past it is not used, and its
                                     * threads' samples are errors with native stacks */
#define LJ_BAD_STATES 64            /* refused candidates remembered (a ring) */
#define LJ_MAX_NAMES 1024
#define LJ_PT_CACHE 512
#define LJ_TID_CACHE 64
#define LJ_LSTACK_MAX (64u << 10)   /* bytes of Lua stack copied per capture */
#define LJ_PARENTS 8                /* threads besides cur_L copied per capture (snap_copy) */
#define LJ_RECENT 8                 /* threads remembered per tid for the next capture */
#define LJ_RESUME_SCAN 4096         /* bytes of C frames looked through for a resumer */
#define LJ_RESUME_TRIES 8           /* candidate resumers read per C boundary */
#define LJ_PSTACK_MAX (32u << 10)   /* bytes of each resumer's stack copied */

struct lj_fname {                    /* C function / builtin name learned at probe */
	uint64_t fn;                 /* GCfunc address */
	uint64_t f;                  /* its C function pointer (0 = none) */
	uint8_t ffid;
	const char *name;            /* interned "string.format" */
};

struct lj_ptinfo {                   /* validated proto, cached by address and
                                      * checked against its contents each walk */
	uint64_t pt;
	uint32_t sizebc, sizept;
	int32_t firstline, numline;
	uint64_t lineinfo, uvinfo, varinfo, k;
	uint32_t sizekgc;
	uint64_t chunkname;
	uint64_t chunkid;            /* the chunk name's contents (chunk_ident) */
	const char *file;            /* interned short_src */
	const char *anon;            /* interned "function <file:line>" or "main chunk" */
	uint32_t stamp;              /* first 8 bytes of bytecode for reuse check */
	uint32_t stamp2;
};

struct lj_namecache {                /* callee names by caller proto + call site */
	uint64_t pt;
	uint32_t pos, ins, sizebc;
	int32_t firstline;
	uint64_t chunkid, varinfo;   /* the proto's chunk and local names: addresses are reused */
	const char *name;            /* NULL: no name */
	int used;
};
#define LJ_NAME_CACHE 1024

struct lj_tidbuf {
	pid_t tid;
	uint64_t g;
	uint8_t *buf;                /* Lua stack copy */
	size_t len;
	uint64_t addr;
	unsigned age;
	uint64_t recent[LJ_RECENT];  /* threads the last walks met, latest first */
	int nrecent;
	uint64_t noscan;             /* outermost cframe whose C frames held no resumer */
	unsigned noscan_uses;        /* captures since noscan was last cleared */
};

/* What the probe and discovery found: states and library names.
 * Owner: vm_luajit_probe.c (lj_probe, lj_discover and their helpers)
 * writes it, never during a capture or a walk held in the stop window;
 * the walker reads it and queues candidates (lj_state_usable), and a
 * walk of a released thread may run lj_learn_now() before it names a
 * frame. */
struct lj_found {
	uint64_t *g;                 /* global_States found (grown, LJ_MAX_STATES) */
	int ng;
	size_t capg;
	uint64_t bad_g[LJ_BAD_STATES]; /* candidates already refused */
	int nbad;
	unsigned nbad_next;          /* bad_g slot to reuse when full */
	/* states met by captures and walks but not in g[]: requests to
	 * discovery (lj_discover() moves the valid ones to g[], the others to
	 * bad_g[]); captures and walks use the valid ones meanwhile */
	struct lj_cand {
		uint64_t g;
		const char *how;     /* "DISPATCH register", "cframe anchor" */
		int ok;              /* lj_check_g() passed */
	} *cand;                     /* grown, LJ_MAX_STATES */
	int ncand;
	size_t capcand;
	struct lj_fname names[LJ_MAX_NAMES];
	int nnames;
	const char *ffname[256];     /* builtin id -> name */
	int quick;                   /* probed with VM_PROBE_QUICK: the heap scan is
	                              * left to discovery, when no state turned up */
	const char *how;             /* how the states were found */
};

/* What dump --locals needs of one frame the walk emitted
 * (thread_snap.want_vars; vm_luajit_locals.c reads them). */
struct lj_lframe {
	uint64_t pt;                 /* GCproto of a Lua frame, 0 for a C frame */
	uint64_t fn;                 /* GCfunc */
	uint64_t slot;               /* frame slot (walk_seg's F): base = slot + 8 */
	uint64_t pc;                 /* bytecode return PC of the frame, 0 unknown */
	uint64_t vdelta;             /* vararg frame: bytes down to the real frame */
	int32_t trace;               /* the trace running it (frame.trace), 0 none */
};

/* What the walker caches between samples: validated protos, call-site
 * names, per-thread stack copies. Owner: vm_luajit.c (capture and walk);
 * the probe never touches it. */
struct lj_cache {
	struct lj_ptinfo pt[LJ_PT_CACHE];
	struct lj_namecache nc[LJ_NAME_CACHE];
	struct lj_tidbuf tb[LJ_TID_CACHE];
	unsigned clock;              /* capture count, ages tb[] */
	/* dump --locals: the frames of the last walk of thread lf_tid that
	 * wanted them (grown, bounded by LUA_WALK_MAX_FRAMES) */
	struct lj_lframe *lf;
	int nlf;
	size_t caplf;
	pid_t lf_tid;
	uint8_t ff_tried[32];        /* builtin ids a walk had lj_learn_now() look for */
};

/* A register save or restore sequence of the VM code (vm_x64.dasc
 * saveregs: push rbp, rbx, r15, r14 [, r13, r12]; sub rsp, CFRAME_SPACE
 * at lj_vm_call, lj_vm_pcall, lj_vm_cpcall, lj_vm_resume; restoreregs:
 * add rsp, CFRAME_SPACE; the pops in reverse; then ret or jmp at
 * vm_leave_unw, vm_unwind_rethrow), where the VM's one CFI rule (CFA =
 * rsp + CFRAME_SIZE) does not hold; and vm_ffi_callback's saveregs_,
 * the same without push rbp (the callback stub pushed it). Found in the
 * code by lj_probe;
 * docs/luajit.md §10.7. */
#define LJ_EDGES 16                  /* sequences kept (LuaJIT 2.1 has 7) */
#define LJ_EDGE_INSNS 9              /* instructions of the longest one */
struct lj_edge {
	uint64_t addr;               /* target address of its first instruction */
	uint8_t exit;                /* 0 saveregs, 1 restoreregs */
	uint8_t ninsn;               /* instructions, the sub/add and ret/jmp included */
	uint8_t off[LJ_EDGE_INSNS + 1]; /* byte offset of each instruction, then the end */
	int8_t reg[LJ_EDGE_INSNS];   /* UREG_* each pushes or pops, -1: none (rbp is UREG_RBP) */
	uint8_t space;               /* CFRAME_SPACE: the sub/add immediate */
	uint8_t stub_rbp;            /* entry without push rbp (vm_ffi_callback's
	                              * saveregs_): the callback stub pushed rbp
	                              * just before, the caller's rbp is there */
};

/* The VM found in a process: what it is (set by lj_probe, then
 * constant), what was found in it, what the walker keeps. */
struct vm {
	const struct lj_layout *lay;
	const struct lj_objlayout *ol;
	uint64_t vm_start, vm_end;   /* VM code range (the big FDE) */
	const char *vm_module;       /* interned basename */
	struct lj_edge edge[LJ_EDGES]; /* register save/restore sequences in the VM code */
	int nedge;
	char desc[160];
	/* a layout no row names, derived at the probe (vm_luajit_derive.c):
	 * lay points here then */
	struct lj_layout derived;
	char derived_name[120];
	struct lj_found found;
	struct lj_cache cache;
};

/* The thread snapshot kept in thread_snap.vm_data. */
struct lj_snap {
	uint32_t magic;
	int32_t vmstate;
	uint64_t g;
	uint64_t cur_L;
	uint64_t jit_base;
	int have;                    /* g fields read */
	int lstack;                  /* index+1 of the tidbuf holding the Lua stack copy */
	uint64_t trace_addr;         /* set by the walk: the pc on a trace of a native
	                              * frame below the leaf (a signal handler
	                              * interrupted the trace), 0 */
};

/* vm_luajit_probe.c */
int lj_probe(struct target *t, unsigned flags, struct vm **out, char *why, size_t whylen);
/* Find the register save and restore sequences (struct lj_edge) in
 * CODE[0..LEN), the VM code at target address START, whose stack
 * adjustment matches CFRAME_SIZE CF_SIZE (pushes + space + return
 * address). Fills OUT (at most MAX); returns how many. Exported for the
 * unit test. */
int lj_edges_find(const uint8_t *code, size_t len, uint64_t start, unsigned cf_size,
		  struct lj_edge *out, int max);
/* Validate G as a global_State of layout VM->lay. 0 or -LS_E_GARBAGE. */
int lj_check_g(struct vm *vm, struct mem *m, uint64_t g);
/* Add G (validated) to VM's states; returns index or -1. Discovery
 * only (probe, lj_discover), never a capture or a walk. */
int lj_add_g(struct vm *vm, struct mem *m, uint64_t g, const char *how);
/* For captures and walks: may G be used as a state? 1 when known or a
 * valid candidate, 0 when refused. A new G is validated (lj_check_g,
 * reads through M only) and queued in VM->found.cand for lj_discover(), found
 * by HOW; nothing else changes. */
int lj_state_usable(struct vm *vm, struct mem *m, uint64_t g, const char *how);
/* vm_ops.discover (vm.h), after the release; sampler.c runs it with its
 * back-off. WHAT (VM_DISC_*): STATES adopts the candidates captures and
 * walks queued and, when still no state is known after a quick probe,
 * scans the heap (a launched program creates its state later; a scan
 * costs up to a second on a big heap); NAMES learns library names again
 * (modules required after the probe). Returns the states and names
 * found. */
int lj_discover(struct vm *vm, struct target *t, unsigned what);
/* For a walk that runs outside the stop window (the thread released,
 * thread_snap.held 0) and meets a C function or builtin (FFID > 1; 1 a
 * lua_CFunction) without a name, before it names the frame: adopts the
 * states captures and walks queued (learning their names), and, for a
 * builtin still unnamed, learns the names of the states known before
 * again. Reads the running target (t->mem.base): the cost of one
 * discovery (2-70 ms), once per new state or builtin id (the walker
 * keeps which, lj_cache.ff_tried). Returns the names added. */
int lj_learn_now(struct vm *vm, struct target *t, uint8_t ffid);
/* Free what VM's found and cache hold, then VM. */
void lj_vm_free(struct vm *vm);
/* Discovery for the candidates queued by lj_state_usable(): the valid
 * ones become states (lj_add_g), the others are remembered as refused.
 * Returns the states added. */
int lj_adopt_candidates(struct vm *vm, struct mem *m);
/* Scan writable anonymous memory (bounded: 512 MiB) for main lua_States
 * and add the valid ones (docs/luajit.md §8.5). Runs on a running target: the
 * fallback when neither symbols nor registers nor cframes named a state. */
void lj_scan_heap(struct vm *vm, struct target *t);
/* Learn library function names of the state G (registry _LOADED). */
int lj_learn_names(struct vm *vm, struct mem *m, uint64_t g);
/* The VM's FDE (> 10 KiB, CFA rsp+80 or +96) of one module: a
 * symtab_each_module callback (ARG a struct lj_fde_find, zeroed by the
 * caller); returns 1 and fills it when found. Exported for
 * fuzz/fuzz_elf.c. */
struct lj_fde_find {
	uint64_t start, end;     /* target addresses */
	const char *module;      /* interned basename */
	int cfa;
};
int lj_fde_cb(void *arg, const char *name, uint64_t start, uint64_t end, Elf *elf,
	      uint64_t bias);
/* Short source name as debug.traceback prints it (lj_debug_shortname). */
void lj_shortsrc(char *out, size_t outlen, const char *chunk, size_t len);

/* vm_luajit.c: the Lua frames of thread L from L->base down, innermost
 * first, without native stack (coroutines, tests). Count or -LS_E_*. */
int lj_thread_frames(struct vm *vm, struct mem *m, uint64_t L, struct frame *out, int max);
/* vm_luajit.c: is PC (target address) in the first LJ_ENTRY_WINDOW
 * (128) bytes after the register saves of a VM entry in VM->edge[]
 * (lj_vm_call, lj_vm_pcall, lj_vm_cpcall, lj_vm_resume,
 * vm_ffi_callback), with no other sequence starting between? There the
 * entry has not stored SAVE_L or linked its cframe yet (vm_x64.dasc):
 * a thread stopped there has no Lua frames on that cframe. 1 yes, 0 no.
 * docs/luajit.md §10.7. */
int lj_entry_window(const struct vm *vm, uint64_t pc);
/* vm_luajit.c: is PC (target address, read through M) in an FFI
 * callback stub (lj_ccallback.c callback_mcode_init, x64: a page of
 * anonymous code whose first 8 bytes hold lj_vm_ffi_callback's address,
 * the start of the VM->edge[] sequence without push rbp, then `mov al, SLOT; jmp short` per slot and, per group
 * of 32, `push rbp; mov ah, SLOT>>8; mov rbp, g; jmp [page]`)? -1 no;
 * 0 yes, rbp not pushed yet (the caller's return address at rsp); 1 yes,
 * pushed (the return address at rsp+8, the caller's rbp at rsp). Told by
 * the instruction at PC. docs/luajit.md §10.6. */
int lj_stub_state(const struct vm *vm, struct mem *m, uint64_t pc);
/* vm_luajit.c: does the frame at BASE (its function at BASE-2 slots, on
 * the Lua stack from STACK) fit a top-frame candidate with PC, as NEED
 * asks? NEED 0 any function, 1 a Lua function with PC in its bytecode,
 * 2 that or an ASM fast function (code in the VM: its pc field points
 * to an instruction with an opcode from BC__MAX on, GG_State's bcff[]),
 * 3 a Lua function, PC unknown, 4 a C function (not ASM) whose frame
 * the VM is entering or leaving (PC its pc field, +4, or the frame's
 * link), 5 an ASM fast function whose link slot holds a result (a
 * TValue; GC64 only) while PC is its link (its return path). 1 fits,
 * 0 not. For tests; docs/luajit.md §10.4. */
int lj_top_frame_ok(struct vm *vm, struct mem *m, uint64_t stack, uint64_t base, uint64_t pc,
		    int need);
/* vm_luajit.c: the name of the function called from Lua function
 * CALLERFN (a GCfuncL address) by the call instruction just before PC
 * (a bytecode address, as a frame's return PC), from the caller's
 * bytecode, constants, upvalue and local names (lj_debug_funcname,
 * lj_debug.c; docs/luajit.md): interned, or NULL when none can be
 * inferred. Reads through M; caches in VM->cache (pt, nc). The walker's
 * own finder, exposed for fuzz/fuzz_names_luajit.c. */
const char *lj_callee_name(struct vm *vm, struct mem *m, uint64_t callerfn, uint64_t pc);
/* The threads below CUR_L on one C stack, innermost first: the threads
 * whose coroutine.resume/wrap, or a C function's lua_resume, runs CUR_L.
 * A coroutine's outermost cframe (PREV = NULL) has its resumer's VM
 * cframe right above it, at cf + CFRAME_SIZE (coroutine.resume), or within
 * LJ_RESUME_SCAN bytes above that (C frames in between), naming the resumer
 * in SAVE_L; the resumer's L->cframe points back (lj_vm_resume in
 * vm_x64.dasc; docs/luajit.md §10.3). The search stops at MAIN_L (the state's
 * main thread: nothing resumes it; 0 = unknown). HDR is CUR_L's header as
 * read (L_stacksize + 4 bytes). Reads through M; fills OUT[i] and, in
 * HDRS[i], that thread's header; at most MAX. NOSCAN (or NULL): the
 * outermost cframe where the scan past C frames last found nothing; that
 * scan is skipped there, and *NOSCAN is set where it fails. Returns how
 * many were found (0 on garbage). */
int lj_find_resumers(struct vm *vm, struct mem *m, uint64_t cur_L, uint64_t main_L,
		     const uint8_t *hdr, uint64_t *out, uint8_t (*hdrs)[128], int max,
		     uint64_t *noscan);

/* vm_luajit_locals.c: start over (LF NULL: forget, keep for TID; -1:
 * none, LJ_LF_CORO: the coroutine lj_coroutines() reports) or append
 * LF[0..N) to VM->cache.lf. 0 or -LS_E_NOMEM. */
#define LJ_LF_CORO (-2)
int lj_lframes_keep(struct vm *vm, pid_t tid, const struct lj_lframe *lf, int n);
/* vm_ops.locals (vm.h) for LuaJIT: reads VM->cache.lf of TS's last walk. */
int lj_locals(struct vm *vm, struct target *t, struct thread_snap *ts, size_t str_max,
	      vm_vars_fn *fn, void *arg);

/* vm_luajit_image.c: walk a memory image M without a process (fuzzing,
 * tests). With G != 0, G is validated as a global_State of layout LAY
 * (lj_check_g, without the dispatch-boundary check: no VM code) and its
 * library names are learned; L 0 then means G's cur_L (else its main
 * thread). Then thread L's Lua frames from L->base down, innermost first,
 * into OUT (at most MAX). Count or -LS_E_* (-LS_E_GARBAGE: G refused). */
int lj_walk_image(const struct lj_layout *lay, struct mem *m, uint64_t g, uint64_t L,
		  struct frame *out, int max);
/* lj_find_resumers() over a memory image (fuzzing, tests): L's header
 * read from M, main thread MAIN_L (0 = unknown). Fills OUT (at most MAX);
 * returns the count, or -LS_E_* when L's header can't be read. */
int lj_resumers_image(const struct lj_layout *lay, struct mem *m, uint64_t L, uint64_t main_L,
		      uint64_t *out, int max);


/* vm_luajit_heap.c: vm_ops.heap (vm.h) for LuaJIT: every state's
 * objects, sizes and largest tables and strings (docs/heap.md §3). */
int lj_heap(struct vm *vm, struct target *t, struct mem *m, unsigned flags,
	     struct heap_state **out);

#endif
