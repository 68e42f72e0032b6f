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
#include <string.h>
#include "htab.h"
#include "intern.h"
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

/* ------------------------------------------------------------ buffer */

/* Pieces (numbers, escaped labels) are formatted into a block that is
 * handed to stdio once it holds SB_FLUSH_BYTES. A piece is at most
 * SB_PIECE_MAX bytes: a label is < OUT_LABEL_MAX bytes and escapes to
 * at most 6 bytes per byte, plus the quotes. */
#ifndef SB_FLUSH_BYTES
#define SB_FLUSH_BYTES 4096
#endif
#define SB_PIECE_MAX (6 * (OUT_LABEL_MAX + 64) + 64)
#define SB_BYTES (SB_FLUSH_BYTES + SB_PIECE_MAX)

struct sbuf {
	FILE *f;
	char *s;    /* SB_BYTES */
	size_t n;
};

static void sb_flush(struct sbuf *b)
{
	if (b->n)
		fwrite(b->s, 1, b->n, b->f);  /* errors: ferror(f) */
	b->n = 0;
}

/* Room for one piece at b->s + b->n. */
static char *sb_room(struct sbuf *b)
{
	if (b->n >= SB_FLUSH_BYTES)
		sb_flush(b);
	return b->s + b->n;
}

static void sb_puts(struct sbuf *b, const char *s)
{
	size_t n = strlen(s);
	char *d = sb_room(b);
	memcpy(d, s, n);
	b->n += n;
}

static void sb_putc(struct sbuf *b, char c)
{
	*sb_room(b) = c;
	b->n++;
}

static void sb_u64(struct sbuf *b, uint64_t v)
{
	b->n += out_fmt_u64(sb_room(b), v);
}

/* S (< SB_PIECE_MAX / 6 bytes) as a quoted JSON string (out_json_string). */
static void sb_json(struct sbuf *b, const char *s)
{
	b->n += out_json_string(sb_room(b), s, strlen(s));
}

/* ------------------------------------------------------------ document */

/* What a speedscope frame says: name, file, line. */
struct sf_entry {
	const char *label;   /* interned */
	const char *file;    /* interned (the frame's file or module), or NULL */
	int32_t line;        /* > 0, or 0 */
	uint32_t id;         /* the first frame id written as this entry */
};

struct sf_find {
	const struct sf_entry *e;
	const struct sf_entry *key;
};

static int sf_same(const void *ctx, uint32_t i)
{
	const struct sf_find *f = ctx;
	const struct sf_entry *a = &f->e[i], *b = f->key;
	return a->label == b->label && a->file == b->file && a->line == b->line;
}

/* The entries of shared.frames: frames that would read alike (a frame's
 * trace number and prototype are not written) share one, since
 * speedscope tells frames apart by index alone and would show one
 * function as two rows. USED (out_used_frames) becomes each used frame's
 * entry + 1. Returns the entries (*N of them; the caller frees), or NULL
 * when out of memory. */
static struct sf_entry *sf_entries(const struct profile *p, uint32_t *used, size_t *n)
{
	char buf[OUT_LABEL_MAX];
	size_t nf = profile_nframes(p), cap = 0;
	struct sf_entry *e = NULL;
	struct htab t = { 0 };
	*n = 0;
	for (size_t id = 0; id < nf; id++) {
		if (!used[id])
			continue;
		const struct frame *fr = profile_frame(p, (uint32_t)id);
		struct sf_entry key = { intern(out_label(fr, buf, sizeof buf, 1, 0)),
					fr->file ? fr->file : fr->module, fr->line > 0 ? fr->line : 0,
					(uint32_t)id };
		struct sf_find f = { e, &key };
		uint64_t h = htab_fnv1a_ptr(htab_fnv1a_ptr(HTAB_FNV_INIT, key.label), key.file);
		h = htab_fnv1a_word(h, (uint32_t)key.line);
		size_t pos;
		if (!key.label || htab_reserve(&t) < 0)
			goto oom;
		int64_t i = htab_find(&t, h, sf_same, &f, &pos);
		if (i < 0) {
			if (array_grow(&e, &cap, *n + 1, sizeof *e) < 0)
				goto oom;
			e[*n] = key;
			i = (int64_t)(*n)++;
			htab_insert(&t, pos, h, (uint32_t)i);
		}
		used[id] = (uint32_t)i + 1;
	}
	htab_free(&t);
	return e ? e : calloc(1, sizeof *e);
oom:
	htab_free(&t);
	free(e);
	return NULL;
}

/* shared.frames: the N entries of sf_entries, in order. */
static void put_frames(const struct sf_entry *e, size_t n, struct sbuf *b)
{
	char buf[OUT_LABEL_MAX];
	for (size_t k = 0; k < n; k++) {
		sb_puts(b, k ? ",\n{\"name\":" : "\n{\"name\":");
		sb_json(b, e[k].label);
		if (e[k].file) {
			sb_puts(b, ",\"file\":");
			sb_json(b, out_clean(e[k].file, buf, sizeof buf, 0));
		}
		if (e[k].line > 0) {
			sb_puts(b, ",\"line\":");
			sb_u64(b, (uint64_t)e[k].line);
		}
		sb_putc(b, '}');
	}
}

int out_speedscope_write(const struct profile *p, FILE *f)
{
	const struct profile_meta *m = profile_meta_const(p);
	size_t ns = profile_nstacks(p);
	size_t nused;
	size_t *idx = malloc((ns ? ns : 1) * sizeof *idx);
	uint32_t *used = out_used_frames(p, &nused);
	size_t nent = 0;
	struct sf_entry *ent = used ? sf_entries(p, used, &nent) : NULL;
	struct sbuf sb = { .f = f, .s = malloc(SB_BYTES) };
	struct sbuf *b = &sb;
	if (!idx || !used || !ent || !sb.s) {
		free(idx);
		free(used);
		free(ent);
		free(sb.s);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ns; i++)
		idx[i] = i;
	qsort_r(idx, ns, sizeof *idx, cmp_tid, (void *)p);

	/* Weight unit: nanoseconds when the rate is known, else counts. */
	double ns_per_sample = m->rate_hz > 0 ? 1e9 / m->rate_hz : 0;
	const char *unit = ns_per_sample ? "nanoseconds" : "none";
	char title[OUT_LABEL_MAX];
	out_clean(m->title && *m->title ? m->title : "luaspy", title, sizeof title, 0);

	sb_puts(b, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n"
		"\"shared\":{\"frames\":[");
	put_frames(ent, nent, b);
	sb_puts(b, "]},\n\"profiles\":[");

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
		sb_puts(b, nthreads++ ? ",\n{" : "\n{");
		sb_puts(b, "\"type\":\"sampled\",\"name\":");
		char name[OUT_LABEL_MAX + 32];
		snprintf(name, sizeof name, "%s (tid %d)", title, (int)tid);
		sb_json(b, name);
		sb_puts(b, ",\"unit\":\"");
		sb_puts(b, unit);
		sb_puts(b, "\",\"startValue\":0,\"endValue\":");
		sb_u64(b, sum);
		sb_puts(b, ",\n\"samples\":[");
		for (size_t k = i; k < end; k++) {
			const uint32_t *ids;
			size_t depth;
			profile_stack(p, idx[k], NULL, &ids, &depth, NULL);
			sb_puts(b, k > i ? ",[" : "[");
			for (size_t d = 0; d < depth; d++) {
				char *o = sb_room(b);
				size_t n = 0;
				if (d)
					o[n++] = ',';
				n += out_fmt_u64(o + n, used[ids[d]] - 1);
				b->n += n;
			}
			sb_putc(b, ']');
		}
		sb_puts(b, "],\n\"weights\":[");
		for (size_t k = i; k < end; k++) {
			uint64_t count;
			profile_stack(p, idx[k], NULL, NULL, NULL, &count);
			if (k > i)
				sb_putc(b, ',');
			sb_u64(b, weight(count, ns_per_sample));
		}
		sb_puts(b, "]}");
		sb_flush(b);
		if (ferror(f))
			break;
		i = end;
	}
	if (nthreads == 0) {
		/* speedscope wants at least one profile to open the file. */
		sb_puts(b, "\n{\"type\":\"sampled\",\"name\":");
		sb_json(b, title);
		sb_puts(b, ",\"unit\":\"");
		sb_puts(b, unit);
		sb_puts(b, "\",\"startValue\":0,\"endValue\":0,"
			"\"samples\":[],\"weights\":[]}");
	}
	sb_puts(b, "],\n\"name\":");
	sb_json(b, title);
	sb_puts(b, ",\"activeProfileIndex\":0,\"exporter\":\"luaspy " PACKAGE_VERSION
		"\"}\n");
	sb_flush(b);
	free(idx);
	free(used);
	free(ent);
	free(sb.s);
	return out_ferror(f);
}
