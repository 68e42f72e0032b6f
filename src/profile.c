/* profile.c: interned frames and (tid, stack) -> count aggregation.
 *
 * Two hash indexes (htab.h) over flat arrays:
 *   frames:  struct frame by value, keyed by every field but addr
 *            (strings are interned, so they compare by pointer);
 *   stacks:  struct pstack {tid, depth, count, offset into ids[]},
 *            keyed by tid and the id sequence (outermost first).
 * Nothing is ever removed except by reset.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"
#include "profile.h"

struct pstack {
	uint64_t count;
	size_t off;       /* first id in p->ids */
	uint32_t depth;
	pid_t tid;
};

struct profile {
	struct profile_meta meta;

	struct frame *frames;
	size_t nframes, frames_cap;
	struct htab ftab;        /* frame hash -> frame id */

	struct pstack *stacks;
	size_t nstacks, stacks_cap;
	struct htab stab;        /* stack hash -> index into stacks */
	uint32_t *ids;           /* all stacks' frame ids, back to back */
	size_t nids, ids_cap;

	uint32_t *scratch;       /* one stack's ids while adding */
	size_t scratch_cap;

	uint64_t total;
};

/* ------------------------------------------------------------ hashing */

static uint64_t frame_hash(const struct frame *fr)
{
	uint64_t h = htab_fnv1a_word(HTAB_FNV_INIT, fr->kind);
	h = htab_fnv1a_ptr(h, fr->name);
	h = htab_fnv1a_ptr(h, fr->file);
	h = htab_fnv1a_ptr(h, fr->module);
	h = htab_fnv1a_word(h, (uint32_t)fr->line);
	h = htab_fnv1a_word(h, (uint32_t)fr->firstline);
	return htab_fnv1a_word(h, (uint32_t)fr->trace);
}

static int frame_same(const struct frame *a, const struct frame *b)
{
	return a->kind == b->kind && a->name == b->name && a->file == b->file &&
	       a->module == b->module && a->line == b->line &&
	       a->firstline == b->firstline && a->trace == b->trace;
}

static uint64_t stack_hash(pid_t tid, const uint32_t *ids, size_t depth)
{
	uint64_t h = htab_fnv1a_word(HTAB_FNV_INIT, (uint32_t)tid);
	h = htab_fnv1a_word(h, (uint32_t)depth);
	for (size_t i = 0; i < depth; i++)
		h = htab_fnv1a_word(h, ids[i]);
	return h;
}

/* ------------------------------------------------------------ API */

struct profile *profile_new(void)
{
	struct profile *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	if (htab_reserve(&p->ftab) < 0 || htab_reserve(&p->stab) < 0) {
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
	htab_free(&p->ftab);
	free(p->stacks);
	htab_free(&p->stab);
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

struct frame_key {
	const struct profile *p;
	const struct frame *fr;
};

static int frame_eq(const void *ctx, uint32_t id)
{
	const struct frame_key *k = ctx;
	return frame_same(&k->p->frames[id], k->fr);
}

/* Id of FR, interning it on first sight. Returns id or -1 (no memory). */
static int64_t frame_intern(struct profile *p, const struct frame *fr)
{
	uint64_t h = frame_hash(fr);
	struct frame_key k = { p, fr };
	size_t pos;
	if (htab_reserve(&p->ftab) < 0)
		return -1;
	int64_t id = htab_find(&p->ftab, h, frame_eq, &k, &pos);
	if (id >= 0)
		return id;
	if (array_grow(&p->frames, &p->frames_cap, p->nframes + 1, sizeof *p->frames) < 0)
		return -1;
	p->frames[p->nframes] = *fr;
	htab_insert(&p->ftab, pos, h, (uint32_t)p->nframes);
	return (int64_t)p->nframes++;
}

struct stack_key {
	const struct profile *p;
	pid_t tid;
	size_t depth;
};

static int stack_eq(const void *ctx, uint32_t i)
{
	const struct stack_key *k = ctx;
	const struct pstack *s = &k->p->stacks[i];
	return s->tid == k->tid && s->depth == k->depth &&
	       (k->depth == 0 ||
		memcmp(k->p->ids + s->off, k->p->scratch, k->depth * sizeof *k->p->ids) == 0);
}

int profile_add(struct profile *p, pid_t tid, const struct stack *st, uint64_t count)
{
	size_t depth = st->n > 0 ? (size_t)st->n : 0;
	if (array_grow(&p->scratch, &p->scratch_cap, depth + 1, sizeof *p->scratch) < 0)
		return -1;
	/* Walkers give innermost first; we keep outermost first. */
	for (size_t i = 0; i < depth; i++) {
		int64_t id = frame_intern(p, &st->f[depth - 1 - i]);
		if (id < 0)
			return -1;
		p->scratch[i] = (uint32_t)id;
	}

	uint64_t h = stack_hash(tid, p->scratch, depth);
	struct stack_key k = { p, tid, depth };
	size_t pos;
	if (htab_reserve(&p->stab) < 0)
		return -1;
	int64_t i = htab_find(&p->stab, h, stack_eq, &k, &pos);
	if (i >= 0) {
		p->stacks[i].count += count;
		p->total += count;
		return 0;
	}
	if (array_grow(&p->stacks, &p->stacks_cap, p->nstacks + 1, sizeof *p->stacks) < 0 ||
	    array_grow(&p->ids, &p->ids_cap, p->nids + depth, sizeof *p->ids) < 0)
		return -1;
	struct pstack *s = &p->stacks[p->nstacks];
	s->count = count;
	s->off = p->nids;
	s->depth = (uint32_t)depth;
	s->tid = tid;
	if (depth)
		memcpy(p->ids + p->nids, p->scratch, depth * sizeof *p->ids);
	p->nids += depth;
	htab_insert(&p->stab, pos, h, (uint32_t)p->nstacks++);
	p->total += count;
	return 0;
}

void profile_reset(struct profile *p)
{
	p->nstacks = 0;
	p->nids = 0;
	p->total = 0;
	htab_clear(&p->stab);
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

int profile_row(const struct profile *p, size_t i, struct profile_row *r)
{
	profile_stack(p, i, &r->tid, &r->ids, &r->depth, &r->count);
	return r->count && r->depth;
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

/* ------------------------------------------------------------ names */

/* One name per Lua function (docs/naming.md §1).
 * A Lua frame's name comes from the call site, so one prototype shows
 * under several names; this table counts samples per (chunk, linedefined,
 * prototype, name) and picks one name per (chunk, linedefined, prototype).
 * The prototype (the frame's addr, 0 when unknown) tells apart functions
 * defined on one line, which would otherwise become one row. */
struct fn_tally {                /* samples of one function under one name */
	const char *file;
	int32_t firstline;
	uint64_t proto;
	const char *name;
	uint64_t count;
};

struct fn_key {                  /* one function: its best name */
	const char *file;
	int32_t firstline;
	uint64_t proto;
	const char *best;        /* from the last count, NULL: no samples */
	uint64_t best_count;
	int best_rank;
	const char *shown;       /* the last non-NULL best: what was handed out */
};

struct fn_names {
	struct fn_tally *t;
	size_t nt, tcap;
	struct htab tt;          /* (file, firstline, name) -> t[] */
	struct fn_key *k;
	size_t nk, kcap;
	struct htab kt;          /* (file, firstline) -> k[] */
};

struct fn_names *fn_names_new(void)
{
	return calloc(1, sizeof(struct fn_names));
}

void fn_names_free(struct fn_names *nm)
{
	if (!nm)
		return;
	free(nm->t);
	htab_free(&nm->tt);
	free(nm->k);
	htab_free(&nm->kt);
	free(nm);
}

/* Rank of a name: 0 a name the function was called or found under, 1 a
 * metamethod event ("__index"), 2 a stand-in ("function <chunk:line>",
 * "?"). Lower is better. */
static int name_rank(const char *s)
{
	if (!s || !strncmp(s, "function <", 10) || !strcmp(s, "?"))
		return 2;
	return s[0] == '_' && s[1] == '_' ? 1 : 0;
}

/* Is NAME (COUNT samples) a better name than the key's best so far? */
static int name_better(const struct fn_key *k, const char *name, uint64_t count)
{
	int r = name_rank(name);
	if (!k->best || r != k->best_rank)
		return !k->best || r < k->best_rank;
	if (count != k->best_count)
		return count > k->best_count;
	return strcmp(name, k->best) < 0;
}

static int is_fn_frame(const struct frame *fr)
{
	/* firstline 0: a main chunk (always "main chunk") or not known */
	return fr->kind == FRAME_LUA && fr->file && fr->name && fr->firstline > 0;
}

static uint64_t fn_hash(const char *file, int32_t firstline, uint64_t proto)
{
	uint64_t h = htab_fnv1a_word(htab_fnv1a_ptr(HTAB_FNV_INIT, file), (uint32_t)firstline);
	h = htab_fnv1a_word(h, (uint32_t)proto);
	return htab_fnv1a_word(h, (uint32_t)(proto >> 32));
}

struct fn_find {
	const struct fn_names *nm;
	const struct frame *fr;
};

static int tally_eq(const void *ctx, uint32_t i)
{
	const struct fn_find *f = ctx;
	const struct fn_tally *t = &f->nm->t[i];
	return t->file == f->fr->file && t->firstline == f->fr->firstline &&
	       t->proto == f->fr->addr && t->name == f->fr->name;
}

static int key_eq(const void *ctx, uint32_t i)
{
	const struct fn_find *f = ctx;
	const struct fn_key *k = &f->nm->k[i];
	return k->file == f->fr->file && k->firstline == f->fr->firstline && k->proto == f->fr->addr;
}

/* Add COUNT samples of FR's function under FR's name. 0 or -1 (memory). */
static int fn_names_add(struct fn_names *nm, const struct frame *fr, uint64_t count)
{
	struct fn_find f = { nm, fr };
	uint64_t h = fn_hash(fr->file, fr->firstline, fr->addr);
	size_t pos;
	if (htab_reserve(&nm->kt) < 0)
		return -1;
	if (htab_find(&nm->kt, h, key_eq, &f, &pos) < 0) {
		if (array_grow(&nm->k, &nm->kcap, nm->nk + 1, sizeof *nm->k) < 0)
			return -1;
		nm->k[nm->nk] = (struct fn_key){ fr->file, fr->firstline, fr->addr, NULL, 0, 3, NULL };
		htab_insert(&nm->kt, pos, h, (uint32_t)nm->nk++);
	}
	h = htab_fnv1a_ptr(h, fr->name);
	if (htab_reserve(&nm->tt) < 0)
		return -1;
	int64_t i = htab_find(&nm->tt, h, tally_eq, &f, &pos);
	if (i < 0) {
		if (array_grow(&nm->t, &nm->tcap, nm->nt + 1, sizeof *nm->t) < 0)
			return -1;
		nm->t[nm->nt] = (struct fn_tally){ fr->file, fr->firstline, fr->addr, fr->name, 0 };
		htab_insert(&nm->tt, pos, h, (uint32_t)nm->nt);
		i = (int64_t)nm->nt++;
	}
	nm->t[i].count += count;
	return 0;
}

/* Choose each key's best name from the tallies; 1 when a name handed out
 * before (fn_names_best) is no longer the best, else 0. */
static int fn_names_choose(struct fn_names *nm)
{
	int changed = 0;
	for (size_t i = 0; i < nm->nk; i++) {
		nm->k[i].best = NULL;
		nm->k[i].best_count = 0;
		nm->k[i].best_rank = 3;
	}
	for (size_t i = 0; i < nm->nt; i++) {
		const struct fn_tally *t = &nm->t[i];
		struct frame fr = { .kind = FRAME_LUA, .file = t->file, .firstline = t->firstline,
				    .addr = t->proto };
		struct fn_find f = { nm, &fr };
		int64_t k = htab_find(&nm->kt, fn_hash(t->file, t->firstline, t->proto), key_eq, &f, NULL);
		if (k < 0 || !t->count)
			continue;
		struct fn_key *key = &nm->k[k];
		if (name_better(key, t->name, t->count)) {
			key->best = t->name;
			key->best_count = t->count;
			key->best_rank = name_rank(t->name);
		}
	}
	for (size_t i = 0; i < nm->nk; i++) {
		struct fn_key *key = &nm->k[i];
		if (!key->best)
			continue;
		if (key->shown && key->shown != key->best)
			changed = 1;
		key->shown = key->best;
	}
	return changed;
}

int fn_names_count(struct fn_names *nm, const struct profile *p)
{
	for (size_t i = 0; i < nm->nt; i++)
		nm->t[i].count = 0;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct pstack *ps = &p->stacks[i];
		for (size_t d = 0; d < ps->depth; d++) {
			const struct frame *fr = &p->frames[p->ids[ps->off + d]];
			if (is_fn_frame(fr) && fn_names_add(nm, fr, ps->count) < 0)
				return -1;
		}
	}
	return fn_names_choose(nm);
}

const char *fn_names_best(const struct fn_names *nm, const struct frame *fr)
{
	if (!nm || !is_fn_frame(fr))
		return fr->name;
	struct fn_find f = { nm, fr };
	int64_t k = htab_find(&nm->kt, fn_hash(fr->file, fr->firstline, fr->addr), key_eq, &f, NULL);
	return k >= 0 && nm->k[k].shown ? nm->k[k].shown : fr->name;
}

static void rename_frame(struct frame *fr, void *arg)
{
	fr->name = fn_names_best(arg, fr);
}

int profile_name_functions(struct profile *p)
{
	struct fn_names *nm = fn_names_new();
	if (!nm)
		return -1;
	int rc = fn_names_count(nm, p) < 0 ? -1 : profile_map_frames(p, rename_frame, nm);
	fn_names_free(nm);
	return rc;
}
