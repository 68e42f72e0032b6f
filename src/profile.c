/* profile.c: interned frames and (tid, stack) -> count aggregation.
 *
 * Two open-addressing hash tables over flat arrays:
 *   frames:  struct frame by value, keyed by every field but addr
 *            (strings are interned, so they compare by pointer);
 *   stacks:  struct pstack {tid, depth, count, offset into ids[]},
 *            keyed by tid and the id sequence (outermost first).
 * Table slots hold index+1 (0 = empty). Both tables stay at most half
 * full, so probes are short; nothing is ever removed except by reset.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "profile.h"

struct pstack {
	uint64_t count;
	uint64_t hash;
	size_t off;       /* first id in p->ids */
	uint32_t depth;
	pid_t tid;
};

struct profile {
	struct profile_meta meta;

	struct frame *frames;
	size_t nframes, frames_cap;
	uint32_t *ftab;          /* frame hash slots: id+1, 0 = empty */
	size_t ftab_cap;         /* power of two */

	struct pstack *stacks;
	size_t nstacks, stacks_cap;
	uint32_t *stab;          /* stack hash slots: index+1, 0 = empty */
	size_t stab_cap;         /* power of two */
	uint32_t *ids;           /* all stacks' frame ids, back to back */
	size_t nids, ids_cap;

	uint32_t *scratch;       /* one stack's ids while adding */
	size_t scratch_cap;

	uint64_t total;
};

/* ------------------------------------------------------------ hashing */

static inline uint64_t mix64(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h;
}

static inline uint64_t fin64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

static uint64_t frame_hash(const struct frame *fr)
{
	uint64_t h = fr->kind;
	h = mix64(h, (uintptr_t)fr->name);
	h = mix64(h, (uintptr_t)fr->file);
	h = mix64(h, (uintptr_t)fr->module);
	h = mix64(h, (uint32_t)fr->line);
	h = mix64(h, (uint32_t)fr->firstline);
	h = mix64(h, (uint32_t)fr->trace);
	return fin64(h);
}

static int frame_same(const struct frame *a, const struct frame *b)
{
	return a->kind == b->kind && a->name == b->name && a->file == b->file &&
	       a->module == b->module && a->line == b->line &&
	       a->firstline == b->firstline && a->trace == b->trace;
}

static uint64_t stack_hash(pid_t tid, const uint32_t *ids, size_t depth)
{
	uint64_t h = fin64((uint64_t)(uint32_t)tid ^ (depth << 32));
	for (size_t i = 0; i < depth; i++)
		h = (h ^ ids[i]) * 0x100000001b3ull + (h >> 29);
	return fin64(h);
}

/* ------------------------------------------------------------ growth */

static int grow_array(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 64;
	while (ncap < need)
		ncap *= 2;
	void *n = realloc(*arr, ncap * elem);
	if (!n)
		return -1;
	*arr = n;
	*cap = ncap;
	return 0;
}

static int ftab_rehash(struct profile *p, size_t ncap)
{
	uint32_t *t = calloc(ncap, sizeof *t);
	if (!t)
		return -1;
	for (size_t id = 0; id < p->nframes; id++) {
		size_t j = frame_hash(&p->frames[id]) & (ncap - 1);
		while (t[j])
			j = (j + 1) & (ncap - 1);
		t[j] = (uint32_t)id + 1;
	}
	free(p->ftab);
	p->ftab = t;
	p->ftab_cap = ncap;
	return 0;
}

static int stab_rehash(struct profile *p, size_t ncap)
{
	uint32_t *t = calloc(ncap, sizeof *t);
	if (!t)
		return -1;
	for (size_t i = 0; i < p->nstacks; i++) {
		size_t j = p->stacks[i].hash & (ncap - 1);
		while (t[j])
			j = (j + 1) & (ncap - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(p->stab);
	p->stab = t;
	p->stab_cap = ncap;
	return 0;
}

/* ------------------------------------------------------------ API */

struct profile *profile_new(void)
{
	struct profile *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	if (ftab_rehash(p, 1024) < 0 || stab_rehash(p, 1024) < 0) {
		profile_free(p);
		return NULL;
	}
	return p;
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	free(p->frames);
	free(p->ftab);
	free(p->stacks);
	free(p->stab);
	free(p->ids);
	free(p->scratch);
	free(p);
}

struct profile_meta *profile_meta(struct profile *p)
{
	return &p->meta;
}

const struct profile_meta *profile_meta_const(const struct profile *p)
{
	return &p->meta;
}

/* Id of FR, interning it on first sight. Returns id or -1 (no memory). */
static int64_t frame_intern(struct profile *p, const struct frame *fr)
{
	uint64_t h = frame_hash(fr);
	size_t mask = p->ftab_cap - 1;
	size_t j = h & mask;
	for (uint32_t v; (v = p->ftab[j]); j = (j + 1) & mask)
		if (frame_same(&p->frames[v - 1], fr))
			return v - 1;
	if (p->nframes >= UINT32_MAX - 1)
		return -1;
	if (grow_array((void **)&p->frames, &p->frames_cap, p->nframes + 1,
		       sizeof *p->frames) < 0)
		return -1;
	uint32_t id = (uint32_t)p->nframes++;
	p->frames[id] = *fr;
	p->ftab[j] = id + 1;
	if (p->nframes * 2 > p->ftab_cap && ftab_rehash(p, p->ftab_cap * 2) < 0) {
		/* Table stays valid but fuller; only fail when it is full. */
		if (p->nframes + 1 >= p->ftab_cap) {
			p->ftab[j] = 0;
			p->nframes--;
			return -1;
		}
	}
	return id;
}

int profile_add(struct profile *p, pid_t tid, const struct stack *st, uint64_t count)
{
	size_t depth = st->n > 0 ? (size_t)st->n : 0;
	if (grow_array((void **)&p->scratch, &p->scratch_cap, depth + 1,
		       sizeof *p->scratch) < 0)
		return -1;
	/* Walkers give innermost first; we keep outermost first. */
	for (size_t i = 0; i < depth; i++) {
		int64_t id = frame_intern(p, &st->f[depth - 1 - i]);
		if (id < 0)
			return -1;
		p->scratch[i] = (uint32_t)id;
	}

	uint64_t h = stack_hash(tid, p->scratch, depth);
	size_t mask = p->stab_cap - 1;
	size_t j = h & mask;
	for (uint32_t v; (v = p->stab[j]); j = (j + 1) & mask) {
		struct pstack *s = &p->stacks[v - 1];
		if (s->hash == h && s->tid == tid && s->depth == depth &&
		    (depth == 0 ||
		     memcmp(p->ids + s->off, p->scratch, depth * sizeof *p->ids) == 0)) {
			s->count += count;
			p->total += count;
			return 0;
		}
	}

	if (p->nstacks >= UINT32_MAX - 1)
		return -1;
	if (grow_array((void **)&p->stacks, &p->stacks_cap, p->nstacks + 1,
		       sizeof *p->stacks) < 0 ||
	    grow_array((void **)&p->ids, &p->ids_cap, p->nids + depth,
		       sizeof *p->ids) < 0)
		return -1;
	if ((p->nstacks + 1) * 2 > p->stab_cap) {
		if (stab_rehash(p, p->stab_cap * 2) < 0 && p->nstacks + 2 >= p->stab_cap)
			return -1;
		mask = p->stab_cap - 1;
		for (j = h & mask; p->stab[j]; j = (j + 1) & mask)
			;
	}
	struct pstack *s = &p->stacks[p->nstacks];
	s->count = count;
	s->hash = h;
	s->off = p->nids;
	s->depth = (uint32_t)depth;
	s->tid = tid;
	if (depth)
		memcpy(p->ids + p->nids, p->scratch, depth * sizeof *p->ids);
	p->nids += depth;
	p->stab[j] = (uint32_t)++p->nstacks;
	p->total += count;
	return 0;
}

void profile_reset(struct profile *p)
{
	p->nstacks = 0;
	p->nids = 0;
	p->total = 0;
	memset(p->stab, 0, p->stab_cap * sizeof *p->stab);
}

size_t profile_nframes(const struct profile *p)
{
	return p->nframes;
}

const struct frame *profile_frame(const struct profile *p, uint32_t id)
{
	return id < p->nframes ? &p->frames[id] : NULL;
}

size_t profile_nstacks(const struct profile *p)
{
	return p->nstacks;
}

void profile_stack(const struct profile *p, size_t i, pid_t *tid,
		   const uint32_t **ids, size_t *depth, uint64_t *count)
{
	const struct pstack *s = &p->stacks[i];
	if (tid)
		*tid = s->tid;
	if (ids)
		*ids = s->depth ? p->ids + s->off : p->scratch;
	if (depth)
		*depth = s->depth;
	if (count)
		*count = s->count;
}

uint64_t profile_total(const struct profile *p)
{
	return p->total;
}

/* ------------------------------------------------------------ rewrite */

int profile_map_frames(struct profile *p, void (*fn)(struct frame *fr, void *arg), void *arg)
{
	struct profile *q = profile_new();
	struct stack st = { 0 };
	if (!q)
		return -1;
	int rc = 0;
	for (size_t i = 0; i < p->nstacks && rc == 0; i++) {
		const struct pstack *ps = &p->stacks[i];
		stack_clear(&st);
		/* ids are outermost first, profile_add takes innermost first */
		for (size_t k = ps->depth; k-- > 0 && rc == 0;) {
			struct frame fr = p->frames[p->ids[ps->off + k]];
			fn(&fr, arg);
			rc = stack_push(&st, &fr);
		}
		if (rc == 0)
			rc = profile_add(q, ps->tid, &st, ps->count);
	}
	stack_free(&st);
	if (rc < 0) {
		profile_free(q);
		return -1;
	}
	/* Q's tables become P's; P keeps its meta */
	struct profile tmp = *p;
	*p = *q;
	p->meta = tmp.meta;
	*q = tmp;
	profile_free(q);
	return 0;
}
