/* out.c: output format names, atomic file writing, and the text cleaning
 * and escaping every writer shares. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "out.h"

/* ------------------------------------------------------------ formats */

static const struct {
	const char *name;
	const char *noun;
	int (*write)(const struct profile *, FILE *);
} formats[OUT_NFORMATS] = {
	[OUT_FLAMEGRAPH] = { "flamegraph", "flame graph", out_svg_write },
	[OUT_FOLDED] = { "folded", "folded stacks", out_folded_write },
	[OUT_SPEEDSCOPE] = { "speedscope", "speedscope profile", out_speedscope_write },
	[OUT_PPROF] = { "pprof", "pprof profile", out_pprof_write },
};

int out_format_parse(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < OUT_NFORMATS; i++)
		if (strcmp(name, formats[i].name) == 0)
			return i;
	return -1;
}

static int has_suffix(const char *s, size_t n, const char *suf)
{
	size_t m = strlen(suf);
	return n >= m && strcasecmp(s + n - m, suf) == 0;
}

int out_format_from_path(const char *path)
{
	static const struct {
		const char *suffix;
		int fmt;
	} map[] = {
		{ ".svg", OUT_FLAMEGRAPH },
		{ ".folded", OUT_FOLDED },
		{ ".collapsed", OUT_FOLDED },
		{ ".txt", OUT_FOLDED },
		{ ".json", OUT_SPEEDSCOPE },
		{ ".speedscope", OUT_SPEEDSCOPE },
		{ ".pb.gz", OUT_PPROF },
		{ ".pprof", OUT_PPROF },
		{ ".pb", OUT_PPROF },
	};
	size_t n = path ? strlen(path) : 0;
	for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
		if (has_suffix(path, n, map[i].suffix))
			return map[i].fmt;
	return OUT_FLAMEGRAPH;
}

const char *out_format_name(int fmt)
{
	return fmt >= 0 && fmt < OUT_NFORMATS ? formats[fmt].name : "unknown";
}

const char *out_format_noun(int fmt)
{
	return fmt >= 0 && fmt < OUT_NFORMATS ? formats[fmt].noun : "output";
}

/* ------------------------------------------------------------ writing */

int out_ferror(FILE *f)
{
	if (!ferror(f))
		return 0;
	return errno > 0 ? -errno : -EIO;
}

/* Best effort: make the rename itself durable. */
static void sync_parent_dir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
			  : strdup(".");
	if (!dir)
		return;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(dir);
}

static int write_stream(const struct profile *p, int fmt, FILE *f)
{
	errno = 0;
	int r = formats[fmt].write(p, f);
	if (r == 0 && fflush(f) != 0)
		r = errno > 0 ? -errno : -EIO;
	if (r == 0)
		r = out_ferror(f);
	return r;
}

int out_write_file(const struct profile *p, int fmt, const char *path)
{
	if (fmt < 0 || fmt >= OUT_NFORMATS || !path || !*path)
		return -EINVAL;
	if (strcmp(path, "-") == 0)
		return write_stream(p, fmt, stdout);

	size_t n = strlen(path);
	char *tmp = malloc(n + sizeof ".tmp.XXXXXX");
	if (!tmp)
		return -ENOMEM;
	memcpy(tmp, path, n);
	memcpy(tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");

	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		int r = -errno;
		free(tmp);
		return r;
	}
	/* mkstemp makes 0600; give the file the mode open(2) would. */
	mode_t mask = umask(0);
	umask(mask);
	int r = 0;
	if (fchmod(fd, 0666 & ~mask) != 0)
		r = -errno;
	FILE *f = r ? NULL : fdopen(fd, "w");
	if (!f) {
		if (!r)
			r = -errno;
		close(fd);
	} else {
		r = write_stream(p, fmt, f);
		if (r == 0 && fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
			r = -errno;
		if (fclose(f) != 0 && r == 0)
			r = -errno;
	}
	if (r == 0 && rename(tmp, path) != 0)
		r = -errno;
	if (r != 0)
		unlink(tmp);
	else
		sync_parent_dir(path);
	free(tmp);
	return r;
}

/* ------------------------------------------------------------ text */

/* Decode one UTF-8 character at S (N bytes left). Returns its length and
 * sets *CP, or 0 when the bytes are not well-formed UTF-8. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	size_t len;
	uint32_t v, min;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

char *out_clean(const char *s, char *buf, size_t len, int flags)
{
	static const char fffd[] = "\xef\xbf\xbd";
	size_t o = 0;
	if (len == 0)
		return buf;
	if (s) {
		const unsigned char *u = (const unsigned char *)s;
		size_t n = strlen(s);
		for (size_t i = 0; i < n;) {
			uint32_t cp = 0;
			size_t k = utf8_decode(u + i, n - i, &cp);
			const char *piece = (const char *)u + i;
			size_t plen = k;
			if (k == 0) {
				piece = fffd, plen = 3, k = 1;
			} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) ||
				   cp == 0xfffe || cp == 0xffff) {
				piece = fffd, plen = 3;
			} else if (cp == ';' && (flags & OUT_CLEAN_FOLDED)) {
				piece = ":", plen = 1;
			}
			if (o + plen >= len)
				break;
			memcpy(buf + o, piece, plen);
			o += plen;
			i += k;
		}
	}
	buf[o] = 0;
	return buf;
}

char *out_label(const struct frame *fr, char *buf, size_t len, int with_line,
		int flags)
{
	char raw[OUT_LABEL_MAX];
	frame_label(fr, raw, sizeof raw, with_line);
	return out_clean(raw, buf, len, flags);
}

void out_put_xml(FILE *f, const char *s)
{
	const char *run = s;
	for (; *s; s++) {
		const char *esc;
		switch (*s) {
		case '&': esc = "&amp;"; break;
		case '<': esc = "&lt;"; break;
		case '>': esc = "&gt;"; break;
		case '"': esc = "&quot;"; break;
		case '\'': esc = "&#39;"; break;
		default: continue;
		}
		fwrite(run, 1, (size_t)(s - run), f);
		fputs(esc, f);
		run = s + 1;
	}
	fwrite(run, 1, (size_t)(s - run), f);
}

void out_put_json(FILE *f, const char *s)
{
	const char *run = s;
	putc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c != '"' && c != '\\' && c >= 0x20)
			continue;
		fwrite(run, 1, (size_t)(s - run), f);
		if (c == '"' || c == '\\') {
			putc('\\', f);
			putc(c, f);
		} else {
			fprintf(f, "\\u%04x", c);
		}
		run = s + 1;
	}
	fwrite(run, 1, (size_t)(s - run), f);
	putc('"', f);
}

void out_put_fixed(FILE *f, double v, int decimals)
{
	static const uint64_t pow10[] = { 1, 10, 100, 1000, 10000, 100000, 1000000 };
	if (decimals < 0)
		decimals = 0;
	if (decimals > 6)
		decimals = 6;
	if (!(v == v)) /* NaN */
		v = 0;
	if (v < 0) {
		putc('-', f);
		v = -v;
	}
	if (v > 1e15)
		v = 1e15;
	uint64_t scaled = (uint64_t)(v * (double)pow10[decimals] + 0.5);
	fprintf(f, "%llu", (unsigned long long)(scaled / pow10[decimals]));
	if (decimals)
		fprintf(f, ".%0*llu", decimals,
			(unsigned long long)(scaled % pow10[decimals]));
}

uint32_t *out_used_frames(const struct profile *p, size_t *nused)
{
	size_t nf = profile_nframes(p), ns = profile_nstacks(p), n = 0;
	uint32_t *map = calloc(nf ? nf : 1, sizeof *map);
	if (!map)
		return NULL;
	for (size_t i = 0; i < ns; i++) {
		const uint32_t *ids;
		size_t depth;
		profile_stack(p, i, NULL, &ids, &depth, NULL);
		for (size_t d = 0; d < depth; d++)
			map[ids[d]] = 1;
	}
	for (size_t id = 0; id < nf; id++)
		if (map[id])
			map[id] = (uint32_t)++n;
	*nused = n;
	return map;
}

/* ------------------------------------------------------------ ordering */

static int cmp_label(const void *a, const void *b, void *arg)
{
	char **label = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(label[x], label[y]);
	return c ? c : (x > y) - (x < y);
}

struct stack_cmp_ctx {
	const struct profile *p;
	const uint32_t *rank;
};

static int cmp_stack(const void *a, const void *b, void *arg)
{
	const struct stack_cmp_ctx *c = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	const uint32_t *ia, *ib;
	size_t da, db;
	pid_t ta, tb;
	profile_stack(c->p, i, &ta, &ia, &da, NULL);
	profile_stack(c->p, j, &tb, &ib, &db, NULL);
	size_t n = da < db ? da : db;
	for (size_t k = 0; k < n; k++) {
		if (ia[k] != ib[k])
			return c->rank[ia[k]] < c->rank[ib[k]] ? -1 : 1;
	}
	if (da != db)
		return da < db ? -1 : 1;
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return (i > j) - (i < j);
}

int out_order_init(struct out_order *o, const struct profile *p, int with_line,
		   int flags)
{
	memset(o, 0, sizeof *o);
	size_t nf = profile_nframes(p), ns = profile_nstacks(p);
	uint32_t *byrank = NULL;
	o->label = calloc(nf ? nf : 1, sizeof *o->label);
	o->rank = calloc(nf ? nf : 1, sizeof *o->rank);
	o->stack = calloc(ns ? ns : 1, sizeof *o->stack);
	byrank = calloc(nf ? nf : 1, sizeof *byrank);
	o->nframes = nf;
	o->nstacks = ns;
	if (!o->label || !o->rank || !o->stack || !byrank)
		goto nomem;
	char buf[OUT_LABEL_MAX];
	for (size_t i = 0; i < nf; i++) {
		out_label(profile_frame(p, (uint32_t)i), buf, sizeof buf, with_line, flags);
		if (!(o->label[i] = strdup(buf)))
			goto nomem;
		byrank[i] = (uint32_t)i;
	}
	qsort_r(byrank, nf, sizeof *byrank, cmp_label, o->label);
	for (size_t i = 0; i < nf; i++)
		o->rank[byrank[i]] = (uint32_t)i;
	free(byrank);
	for (size_t i = 0; i < ns; i++)
		o->stack[i] = i;
	struct stack_cmp_ctx ctx = { p, o->rank };
	qsort_r(o->stack, ns, sizeof *o->stack, cmp_stack, &ctx);
	return 0;
nomem:
	free(byrank);
	out_order_free(o);
	return -ENOMEM;
}

void out_order_free(struct out_order *o)
{
	if (o->label)
		for (size_t i = 0; i < o->nframes; i++)
			free(o->label[i]);
	free(o->label);
	free(o->rank);
	free(o->stack);
	memset(o, 0, sizeof *o);
}
