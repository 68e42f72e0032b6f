/* t_htab.c: unit tests for the shared hash index, FNV-1a and the array
 * grower (src/htab.h), and for intern() built on them. Exit 0 pass, 1 fail. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"
#include "intern.h"

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

static void test_fnv(void)
{
	/* reference values of 64-bit FNV-1a (offset basis, "a", "foobar") */
	CHECK(htab_fnv1a(HTAB_FNV_INIT, "", 0) == 0xcbf29ce484222325ull);
	CHECK(htab_fnv1a(HTAB_FNV_INIT, "a", 1) == 0xaf63dc4c8601ec8cull);
	CHECK(htab_fnv1a(HTAB_FNV_INIT, "foobar", 6) == 0x85944171f73967e8ull);
	/* a word is one FNV-1a step: a value below 256 hashes as that byte */
	CHECK(htab_fnv1a_word(HTAB_FNV_INIT, 'a') == htab_fnv1a(HTAB_FNV_INIT, "a", 1));
	CHECK(htab_fnv1a_word(htab_fnv1a_word(HTAB_FNV_INIT, 'f'), 'o') ==
	      htab_fnv1a(HTAB_FNV_INIT, "fo", 2));
	CHECK(htab_fnv1a_word(1, 0x12345678) == ((1 ^ 0x12345678ull) * HTAB_FNV_PRIME));
	CHECK(htab_fold(0x0000000100000002ull) == 3);
}

/* Entries of the test tables: keys in a dense array, as callers keep them. */
static uint64_t *keys;
static size_t nkeys, keys_cap;

static int key_eq(const void *ctx, uint32_t i)
{
	return keys[i] == *(const uint64_t *)ctx;
}

/* Entry of K, added when new (HASH(K) given); -1 when the table is full. */
static int64_t key_get(struct htab *t, uint64_t k, uint64_t h)
{
	size_t pos;
	if (htab_reserve(t) < 0)
		return -1;
	int64_t i = htab_find(t, h, key_eq, &k, &pos);
	if (i >= 0)
		return i;
	if (array_grow(&keys, &keys_cap, nkeys + 1, sizeof *keys) < 0)
		return -1;
	keys[nkeys] = k;
	htab_insert(t, pos, h, (uint32_t)nkeys);
	return (int64_t)nkeys++;
}

static uint64_t key_hash(uint64_t k)
{
	return htab_fnv1a_word(HTAB_FNV_INIT, k);
}

static void test_table(void)
{
	struct htab t = { 0 };
	size_t pos = 99;
	uint64_t k0 = 7;
	CHECK(htab_find(&t, key_hash(7), key_eq, &k0, &pos) == -1); /* empty, cap 0 */

	/* 100 000 keys that differ only in high bits (like aligned pointers) */
	const size_t n = 100000;
	int ok = 1;
	for (size_t i = 0; i < n; i++)
		ok &= key_get(&t, (uint64_t)i << 12, key_hash((uint64_t)i << 12)) == (int64_t)i;
	CHECK(ok);
	CHECK(t.n == n && nkeys == n);
	/* power of two, at most half full, within the memory bound */
	CHECK((t.cap & (t.cap - 1)) == 0);
	CHECK(t.n * 2 <= t.cap && t.cap <= 4 * (t.n + 1));
	/* every key is found again, with no new entry; absent keys are not */
	ok = 1;
	for (size_t i = 0; i < n; i++) {
		uint64_t k = (uint64_t)i << 12;
		ok &= htab_find(&t, key_hash(k), key_eq, &k, NULL) == (int64_t)i;
		ok &= key_get(&t, k, key_hash(k)) == (int64_t)i;
		k |= 1;
		ok &= htab_find(&t, key_hash(k), key_eq, &k, NULL) == -1;
	}
	CHECK(ok && t.n == n);

	/* clear forgets everything but keeps the slots */
	size_t cap = t.cap;
	htab_clear(&t);
	CHECK(t.n == 0 && t.cap == cap);
	uint64_t k1 = 1 << 12;
	CHECK(htab_find(&t, key_hash(k1), key_eq, &k1, NULL) == -1);
	htab_free(&t);
	CHECK(t.cap == 0 && t.slot == NULL && t.n == 0);

	/* all keys under one hash: EQ tells them apart, each one found */
	nkeys = 0;
	ok = 1;
	for (uint64_t k = 0; k < 300; k++)
		ok &= key_get(&t, k, 42) == (int64_t)k;
	for (uint64_t k = 0; k < 300; k++)
		ok &= htab_find(&t, 42, key_eq, &k, NULL) == (int64_t)k;
	uint64_t k2 = 300;
	CHECK(ok && htab_find(&t, 42, key_eq, &k2, NULL) == -1);
	htab_free(&t);

	/* full: past HTAB_MAX_ENTRIES reserve refuses and changes nothing */
	struct htab full = { .n = HTAB_MAX_ENTRIES };
	CHECK(htab_reserve(&full) == -1 && full.cap == 0 && full.slot == NULL);
	free(keys);
}

static void test_array_grow(void)
{
	int *a = NULL;
	size_t cap = 0;
	CHECK(array_grow(&a, &cap, 0, sizeof *a) == 0 && a == NULL && cap == 0);
	CHECK(array_grow(&a, &cap, 1, sizeof *a) == 0 && a && cap == 64);
	a[63] = 5;
	int *before = a;
	CHECK(array_grow(&a, &cap, 64, sizeof *a) == 0 && a == before && cap == 64);
	CHECK(array_grow(&a, &cap, 65, sizeof *a) == 0 && cap == 128 && a[63] == 5);
	CHECK(array_grow(&a, &cap, 1000, sizeof *a) == 0 && cap == 1024 && a[63] == 5);
	/* a size that overflows: refused, array untouched */
	before = a;
	CHECK(array_grow(&a, &cap, SIZE_MAX / 2, sizeof *a) == -1 && a == before && cap == 1024);
	CHECK(array_grow(&a, &cap, SIZE_MAX, 1) == -1 && a == before && cap == 1024);
	free(a);
}

static void test_intern(void)
{
	char buf[32];
	const char *x = intern("fib");
	CHECK(x && strcmp(x, "fib") == 0);
	snprintf(buf, sizeof buf, "%s", "fib");
	CHECK(intern(buf) == x);
	CHECK(intern_n("fibonacci", 3) == x);
	CHECK(intern_n("fib\0zzz", 7) == x);    /* stops at the NUL */
	CHECK(intern("") != NULL && intern("") == intern_n("x", 0));
	CHECK(intern(NULL) == NULL);
	/* many distinct strings keep their identity across growth */
	const char *first = internf("s%d", 0);
	int ok = 1;
	for (int i = 1; i < 20000; i++) {
		const char *s = internf("s%d", i);
		snprintf(buf, sizeof buf, "s%d", i);
		ok &= s != first && strcmp(s, buf) == 0;
	}
	CHECK(ok && internf("s%d", 0) == first && intern("fib") == x);
}

int main(void)
{
	test_fnv();
	test_table();
	test_array_grow();
	test_intern();
	if (failures) {
		printf("%d check(s) failed\n", failures);
		return 1;
	}
	printf("t_htab: all checks passed\n");
	return 0;
}
