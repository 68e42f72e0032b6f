/* t_jitdump.c: unit tests for the jitdump reader (src/jitdump.h) over
 * synthetic files in the format of the Linux kernel's
 * tools/perf/Documentation/jitdump-specification.txt: loads, a move,
 * skipped kinds, CLOSE; a file fed one byte longer at a time (a torn
 * last record waits, the end result is the same); refused headers;
 * hostile records (sizes huge or short, no NUL, code past the record,
 * wrapping regions, unknown moves, long and dirty names); the region
 * limit; a file read through a descriptor as it grows, and a sparse
 * file past JITDUMP_MAX_BYTES. Exit 0 pass, 1 fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "jitdump.h"

/* ---- writing synthetic files ---- */

struct buf {
	unsigned char *p;
	size_t n, cap;
};

static void put(struct buf *b, const void *s, size_t n)
{
	if (b->n + n > b->cap) {
		b->cap = (b->n + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			abort();
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
}

static void put32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void put64(struct buf *b, uint64_t v) { put(b, &v, 8); }

static void header(struct buf *b, uint32_t magic, uint32_t version, uint32_t size)
{
	put32(b, magic);
	put32(b, version);
	put32(b, size);
	put32(b, 62); /* EM_X86_64 */
	put32(b, 0);
	put32(b, 1234);
	put64(b, 1);
	put64(b, 0);
	for (uint32_t i = 40; i < size && i < 4096; i++)
		put(b, "", 1);
}

static void good_header(struct buf *b)
{
	header(b, JITDUMP_MAGIC, 1, 40);
}

/* A JIT_CODE_LOAD of NAME (NAMELEN bytes, then a NUL unless NONUL) and
 * CODE_SIZE bytes of code (CODE_BYTES of them written: the rest is
 * claimed only). */
static void load_raw(struct buf *b, uint64_t addr, uint64_t code_size, uint64_t index,
		     const char *name, size_t namelen, int nonul, size_t code_bytes)
{
	put32(b, 0);
	put32(b, (uint32_t)(16 + 40 + namelen + !nonul + code_bytes));
	put64(b, 2);
	put32(b, 1234);
	put32(b, 1235);
	put64(b, addr);
	put64(b, addr);
	put64(b, code_size);
	put64(b, index);
	put(b, name, namelen);
	if (!nonul)
		put(b, "", 1);
	for (size_t i = 0; i < code_bytes; i++)
		put(b, "\xc3", 1);
}

static void load(struct buf *b, uint64_t addr, uint64_t size, uint64_t index, const char *name)
{
	load_raw(b, addr, size, index, name, strlen(name), 0, (size_t)size);
}

static void move(struct buf *b, uint64_t old, uint64_t new, uint64_t size, uint64_t index)
{
	put32(b, 1);
	put32(b, 16 + 48);
	put64(b, 3);
	put32(b, 1234);
	put32(b, 1235);
	put64(b, new);
	put64(b, old);
	put64(b, new);
	put64(b, size);
	put64(b, index);
}

/* A record of kind ID with LEN bytes of payload. */
static void other(struct buf *b, uint32_t id, size_t len)
{
	put32(b, id);
	put32(b, (uint32_t)(16 + len));
	put64(b, 4);
	for (size_t i = 0; i < len; i++)
		put(b, "\x55", 1);
}

/* ---- checking ---- */

static struct jitdump *jd;

static void fresh(void)
{
	jitdump_free(jd);
	jd = jitdump_new();
	if (!jd)
		abort();
}

/* Name at ADDR, or "". */
static const char *at(uint64_t addr)
{
	const struct code_table *t = jitdump_table(jd);
	const struct code_region *e = t ? code_table_find(t, addr) : NULL;
	return e ? e->name : "";
}

/* The file of records(): 3 regions at the end. */
static void records(struct buf *b)
{
	good_header(b);
	load(b, 0x1000, 0x40, 1, "java::Foo.bar");
	other(b, 2, 24);           /* DEBUG_INFO: skipped */
	load(b, 0x2000, 0x10, 2, "js::baz");
	load(b, 0x1020, 0x10, 3, "later_inside"); /* later: wins over Foo.bar */
	move(b, 0x2000, 0x3000, 0x10, 2);          /* js::baz moves */
	other(b, 4, 40);           /* UNWINDING_INFO: skipped */
	other(b, 99, 0);           /* unknown: skipped */
	other(b, 3, 0);            /* CLOSE */
	load(b, 0x9000, 0x10, 4, "after_close");
}

static void check_records(const char *what)
{
	const struct jitdump_stats *st = jitdump_stats(jd);
	CHECK(!strcmp(at(0x3008), "js::baz"), "%s: '%s'", what, at(0x3008));
	CHECK(!strcmp(at(0x2008), ""), "%s: moved away: '%s'", what, at(0x2008));
	CHECK(!strcmp(at(0x1024), "later_inside"), "%s: '%s'", what, at(0x1024));
	CHECK(!strcmp(at(0x9000), ""), "%s: read past CLOSE", what);
	CHECK(st->loads == 3 && st->moves == 1 && st->other == 3 && st->closed && !st->malformed,
	      "%s: loads %lu moves %lu other %lu closed %d malformed %lu", what, st->loads, st->moves,
	      st->other, st->closed, st->malformed);
	CHECK(!st->bad_header && !st->broken && !st->cut_bytes, "%s", what);
}

static void well_formed(void)
{
	struct buf b = { 0 };
	records(&b);
	fresh();
	long n = jitdump_feed(jd, b.p, b.n);
	CHECK(n == 4, "%ld regions made", n);
	check_records("whole");
	/* a region end is exclusive; its start is in; a region overlapped by
	 * a later one is dropped whole, as in perf maps */
	CHECK(!strcmp(at(0x3000), "js::baz") && !strcmp(at(0x3010), "") && !strcmp(at(0x2fff), ""));
	CHECK(!strcmp(at(0x1000), "") && jitdump_stats(jd)->overlapped == 1);
	/* fed again with nothing new: the same */
	CHECK(jitdump_feed(jd, b.p, b.n) == 4);
	/* rewritten from its start (another header), longer: read anew */
	struct buf b2 = { 0 };
	header(&b2, JITDUMP_MAGIC, 1, 48);
	load(&b2, 0x5000, 0x10, 1, "rewritten");
	while (b2.n < b.n + 100)
		other(&b2, 2, 30);
	CHECK(jitdump_feed(jd, b2.p, b2.n) == 1, "rewritten: %ld", jitdump_feed(jd, b2.p, b2.n));
	CHECK(!strcmp(at(0x5000), "rewritten") && !strcmp(at(0x3000), "") && !jitdump_stats(jd)->closed);
	free(b2.p);
	free(b.p);
}

/* Fed one byte longer each time, as a writer appends: a torn record is
 * left for later, never half read. */
static void growing(void)
{
	struct buf b = { 0 };
	records(&b);
	fresh();
	unsigned long early = 0;
	for (size_t len = 0; len <= b.n; len++) {
		long n = jitdump_feed(jd, b.p, len);
		CHECK(n >= 0, "len %zu: %ld", len, n);
		CHECK(jitdump_offset(jd) <= len, "len %zu: offset %llu", len,
		      (unsigned long long)jitdump_offset(jd));
		if (len == 100 && jitdump_stats(jd)->loads)
			early++;
		CHECK(!jitdump_stats(jd)->malformed && !jitdump_stats(jd)->broken, "len %zu", len);
	}
	CHECK(!early, "a load read before it was whole");
	check_records("grown a byte at a time");
	free(b.p);
}

static void bad_headers(void)
{
	static const struct {
		uint32_t magic, version, size;
		const char *why;
	} h[] = {
		{ 0x12345678, 1, 40, "no jitdump magic" },
		{ 0x4454694A, 1, 40, "written in the other byte order" },
		{ JITDUMP_MAGIC, 2, 40, "version not 1" },
		{ JITDUMP_MAGIC, 1, 39, "header size out of bounds" },
		{ JITDUMP_MAGIC, 1, 0xffffffff, "header size out of bounds" },
	};
	for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
		struct buf b = { 0 };
		header(&b, h[i].magic, h[i].version, h[i].size);
		load(&b, 0x1000, 0x10, 1, "f");
		fresh();
		CHECK(jitdump_feed(jd, b.p, b.n) == 0, "header %zu", i);
		const char *why = jitdump_stats(jd)->bad_header;
		CHECK(why && !strcmp(why, h[i].why), "header %zu: '%s'", i, why ? why : "(none)");
		free(b.p);
	}
	/* a longer header (a newer writer's fields) is skipped by its size */
	struct buf b = { 0 };
	header(&b, JITDUMP_MAGIC, 1, 64);
	load(&b, 0x1000, 0x10, 1, "after_long_header");
	fresh();
	CHECK(jitdump_feed(jd, b.p, b.n) == 1 && !strcmp(at(0x1000), "after_long_header"));
	/* a header not whole yet: nothing, no complaint */
	fresh();
	CHECK(jitdump_feed(jd, b.p, 20) == 0 && !jitdump_stats(jd)->bad_header);
	free(b.p);
}

static void hostile(void)
{
	struct buf b = { 0 };
	good_header(&b);
	load(&b, 0x1000, 0x10, 1, "ok1");
	load_raw(&b, 0x2000, 0x10, 2, "nonul", 5, 1, 0x10);          /* the code starts at the name's end: */
	load_raw(&b, 0x3000, 0xffffffff, 3, "huge", 4, 0, 0x10);     /* code past the record */
	load_raw(&b, 0x4000, 0x10, 4, "", 0, 0, 0x10);               /* no name */
	load_raw(&b, 0x5000, 0, 5, "zero", 4, 0, 0);                 /* code size 0 */
	load_raw(&b, 0xfffffffffffffff0ull, 0x20, 6, "wrap", 4, 0, 0x20);
	other(&b, 0, 30);                                             /* a load too short for its fields */
	move(&b, 0x7000, 0x8000, 0x10, 77);                           /* unknown index */
	move(&b, 0x7000, 0x8000, 0, 1);                               /* size 0 */
	other(&b, 1, 20);                                             /* a move too short */
	/* a long name: no NUL in the first JITDUMP_MAX_NAME_SCAN bytes */
	char *lng = malloc(JITDUMP_MAX_NAME_SCAN + 100);
	memset(lng, 'n', JITDUMP_MAX_NAME_SCAN + 100);
	memcpy(lng, "\xc3\xa9\x1b[31m", 7);
	load_raw(&b, 0x6000, 0x10, 8, lng, JITDUMP_MAX_NAME_SCAN + 100, 0, 0x10);
	free(lng);
	load(&b, 0xa000, 0x10, 9, "ok2");
	size_t good_end = b.n;
	/* then a record whose size is out of bounds: nothing past it is read */
	put32(&b, 0);
	put32(&b, 0xffffffff);
	put64(&b, 0);
	load(&b, 0xb000, 0x10, 10, "unreachable");
	fresh();
	long n = jitdump_feed(jd, b.p, b.n);
	const struct jitdump_stats *st = jitdump_stats(jd);
	CHECK(n == 3, "%ld regions", n);
	CHECK(st->malformed == 9, "%lu malformed", st->malformed);
	CHECK(st->broken && !strcmp(st->broken, "record size over the limit") && st->broken_at == good_end,
	      "broken '%s' at %llu", st->broken ? st->broken : "", (unsigned long long)st->broken_at);
	CHECK(!strcmp(at(0x1000), "ok1") && !strcmp(at(0xa000), "ok2") && !strcmp(at(0xb000), ""));
	CHECK(!strcmp(at(0x2000), "") && !strcmp(at(0x3000), "") && !strcmp(at(0x4000), "") &&
	      !strcmp(at(0x8000), ""));
	const char *ln = at(0x6000);
	CHECK(strlen(ln) == CODE_NAME_MAX && !memcmp(ln, "\xc3\xa9?[31mnnn", 10), "'%.20s' (%zu)", ln,
	      strlen(ln));
	/* once broken, more bytes change nothing */
	CHECK(jitdump_feed(jd, b.p, b.n) == 3);
	/* a size under the prefix's own */
	b.n = good_end;
	put32(&b, 0);
	put32(&b, 8);
	put64(&b, 0);
	fresh();
	CHECK(jitdump_feed(jd, b.p, b.n) == 3);
	st = jitdump_stats(jd);
	CHECK(st->broken && !strcmp(st->broken, "record size under 16 bytes"));
	/* a record claiming far more than the file holds, under the limit:
	 * torn, waited for, nothing said */
	b.n = good_end;
	put32(&b, 0);
	put32(&b, JITDUMP_MAX_RECORD);
	put64(&b, 0);
	fresh();
	CHECK(jitdump_feed(jd, b.p, b.n) == 3 && !jitdump_stats(jd)->broken &&
	      jitdump_offset(jd) == good_end);
	free(b.p);
}

static void many(void)
{
	struct buf b = { 0 };
	good_header(&b);
	size_t loads = CODE_MAX_REGIONS + 10;
	char name[32];
	long n;
	for (size_t i = 0; i < loads; i++) {
		snprintf(name, sizeof name, "f%zu", i);
		load_raw(&b, 0x10000 + i * 16, 1, i, name, strlen(name), 0, 1);
	}
	/* a move past the limit: refused whole, the region stays where it was */
	move(&b, 0x10000 + 5 * 16, 0x90000000, 1, 5);
	fresh();
	n = jitdump_feed(jd, b.p, b.n);
	CHECK(n == CODE_MAX_REGIONS, "%ld", n);
	CHECK(!jitdump_stats(jd)->malformed, "%lu", jitdump_stats(jd)->malformed);
	CHECK(jitdump_stats(jd)->over_count == 11, "%lu", jitdump_stats(jd)->over_count);
	CHECK(!strcmp(at(0x10000 + 5 * 16), "f5") && !strcmp(at(0x10000 + (loads - 1) * 16), ""));
	CHECK(!strcmp(at(0x90000000), ""));
	free(b.p);
}

static void through_fd(void)
{
	char path[] = "/tmp/t_jitdump.XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	if (fd < 0)
		return;
	unlink(path);
	struct buf b = { 0 };
	good_header(&b);
	load(&b, 0x1000, 0x10, 1, "first");
	size_t half = b.n + 20; /* the next load torn */
	load(&b, 0x2000, 0x10, 2, "second");
	CHECK(pwrite(fd, b.p, half, 0) == (ssize_t)half);
	fresh();
	CHECK(jitdump_feed_fd(jd, fd, half) == 1 && !strcmp(at(0x1000), "first") && !strcmp(at(0x2000), ""));
	CHECK(pwrite(fd, b.p + half, b.n - half, (off_t)half) == (ssize_t)(b.n - half));
	CHECK(jitdump_feed_fd(jd, fd, b.n) == 2 && !strcmp(at(0x2000), "second"));
	/* a sparse file of 64 MiB skipped records: read up to 1 GiB only */
	uint64_t off = b.n;
	struct buf r = { 0 };
	other(&r, 2, 0);
	uint32_t tsz = JITDUMP_MAX_RECORD;
	memcpy(r.p + 4, &tsz, 4);
	while (off < JITDUMP_MAX_BYTES + 2ull * JITDUMP_MAX_RECORD) {
		CHECK(pwrite(fd, r.p, r.n, (off_t)off) == (ssize_t)r.n);
		off += JITDUMP_MAX_RECORD;
	}
	CHECK(ftruncate(fd, (off_t)off) == 0);
	CHECK(jitdump_feed_fd(jd, fd, off) == 2);
	const struct jitdump_stats *st = jitdump_stats(jd);
	CHECK(st->cut_bytes && st->other == JITDUMP_MAX_BYTES / JITDUMP_MAX_RECORD - 1, "cut %d, %lu skipped",
	      st->cut_bytes, st->other);
	close(fd);
	free(b.p);
	free(r.p);
}

int main(void)
{
	well_formed();
	growing();
	bad_headers();
	hostile();
	many();
	through_fd();
	jitdump_free(jd);
	return check_summary("t_jitdump");
}
