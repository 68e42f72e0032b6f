/* intern.c: string interning with an open-addressing hash table. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "intern.h"

static char **tab;
static size_t tab_cap, tab_used;

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h;
}

static int grow(void)
{
	size_t ncap = tab_cap ? tab_cap * 2 : 1024;
	char **nt = calloc(ncap, sizeof *nt);
	if (!nt)
		return -1;
	for (size_t i = 0; i < tab_cap; i++) {
		char *s = tab[i];
		if (!s)
			continue;
		size_t j = hash_bytes(s, strlen(s)) & (ncap - 1);
		while (nt[j])
			j = (j + 1) & (ncap - 1);
		nt[j] = s;
	}
	free(tab);
	tab = nt;
	tab_cap = ncap;
	return 0;
}

const char *intern_n(const char *s, size_t len)
{
	if (!s)
		return NULL;
	const char *nul = memchr(s, 0, len);
	if (nul)
		len = (size_t)(nul - s);
	if ((tab_used + 1) * 2 > tab_cap && grow() < 0)
		abort();
	size_t j = hash_bytes(s, len) & (tab_cap - 1);
	while (tab[j]) {
		if (strncmp(tab[j], s, len) == 0 && tab[j][len] == 0)
			return tab[j];
		j = (j + 1) & (tab_cap - 1);
	}
	char *c = malloc(len + 1);
	if (!c)
		abort();
	memcpy(c, s, len);
	c[len] = 0;
	tab[j] = c;
	tab_used++;
	return c;
}

const char *intern(const char *s)
{
	return s ? intern_n(s, strlen(s)) : NULL;
}

const char *internf(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return intern(buf);
}
