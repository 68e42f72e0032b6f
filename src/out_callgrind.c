/* out_callgrind.c: the callgrind profile format (valgrind's
 * docs/cl-format.xml, "Callgrind Format Specification", version 1) for
 * KCachegrind and callgrind_annotate, as rbspy and phpspy write it.
 *
 * One event, "Samples". A function is a frame's label without its line
 * (frame_label(.., 0)), its file the Lua chunk, else the native source
 * file, else the module. Every stack adds, for each frame but the leaf,
 * a call to the next frame inward (calls= and the inclusive cost =
 * the stack's count, at the caller's line), and for the leaf its self
 * cost at its line. Costs of repeated blocks add up, as the format
 * says. Names and files are compressed: "(id) name" once, "(id)" after.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "config.h"
#include "htab.h"
#include "intern.h"
#include "out.h"

/* Interned string -> id (1-based), per table. */
struct cg_tab {
	const char **s;
	size_t n, cap;
	struct htab index;
};

static int cg_eq(const void *ctx, uint32_t i)
{
	const void *const *k = ctx;
	const struct cg_tab *t = k[0];
	return t->s[i] == k[1];
}

/* Id of S (interned) in T, *NEW set when it is new; 0 when out of memory. */
static uint32_t cg_id(struct cg_tab *t, const char *s, int *isnew)
{
	const void *k[2] = { t, s };
	uint64_t h = htab_fnv1a_ptr(HTAB_FNV_INIT, s);
	size_t pos;
	*isnew = 0;
	if (htab_reserve(&t->index) < 0)
		return 0;
	int64_t i = htab_find(&t->index, h, cg_eq, k, &pos);
	if (i >= 0)
		return (uint32_t)i + 1;
	if (array_grow(&t->s, &t->cap, t->n + 1, sizeof *t->s) < 0)
		return 0;
	t->s[t->n] = s;
	htab_insert(&t->index, pos, h, (uint32_t)t->n);
	*isnew = 1;
	return (uint32_t)++t->n;
}

struct cg_frame {
	uint32_t fn, fl;   /* ids */
	int32_t line;
};

/* Write "KEY=(ID)" or, the first time, "KEY=(ID) NAME". */
static void cg_name(FILE *f, const char *key, uint32_t id, const struct cg_tab *t, uint8_t *shown)
{
	if (shown[id]) {
		fprintf(f, "%s=(%u)\n", key, id);
		return;
	}
	shown[id] = 1;
	fprintf(f, "%s=(%u) %s\n", key, id, t->s[id - 1]);
}

int out_callgrind_write(const struct profile *p, FILE *f)
{
	size_t nf = profile_nframes(p);
	struct cg_tab fns = { 0 }, fls = { 0 };
	struct cg_frame *cf = calloc(nf ? nf : 1, sizeof *cf);
	uint8_t *fn_shown = NULL, *fl_shown = NULL;
	int r = 0;
	if (!cf)
		return -ENOMEM;
	char buf[OUT_LABEL_MAX], clean[OUT_LABEL_MAX];
	for (size_t i = 0; i < nf; i++) {
		const struct frame *fr = profile_frame(p, (uint32_t)i);
		int isnew;
		const char *file = fr->file ? fr->file : fr->module ? fr->module : "???";
		const char *fn = intern(out_label(fr, buf, sizeof buf, 0, 0));
		const char *fl = intern(out_clean(file, clean, sizeof clean, 0));
		cf[i].fn = cg_id(&fns, fn, &isnew);
		cf[i].fl = cg_id(&fls, fl, &isnew);
		cf[i].line = fr->line > 0 ? fr->line : 0;
		if (!cf[i].fn || !cf[i].fl) {
			r = -ENOMEM;
			goto out;
		}
	}
	fn_shown = calloc(fns.n + 1, 1);
	fl_shown = calloc(fls.n + 1, 1);
	if (!fn_shown || !fl_shown) {
		r = -ENOMEM;
		goto out;
	}
	const struct profile_meta *m = profile_meta_const(p);
	fputs("# callgrind format\nversion: 1\ncreator: luaspy " PACKAGE_VERSION "\n", f);
	if (m->title && *m->title)
		fprintf(f, "cmd: %s\n", out_clean(m->title, clean, sizeof clean, 0));
	if (m->pid > 0)
		fprintf(f, "pid: %d\n", (int)m->pid);
	fprintf(f, "positions: line\nevents: Samples\nsummary: %llu\n\n",
		(unsigned long long)profile_total(p));
	size_t ns = profile_nstacks(p);
	for (size_t i = 0; i < ns; i++) {
		struct profile_row row;
		if (!profile_row(p, i, &row))
			continue;
		for (size_t d = 0; d < row.depth; d++) {
			const struct cg_frame *a = &cf[row.ids[d]];
			cg_name(f, "fl", a->fl, &fls, fl_shown);
			cg_name(f, "fn", a->fn, &fns, fn_shown);
			if (d + 1 == row.depth) {
				fprintf(f, "%d %llu\n", a->line, (unsigned long long)row.count);
				break;
			}
			const struct cg_frame *b = &cf[row.ids[d + 1]];
			cg_name(f, "cfl", b->fl, &fls, fl_shown);
			cg_name(f, "cfn", b->fn, &fns, fn_shown);
			fprintf(f, "calls=%llu %d\n%d %llu\n", (unsigned long long)row.count, b->line,
				a->line, (unsigned long long)row.count);
		}
		fputc('\n', f);
	}
	r = out_ferror(f);
out:
	free(cf);
	free(fn_shown);
	free(fl_shown);
	free(fns.s);
	free(fls.s);
	htab_free(&fns.index);
	htab_free(&fls.index);
	return r;
}
