/* tests/t_sampler_bpf.c: the eBPF tick copy's pairing and overlay
 * (src/sampler_bpf.c) over synthetic records, no program loaded: a
 * perf sample gets the record of its thread within 200 us, older records
 * of the thread are dropped, and reads inside the copied ranges return
 * the tick's bytes while the rest comes from the memory under it;
 * records whose sizes do not fit are refused. A PUC Lua record's chunks
 * (lua_State, CallInfos, function slots) are read the same way, adjacent
 * ones as one range, and a chunk that does not fit ends the list. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "proc_mem.h"
#include "sampler_bpf.h"
#include "sampler_bpf_rec.h"

#define G 0x10000ull
#define L0 0x20000ull
#define L1 0x20100ull
#define S0 0x30000ull
#define S1 0x34000ull
#define HEAD offsetof(struct lsbpf_rec, data)

static const struct lsbpf_cfg cfg = {
	.g = G, .g_vmstate = 184, .g_cur_L = 368, .g_cur_len = 16, .g_mainthref = 200,
	.gcref = 8, .hdr_len = 92, .L_stack = 56, .L_top = 40, .L_base = 32,
	.L_stacksize = 88, .g_jit_base = 376,
};

/* A record of TID at T: both threads, 512 and 256 bytes of stack.
 * Returns its length as the ring gives it. */
static size_t make(struct lsbpf_rec *r, uint32_t tid, uint64_t t)
{
	memset(r, 0, sizeof *r);
	r->time_ns = t;
	r->tid = tid;
	r->g = G;
	r->flags = LSBPF_FL_G | LSBPF_FL_HDR(0) | LSBPF_FL_STK(0) | LSBPF_FL_HDR(1) | LSBPF_FL_STK(1);
	uint32_t vm = 0x01020304;
	memcpy(r->gvm, &vm, 4);
	uint64_t cur = L0;
	memcpy(r->gcur, &cur, 8);
	r->th[0].L = L0;
	r->th[0].lo = S0;
	r->th[0].len = 512;
	memset(r->th[0].hdr, 0x33, sizeof r->th[0].hdr);
	memset(r->data, 0x11, 512);
	r->th[1].L = L1;
	r->th[1].lo = S1;
	r->th[1].len = 256;
	memset(r->th[1].hdr, 0x44, sizeof r->th[1].hdr);
	memset(r->data + LSBPF_STACK0_MAX, 0x22, 256);
	return HEAD + LSBPF_STACK0_MAX + 256;
}

static int all(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

int main(void)
{
	/* the target's memory now: 0xee everywhere */
	static uint8_t heap[0x30000];
	int wcut = -1;                  /* sampler_bpf_pair's *CUT */
	memset(heap, 0xee, sizeof heap);
	struct mem_region reg = { .addr = G, .data = heap, .len = sizeof heap };
	struct mem_image live;
	mem_image_init(&live, &reg, 1);

	struct sampler_bpf *b = NULL;
	CHECK(sampler_bpf_new_unloaded(&b) == 0 && b);
	struct lsbpf_rec *r = malloc(sizeof *r);
	CHECK(r != NULL);
	if (!b || !r)
		return check_summary("t_sampler_bpf");
	const struct bpf_tick_counts *c = sampler_bpf_counts(b);

	size_t len = make(r, 42, 1000000);
	CHECK(sampler_bpf_feed(b, r, len) == 0);
	CHECK(sampler_bpf_pair(b, 7, 42, 1000000, &wcut) == NULL, "process not configured");
	CHECK(sampler_bpf_config(b, 7, &cfg) == 1);
	CHECK(sampler_bpf_pair(b, 7, 43, 1000000, &wcut) == NULL, "another thread's record");
	CHECK(sampler_bpf_pair(b, 7, 42, 1000000 - 300000, &wcut) == NULL, "300 us apart");
	CHECK(c->unpaired == 2, "%llu", (unsigned long long)c->unpaired);

	/* the sample 2 us before its record (the kernel stamps the sample first) */
	struct mem_overlay *ov = sampler_bpf_pair(b, 7, 42, 1000000 - 2000, &wcut);
	CHECK(ov != NULL);
	if (ov) {
		ov->under = &live.base;
		uint8_t buf[600];
		uint32_t vm = 0;
		uint64_t cur = 0;
		CHECK(mem_read(&ov->base, G + 184, &vm, 4) == 0 && vm == 0x01020304, "vmstate 0x%x", vm);
		CHECK(mem_read(&ov->base, G + 368, &cur, 8) == 0 && cur == L0);
		CHECK(mem_read(&ov->base, G + 384, buf, 8) == 0 && all(buf, 8, 0xee), "past jit_base: live");
		CHECK(mem_read(&ov->base, L0, buf, 92) == 0 && all(buf, 92, 0x33), "cur_L's header");
		CHECK(mem_read(&ov->base, L0 + 92, buf, 4) == 0 && all(buf, 4, 0xee), "past the header: live");
		CHECK(mem_read(&ov->base, L1, buf, 92) == 0 && all(buf, 92, 0x44), "main thread's header");
		CHECK(mem_read(&ov->base, S0, buf, 512) == 0 && all(buf, 512, 0x11), "cur_L's window");
		CHECK(mem_read(&ov->base, S0 + 508, buf, 8) == 0 && all(buf, 4, 0x11) && all(buf + 4, 4, 0xee),
		      "a read across the window's end");
		CHECK(mem_read(&ov->base, S1, buf, 256) == 0 && all(buf, 256, 0x22), "main's window");
		CHECK(mem_read(&ov->base, S1 - 8, buf, 8) == 0 && all(buf, 8, 0xee), "below main's window");
	}
	CHECK(c->paired == 1 && c->max_delta_ns == 2000, "paired %llu gap %llu",
	      (unsigned long long)c->paired, (unsigned long long)c->max_delta_ns);
	CHECK(sampler_bpf_pair(b, 7, 42, 1000000, &wcut) == NULL, "a record pairs once");

	/* two ticks of one thread: the later sample takes the later record,
	 * the earlier record (its sample lost) is dropped */
	sampler_bpf_feed(b, r, make(r, 42, 5000000));
	sampler_bpf_feed(b, r, make(r, 42, 6000000));
	uint64_t orph = c->orphans;
	CHECK(sampler_bpf_pair(b, 7, 42, 6000500, &wcut) != NULL);
	CHECK(c->orphans == orph + 1, "orphans %llu", (unsigned long long)c->orphans);
	CHECK(sampler_bpf_pair(b, 7, 42, 5000000, &wcut) == NULL, "the earlier record was dropped");

	/* another state's record (the process's state changed) */
	make(r, 42, 7000000);
	r->g = G + 0x1000;
	sampler_bpf_feed(b, r, len);
	CHECK(sampler_bpf_pair(b, 7, 42, 7000000, &wcut) == NULL, "record of another state");

	/* sizes that do not fit are refused */
	make(r, 42, 8000000);
	r->th[0].len = LSBPF_STACK0_MAX + 8;
	CHECK(sampler_bpf_feed(b, r, sizeof *r) == -1, "window over its maximum");
	make(r, 42, 8000000);
	CHECK(sampler_bpf_feed(b, r, HEAD + LSBPF_STACK0_MAX + 100) == -1, "main's window past the record");
	CHECK(sampler_bpf_feed(b, r, HEAD - 1) == -1, "shorter than the head");
	CHECK(sampler_bpf_feed(b, r, sizeof *r + 1) == -1, "longer than a record");
	CHECK(sampler_bpf_pair(b, 7, 42, 8000000, &wcut) == NULL, "a refused record is not paired");

	/* a full pool drops the oldest */
	orph = c->orphans;
	for (int i = 0; i < 100; i++)
		sampler_bpf_feed(b, r, make(r, 1000 + (uint32_t)i, 9000000));
	CHECK(c->orphans > orph, "no record dropped with 100 waiting");
	CHECK(sampler_bpf_pair(b, 7, 1099, 9000000, &wcut) != NULL, "the newest is kept");
	CHECK(sampler_bpf_pair(b, 7, 1000, 9000000, &wcut) == NULL, "the oldest was dropped");

	/* a sample 300 us after the thread's record: that record's own sample
	 * was lost, it is dropped, not paired with a later tick */
	sampler_bpf_feed(b, r, make(r, 42, 20000000));
	orph = c->orphans;
	CHECK(sampler_bpf_pair(b, 7, 42, 20300000, &wcut) == NULL, "a record 300 us older");
	CHECK(c->orphans == orph + 1 && sampler_bpf_pair(b, 7, 42, 20000000, &wcut) == NULL, "dropped");

	/* PUC Lua: chunks. A 208-byte lua_State at L0 (0x55), two adjacent
	 * 72-byte CallInfos at L1 (0x66, 0x67), a function slot overlapping
	 * the second CallInfo's end (0x77: the same tick, the first chunk
	 * wins), then a chunk too long for its record: the list ends there */
	static const struct lsbpf_cfg pcfg = { .g = L0, .kind = LSBPF_KIND_PUC, .p_L_size = 208,
					       .p_ci_size = 72 };
	CHECK(sampler_bpf_config(b, 8, &pcfg) == 1);
	memset(r, 0, sizeof *r);
	r->time_ns = 30000000;
	r->tid = 50;
	r->g = L0;
	r->flags = LSBPF_FL_PUC | LSBPF_FL_PUC_CUT;
	size_t pos = 0;
	struct { uint64_t a; uint32_t n; uint8_t v; } chunks[] = {
		{ L0, 208, 0x55 }, { L1, 72, 0x66 }, { L1 + 72, 72, 0x67 }, { L1 + 128, 32, 0x77 },
		{ S0, 64, 0x88 },
	};
	for (size_t i = 0; i < sizeof chunks / sizeof *chunks; i++) {
		struct lsbpf_chunk h = { .addr = chunks[i].a, .len = chunks[i].n };
		memcpy(r->data + pos, &h, sizeof h);
		memset(r->data + pos + sizeof h, chunks[i].v, chunks[i].n);
		pos += sizeof h + ((chunks[i].n + 7u) & ~7u);
	}
	/* the last chunk claims more than the record holds */
	CHECK(sampler_bpf_feed(b, r, HEAD + pos - 8) == 0);
	uint64_t cut = c->cut;
	ov = sampler_bpf_pair(b, 8, 50, 30000000, &wcut);
	CHECK(ov != NULL, "PUC record paired");
	if (ov) {
		ov->under = &live.base;
		uint8_t buf[300];
		CHECK(mem_read(&ov->base, L0, buf, 208) == 0 && all(buf, 208, 0x55), "lua_State");
		CHECK(mem_read(&ov->base, L0 + 200, buf, 16) == 0 && all(buf, 8, 0x55) && all(buf + 8, 8, 0xee),
		      "across the state's end");
		CHECK(mem_read(&ov->base, L1 + 64, buf, 16) == 0 && all(buf, 8, 0x66) && all(buf + 8, 8, 0x67),
		      "across two adjacent CallInfos");
		CHECK(mem_read(&ov->base, L1 + 128, buf, 16) == 0 && all(buf, 16, 0x67), "overlap: first chunk");
		CHECK(mem_read(&ov->base, L1 + 144, buf, 16) == 0 && all(buf, 16, 0x77), "the function slot");
		CHECK(mem_read(&ov->base, L1 + 160, buf, 8) == 0 && all(buf, 8, 0xee), "past it: live");
		CHECK(mem_read(&ov->base, S0, buf, 8) == 0 && all(buf, 8, 0xee), "a chunk past the record: live");
	}
	CHECK(c->cut == cut + 1 && wcut == 1, "a cut chain counted and said");
	/* a LuaJIT record after it reads as before (the overlay's reader back) */
	sampler_bpf_feed(b, r, make(r, 42, 40000000));
	ov = sampler_bpf_pair(b, 7, 42, 40000000, &wcut);
	CHECK(ov != NULL && wcut == 0);
	if (ov) {
		uint8_t buf[8];
		ov->under = &live.base;
		CHECK(mem_read(&ov->base, S0, buf, 8) == 0 && all(buf, 8, 0x11), "LuaJIT window after PUC");
	}
	sampler_bpf_forget(b, 8);

	sampler_bpf_forget(b, 7);
	sampler_bpf_feed(b, r, make(r, 42, 10000000));
	CHECK(sampler_bpf_pair(b, 7, 42, 10000000, &wcut) == NULL, "forgotten process");
	sampler_bpf_close(b);
	free(r);
	return check_summary("t_sampler_bpf");
}
