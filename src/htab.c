/* htab.c: growing the hash index and arrays (htab.h). */
#include <stdlib.h>
#include <string.h>
#include "htab.h"

int htab_reserve(struct htab *t)
{
	if ((t->n + 1) * 2 <= t->cap)
		return 0;
	if (t->n + 1 > HTAB_MAX_ENTRIES)
		return -1;
	size_t ncap = t->cap ? t->cap * 2 : HTAB_MIN_SLOTS;
	struct htab_slot *ns = calloc(ncap, sizeof *ns);
	if (!ns)
		return -1;
	size_t mask = ncap - 1;
	for (size_t i = 0; i < t->cap; i++) {
		if (!t->slot[i].idx1)
			continue;
		size_t j = t->slot[i].hash & mask;
		while (ns[j].idx1)
			j = (j + 1) & mask;
		ns[j] = t->slot[i];
	}
	free(t->slot);
	t->slot = ns;
	t->cap = ncap;
	return 0;
}

void htab_clear(struct htab *t)
{
	if (t->cap)
		memset(t->slot, 0, t->cap * sizeof *t->slot);
	t->n = 0;
}

void htab_free(struct htab *t)
{
	free(t->slot);
	t->slot = NULL;
	t->cap = 0;
	t->n = 0;
}

int array_grow_to(void *pp, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 64;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -1;
		ncap *= 2;
	}
	if (size && ncap > SIZE_MAX / size)
		return -1;
	void **p = pp;
	void *n = realloc(*p, ncap * size);
	if (!n)
		return -1;
	*p = n;
	*cap = ncap;
	return 0;
}
