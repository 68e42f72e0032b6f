/* codemap.c: named code regions, sorted and disjoint (codemap.h). */
#include <stdlib.h>
#include <string.h>
#include "codemap.h"
#include "err.h"

/* A region while building: SEQ is the order it was written in. */
struct cm_ent {
	uint64_t start, end;
	const char *name;
	size_t seq;
};

size_t code_name_clean(char *s, size_t len)
{
	if (len > CODE_NAME_MAX) {
		len = CODE_NAME_MAX;
		/* not inside a UTF-8 sequence */
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			s[i] = '?';
	return len;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct cm_ent *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void code_table_free(struct code_table *t)
{
	free(t->e);
	free(t->text);
	memset(t, 0, sizeof *t);
}

/* Sort the N entries V (their SEQ set), drop overlaps (counted in
 * *OVERLAPPED) and put the rest in OUT (empty before; its text is the
 * caller's). V is reordered. Returns the entries kept or -LS_E_NOMEM. */
static long build(struct code_table *out, struct cm_ent *v, size_t n,
		  unsigned long *overlapped)
{
	if (n > 1)
		qsort(v, n, sizeof *v, ent_cmp);
	/* overlaps: of two overlapping regions the later one wins; the kept
	 * ones stay sorted and disjoint (a replaced entry's predecessor ends
	 * before it started, so before the new one too) */
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k > 0 && v[i].start < v[k - 1].end) {
			(*overlapped)++;
			if (v[i].seq > v[k - 1].seq)
				v[k - 1] = v[i];
			continue;
		}
		v[k++] = v[i];
	}
	struct code_region *e = NULL;
	if (k > 0 && !(e = malloc(k * sizeof *e)))
		return -LS_E_NOMEM;
	for (size_t i = 0; i < k; i++) {
		e[i].start = v[i].start;
		e[i].end = v[i].end;
		e[i].name = v[i].name;
	}
	out->e = e;
	out->n = k;
	return (long)k;
}

long code_table_build(struct code_table *out, const struct code_region *v, size_t n,
			 unsigned long *overlapped)
{
	code_table_free(out);
	struct cm_ent *w = NULL;
	if (n > 0 && !(w = malloc(n * sizeof *w)))
		return -LS_E_NOMEM;
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].end <= v[i].start)
			continue; /* a region moved away */
		w[m].start = v[i].start;
		w[m].end = v[i].end;
		w[m].name = v[i].name;
		w[m].seq = i;
		m++;
	}
	long k = build(out, w, m, overlapped);
	free(w);
	return k;
}

const struct code_region *code_table_find(const struct code_table *t, uint64_t addr)
{
	size_t lo = 0, hi = t->n; /* the first entry starting past ADDR is in [lo, hi] */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->e[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct code_region *e = &t->e[lo - 1];
	return addr < e->end ? e : NULL;
}
