/* sampler_bpf_tick.bpf.c: eBPF program run by the kernel at each tick of
 * the perf sampler's events (BPF_PROG_TYPE_PERF_EVENT, attached with
 * PERF_EVENT_IOC_SET_BPF to every thread's event, sampler_perf.c). It
 * copies, while the thread is interrupted, what the LuaJIT walk needs
 * and what changes as soon as the thread runs on: g's vmstate, cur_L and
 * jit_base, the running lua_State's header and its Lua stack window,
 * and the same for the main thread (most often the resumer of a
 * coroutine), into a ring buffer luaspy pairs with the perf sample
 * (sampler_bpf.c). For PUC Lua it copies the main lua_State, its
 * CallInfo chain with each frame's function slot, and the same for the
 * coroutines it resumes (puc_tick below). Returns 1: the kernel then
 * writes the perf sample as without the program. Built with clang -target bpf; the record layout
 * is sampler_bpf_rec.h; docs/sampling.md §8. */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>
#include "../sampler_bpf_rec.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LSBPF_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct lsbpf_cfg);
} lsbpf_cfg SEC(".maps");

/* scratch for one record (too large for the BPF stack) */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct lsbpf_rec);
} lsbpf_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} lsbpf_ring SEC(".maps");

static __always_inline __u64 rd_ref(const struct lsbpf_cfg *c, __u64 addr)
{
	__u64 v = 0;
	if (c->gcref == 8) {
		bpf_probe_read_user(&v, 8, (const void *)addr);
		return v & 0x7fffffffffffull;
	}
	__u32 w = 0;
	bpf_probe_read_user(&w, 4, (const void *)addr);
	return w;
}

/* A GCRef or MRef (a pointer: 8 bytes with GC64, else 4) at OFF of HDR. */
static __always_inline __u64 hdr_ref(const struct lsbpf_cfg *c, const unsigned char *hdr, __u32 off)
{
	__u64 v = 0;
	/* the mask keeps the verifier sure of the bound (an offset past
	 * the header reads the record's next bytes, never past it) */
	__builtin_memcpy(&v, hdr + (off & (LSBPF_HDR_MAX - 1)), 8);
	return c->gcref == 8 ? v & 0x7fffffffffffull : v & 0xffffffffull;
}

/* Copy thread L's header into R->th[I] and its stack window, at most
 * MAX bytes (a power of two) below its highest slot in use (L->top,
 * L->base, HINT: the tick's BASE register when it lies in the stack),
 * into R->data at AT (constants: the verifier must see the bounds).
 * Returns the bytes of the window. */
static __always_inline __u32 copy_thread(const struct lsbpf_cfg *c, struct lsbpf_rec *r, int i,
					 __u64 L, __u64 hint, const __u32 at, const __u32 max)
{
	struct lsbpf_thr *t = &r->th[i];
	__u32 hl = c->hdr_len;
	t->L = L;
	t->len = 0;
	if (hl > LSBPF_HDR_MAX)
		hl = LSBPF_HDR_MAX;
	if (!L || bpf_probe_read_user(t->hdr, hl, (const void *)L) < 0)
		return 0;
	r->flags |= LSBPF_FL_HDR(i);
	__u64 stack = hdr_ref(c, t->hdr, c->L_stack);
	__u32 ssz = 0;
	__builtin_memcpy(&ssz, t->hdr + (c->L_stacksize & (LSBPF_HDR_MAX - 1)), 4);
	__u64 end = stack + (__u64)ssz * 8;
	__u64 top = hdr_ref(c, t->hdr, c->L_top), base = hdr_ref(c, t->hdr, c->L_base);
	__u64 hi = top > base ? top : base;
	if (hint >= stack && hint < end && hint > hi)
		hi = hint;
	if (!stack || hi < stack || hi > end)
		return 0;
	hi += LSBPF_SLACK;
	if (hi > end)
		hi = end;
	/* max - 8: the mask below bounds the length without changing it */
	__u64 lo = hi - stack > max - 8 ? hi - (max - 8) : stack;
	__u32 len = (__u32)(hi - lo) & (max - 1);
	if (bpf_probe_read_user(r->data + at, len, (const void *)lo) < 0)
		return 0;
	t->lo = lo;
	t->len = len;
	r->flags |= LSBPF_FL_STK(i);
	if (lo > stack)
		r->flags |= LSBPF_FL_CUT(i);
	return len;
}

/* ---- PUC Lua -------------------------------------------------------------- */

/* What the walker (vm_puc_walk.c: find_cands, capture_state,
 * puc_read_chain, puc_resume_child) reads that changes as the thread runs
 * on: each lua_State (status, ci, errorJmp, savedpc), its CallInfo chain
 * (5.2-5.4 a list from L->ci through previous to &L->base_ci; 5.1 the
 * array base_ci..ci, lstate.c/ldo.c), each frame's function slot and the
 * one above it (coroutine.resume's argument), from the main state down
 * the coroutines resumed. Copied as chunks, one bpf_loop step each (the
 * verifier checks the step once, not every iteration). A chunk is a copy
 * of target memory at the tick whatever it turns out to be: copying one
 * too many (a thread passed to a C function that does not resume it)
 * costs room, never a wrong read. */
struct puc_walk {
	__u32 pos;       /* bytes of the record's data used */
	__u32 si;        /* main state (index in c.p_states) */
	__u32 depth;     /* lua_States done of this main state's chain */
	__u32 nci;       /* CallInfos copied of the current one */
	__u32 cut;       /* a chain not copied whole */
	__u32 full;      /* the record's data is full */
	__s32 inner_at;  /* data offset of the innermost frame's function slot, -1 */
	__u64 L;         /* current lua_State, 0: done */
	__u64 ci;        /* next CallInfo to copy; 0: the state's header first */
	__u64 base;      /* where the chain ends (5.1: base_ci; 5.2+: &L->base_ci) */
	__u64 rsp;       /* the tick's user rsp, 0: unknown */
	struct lsbpf_cfg c; /* the process's (a copy: no hash lookup per step) */
};

/* The walk's state lives in a map, not on the stack: values read from a
 * map are unknown to the verifier, so it checks puc_step a few times
 * instead of following every counter through every iteration (on the
 * stack, four main states made it give up at a million instructions). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct puc_walk);
} lsbpf_walk SEC(".maps");

/* Append LEN bytes at target ADDR to R's data as a chunk. Returns the
 * offset of its bytes in R->data (at most LSBPF_DATA_BYTES -
 * LSBPF_CHUNK_MAX), or -1 (unreadable, too long, or the data full:
 * W->full). */
static __always_inline long put(struct lsbpf_rec *r, struct puc_walk *w, __u64 addr, __u32 len)
{
	__u32 p = w->pos;
	if (p > LSBPF_DATA_BYTES - sizeof(struct lsbpf_chunk) - LSBPF_CHUNK_MAX) {
		w->cut = w->full = 1;
		return -1;
	}
	if (len == 0 || len > LSBPF_CHUNK_MAX || !addr)
		return -1;
	if (bpf_probe_read_user(r->data + p + sizeof(struct lsbpf_chunk), len, (const void *)addr) < 0)
		return -1;
	struct lsbpf_chunk *h = (struct lsbpf_chunk *)(r->data + p);
	h->addr = addr;
	h->len = len;
	h->pad = 0;
	w->pos = p + sizeof *h + ((len + 7) & ~7u);
	return p + sizeof *h;
}

/* 8 bytes at OFF of the chunk whose bytes start at AT (put's return);
 * OFF past the chunk's longest possible length gives 0 */
static __always_inline __u64 get64(const struct lsbpf_rec *r, long at, __u32 off)
{
	__u64 v = 0;
	if (at < 0 || at > LSBPF_DATA_BYTES - LSBPF_CHUNK_MAX || off > LSBPF_CHUNK_MAX - 8)
		return 0;
	__builtin_memcpy(&v, r->data + at + off, 8);
	return v;
}

static __always_inline unsigned tv_tt(const struct lsbpf_cfg *c, const unsigned char *tv)
{
	unsigned t = 0;
	if (c->p_tt_size == 1)
		return tv[8];
	__builtin_memcpy(&t, tv + 8, 4);
	return t;
}

/* The coroutine that the innermost frame (a C function: coroutine.resume's
 * argument, coroutine.wrap's upvalue) runs, or 0. AT: its function
 * slot's copy (32 bytes: the slot and the one above). */
static __always_inline __u64 puc_child(const struct lsbpf_rec *r, const struct lsbpf_cfg *c, long at)
{
	unsigned char tv[32];
	__u64 v = 0;
	if (at < 0 || at > LSBPF_DATA_BYTES - LSBPF_CHUNK_MAX)
		return 0;
	__builtin_memcpy(tv, r->data + at, 32);
	unsigned t0 = tv_tt(c, tv), t1 = tv_tt(c, tv + 16);
	if (t0 != c->p_tag_lcf && t0 != c->p_tag_ccl)
		return 0;
	if (t1 == c->p_tag_thread) {
		__builtin_memcpy(&v, tv + 16, 8);
		return v;
	}
	if (t0 != c->p_tag_ccl)
		return 0;
	__builtin_memcpy(&v, tv, 8);
	if (!v || bpf_probe_read_user(tv, 16, (const void *)(v + c->p_ccl_upvalue)) < 0 ||
	    tv_tt(c, tv) != c->p_tag_thread)
		return 0;
	__builtin_memcpy(&v, tv, 8);
	return v;
}

/* On to the next main state's chain; 1 (stop) when there is none, or
 * the data is full. */
static __always_inline long next_state(struct puc_walk *w)
{
	__u32 k = w->si + 1;
	if (w->full || k >= w->c.p_nstates || k >= LSBPF_PUC_STATES)
		return 1;
	w->si = k;
	/* constant indexes: the verifier refuses a variable one on the stack */
	switch (k) {
	case 1: w->L = w->c.p_states[1]; break;
	case 2: w->L = w->c.p_states[2]; break;
	default: w->L = w->c.p_states[3]; break;
	}
	w->ci = 0;
	w->depth = 0;
	return w->L ? 0 : 1;
}

/* One bpf_loop step: a lua_State's header, or one CallInfo and its
 * function slot, or the move to the coroutine resumed. 0 goes on, 1
 * stops. */
static long puc_step(__u64 i, void *arg)
{
	__u32 zero = 0;
	struct puc_walk *w = bpf_map_lookup_elem(&lsbpf_walk, &zero);
	struct lsbpf_rec *r = bpf_map_lookup_elem(&lsbpf_scratch, &zero);
	(void)i;
	(void)arg;
	if (!r || !w || !w->L)
		return 1;
	const struct lsbpf_cfg *c = &w->c;
	if (!w->ci) {
		long at = put(r, w, w->L, c->p_L_size);
		if (at < 0)
			return next_state(w);
		w->ci = get64(r, at, c->p_L_ci);
		w->base = c->puc51 ? get64(r, at, c->p_L_base_ci) : w->L + c->p_L_base_ci;
		w->nci = 0;
		w->inner_at = -1;
		/* a main state inside a protected call on another thread's
		 * stack does not run here: its header is enough */
		__u64 ej = get64(r, at, c->p_L_errorJmp);
		if (!w->depth && w->rsp && ej && (ej < w->rsp || ej - w->rsp > LSBPF_PUC_EJ_SPAN))
			return next_state(w);
		return w->ci ? 0 : next_state(w);
	}
	int more = c->puc51 ? w->ci > w->base : w->ci != w->base;
	if (more && w->nci < LSBPF_PUC_CI) {
		__u64 ci = w->ci;
		long at = put(r, w, ci, c->p_ci_size);
		if (at < 0)
			return next_state(w);
		long fat = put(r, w, get64(r, at, c->p_ci_func), 32);
		if (!w->nci)
			w->inner_at = (__s32)fat;
		w->nci++;
		w->ci = c->puc51 ? ci - c->p_ci_size : get64(r, at, c->p_ci_previous);
		return w->ci ? 0 : next_state(w);
	}
	if (more)
		w->cut = 1;
	__u64 child = puc_child(r, c, w->inner_at);
	if (++w->depth >= LSBPF_PUC_DEPTH || child == w->L) {
		w->cut |= child != 0;
		return next_state(w);
	}
	if (!child)
		return next_state(w);
	w->L = child;
	w->ci = 0;
	return 0;
}

static __always_inline void puc_tick(struct lsbpf_rec *r, const struct lsbpf_cfg *c, __u64 rsp)
{
	__u32 zero = 0;
	struct puc_walk *w = bpf_map_lookup_elem(&lsbpf_walk, &zero);
	if (!w)
		return;
	__builtin_memset(w, 0, __builtin_offsetof(struct puc_walk, c));
	w->L = c->g;
	w->inner_at = -1;
	w->rsp = rsp;
	__builtin_memcpy(&w->c, c, sizeof w->c);
	r->flags = LSBPF_FL_PUC;
	bpf_loop(LSBPF_PUC_STEPS, puc_step, NULL, 0);
	if (w->cut)
		r->flags |= LSBPF_FL_PUC_CUT;
	__u32 pos = w->pos;
	if (pos > LSBPF_DATA_BYTES)
		pos = LSBPF_DATA_BYTES;
	__u64 size = __builtin_offsetof(struct lsbpf_rec, data) + (__u64)pos;
	if (size > sizeof *r)
		size = sizeof *r;
	bpf_ringbuf_output(&lsbpf_ring, r, size, BPF_RB_NO_WAKEUP);
}

SEC("perf_event")
int lsbpf_tick(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = (__u32)(id >> 32), zero = 0;
	const struct lsbpf_cfg *c = bpf_map_lookup_elem(&lsbpf_cfg, &pid);
	if (!c || !c->g)
		return 1;
	struct lsbpf_rec *r = bpf_map_lookup_elem(&lsbpf_scratch, &zero);
	if (!r)
		return 1;
	r->time_ns = bpf_ktime_get_ns();
	r->tid = (__u32)id;
	r->flags = 0;
	r->g = c->g;
	r->th[0].L = r->th[1].L = 0;
	r->th[0].len = r->th[1].len = 0;
	if (c->kind == LSBPF_KIND_PUC) {
		puc_tick(r, c, (ctx->regs.cs & 3) == 3 ? ctx->regs.rsp : 0);
		return 1;
	}
	__u32 gl = c->g_cur_len;
	if (gl > sizeof r->gcur)
		gl = sizeof r->gcur;
	if (bpf_probe_read_user(r->gvm, 4, (const void *)(c->g + c->g_vmstate)) == 0 &&
	    bpf_probe_read_user(r->gcur, gl, (const void *)(c->g + c->g_cur_L)) == 0)
		r->flags |= LSBPF_FL_G;
	__u64 cur = 0, jb = 0;
	if (c->gcref == 8) {
		__builtin_memcpy(&cur, r->gcur, 8);
		cur &= 0x7fffffffffffull;
	} else {
		__u32 w;
		__builtin_memcpy(&w, r->gcur, 4);
		cur = w;
	}
	/* BASE is rdx in the interpreter and on traces (vm_x64.dasc,
	 * lj_target_x86.h RID_BASE); jit_base names a trace's */
	if (c->g_jit_base)
		jb = rd_ref(c, c->g + c->g_jit_base);
	__u64 hint = (ctx->regs.cs & 3) == 3 ? ctx->regs.rdx : 0;
	if (jb > hint)
		hint = jb;
	__u32 n0 = 0;
	if (r->flags & LSBPF_FL_G)
		n0 = copy_thread(c, r, 0, cur, hint, 0, LSBPF_STACK0_MAX);
	/* the main thread's window sits at a fixed offset: the verifier
	 * could not bound a variable one */
	__u64 main = rd_ref(c, c->g + c->g_mainthref);
	__u32 n1 = 0;
	if (main && main != cur)
		n1 = copy_thread(c, r, 1, main, 0, LSBPF_STACK0_MAX, LSBPF_STACK1_MAX);
	__u64 size = __builtin_offsetof(struct lsbpf_rec, data) + (n1 ? LSBPF_STACK0_MAX + n1 : n0);
	if (size > sizeof *r)
		size = sizeof *r;
	bpf_ringbuf_output(&lsbpf_ring, r, size, BPF_RB_NO_WAKEUP);
	return 1;
}
