/* htab.h: one open-addressing hash index, one hash (FNV-1a) and one
 * array grower for every table of luaspy (interned strings, profile
 * frames and stacks, pprof strings and functions, top's rows, elf_sym's
 * line tokens).
 *
 * The table is an index: the caller keeps its entries in its own dense
 * array (so ids stay small and in insertion order) and the table maps a
 * 64-bit hash to an entry number 0 .. HTAB_MAX_ENTRIES-1.
 *
 * Inputs: the hash H of the key (htab_fnv1a*) and an EQ callback that
 *   says whether entry I matches the key the caller looks for.
 * Outputs: htab_find gives the entry number, or -1 and the empty slot
 *   where the key goes; htab_insert puts an entry number there.
 * Slots: linear probing over a power-of-two array; a slot holds entry+1
 *   (0 = empty) and 32 bits of the hash, so a probe calls EQ only on a
 *   hash match and growing never calls back.
 * Growth rule: htab_reserve, called before each htab_find that may lead
 *   to an insert, doubles the slots (at least HTAB_MIN_SLOTS) when one
 *   more entry would fill more than half of them. The table is thus at
 *   most half full and probes stay short.
 * Memory bound: 8 bytes a slot and slots < 4 * (entries + 1), so under
 *   32 bytes per entry (at least HTAB_MIN_SLOTS * 8 bytes); "entries" is
 *   the most the table held, since htab_clear keeps the slots.
 * When full: it grows; when it cannot (no memory, or HTAB_MAX_ENTRIES
 *   reached) htab_reserve returns -1 and leaves the table as it was, so
 *   the caller refuses the insert and every entry stays findable.
 * Nothing is removed but all at once (htab_clear). Not thread-safe.
 *
 *   if (htab_reserve(&t) < 0) return -1;
 *   size_t pos;
 *   int64_t i = htab_find(&t, h, same, &key, &pos);
 *   if (i >= 0) return i;
 *   i = n++; ...append entry i...; htab_insert(&t, pos, h, (uint32_t)i);
 */
#ifndef LUASPY_HTAB_H
#define LUASPY_HTAB_H

#include <stddef.h>
#include <stdint.h>

#define HTAB_MIN_SLOTS 256
#define HTAB_MAX_ENTRIES ((size_t)1 << 30)

struct htab_slot {
	uint32_t idx1;   /* entry + 1, 0 = empty */
	uint32_t hash;   /* htab_fold(h) */
};

struct htab {
	struct htab_slot *slot;  /* cap slots, or NULL before the first reserve */
	size_t cap;              /* 0 or a power of two */
	size_t n;                /* entries inserted since the last clear */
};

/* 32 bits of H for the slot: both halves, since FNV-1a's low bits mix
 * less than its high bits. */
static inline uint32_t htab_fold(uint64_t h)
{
	return (uint32_t)(h ^ (h >> 32));
}

/* Entry whose EQ(CTX, entry) is true among those stored with hash H, or
 * -1. On -1, *POS (if not NULL) is the empty slot for htab_insert, valid
 * until the table changes. An empty table (cap 0) finds nothing and has
 * no slot to give: call htab_reserve first when inserting. */
static inline int64_t htab_find(const struct htab *t, uint64_t h,
				int (*eq)(const void *ctx, uint32_t entry),
				const void *ctx, size_t *pos)
{
	if (pos)
		*pos = 0;
	if (t->cap == 0)
		return -1;
	uint32_t hf = htab_fold(h);
	size_t mask = t->cap - 1, j = hf & mask;
	for (; t->slot[j].idx1; j = (j + 1) & mask)
		if (t->slot[j].hash == hf && eq(ctx, t->slot[j].idx1 - 1))
			return (int64_t)t->slot[j].idx1 - 1;
	if (pos)
		*pos = j;
	return -1;
}

/* Store ENTRY with hash H at the empty slot POS that htab_find gave. */
static inline void htab_insert(struct htab *t, size_t pos, uint64_t h, uint32_t entry)
{
	t->slot[pos].idx1 = entry + 1;
	t->slot[pos].hash = htab_fold(h);
	t->n++;
}

/* Make room for one more entry (see the growth rule above). Returns 0,
 * or -1 when the table cannot grow; it is then unchanged. */
int htab_reserve(struct htab *t);

/* Forget every entry; the slots are kept for reuse. */
void htab_clear(struct htab *t);

/* Free the slots; T is empty again (cap 0) and may be reused. */
void htab_free(struct htab *t);

/* ------------------------------------------------------------ FNV-1a */

/* FNV-1a (64-bit): start from HTAB_FNV_INIT, feed bytes, use the result
 * as H. Fields of a struct key are fed one by one (never the padding). */
#define HTAB_FNV_INIT 0xcbf29ce484222325ull
#define HTAB_FNV_PRIME 0x100000001b3ull

/* Feed the N bytes at P into hash H; returns the new hash. */
static inline uint64_t htab_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * HTAB_FNV_PRIME;
	return h;
}

/* Feed V as one unit: the FNV-1a step (xor, multiply) on a whole word
 * instead of on each of its bytes, for fixed-size keys (ids, pointers
 * of interned strings, lines): one multiply per field, where feeding 8
 * bytes one by one made interning a frame 2.5 times slower. The low bits
 * of such a hash depend on the low bits of the words only (pointers are
 * aligned), which is why the slot is chosen by htab_fold's 32 bits. */
static inline uint64_t htab_fnv1a_word(uint64_t h, uint64_t v)
{
	return (h ^ v) * HTAB_FNV_PRIME;
}

/* Feed a pointer's value (for interned strings, compared by pointer). */
static inline uint64_t htab_fnv1a_ptr(uint64_t h, const void *p)
{
	return htab_fnv1a_word(h, (uint64_t)(uintptr_t)p);
}

/* ------------------------------------------------------------ arrays */

/* Make the array *PP of *CAP elements of SIZE bytes hold at least NEED:
 * when it is too small, realloc it to the next doubling of *CAP (64 at
 * first) that holds NEED, and update *PP and *CAP. PP is a pointer to
 * the array pointer (any type). Returns 0, or -1 when out of memory or
 * the size overflows (*PP and *CAP unchanged, the old array intact).
 * The check is inline; array_grow_to does the growing. */
int array_grow_to(void *pp, size_t *cap, size_t need, size_t size);
static inline int array_grow(void *pp, size_t *cap, size_t need, size_t size)
{
	return need <= *cap ? 0 : array_grow_to(pp, cap, need, size);
}

#endif
