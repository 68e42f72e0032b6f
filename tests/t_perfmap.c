/* t_perfmap.c: unit tests for the perf map parser (src/perfmap.h):
 * well-formed lines in the forms JIT runtimes write, malformed lines,
 * lines past PERFMAP_MAX_LINE, unsorted and overlapping regions (the
 * later line wins), PERFMAP_MAX_ENTRIES, names cut and cleaned, and the
 * binary search at region edges; a map file read as it grows (this
 * process's own /tmp/perf-PID.map: whole lines appended are read on, a
 * half-written line waits for its newline, a file rewritten is read
 * anew). Exit 0 pass, 1 fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "check.h"
#include "perfmap.h"

static struct code_table t;
static struct perfmap_stats st;

static long parse(const char *s)
{
	return perfmap_parse(s, strlen(s), &t, &st);
}

/* Name at ADDR, or "" when none. */
static const char *at(uint64_t addr)
{
	const struct code_region *e = code_table_find(&t, addr);
	return e ? e->name : "";
}

static void forms(void)
{
	/* perf's own form (no 0x), CPython's and Node's (0x), V8 with
	 * spaces in names, CRLF, a last line without newline */
	long n = parse("7f0000001000 40 py::f:app.py\n"
		       "0x7f0000002000 0x10 LazyCompile:~main file:///a b.js:1\r\n"
		       "\n"
		       "  7f0000003000\t8\tTRACE_1::app.lua:3  \n"
		       "7F0000004000 1 last");
	CHECK(n == 4, "%ld entries", n);
	CHECK(st.lines == 4 && st.malformed == 0, "lines %lu malformed %lu", st.lines, st.malformed);
	CHECK(!strcmp(at(0x7f0000001000), "py::f:app.py"));
	CHECK(!strcmp(at(0x7f000000103f), "py::f:app.py"));
	CHECK(!strcmp(at(0x7f0000001040), ""), "end is exclusive: '%s'", at(0x7f0000001040));
	CHECK(!strcmp(at(0x7f0000000fff), ""));
	CHECK(!strcmp(at(0x7f0000002008), "LazyCompile:~main file:///a b.js:1"), "'%s'", at(0x7f0000002008));
	CHECK(!strcmp(at(0x7f0000003007), "TRACE_1::app.lua:3"), "'%s'", at(0x7f0000003007));
	CHECK(!strcmp(at(0x7f0000004000), "last"));
	CHECK(!strcmp(at(0), "") && !strcmp(at(UINT64_MAX), ""));
}

static void malformed(void)
{
	long n = parse("zzzz 10 name\n"          /* no start */
		       "1000 name\n"              /* no size */
		       "1000 10\n"                /* no name */
		       "1000 10    \n"            /* blank name */
		       "1000 0 empty\n"           /* size 0 */
		       "ffffffffffffff00 1000 wrap\n" /* start + size overflows */
		       "12345678901234567 10 long-hex\n" /* 17 digits */
		       "100010 name-glued\n"      /* one number */
		       "0x 10 bare-prefix\n"
		       "2000 10 good\n"
		       "\x01\x02\xff\n");
	CHECK(n == 1, "%ld entries", n);
	CHECK(st.malformed == 10, "malformed %lu", st.malformed);
	CHECK(!strcmp(at(0x2008), "good"));
	CHECK(!strcmp(at(0x1008), ""));
}

static void huge_lines(void)
{
	size_t big = 3 * PERFMAP_MAX_LINE;
	char *s = malloc(big + 64);
	int o = sprintf(s, "3000 10 ");
	memset(s + o, 'a', big);
	o += (int)big;
	o += sprintf(s + o, "\n4000 10 ok\n");
	long n = perfmap_parse(s, (size_t)o, &t, &st);
	CHECK(n == 1 && st.too_long == 1, "%ld entries, %lu too long", n, st.too_long);
	CHECK(!strcmp(at(0x4000), "ok") && !strcmp(at(0x3000), ""));
	/* a line just at the limit is kept, its name cut to CODE_NAME_MAX */
	o = sprintf(s, "5000 10 ");
	memset(s + o, 'b', PERFMAP_MAX_LINE - (size_t)o);
	o = PERFMAP_MAX_LINE;
	n = perfmap_parse(s, (size_t)o, &t, &st);
	CHECK(n == 1 && st.too_long == 0, "%ld entries, %lu too long", n, st.too_long);
	CHECK(strlen(at(0x5000)) == CODE_NAME_MAX, "name of %zu bytes", strlen(at(0x5000)));
	/* a cut never splits a UTF-8 character; control bytes become '?' */
	o = sprintf(s, "6000 10 ");
	for (int i = 0; i < CODE_NAME_MAX; i += 2)
		o += sprintf(s + o, "\xc3\xa9");
	s[o++] = 'x';
	o += sprintf(s + o, "\n7000 10 a\tb\x1b[31m\x7f" "c\n");
	n = perfmap_parse(s, (size_t)o, &t, &st);
	CHECK(n == 2);
	CHECK(strlen(at(0x6000)) == CODE_NAME_MAX, "%zu", strlen(at(0x6000)));
	CHECK(!strcmp(at(0x7000), "a?b?[31m?c"), "'%s'", at(0x7000));
	free(s);
}

static void unsorted_overlapping(void)
{
	long n = parse("9000 100 old-big\n"
		       "1000 10 one\n"
		       "9010 10 new-small\n"   /* later: wins over old-big */
		       "9050 10 new-small2\n"  /* later: wins too */
		       "500 10 half\n"
		       "1000 10 one-again\n"   /* same region, later: wins */
		       "a000 100 new-big\n"
		       "a010 10 old-small-after\n" /* later, inside new-big: wins */
		       "8000 8 eight\n");
	CHECK(n >= 5, "%ld entries", n);
	CHECK(!strcmp(at(0x1004), "one-again"), "'%s'", at(0x1004));
	CHECK(!strcmp(at(0x9010), "new-small"), "'%s'", at(0x9010));
	CHECK(!strcmp(at(0x9055), "new-small2"), "'%s'", at(0x9055));
	CHECK(!strcmp(at(0xa010), "old-small-after"), "'%s'", at(0xa010));
	CHECK(!strcmp(at(0x500), "half") && !strcmp(at(0x8007), "eight"));
	CHECK(st.overlapped >= 3, "%lu overlapped", st.overlapped);
	/* kept entries are sorted and disjoint */
	for (size_t i = 1; i < t.n; i++)
		CHECK(t.e[i - 1].end <= t.e[i].start, "entry %zu overlaps %zu", i - 1, i);
}

static void many(void)
{
	size_t lines = PERFMAP_MAX_ENTRIES + 1000;
	char *s = malloc(lines * 24 + 1);
	size_t o = 0;
	/* written in descending order: the sort must put them right */
	for (size_t i = 0; i < lines; i++)
		o += (size_t)sprintf(s + o, "%zx 10 f%zu\n", (lines - i) * 0x10, lines - i);
	long n = perfmap_parse(s, o, &t, &st);
	CHECK(n == PERFMAP_MAX_ENTRIES, "%ld entries", n);
	CHECK(st.over_count == 1000, "%lu over", st.over_count);
	char want[32];
	snprintf(want, sizeof want, "f%zu", lines);
	CHECK(!strcmp(at(lines * 0x10 + 5), want), "'%s'", at(lines * 0x10 + 5));
	CHECK(!strcmp(at(0x10 * 1000), ""), "lines past the limit are not kept");
	snprintf(want, sizeof want, "f%zu", (size_t)1001);
	CHECK(!strcmp(at(0x10 * 1001), want), "'%s'", at(0x10 * 1001));
	free(s);
}

/* Append (or with TRUNC rewrite) S to FILE, then wait out the re-check
 * interval so the next lookup looks at the file. */
static void put_map(const char *file, const char *s, int trunc)
{
	FILE *f = fopen(file, trunc ? "r+" : "a");
	CHECK(f != NULL);
	if (!f)
		return;
	if (trunc)
		CHECK(ftruncate(fileno(f), 0) == 0);
	fputs(s, f);
	fclose(f);
	struct timespec ts = { 0, (long)PERFMAP_RECHECK_NS + 10000000 };
	nanosleep(&ts, NULL);
}

static const char *look(struct perfmap *pm, uint64_t addr)
{
	const char *mod = NULL;
	const char *n = perfmap_lookup(pm, addr, NULL, &mod);
	CHECK(!n || !strcmp(mod, "[perf-map]"));
	return n ? n : "";
}

static void growing_file(void)
{
	char file[64];
	snprintf(file, sizeof file, "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(file, "w");
	CHECK(f != NULL);
	if (!f)
		return;
	fclose(f);
	struct perfmap *pm = perfmap_open(getpid());
	put_map(file, "1000 10 a\n2000 10 b\n", 0);
	CHECK(!strcmp(look(pm, 0x1000), "a") && !strcmp(look(pm, 0x2008), "b"));
	/* a whole line and a half-written one */
	put_map(file, "3000 10 c\n4000 10 dd", 0);
	CHECK(!strcmp(look(pm, 0x3000), "c"), "'%s'", look(pm, 0x3000));
	CHECK(!strcmp(look(pm, 0x4000), ""), "a half line was read: '%s'", look(pm, 0x4000));
	put_map(file, "d\n", 0);
	CHECK(!strcmp(look(pm, 0x4000), "ddd"), "'%s'", look(pm, 0x4000));
	CHECK(!strcmp(look(pm, 0x1000), "a"), "read on, the first lines kept");
	CHECK(perfmap_last_stats(pm)->lines == 4, "%lu lines", perfmap_last_stats(pm)->lines);
	/* a later line over an earlier one wins, as in a whole read */
	put_map(file, "1000 10 a2\n", 0);
	CHECK(!strcmp(look(pm, 0x1000), "a2"), "'%s'", look(pm, 0x1000));
	/* rewritten in place, longer: read anew */
	put_map(file, "1000 10 new\n5000 10 e\n6000 10 ffffffffffffffffffffffffffffffffffffffff\n", 1);
	CHECK(!strcmp(look(pm, 0x1000), "new") && !strcmp(look(pm, 0x2000), "") &&
	      !strcmp(look(pm, 0x5000), "e"), "'%s' '%s'", look(pm, 0x1000), look(pm, 0x2000));
	CHECK(perfmap_last_stats(pm)->lines == 3, "%lu lines", perfmap_last_stats(pm)->lines);
	perfmap_close(pm);
	unlink(file);
}

int main(void)
{
	forms();
	malformed();
	huge_lines();
	unsorted_overlapping();
	many();
	growing_file();
	CHECK(parse("") == 0 && t.n == 0 && code_table_find(&t, 0) == NULL);
	CHECK(perfmap_lookup(NULL, 1, NULL, NULL) == NULL);
	code_table_free(&t);
	return check_summary("t_perfmap");
}
