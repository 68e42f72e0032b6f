/* heap_pprof.c: `luaspy heap -f pprof`: the heap as a pprof heap profile
 * (gzipped profile.proto, the subset of src/profile.proto): every object
 * reached is counted at its shortest path from the roots, integer keys
 * collapsed ([*]), and the path's prefixes are its stack ("_G",
 * "_G.cache", "_G.cache[*]"), so `go tool pprof -top` lists bytes by path
 * and a flame graph shows what holds them. Sample types inuse_objects
 * (count) and inuse_space (bytes), as go tool pprof names a heap
 * profile's. docs/heap.md §8. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "err.h"
#include "heap.h"
#include "htab.h"
#include "intern.h"
#include "profile.pb-c.h"

#define PP_DEPTH 32                /* prefixes kept per path */

/* Interned strings to small ids (the string table, the functions). */
struct ptrtab {
	const char **s;
	size_t n, cap;
	struct htab idx;
};

struct pt_key { const struct ptrtab *t; const char *p; };

static int pt_eq(const void *ctx, uint32_t i)
{
	const struct pt_key *k = ctx;
	return k->t->s[i] == k->p;
}

static int64_t pt_id(struct ptrtab *t, const char *p)
{
	struct pt_key k = { t, p };
	uint64_t h = htab_fnv1a_ptr(HTAB_FNV_INIT, p);
	size_t pos;
	if (htab_reserve(&t->idx) < 0 || array_grow(&t->s, &t->cap, t->n + 1, sizeof *t->s) < 0)
		return -1;
	int64_t i = htab_find(&t->idx, h, pt_eq, &k, &pos);
	if (i >= 0)
		return i;
	t->s[t->n] = p;
	htab_insert(&t->idx, pos, h, (uint32_t)t->n);
	return (int64_t)t->n++;
}

static void pt_free(struct ptrtab *t)
{
	free(t->s);
	htab_free(&t->idx);
}

/* One path: its prefixes (functions' ids, outermost first) and sums. */
struct pp_path {
	uint32_t fn[PP_DEPTH];
	int depth;
	int64_t count, bytes;
};

/* Gzip IN (LEN bytes) to F. 0 or -LS_E_*. */
static int gz_write(FILE *f, const uint8_t *in, size_t len)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -LS_E_NOMEM;
	size_t cap = deflateBound(&z, (uLong)len) + 64;
	uint8_t *out = malloc(cap);
	if (!out) {
		deflateEnd(&z);
		return -LS_E_NOMEM;
	}
	z.next_in = (Bytef *)(uintptr_t)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	int zr = deflate(&z, Z_FINISH);
	size_t n = cap - z.avail_out;
	deflateEnd(&z);
	int rc = zr == Z_STREAM_END && fwrite(out, 1, n, f) == n ? 0 : -LS_E_IO;
	free(out);
	return rc;
}

/* Group the objects of the N states S by their path (its prefixes,
 * at most PP_DEPTH, as functions): *PV (*CAPPV allocated) gets one entry
 * per path, numbered as in PATHS; FNS and STRS the names. 0, or -1: no
 * memory. */
static int collect_paths(const struct heap_state *s, int n, struct ptrtab *strs,
			 struct ptrtab *fns, struct ptrtab *paths, struct pp_path **pv, size_t *cappv)
{
	for (int k = 0; k < n; k++) {
		const struct heap_state *h = &s[k];
		if (!h->pparent)
			continue;
		for (uint32_t i = 1; i < h->nn; i++) {
			const char *pre[PP_DEPTH];
			int d = heap_node_prefixes(h, i, pre, PP_DEPTH);
			if (d <= 0)
				continue;
			if (n > 1)
				for (int j = 0; j < d; j++)
					pre[j] = internf("state %d: %s", k, pre[j]);
			size_t before = paths->n;
			int64_t pi = pt_id(paths, pre[d - 1]);
			if (pi < 0 || array_grow(pv, cappv, paths->n, sizeof **pv) < 0)
				return -1;
			if (paths->n > before) {   /* a new path: array_grow leaves it unset */
				memset(&(*pv)[pi], 0, sizeof (*pv)[pi]);
				for (int j = 0; j < d; j++) {
					int64_t fi = pt_id(fns, pre[j]);
					if (fi < 0 || pt_id(strs, pre[j]) < 0)
						return -1;
					(*pv)[pi].fn[j] = (uint32_t)fi;
				}
				(*pv)[pi].depth = d;
			}
			(*pv)[pi].count++;
			(*pv)[pi].bytes += h->nself[i];
		}
	}
	return 0;
}

int heap_pprof_write(FILE *f, const struct heap_state *s, int n)
{
	struct ptrtab strs = { 0 }, fns = { 0 }, paths = { 0 };
	struct pp_path *pv = NULL;
	size_t cappv = 0;
	int rc = -LS_E_NOMEM;
	if (pt_id(&strs, "") < 0)
		goto out;
	if (collect_paths(s, n, &strs, &fns, &paths, &pv, &cappv) < 0)
		goto out;
	/* the profile: sample types, one function and location per prefix,
	 * one sample per path */
	int64_t s_obj = pt_id(&strs, "inuse_objects"), s_cnt = pt_id(&strs, "count"),
		s_space = pt_id(&strs, "inuse_space"), s_bytes = pt_id(&strs, "bytes");
	if (s_obj < 0 || s_cnt < 0 || s_space < 0 || s_bytes < 0)
		goto out;
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vt[2] = { PERFTOOLS__PROFILES__VALUE_TYPE__INIT,
						 PERFTOOLS__PROFILES__VALUE_TYPE__INIT };
	Perftools__Profiles__ValueType *vtp[2] = { &vt[0], &vt[1] };
	/* a walk cut short (target exited, core truncated): said in the
	 * profile's comments (`pprof -comments`), as the text says PARTIAL */
	int64_t cm[4];
	size_t ncm = 0;
	for (int i = 0; i < n && ncm < sizeof cm / sizeof cm[0]; i++) {
		if (!s[i].cut)
			continue;
		const char *c = internf("PARTIAL: state 0x%llx: the walk stopped at %s",
					(unsigned long long)s[i].addr, s[i].cut);
		if (!c || (cm[ncm] = pt_id(&strs, c)) < 0)
			goto out;
		ncm++;
	}
	prof.n_comment = ncm;
	prof.comment = cm;
	vt[0].type = s_obj;
	vt[0].unit = s_cnt;
	vt[1].type = s_space;
	vt[1].unit = s_bytes;
	prof.n_sample_type = 2;
	prof.sample_type = vtp;
	prof.default_sample_type = s_space;
	size_t nf = fns.n, np = paths.n;
	Perftools__Profiles__Function *fv = calloc(nf + 1, sizeof *fv);
	Perftools__Profiles__Function **fp = calloc(nf + 1, sizeof *fp);
	Perftools__Profiles__Location *lv = calloc(nf + 1, sizeof *lv);
	Perftools__Profiles__Location **lp = calloc(nf + 1, sizeof *lp);
	Perftools__Profiles__Line *ln = calloc(nf + 1, sizeof *ln);
	Perftools__Profiles__Line **lnp = calloc(nf + 1, sizeof *lnp);
	Perftools__Profiles__Sample *sv = calloc(np + 1, sizeof *sv);
	Perftools__Profiles__Sample **sp = calloc(np + 1, sizeof *sp);
	uint64_t *locs = calloc(np * PP_DEPTH + 1, sizeof *locs);
	int64_t *vals = calloc(np * 2 + 1, sizeof *vals);
	char **st = calloc(strs.n + 1, sizeof *st);
	uint8_t *buf = NULL;
	if (!fv || !fp || !lv || !lp || !ln || !lnp || !sv || !sp || !locs || !vals || !st)
		goto done;
	for (size_t i = 0; i < nf; i++) {
		int64_t name = pt_id(&strs, fns.s[i]);
		perftools__profiles__function__init(&fv[i]);
		fv[i].id = i + 1;
		fv[i].name = fv[i].system_name = name;
		fp[i] = &fv[i];
		perftools__profiles__line__init(&ln[i]);
		ln[i].function_id = i + 1;
		lnp[i] = &ln[i];
		perftools__profiles__location__init(&lv[i]);
		lv[i].id = i + 1;
		lv[i].n_line = 1;
		lv[i].line = &lnp[i];
		lp[i] = &lv[i];
	}
	for (size_t i = 0; i < np; i++) {
		perftools__profiles__sample__init(&sv[i]);
		uint64_t *l = locs + i * PP_DEPTH;
		for (int j = 0; j < pv[i].depth; j++)   /* leaf first */
			l[j] = pv[i].fn[pv[i].depth - 1 - j] + 1;
		sv[i].n_location_id = (size_t)pv[i].depth;
		sv[i].location_id = l;
		vals[2 * i] = pv[i].count;
		vals[2 * i + 1] = pv[i].bytes;
		sv[i].n_value = 2;
		sv[i].value = vals + 2 * i;
		sp[i] = &sv[i];
	}
	for (size_t i = 0; i < strs.n; i++)
		st[i] = (char *)(uintptr_t)strs.s[i];
	prof.n_function = nf;
	prof.function = fp;
	prof.n_location = nf;
	prof.location = lp;
	prof.n_sample = np;
	prof.sample = sp;
	prof.n_string_table = strs.n;
	prof.string_table = st;
	size_t len = perftools__profiles__profile__get_packed_size(&prof);
	buf = malloc(len + 1);
	if (!buf)
		goto done;
	perftools__profiles__profile__pack(&prof, buf);
	rc = gz_write(f, buf, len);
done:
	free(buf);
	free(fv); free(fp); free(lv); free(lp); free(ln); free(lnp);
	free(sv); free(sp); free(locs); free(vals); free(st);
out:
	free(pv);
	pt_free(&strs);
	pt_free(&fns);
	pt_free(&paths);
	return rc;
}
