/* sampler_bpf_rec.h: what the eBPF tick program (src/bpf/sampler_bpf_tick.bpf.c)
 * and luaspy (sampler_bpf.c) share: the per-process configuration the
 * program reads from its map and the record it writes at each tick.
 * Plain fixed-width types only: this header is compiled for the BPF
 * target too (clang -target bpf), where libc headers are not used.
 * docs/sampling.md §8 ("The Lua state at the tick"). */
#ifndef LUASPY_SAMPLER_BPF_REC_H
#define LUASPY_SAMPLER_BPF_REC_H

#define LSBPF_THREADS 2             /* threads copied per tick: g->cur_L, then
                                     * the main thread (its resumer, most often) */
#define LSBPF_HDR_MAX 128           /* bytes of a lua_State header copied */
#define LSBPF_STACK0_MAX (16u << 10) /* bytes of cur_L's Lua stack copied */
#define LSBPF_STACK1_MAX (8u << 10)  /* bytes of the main thread's */
#define LSBPF_SLACK 256u            /* bytes copied above the highest slot in use */
#define LSBPF_MAX_PROCS 64          /* processes configured at once */
#define LSBPF_DATA_BYTES (LSBPF_STACK0_MAX + LSBPF_STACK1_MAX) /* a record's data */
/* PUC Lua (LSBPF_KIND_PUC): the data is a list of chunks, each a struct
 * lsbpf_chunk and LEN bytes of target memory, padded to 8 */
#define LSBPF_CHUNK_MAX 256u        /* bytes of one chunk (a lua_State is <= 208) */
#define LSBPF_PUC_STATES 4          /* main lua_States configured per process */
#define LSBPF_PUC_DEPTH 4           /* lua_States copied per main state: it and the
                                     * coroutines it resumes, innermost last */
#define LSBPF_PUC_CI 64             /* CallInfos copied per lua_State */
#define LSBPF_PUC_STEPS (LSBPF_PUC_STATES * LSBPF_PUC_DEPTH * (LSBPF_PUC_CI + 2)) /* bpf_loop steps */
#define LSBPF_PUC_EJ_SPAN (64ull << 20) /* an errorJmp this far above the tick's rsp
                                     * may be on the ticked thread's stack */
#define LSBPF_KIND_LUAJIT 0
#define LSBPF_KIND_PUC 1

/* Record flags, per thread I: FL_HDR(I) its header was read, FL_STK(I)
 * its stack window, FL_CUT(I) the window did not reach down to
 * L->stack (the stack is larger than the copy: the frames below were
 * read live). LSBPF_FL_G: g's vmstate, cur_L and jit_base were read. */
#define LSBPF_FL_G        0x1u
#define LSBPF_FL_HDR(i)   (0x10u << (i))
#define LSBPF_FL_STK(i)   (0x100u << (i))
#define LSBPF_FL_CUT(i)   (0x1000u << (i))
#define LSBPF_FL_PUC      0x2u      /* data is chunks (PUC Lua) */
#define LSBPF_FL_PUC_CUT  0x4u      /* a chain was longer than what was copied
                                     * (LSBPF_PUC_CI, LSBPF_PUC_DEPTH, the data full) */

/* One process's configuration, keyed by its pid (tgid). Offsets come
 * from the LuaJIT walker's layout rows (vm_luajit_layout.c, through
 * lj_tick_layout() in vm_luajit.h); nothing here is a layout of its own. */
struct lsbpf_cfg {
	unsigned long long g;        /* global_State address */
	unsigned int g_vmstate;      /* offset of vmstate (i32) */
	unsigned int g_cur_L;        /* offset of cur_L (GCRef); jit_base follows */
	unsigned int g_cur_len;      /* bytes from cur_L to the end of jit_base (<= 16) */
	unsigned int g_mainthref;    /* offset of mainthref (GCRef) */
	unsigned int gcref;          /* 8 (GC64) or 4 */
	unsigned int hdr_len;        /* lua_State bytes to copy (<= LSBPF_HDR_MAX) */
	unsigned int L_stack;        /* offsets in lua_State: stack (MRef) */
	unsigned int L_top;          /* top (TValue *) */
	unsigned int L_base;         /* base (TValue *) */
	unsigned int L_stacksize;    /* stacksize (u32, slots) */
	unsigned int g_jit_base;     /* offset of jit_base (MRef) */
	/* PUC Lua (kind LSBPF_KIND_PUC): G is the first main lua_State,
	 * P_STATES all of them (P_NSTATES, G first); offsets
	 * and tags from the walker's layout row (vm_puc_layout.c, through
	 * sampler_bpf_puc.c) */
	unsigned int kind;           /* LSBPF_KIND_* */
	unsigned int puc51;          /* 1: CallInfo array base_ci..ci (5.1), 0: list */
	unsigned int p_L_size;       /* lua_State bytes (<= LSBPF_CHUNK_MAX) */
	unsigned int p_L_ci;         /* ci (CallInfo *) */
	unsigned int p_L_base_ci;    /* 5.1: base_ci (CallInfo *); 5.2+: the embedded CallInfo */
	unsigned int p_ci_size;      /* CallInfo bytes (<= LSBPF_CHUNK_MAX) */
	unsigned int p_ci_func;      /* func (StkId) */
	unsigned int p_ci_previous;  /* previous (CallInfo *), 5.2+ */
	unsigned int p_tt_size;      /* TValue tag: 4 or 1 bytes at +8 */
	unsigned int p_tag_lcf, p_tag_ccl, p_tag_thread;
	unsigned int p_ccl_upvalue;  /* CClosure upvalue[0] (coroutine.wrap's thread) */
	unsigned int p_L_errorJmp;   /* errorJmp (struct lua_longjmp *, on a C stack) */
	unsigned int p_nstates;      /* main states in P_STATES (<= LSBPF_PUC_STATES) */
	unsigned int pad2;
	unsigned long long p_states[LSBPF_PUC_STATES];
};

/* One chunk of a PUC record's data: LEN bytes at target ADDR follow. */
struct lsbpf_chunk {
	unsigned long long addr;
	unsigned int len;
	unsigned int pad;
};

/* One thread's part of a record. */
struct lsbpf_thr {
	unsigned long long L;        /* lua_State address, 0: none */
	unsigned long long lo;       /* target address of its stack window */
	unsigned int len;            /* bytes of the window in the record's data */
	unsigned int pad;
	unsigned char hdr[LSBPF_HDR_MAX];
};

/* One tick: written by the program into its ring buffer just before
 * the kernel writes the perf sample of the same overflow (same thread,
 * same clock, CLOCK_MONOTONIC: stamped 0.2-3.3 µs after the sample's
 * time, docs/sampling.md §8). DATA holds
 * thread 0's window at 0 and thread 1's at LSBPF_STACK0_MAX; a window is
 * at most its maximum less 8 bytes. The record is written up to the end
 * of the last window present. A PUC Lua record (LSBPF_FL_PUC) has no
 * windows (TH unused): DATA is a list of chunks (struct lsbpf_chunk and
 * its bytes, padded to 8), as many as the record's length holds. */
struct lsbpf_rec {
	unsigned long long time_ns;  /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	unsigned int tid;
	unsigned int flags;          /* LSBPF_FL_* */
	unsigned long long g;
	unsigned char gvm[4];        /* g->vmstate */
	unsigned int pad;
	unsigned char gcur[16];      /* g->cur_L ... g->jit_base (g_cur_len bytes) */
	struct lsbpf_thr th[LSBPF_THREADS];
	unsigned char data[LSBPF_DATA_BYTES];
};

#endif
