/* out_folded.c: collapsed stacks ("outer;...;inner COUNT"), the input of
 * flamegraph.pl and inferno. One line per distinct stack, threads merged
 * (with -t, threads are already root frames). Labels carry lines; ';' in
 * names becomes ':' and control characters/invalid UTF-8 become U+FFFD,
 * so every line splits back into the frames it came from.
 *
 * Lines are built in one buffer and written whole. Stacks come sorted,
 * so a line shares its first frames with the one before: only the text
 * after the common prefix is rebuilt. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"
#include "out.h"

static int same_ids(const struct profile *p, size_t a, size_t b)
{
	const uint32_t *ia, *ib;
	size_t da, db;
	profile_stack(p, a, NULL, &ia, &da, NULL);
	profile_stack(p, b, NULL, &ib, &db, NULL);
	if (da != db)
		return 0;
	for (size_t k = 0; k < da; k++)
		if (ia[k] != ib[k])
			return 0;
	return 1;
}

/* The line being built: text, and where each frame's label ends. */
struct line {
	char *s;
	size_t cap;
	size_t *end;          /* end[k]: offset just past frame k's label */
	size_t end_cap;
	const uint32_t *ids;  /* the stack the text holds, or NULL */
	size_t depth;
};

static int line_reserve(struct line *l, size_t need)
{
	return array_grow(&l->s, &l->cap, need, 1) < 0 ? -ENOMEM : 0;
}

/* Make L hold IDS[0..DEPTH) joined by ';'; returns the text length or
 * -ENOMEM. */
static long line_set(struct line *l, const struct out_order *o,
		     const uint32_t *ids, size_t depth)
{
	size_t c = 0;
	if (l->ids)
		while (c < l->depth && c < depth && l->ids[c] == ids[c])
			c++;
	if (array_grow(&l->end, &l->end_cap, depth, sizeof *l->end) < 0)
		return -ENOMEM;
	size_t pos = c ? l->end[c - 1] : 0;
	for (size_t k = c; k < depth; k++) {
		size_t n = o->label_len[ids[k]];
		if (line_reserve(l, pos + n + 1) < 0) {
			l->ids = NULL;
			return -ENOMEM;
		}
		if (k)
			l->s[pos++] = ';';
		memcpy(l->s + pos, o->label[ids[k]], n);
		pos += n;
		l->end[k] = pos;
	}
	l->ids = ids;
	l->depth = depth;
	return (long)pos;
}

int out_folded_write(const struct profile *p, FILE *f)
{
	struct out_order o;
	struct line l = { 0 };
	int r = out_order_init(&o, p, 1, OUT_CLEAN_FOLDED);
	if (r < 0)
		return r;
	for (size_t i = 0; i < o.nstacks;) {
		const uint32_t *ids;
		size_t depth;
		uint64_t count, sum = 0;
		size_t first = o.stack[i];
		profile_stack(p, first, NULL, &ids, &depth, NULL);
		/* Sum the same stack over all threads (adjacent after sorting). */
		for (; i < o.nstacks && same_ids(p, first, o.stack[i]); i++) {
			profile_stack(p, o.stack[i], NULL, NULL, NULL, &count);
			sum += count;
		}
		if (depth == 0 || sum == 0)
			continue;
		long n = line_set(&l, &o, ids, depth);
		if (n < 0 || line_reserve(&l, (size_t)n + 23) < 0) {
			r = -ENOMEM;
			break;
		}
		size_t len = (size_t)n;
		l.s[len++] = ' ';
		len += out_fmt_u64(l.s + len, sum);
		l.s[len++] = '\n';
		if (fwrite(l.s, 1, len, f) != len)
			break;
	}
	free(l.s);
	free(l.end);
	out_order_free(&o);
	return r ? r : out_ferror(f);
}
