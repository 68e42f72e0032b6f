/* profile_read.c: luaspy's own profiles (pprof, folded stacks) read back
 * into the aggregate, and one aggregate added to another with filters.
 * Every size, count and index in a file is checked before use. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "intern.h"
#include "out.h"
#include "profile.pb-c.h"
#include "profile_read.h"

typedef Perftools__Profiles__Profile PbProfile;

__attribute__((format(printf, 3, 4))) static int fail(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* ------------------------------------------------------------ file bytes */

/* The whole of PATH into *BUF (malloc'd), at most PREAD_MAX_FILE_BYTES. */
static int slurp(const char *path, unsigned char **buf, size_t *len, char *why, size_t wl)
{
	*buf = NULL;
	*len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(why, wl, "%s", strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return fail(why, wl, "not a regular file");
	}
	if ((uint64_t)sb.st_size > PREAD_MAX_FILE_BYTES) {
		close(fd);
		return fail(why, wl, "%llu bytes: larger than the limit of %u MiB",
			    (unsigned long long)sb.st_size, PREAD_MAX_FILE_BYTES >> 20);
	}
	size_t cap = (size_t)sb.st_size + 1, n = 0;
	unsigned char *b = malloc(cap);
	if (!b) {
		close(fd);
		return fail(why, wl, "out of memory");
	}
	for (;;) {
		ssize_t r = read(fd, b + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			free(b);
			close(fd);
			return fail(why, wl, "%s", strerror(e));
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == cap) { /* grew since fstat */
			free(b);
			close(fd);
			return fail(why, wl, "the file grows while read");
		}
	}
	close(fd);
	*buf = b;
	*len = n;
	return 0;
}

/* Gunzip IN into *OUT (malloc'd), at most PREAD_MAX_PB_BYTES. */
static int gunzip(const unsigned char *in, size_t inlen, unsigned char **out, size_t *outlen,
		  char *why, size_t wl)
{
	z_stream z;
	memset(&z, 0, sizeof z);
	if (inflateInit2(&z, 15 + 32) != Z_OK)
		return fail(why, wl, "out of memory");
	size_t cap = inlen * 4 + 4096, n = 0;
	if (cap > PREAD_MAX_PB_BYTES)
		cap = PREAD_MAX_PB_BYTES;
	unsigned char *b = malloc(cap);
	if (!b) {
		inflateEnd(&z);
		return fail(why, wl, "out of memory");
	}
	z.next_in = (unsigned char *)in;
	z.avail_in = (uInt)inlen;
	int zr;
	for (;;) {
		if (n == cap) {
			if (cap >= PREAD_MAX_PB_BYTES) {
				free(b);
				inflateEnd(&z);
				return fail(why, wl, "larger than the limit of %u MiB once unpacked",
					    PREAD_MAX_PB_BYTES >> 20);
			}
			size_t nc = cap * 2 > PREAD_MAX_PB_BYTES ? PREAD_MAX_PB_BYTES : cap * 2;
			unsigned char *nb = realloc(b, nc);
			if (!nb) {
				free(b);
				inflateEnd(&z);
				return fail(why, wl, "out of memory");
			}
			b = nb;
			cap = nc;
		}
		z.next_out = b + n;
		z.avail_out = (uInt)(cap - n);
		zr = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
		if (zr == Z_STREAM_END)
			break;
		if (zr != Z_OK && !(zr == Z_BUF_ERROR && z.avail_out == 0)) {
			free(b);
			inflateEnd(&z);
			return fail(why, wl, "bad gzip data (%s)", zr == Z_BUF_ERROR ? "truncated" :
				    z.msg ? z.msg : "inflate failed");
		}
	}
	inflateEnd(&z);
	*out = b;
	*outlen = n;
	return 0;
}

/* ------------------------------------------------------------ pprof */

/* id -> index, sorted by id for bsearch. */
struct idx {
	uint64_t id;
	size_t i;
};

static int idx_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct idx *)a)->id, y = ((const struct idx *)b)->id;
	return (x > y) - (x < y);
}

static const struct idx *idx_find(const struct idx *v, size_t n, uint64_t id)
{
	struct idx k = { id, 0 };
	return n ? bsearch(&k, v, n, sizeof *v, idx_cmp) : NULL;
}

/* Sort V[N]; -1 when an id is 0 or repeats. */
static int idx_sort(struct idx *v, size_t n)
{
	qsort(v, n, sizeof *v, idx_cmp);
	for (size_t i = 0; i < n; i++)
		if (v[i].id == 0 || (i && v[i].id == v[i - 1].id))
			return -1;
	return 0;
}

/* String S of the table, "" when out of range (checked before). */
static const char *pb_str(const PbProfile *pb, int64_t s)
{
	return s >= 0 && (uint64_t)s < pb->n_string_table && pb->string_table[s] ?
	       pb->string_table[s] : "";
}

static int str_ok(const PbProfile *pb, int64_t s)
{
	return s >= 0 && (uint64_t)s < pb->n_string_table;
}

/* A name that is a VM state leaf ("[GC]", "[JIT trace 3]"), not one of
 * the native stand-ins frame.h lists. */
static int is_vmstate_name(const char *s)
{
	size_t n = strlen(s);
	return n > 2 && s[0] == '[' && s[n - 1] == ']' && strcmp(s, "[unknown]") &&
	       strcmp(s, "[jit]") && strncmp(s, "[C 0x", 5) && strncmp(s, "[builtin#", 9);
}

/* "process 42 ..." (-s) or "thread 42 ..." (-t): a root frame's name. */
static int is_root_name(const char *s)
{
	return (!strncmp(s, "process ", 8) && s[8] >= '0' && s[8] <= '9') ||
	       (!strncmp(s, "thread ", 7) && s[7] >= '0' && s[7] <= '9');
}

/* Frame kinds the rebuilt stack ST (innermost first) implies at its ends. */
static void fix_kinds(struct stack *st)
{
	for (int i = st->n - 1; i >= 0; i--) {
		struct frame *f = &st->f[i];
		if (f->kind != FRAME_NATIVE || f->module || f->file || !is_root_name(f->name))
			break;
		f->kind = FRAME_ROOT;
	}
	for (int i = 0; i < st->n; i++) {
		struct frame *f = &st->f[i];
		if (f->kind == FRAME_NATIVE && !f->module && !f->file) {
			if (!strncmp(f->name, "<elided ", 8))
				f->kind = FRAME_ELIDED;
			else if (i == 0 && is_vmstate_name(f->name))
				f->kind = FRAME_VMSTATE;
		}
	}
}

struct pb_ctx {
	const PbProfile *pb;
	struct idx *loc, *fn, *map;
	const char **fn_name;   /* per function index: interned system name */
	const char **fn_file;
	const char **map_file;
};

/* Check every index PB holds before any is followed. */
static int pb_validate(struct pb_ctx *c, char *why, size_t wl)
{
	const PbProfile *pb = c->pb;
	if (pb->n_string_table == 0 || !pb->string_table[0] || pb->string_table[0][0])
		return fail(why, wl, "string_table[0] is not \"\"");
	for (size_t i = 0; i < pb->n_sample_type; i++)
		if (!str_ok(pb, pb->sample_type[i]->type) || !str_ok(pb, pb->sample_type[i]->unit))
			return fail(why, wl, "sample_type %zu: string index out of range", i);
	if (!pb->n_sample_type)
		return fail(why, wl, "no sample_type");
	for (size_t i = 0; i < pb->n_function; i++) {
		const Perftools__Profiles__Function *f = pb->function[i];
		if (!str_ok(pb, f->name) || !str_ok(pb, f->system_name) || !str_ok(pb, f->filename))
			return fail(why, wl, "function %llu: string index out of range",
				    (unsigned long long)f->id);
		c->fn[i] = (struct idx){ f->id, i };
	}
	if (idx_sort(c->fn, pb->n_function) < 0)
		return fail(why, wl, "function ids are 0 or repeat");
	for (size_t i = 0; i < pb->n_mapping; i++) {
		if (!str_ok(pb, pb->mapping[i]->filename))
			return fail(why, wl, "mapping %zu: string index out of range", i);
		c->map[i] = (struct idx){ pb->mapping[i]->id, i };
	}
	if (idx_sort(c->map, pb->n_mapping) < 0)
		return fail(why, wl, "mapping ids are 0 or repeat");
	for (size_t i = 0; i < pb->n_location; i++) {
		const Perftools__Profiles__Location *l = pb->location[i];
		if (l->mapping_id && !idx_find(c->map, pb->n_mapping, l->mapping_id))
			return fail(why, wl, "location %llu: no mapping %llu",
				    (unsigned long long)l->id, (unsigned long long)l->mapping_id);
		for (size_t k = 0; k < l->n_line; k++)
			if (!idx_find(c->fn, pb->n_function, l->line[k]->function_id))
				return fail(why, wl, "location %llu: no function %llu",
					    (unsigned long long)l->id,
					    (unsigned long long)l->line[k]->function_id);
		c->loc[i] = (struct idx){ l->id, i };
	}
	if (idx_sort(c->loc, pb->n_location) < 0)
		return fail(why, wl, "location ids are 0 or repeat");
	for (size_t i = 0; i < pb->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pb->sample[i];
		if (s->n_value != pb->n_sample_type)
			return fail(why, wl, "sample %zu: %zu values for %zu sample types", i,
				    s->n_value, pb->n_sample_type);
		if (s->n_location_id > PREAD_MAX_DEPTH)
			return fail(why, wl, "sample %zu: %zu locations (limit %d)", i,
				    s->n_location_id, PREAD_MAX_DEPTH);
		for (size_t k = 0; k < s->n_location_id; k++)
			if (!idx_find(c->loc, pb->n_location, s->location_id[k]))
				return fail(why, wl, "sample %zu: no location %llu", i,
					    (unsigned long long)s->location_id[k]);
		for (size_t k = 0; k < s->n_label; k++)
			if (!str_ok(pb, s->label[k]->key) || !str_ok(pb, s->label[k]->str))
				return fail(why, wl, "sample %zu: label string index out of range", i);
	}
	for (size_t i = 0; i < pb->n_comment; i++)
		if (!str_ok(pb, pb->comment[i]))
			return fail(why, wl, "comment %zu: string index out of range", i);
	return 0;
}

/* The frames of location L, innermost first, onto ST. */
static void pb_push_location(struct pb_ctx *c, const Perftools__Profiles__Location *l,
			     struct stack *st)
{
	const char *module = NULL;
	if (l->mapping_id) {
		size_t m = idx_find(c->map, c->pb->n_mapping, l->mapping_id)->i;
		module = c->map_file[m];
	}
	if (!l->n_line) {
		struct frame f = { .kind = FRAME_NATIVE, .module = module, .addr = l->address };
		f.name = internf("[unknown 0x%llx]", (unsigned long long)l->address);
		stack_push(st, &f);
		return;
	}
	for (size_t k = 0; k < l->n_line; k++) {
		const Perftools__Profiles__Line *ln = l->line[k];
		size_t fi = idx_find(c->fn, c->pb->n_function, ln->function_id)->i;
		const Perftools__Profiles__Function *fn = c->pb->function[fi];
		struct frame f = { .kind = FRAME_NATIVE, .name = c->fn_name[fi] };
		f.line = ln->line > 0 && ln->line <= INT32_MAX ? (int32_t)ln->line : 0;
		if (module) {
			f.module = module;
			f.addr = l->address;
			f.file = c->fn_file[fi];
		} else if (c->fn_file[fi]) {
			f.kind = FRAME_LUA;
			f.file = c->fn_file[fi];
			f.firstline = fn->start_line > 0 && fn->start_line <= INT32_MAX ?
				      (int32_t)fn->start_line : 0;
		}
		stack_push(st, &f);
	}
}

static int pb_add(struct profile *p, struct pb_ctx *c, char *why, size_t wl)
{
	const PbProfile *pb = c->pb;
	for (size_t i = 0; i < pb->n_function; i++) {
		const Perftools__Profiles__Function *f = pb->function[i];
		const char *n = pb_str(pb, f->system_name);
		if (!*n)
			n = pb_str(pb, f->name);
		char buf[OUT_LABEL_MAX];
		c->fn_name[i] = intern(out_clean(*n ? n : "[unknown]", buf, sizeof buf, 0));
		const char *fl = pb_str(pb, f->filename);
		c->fn_file[i] = *fl ? intern(out_clean(fl, buf, sizeof buf, 0)) : NULL;
	}
	for (size_t i = 0; i < pb->n_mapping; i++) {
		const char *fl = pb_str(pb, pb->mapping[i]->filename);
		char buf[OUT_LABEL_MAX];
		c->map_file[i] = *fl ? intern(out_clean(fl, buf, sizeof buf, 0)) : NULL;
	}
	/* the value counted: "samples" (luaspy's first), else the first */
	size_t vi = 0;
	for (size_t i = 0; i < pb->n_sample_type; i++)
		if (!strcmp(pb_str(pb, pb->sample_type[i]->type), "samples")) {
			vi = i;
			break;
		}
	struct stack st = { 0 };
	uint64_t total = 0;
	for (size_t i = 0; i < pb->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pb->sample[i];
		int64_t v = s->value[vi];
		if (v <= 0)
			continue;
		pid_t tid = 0;
		for (size_t k = 0; k < s->n_label; k++)
			if (!strcmp(pb_str(pb, s->label[k]->key), "tid") && s->label[k]->num > 0 &&
			    s->label[k]->num <= INT32_MAX)
				tid = (pid_t)s->label[k]->num;
		stack_clear(&st);
		for (size_t k = 0; k < s->n_location_id; k++)
			pb_push_location(c, pb->location[idx_find(c->loc, pb->n_location,
								  s->location_id[k])->i], &st);
		fix_kinds(&st);
		if (profile_add(p, tid, &st, (uint64_t)v) < 0) {
			stack_free(&st);
			return fail(why, wl, "out of memory");
		}
		total += (uint64_t)v;
	}
	stack_free(&st);
	struct profile_meta *m = profile_meta(p);
	m->samples += total;
	return 0;
}

/* Start, duration and rate of one input merged into M (the first input
 * when FIRST). */
static void meta_merge(struct profile_meta *m, int first, uint64_t start_ns, uint64_t dur_ns,
		       double rate_hz)
{
	if (first) {
		m->start_unix_ns = start_ns;
		m->duration_ns = dur_ns;
		m->rate_hz = rate_hz;
		return;
	}
	uint64_t end = m->start_unix_ns + m->duration_ns, e2 = start_ns + dur_ns;
	if (start_ns && (start_ns < m->start_unix_ns || !m->start_unix_ns))
		m->start_unix_ns = start_ns;
	if (e2 > end)
		end = e2;
	m->duration_ns = end > m->start_unix_ns ? end - m->start_unix_ns : m->duration_ns;
	if (m->rate_hz != rate_hz)
		m->rate_hz = 0;
}

static int read_pprof(struct profile *p, const unsigned char *buf, size_t len, char *why,
		      size_t wl)
{
	unsigned char *raw = NULL;
	size_t rawlen = len;
	if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
		if (gunzip(buf, len, &raw, &rawlen, why, wl) < 0)
			return -1;
		buf = raw;
	}
	PbProfile *pb = perftools__profiles__profile__unpack(NULL, rawlen, buf);
	free(raw);
	if (!pb)
		return fail(why, wl, "not a pprof profile (the protobuf does not decode)");
	struct pb_ctx c = { .pb = pb };
	size_t nf = pb->n_function ? pb->n_function : 1, nm = pb->n_mapping ? pb->n_mapping : 1;
	c.loc = calloc(pb->n_location ? pb->n_location : 1, sizeof *c.loc);
	c.fn = calloc(nf, sizeof *c.fn);
	c.map = calloc(nm, sizeof *c.map);
	c.fn_name = calloc(nf, sizeof *c.fn_name);
	c.fn_file = calloc(nf, sizeof *c.fn_file);
	c.map_file = calloc(nm, sizeof *c.map_file);
	int rc;
	if (!c.loc || !c.fn || !c.map || !c.fn_name || !c.fn_file || !c.map_file)
		rc = fail(why, wl, "out of memory");
	else
		rc = pb_validate(&c, why, wl);
	struct profile_meta *m = profile_meta(p);
	int first = m->samples == 0 && profile_total(p) == 0;
	if (rc == 0)
		rc = pb_add(p, &c, why, wl);
	if (rc == 0) {
		double rate = pb->period > 0 ? 1e9 / (double)pb->period : 0;
		meta_merge(m, first, pb->time_nanos > 0 ? (uint64_t)pb->time_nanos : 0,
			   pb->duration_nanos > 0 ? (uint64_t)pb->duration_nanos : 0, rate);
		char b[OUT_LABEL_MAX];
		if (first && pb->n_comment > 0)
			m->title = intern(out_clean(pb_str(pb, pb->comment[0]), b, sizeof b, 0));
		if (first && pb->n_comment > 1)
			m->runtime = intern(out_clean(pb_str(pb, pb->comment[1]), b, sizeof b, 0));
	}
	free(c.loc);
	free(c.fn);
	free(c.map);
	free(c.fn_name);
	free(c.fn_file);
	free(c.map_file);
	perftools__profiles__profile__free_unpacked(pb, NULL);
	return rc;
}

/* ------------------------------------------------------------ folded */

static int read_folded(struct profile *p, const unsigned char *buf, size_t len, char *why,
		       size_t wl)
{
	struct stack st = { 0 };
	uint64_t total = 0;
	size_t lineno = 0;
	const char *b = (const char *)buf, *end = b + len;
	char *tmp = malloc(PREAD_MAX_LINE_BYTES + 1);
	if (!tmp)
		return fail(why, wl, "out of memory");
	int rc = 0;
	while (b < end) {
		const char *nl = memchr(b, '\n', (size_t)(end - b));
		const char *le = nl ? nl : end;
		lineno++;
		size_t n = (size_t)(le - b);
		if (n && b[n - 1] == '\r')
			n--;
		if (n > PREAD_MAX_LINE_BYTES) {
			rc = fail(why, wl, "line %zu: longer than %u bytes (limit)", lineno,
				  PREAD_MAX_LINE_BYTES);
			break;
		}
		memcpy(tmp, b, n);
		tmp[n] = 0;
		b = nl ? nl + 1 : end;
		if (!n)
			continue;
		if (memchr(tmp, 0, n)) {
			rc = fail(why, wl, "line %zu: a NUL byte (not folded stacks)", lineno);
			break;
		}
		char *sp = strrchr(tmp, ' ');
		char *e;
		errno = 0;
		unsigned long long cnt = sp ? strtoull(sp + 1, &e, 10) : 0;
		if (!sp || sp == tmp || errno || e == sp + 1 || *e || sp[1] == '-') {
			rc = fail(why, wl, "line %zu: not \"frame;frame;... COUNT\"", lineno);
			break;
		}
		if (cnt > (1ull << 62) || total + cnt > (1ull << 62)) {
			rc = fail(why, wl, "line %zu: count too large", lineno);
			break;
		}
		*sp = 0;
		/* frames outermost first in the line: push innermost first */
		stack_clear(&st);
		char *s = tmp;
		int depth = 1;
		for (char *q = tmp; *q; q++)
			depth += *q == ';';
		if (depth > PREAD_MAX_DEPTH) {
			rc = fail(why, wl, "line %zu: %d frames (limit %d)", lineno, depth,
				  PREAD_MAX_DEPTH);
			break;
		}
		for (char *q = s + strlen(s);; q--) {
			if (q == s || q[-1] == ';') {
				char *fe = strchr(q, ';');
				size_t fl = fe ? (size_t)(fe - q) : strlen(q);
				char buf2[OUT_LABEL_MAX];
				char save = q[fl];
				q[fl] = 0;
				struct frame f = { .kind = FRAME_NATIVE };
				f.name = intern(out_clean(fl ? q : "[unknown]", buf2, sizeof buf2, 0));
				q[fl] = save;
				stack_push(&st, &f);
				if (q == s)
					break;
			}
		}
		fix_kinds(&st);
		if (cnt && profile_add(p, 0, &st, cnt) < 0) {
			rc = fail(why, wl, "out of memory");
			break;
		}
		total += cnt;
	}
	free(tmp);
	stack_free(&st);
	if (rc == 0) {
		struct profile_meta *m = profile_meta(p);
		int first = m->samples == 0 && profile_total(p) == total;
		m->samples += total;
		meta_merge(m, first, 0, 0, 0);
	}
	return rc;
}

static int has_suffix(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);
	return n >= m && !strcmp(s + n - m, suf);
}

int profile_read_file(struct profile *p, const char *path, int *format, char *why,
		      size_t whylen)
{
	unsigned char *buf;
	size_t len;
	if (slurp(path, &buf, &len, why, whylen) < 0)
		return -1;
	int rc;
	if ((len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) || has_suffix(path, ".pb") ||
	    has_suffix(path, ".pprof")) {
		rc = read_pprof(p, buf, len, why, whylen);
		if (format)
			*format = PREAD_PPROF;
	} else {
		rc = read_folded(p, buf, len, why, whylen);
		if (format)
			*format = PREAD_FOLDED;
	}
	free(buf);
	return rc;
}

int profile_read_mem(struct profile *p, const unsigned char *buf, size_t len, int format,
		     char *why, size_t whylen)
{
	if (len > PREAD_MAX_FILE_BYTES)
		return fail(why, whylen, "%zu bytes: larger than the limit of %u MiB", len,
			    PREAD_MAX_FILE_BYTES >> 20);
	return format == PREAD_PPROF ? read_pprof(p, buf, len, why, whylen)
				     : read_folded(p, buf, len, why, whylen);
}

/* ------------------------------------------------------------ merging */

int64_t profile_add_filtered(struct profile *dst, const struct profile *src,
			     const struct pread_filter *f)
{
	size_t nf = profile_nframes(src);
	/* per frame id: bit 0 matches focus, bit 1 matches ignore */
	unsigned char *match = calloc(nf ? nf : 1, 1);
	if (!match)
		return -1;
	if (f && (f->focus || f->ignore)) {
		char buf[OUT_LABEL_MAX];
		for (size_t i = 0; i < nf; i++) {
			const char *l = frame_label(profile_frame(src, (uint32_t)i), buf, sizeof buf, 1);
			if (f->focus && regexec(f->focus, l, 0, NULL, 0) == 0)
				match[i] |= 1;
			if (f->ignore && regexec(f->ignore, l, 0, NULL, 0) == 0)
				match[i] |= 2;
		}
	}
	struct stack st = { 0 };
	int64_t added = 0;
	size_t ns = profile_nstacks(src);
	for (size_t i = 0; i < ns; i++) {
		pid_t tid;
		const uint32_t *ids;
		size_t depth;
		uint64_t count;
		profile_stack(src, i, &tid, &ids, &depth, &count);
		if (!count || (f && f->tid && tid != f->tid))
			continue;
		unsigned any = 0;
		for (size_t d = 0; d < depth; d++)
			any |= match[ids[d]];
		if (f && ((f->focus && !(any & 1)) || (any & 2)))
			continue;
		stack_clear(&st);
		for (size_t d = depth; d-- > 0;) {
			struct frame fr = *profile_frame(src, ids[d]);
			if (f && f->function && fr.kind == FRAME_LUA && fr.firstline > 0)
				fr.line = fr.firstline;
			if (f && f->nolineno)
				fr.line = 0;
			if (f && f->flatten) {
				char buf[OUT_LABEL_MAX];
				int k = fr.kind;
				fr = (struct frame){ .kind = k == FRAME_ROOT || k == FRAME_VMSTATE ||
							     k == FRAME_ELIDED ? k : FRAME_NATIVE };
				fr.name = intern(frame_label(profile_frame(src, ids[d]), buf,
							     sizeof buf, !(f->nolineno)));
				if (f->function) {
					struct frame g = *profile_frame(src, ids[d]);
					if (g.kind == FRAME_LUA && g.firstline > 0) {
						g.line = g.firstline;
						fr.name = intern(frame_label(&g, buf, sizeof buf, 1));
					}
				}
			}
			stack_push(&st, &fr);
		}
		if (profile_add(dst, tid, &st, count) < 0) {
			added = -1;
			break;
		}
		added += (int64_t)count;
	}
	stack_free(&st);
	free(match);
	return added;
}
