/* out_speedscope.c: speedscope file format
 * (https://www.speedscope.app/file-format-schema.json). Frames are shared;
 * one "sampled" profile per thread id, each distinct stack once with its
 * count (or count * sampling period in nanoseconds) as weight. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include "out.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "dev"
#endif

/* Weight of COUNT samples: nanoseconds when NS_PER_SAMPLE > 0, else the count. */
static uint64_t weight(uint64_t count, double ns_per_sample)
{
	return ns_per_sample > 0 ? (uint64_t)((double)count * ns_per_sample + 0.5) : count;
}

static int cmp_tid(const void *a, const void *b, void *arg)
{
	const struct profile *p = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	pid_t ta, tb;
	profile_stack(p, i, &ta, NULL, NULL, NULL);
	profile_stack(p, j, &tb, NULL, NULL, NULL);
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return (i > j) - (i < j);
}

/* The frames stacks use, in id order; USED from out_used_frames. */
static void put_frames(const struct profile *p, const uint32_t *used, FILE *f)
{
	char buf[OUT_LABEL_MAX];
	size_t nf = profile_nframes(p);
	for (size_t id = 0; id < nf; id++) {
		const struct frame *fr = profile_frame(p, (uint32_t)id);
		if (!used[id])
			continue;
		fputs(used[id] > 1 ? ",\n{\"name\":" : "\n{\"name\":", f);
		out_put_json(f, out_label(fr, buf, sizeof buf, 1, 0));
		const char *file = fr->file ? fr->file : fr->module;
		if (file) {
			fputs(",\"file\":", f);
			out_put_json(f, out_clean(file, buf, sizeof buf, 0));
		}
		if (fr->line > 0)
			fprintf(f, ",\"line\":%" PRId32, fr->line);
		putc('}', f);
	}
}

int out_speedscope_write(const struct profile *p, FILE *f)
{
	const struct profile_meta *m = profile_meta_const(p);
	size_t ns = profile_nstacks(p);
	size_t nused;
	size_t *idx = malloc((ns ? ns : 1) * sizeof *idx);
	uint32_t *used = out_used_frames(p, &nused);
	if (!idx || !used) {
		free(idx);
		free(used);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ns; i++)
		idx[i] = i;
	qsort_r(idx, ns, sizeof *idx, cmp_tid, (void *)p);

	/* Weight unit: nanoseconds when the rate is known, else counts. */
	double ns_per_sample = m->rate_hz > 0 ? 1e9 / m->rate_hz : 0;
	char title[OUT_LABEL_MAX];
	out_clean(m->title && *m->title ? m->title : "luaspy", title, sizeof title, 0);

	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n"
	      "\"shared\":{\"frames\":[", f);
	put_frames(p, used, f);
	fputs("]},\n\"profiles\":[", f);

	size_t nthreads = 0;
	for (size_t i = 0; i < ns;) {
		pid_t tid;
		profile_stack(p, idx[i], &tid, NULL, NULL, NULL);
		size_t end = i;
		uint64_t sum = 0;
		for (; end < ns; end++) {
			pid_t t;
			uint64_t count;
			profile_stack(p, idx[end], &t, NULL, NULL, &count);
			if (t != tid)
				break;
			sum += weight(count, ns_per_sample);
		}
		fputs(nthreads++ ? ",\n{" : "\n{", f);
		fputs("\"type\":\"sampled\",\"name\":", f);
		char name[OUT_LABEL_MAX + 32];
		snprintf(name, sizeof name, "%s (tid %d)", title, (int)tid);
		out_put_json(f, name);
		fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":",
			ns_per_sample ? "nanoseconds" : "none");
		fprintf(f, "%" PRIu64, sum);
		fputs(",\n\"samples\":[", f);
		for (size_t k = i; k < end; k++) {
			const uint32_t *ids;
			size_t depth;
			profile_stack(p, idx[k], NULL, &ids, &depth, NULL);
			fputs(k > i ? ",[" : "[", f);
			for (size_t d = 0; d < depth; d++)
				fprintf(f, d ? ",%" PRIu32 : "%" PRIu32, used[ids[d]] - 1);
			putc(']', f);
		}
		fputs("],\n\"weights\":[", f);
		for (size_t k = i; k < end; k++) {
			uint64_t count;
			profile_stack(p, idx[k], NULL, NULL, NULL, &count);
			if (k > i)
				putc(',', f);
			fprintf(f, "%" PRIu64, weight(count, ns_per_sample));
		}
		fputs("]}", f);
		if (ferror(f))
			break;
		i = end;
	}
	if (nthreads == 0) {
		/* speedscope wants at least one profile to open the file. */
		fputs("\n{\"type\":\"sampled\",\"name\":", f);
		out_put_json(f, title);
		fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":0,"
			"\"samples\":[],\"weights\":[]}",
			ns_per_sample ? "nanoseconds" : "none");
	}
	fputs("],\n\"name\":", f);
	out_put_json(f, title);
	fputs(",\"activeProfileIndex\":0,\"exporter\":\"luaspy " PACKAGE_VERSION
	      "\"}\n", f);
	free(idx);
	free(used);
	return out_ferror(f);
}
