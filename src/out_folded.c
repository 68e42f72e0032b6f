/* out_folded.c: collapsed stacks ("outer;...;inner COUNT"), the input of
 * flamegraph.pl and inferno. One line per distinct stack, threads merged
 * (with -t, threads are already root frames). Labels carry lines; ';' in
 * names becomes ':' and control characters/invalid UTF-8 become U+FFFD,
 * so every line splits back into the frames it came from. */
#include <errno.h>
#include <inttypes.h>
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

int out_folded_write(const struct profile *p, FILE *f)
{
	struct out_order o;
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
		for (size_t k = 0; k < depth; k++) {
			if (k)
				putc(';', f);
			fputs(o.label[ids[k]], f);
		}
		fprintf(f, " %" PRIu64 "\n", sum);
		if (ferror(f))
			break;
	}
	out_order_free(&o);
	return out_ferror(f);
}
