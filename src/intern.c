/* intern.c: string interning over the shared hash index (htab.h). */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"
#include "intern.h"

static char **strs;           /* the interned strings, in order of arrival */
static size_t nstrs, strs_cap;
static struct htab tab;       /* content hash -> index into strs */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* record --period's writer thread interns too */

struct key {
	const char *s;
	size_t len;
};

static int same(const void *ctx, uint32_t i)
{
	const struct key *k = ctx;
	return strncmp(strs[i], k->s, k->len) == 0 && strs[i][k->len] == 0;
}

const char *intern_n(const char *s, size_t len)
{
	if (!s)
		return NULL;
	const char *nul = memchr(s, 0, len);
	if (nul)
		len = (size_t)(nul - s);
	struct key k = { s, len };
	uint64_t h = htab_fnv1a(HTAB_FNV_INIT, s, len);
	size_t pos;
	pthread_mutex_lock(&mu);
	if (htab_reserve(&tab) < 0)
		abort();
	int64_t i = htab_find(&tab, h, same, &k, &pos);
	if (i >= 0) {
		const char *r = strs[i];
		pthread_mutex_unlock(&mu);
		return r;
	}
	char *c = malloc(len + 1);
	if (!c || array_grow(&strs, &strs_cap, nstrs + 1, sizeof *strs) < 0)
		abort();
	memcpy(c, s, len);
	c[len] = 0;
	strs[nstrs] = c;
	htab_insert(&tab, pos, h, (uint32_t)nstrs++);
	pthread_mutex_unlock(&mu);
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
