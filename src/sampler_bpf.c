/* sampler_bpf.c: loading the eBPF tick program, configuring it per
 * process, pairing its records with perf samples (sampler_bpf.h). */
#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "err.h"
#include "msg.h"
#include "sampler_bpf.h"
#include "sampler_bpf_rec.h"
#include "target.h"
#include "vm.h"
#include "vm_luajit.h"

#if HAVE_BPF
#include <stdarg.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

/* the object file, embedded by the build (sampler_bpf_obj.c) */
extern const unsigned char sampler_bpf_obj[];
extern const size_t sampler_bpf_obj_len;
#else
struct bpf_object;
struct ring_buffer;
#endif

#define POOL 64                    /* records waiting for their perf sample */
#define MAX_CHUNKS (LSBPF_DATA_BYTES / (sizeof(struct lsbpf_chunk) + 8))
#define PAIR_NS 200000ull          /* a record and its sample are at most this apart
                                    * (measured: docs/sampling.md §8); a thread's
                                    * ticks are 1/rate s of its CPU time apart */

struct proc_cfg {
	pid_t pid;
	struct lsbpf_cfg cfg;
};

struct sampler_bpf {
	struct bpf_object *obj;
	struct ring_buffer *rb;
	int prog_fd, cfg_fd;
	struct proc_cfg procs[LSBPF_MAX_PROCS];
	int nprocs;
	struct lsbpf_rec *pool;    /* POOL records */
	int used[POOL];            /* 1: slot holds a record */
	uint64_t seq[POOL];        /* arrival order, for eviction */
	size_t plen[POOL];         /* bytes of data written (PUC chunks) */
	uint64_t nseq;
	struct mem_overlay ov;     /* the last pair's */
	/* a PUC record's chunks (its ov reads them: chunks_read) */
	struct mem_region ch[MAX_CHUNKS];
	int nch;
	struct bpf_tick_counts c;
};

static struct sampler_bpf *bpf_new(void)
{
	struct sampler_bpf *b = calloc(1, sizeof *b);
	if (!b || !(b->pool = malloc(POOL * sizeof *b->pool))) {
		free(b);
		return NULL;
	}
	b->prog_fd = b->cfg_fd = -1;
	return b;
}

int sampler_bpf_new_unloaded(struct sampler_bpf **out)
{
	return (*out = bpf_new()) ? 0 : -LS_E_NOMEM;
}

#if HAVE_BPF
static int print_fn(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	/* one message may hold the verifier's log: a line each, the last
	 * lines kept (they say why) */
	char *buf = NULL;
	if (vasprintf(&buf, fmt, ap) < 0)
		return 0;
	char *p = buf, *nl;
	int lines = 0;
	for (char *q = buf; *q; q++)
		lines += *q == '\n';
	for (int i = 0; p && *p; i++, p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		if (i < 4 || i >= lines - 24)
			msg_debug(2, "libbpf: %s", p);
	}
	free(buf);
	return 0;
}
#endif

/* Keep record DATA (LEN bytes) in a free slot (or the oldest). */
int sampler_bpf_feed(struct sampler_bpf *b, const void *data, size_t len)
{
	size_t head = offsetof(struct lsbpf_rec, data);
	b->c.records++;
	if (len < head || len > sizeof(struct lsbpf_rec))
		return -1;
	int k = -1;
	for (int i = 0; i < POOL && k < 0; i++)
		if (!b->used[i])
			k = i;
	if (k < 0) {
		k = 0;
		for (int i = 1; i < POOL; i++)
			if (b->seq[i] < b->seq[k])
				k = i;
		b->c.orphans++;
	}
	memcpy(&b->pool[k], data, len);
	const struct lsbpf_rec *r = &b->pool[k];
	/* the windows must lie in what was written */
	if (r->th[0].len > LSBPF_STACK0_MAX || r->th[1].len > LSBPF_STACK1_MAX ||
	    r->th[0].len > len - head ||
	    (r->th[1].len && LSBPF_STACK0_MAX + (size_t)r->th[1].len > len - head))
		return -1;
	b->used[k] = 1;
	b->seq[k] = ++b->nseq;
	b->plen[k] = len - head;
	return 0;
}

#if HAVE_BPF
/* ring_buffer callback */
static int on_record(void *ctx, void *data, size_t len)
{
	sampler_bpf_feed(ctx, data, len);
	return 0;
}

int sampler_bpf_open(struct sampler_bpf **out, char *why, size_t whylen)
{
	struct sampler_bpf *b = bpf_new();
	if (!b)
		return -LS_E_NOMEM;
	libbpf_set_print(print_fn);
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "luaspy_tick");
	b->obj = bpf_object__open_mem(sampler_bpf_obj, sampler_bpf_obj_len, &oo);
	if (!b->obj) {
		snprintf(why, whylen, "eBPF object: %s", strerror(errno));
		goto fail;
	}
	int rc = bpf_object__load(b->obj);
	if (rc < 0) {
		/* as root, EACCES and E2BIG are the verifier's: not privileges */
		int verifier = geteuid() == 0 && (rc == -EACCES || rc == -E2BIG);
		snprintf(why, whylen, "eBPF program not loaded: %s%s", strerror(-rc),
			 verifier ? " (refused by the kernel's verifier; -vv shows its log)" :
			 rc == -EPERM || rc == -EACCES ? " (needs root or CAP_BPF and CAP_PERFMON)" : "");
		goto fail;
	}
	struct bpf_program *prog = bpf_object__find_program_by_name(b->obj, "lsbpf_tick");
	b->prog_fd = prog ? bpf_program__fd(prog) : -1;
	b->cfg_fd = bpf_object__find_map_fd_by_name(b->obj, "lsbpf_cfg");
	int ring_fd = bpf_object__find_map_fd_by_name(b->obj, "lsbpf_ring");
	if (b->prog_fd < 0 || b->cfg_fd < 0 || ring_fd < 0) {
		snprintf(why, whylen, "eBPF object: program or map missing");
		goto fail;
	}
	b->rb = ring_buffer__new(ring_fd, on_record, b, NULL);
	if (!b->rb) {
		snprintf(why, whylen, "eBPF ring buffer: %s", strerror(errno));
		goto fail;
	}
	*out = b;
	return 0;
fail:
	sampler_bpf_close(b);
	return -LS_E_UNSUPPORTED;
}

#else
int sampler_bpf_open(struct sampler_bpf **out, char *why, size_t whylen)
{
	(void)out;
	snprintf(why, whylen, "built without the eBPF tick copy (configure found no libbpf or "
		 "no clang with a bpf target)");
	return -LS_E_UNSUPPORTED;
}
#endif

void sampler_bpf_close(struct sampler_bpf *b)
{
	if (!b)
		return;
#if HAVE_BPF
	ring_buffer__free(b->rb);
	bpf_object__close(b->obj);
#endif
	free(b->pool);
	free(b);
}

int sampler_bpf_prog_fd(const struct sampler_bpf *b)
{
	return b->prog_fd;
}

static struct proc_cfg *proc_find(struct sampler_bpf *b, pid_t pid)
{
	for (int i = 0; i < b->nprocs; i++)
		if (b->procs[i].pid == pid)
			return &b->procs[i];
	return NULL;
}

int sampler_bpf_target(struct sampler_bpf *b, pid_t pid, struct target *t)
{
	if (!t || !t->vm || !t->vm_ops)
		return 0;
	if (!strcmp(t->vm_ops->family, "puc")) {
		struct lsbpf_cfg c;
		return sampler_bpf_puc_cfg(t, &c) ? sampler_bpf_config(b, pid, &c) : 0;
	}
	if (strcmp(t->vm_ops->family, "luajit"))
		return 0;
	const struct vm *vm = t->vm;
	if (vm->found.ng < 1)
		return 0;
	const struct lj_layout *l = vm->lay;
	const struct lj_objlayout *ol = vm->ol;
	struct lsbpf_cfg c;
	memset(&c, 0, sizeof c);
	c.g = vm->found.g[0];
	c.g_vmstate = l->g_vmstate;
	c.g_cur_L = l->g_cur_L;
	c.g_jit_base = l->g_jit_base;
	c.g_cur_len = (unsigned)(l->g_jit_base - l->g_cur_L + ol->gcref);
	c.kind = LSBPF_KIND_LUAJIT;
	c.g_mainthref = l->g_mainthref;
	c.gcref = ol->gcref;
	c.hdr_len = ol->L_stacksize + 4u;
	c.L_stack = ol->L_stack;
	c.L_top = ol->L_top;
	c.L_base = ol->L_base;
	c.L_stacksize = ol->L_stacksize;
	if (l->g_jit_base < l->g_cur_L || c.g_cur_len > 16 || c.hdr_len > LSBPF_HDR_MAX)
		return 0;
	return sampler_bpf_config(b, pid, &c);
}

int sampler_bpf_config(struct sampler_bpf *b, pid_t pid, const struct lsbpf_cfg *cp)
{
	struct lsbpf_cfg c = *cp;
	struct proc_cfg *p = proc_find(b, pid);
	if (p && !memcmp(&p->cfg, &c, sizeof c))
		return 1;
	if (!p) {
		if (b->nprocs == LSBPF_MAX_PROCS)
			return 0;
		p = &b->procs[b->nprocs++];
		p->pid = pid;
	}
	p->cfg = c;
#if HAVE_BPF
	uint32_t key = (uint32_t)pid;
	if (b->cfg_fd >= 0 && bpf_map_update_elem(b->cfg_fd, &key, &c, BPF_ANY) < 0) {
		msg_debug(1, "pid %d: eBPF tick copy not configured: %s", (int)pid, strerror(errno));
		*p = b->procs[--b->nprocs];
		return -LS_E_UNSUPPORTED;
	}
#endif
	if (c.kind == LSBPF_KIND_PUC)
		msg_debug(1, "pid %d: eBPF tick copy of lua_State 0x%llx%s and the coroutines "
			  "%s (%d deep: headers, %d CallInfos each with their function "
			  "slots, %u bytes in all)", (int)pid, (unsigned long long)c.g,
			  c.p_nstates > 1 ? " and other main states" : "",
			  c.p_nstates > 1 ? "they resume" : "it resumes",
			  LSBPF_PUC_DEPTH, LSBPF_PUC_CI, LSBPF_DATA_BYTES);
	else
		msg_debug(1, "pid %d: eBPF tick copy of state 0x%llx (cur_L and main thread: header, "
			  "%u and %u bytes of Lua stack)", (int)pid, (unsigned long long)c.g,
			  LSBPF_STACK0_MAX, LSBPF_STACK1_MAX);
	return 1;
}

void sampler_bpf_forget(struct sampler_bpf *b, pid_t pid)
{
	struct proc_cfg *p = proc_find(b, pid);
	if (!p)
		return;
#if HAVE_BPF
	uint32_t key = (uint32_t)pid;
	if (b->cfg_fd >= 0)
		bpf_map_delete_elem(b->cfg_fd, &key);
#endif
	*p = b->procs[--b->nprocs];
}

static uint64_t gap(uint64_t a, uint64_t b)
{
	return a > b ? a - b : b - a;
}

/* The waiting record of TID closest in time to TIME_NS, within PAIR_NS;
 * older ones of TID are dropped as orphans (their samples were lost or
 * walked without). Slot or -1. */
static int pick(struct sampler_bpf *b, pid_t tid, uint64_t time_ns)
{
	int best = -1;
	for (int i = 0; i < POOL; i++) {
		const struct lsbpf_rec *r = &b->pool[i];
		if (!b->used[i] || r->tid != (uint32_t)tid || gap(r->time_ns, time_ns) > PAIR_NS)
			continue;
		if (best < 0 || gap(r->time_ns, time_ns) < gap(b->pool[best].time_ns, time_ns))
			best = i;
	}
	uint64_t before = best >= 0 ? b->pool[best].time_ns : time_ns > PAIR_NS ? time_ns - PAIR_NS : 0;
	for (int i = 0; i < POOL; i++)
		if (b->used[i] && i != best && b->pool[i].tid == (uint32_t)tid && b->pool[i].time_ns < before) {
			b->used[i] = 0;
			b->c.orphans++;
		}
	return best;
}

/* The overlay's read for a PUC record: from the chunk covering each
 * address (chunks may overlap: they copy the same tick), else from UNDER
 * up to the next chunk. */
static ssize_t chunks_read(struct mem *m, uint64_t addr, void *buf, size_t len)
{
	struct sampler_bpf *b = (struct sampler_bpf *)((char *)m - offsetof(struct sampler_bpf, ov));
	return mem_regions_read(b->ch, b->nch, b->ov.under, addr, buf, len);
}

/* B->ch from PUC record R (LEN bytes of data written): each chunk's
 * header and bytes must lie in them; the list ends at the first that
 * does not. */
static void chunks_parse(struct sampler_bpf *b, const struct lsbpf_rec *r, size_t len)
{
	size_t p = 0, hd = sizeof(struct lsbpf_chunk);
	b->nch = 0;
	while (b->nch < (int)MAX_CHUNKS && len >= hd && p <= len - hd) {
		struct lsbpf_chunk h;
		memcpy(&h, r->data + p, hd);
		if (!h.len || h.len > LSBPF_CHUNK_MAX || h.len > len - p - hd || h.addr + h.len < h.addr)
			break;
		b->ch[b->nch].addr = h.addr;
		b->ch[b->nch].data = r->data + p + hd;
		b->ch[b->nch].len = h.len;
		b->nch++;
		p += hd + ((h.len + 7u) & ~7u);
	}
}

struct mem_overlay *sampler_bpf_pair(struct sampler_bpf *b, pid_t pid, pid_t tid, uint64_t time_ns,
				     int *cut)
{
	*cut = 0;
	const struct proc_cfg *p = proc_find(b, pid);
	if (!p) {
		b->c.unconfigured++;
		return NULL;
	}
	int k = pick(b, tid, time_ns);
#if HAVE_BPF
	if (k < 0 && b->rb) {
		/* written just before the sample: maybe not read yet */
		ring_buffer__consume(b->rb);
		k = pick(b, tid, time_ns);
	}
#endif
	if (k < 0 || b->pool[k].g != p->cfg.g) {
		b->c.unpaired++;
		return NULL;
	}
	b->used[k] = 0;
	const struct lsbpf_rec *r = &b->pool[k];
	const struct lsbpf_cfg *c = &p->cfg;
	b->c.paired++;
	uint64_t d = gap(time_ns, r->time_ns);
	msg_debug(3, "tid %d: tick copy %s the perf sample by %.1f us", (int)tid,
		  r->time_ns <= time_ns ? "before" : "after", (double)d / 1e3);
	if (d > b->c.max_delta_ns)
		b->c.max_delta_ns = d;
	mem_overlay_init(&b->ov, NULL, 0, NULL, 0);
	if (r->flags & LSBPF_FL_PUC) {
		chunks_parse(b, r, b->plen[k]);
		b->ov.base.read = chunks_read;
		if (r->flags & LSBPF_FL_PUC_CUT) {
			b->c.cut++;
			*cut = 1;
		}
		return &b->ov;
	}
	if (r->flags & LSBPF_FL_G) {
		mem_overlay_add(&b->ov, r->g + c->g_vmstate, r->gvm, 4);
		mem_overlay_add(&b->ov, r->g + c->g_cur_L, r->gcur, c->g_cur_len);
	}
	for (int i = 0; i < LSBPF_THREADS; i++) {
		const struct lsbpf_thr *t = &r->th[i];
		if (r->flags & LSBPF_FL_HDR(i))
			mem_overlay_add(&b->ov, t->L, t->hdr, c->hdr_len);
		if ((r->flags & LSBPF_FL_STK(i)) && t->len)
			mem_overlay_add(&b->ov, t->lo, r->data + (i ? LSBPF_STACK0_MAX : 0), t->len);
	}
	if (r->flags & LSBPF_FL_CUT(0)) {
		b->c.cut++;
		*cut = 1;
	}
	return &b->ov;
}

const struct bpf_tick_counts *sampler_bpf_counts(const struct sampler_bpf *b)
{
	return &b->c;
}

