/* t_out.c: unit tests for the profile aggregate and the output writers
 * on synthetic profiles (tests/out_fixture.h). Syntax checks by outside
 * tools (XML, JSON, go tool pprof, chromium) live in tests/out-*.test.
 * Exit 0 pass, 1 fail. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "out.h"
#include "out_fixture.h"
#include "profile.pb-c.h"
#include "check.h"

/* Run WRITER on P into a malloc'd buffer; *LEN gets its size. */
static char *render(int (*writer)(const struct profile *, FILE *),
		    const struct profile *p, size_t *len, int *rc)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return NULL;
	*rc = writer(p, f);
	fclose(f);
	*len = n;
	return buf;
}

static size_t count_substr(const char *hay, size_t len, const char *needle)
{
	size_t n = 0, m = strlen(needle);
	for (const char *s = hay; (s = memmem(s, len - (size_t)(s - hay), needle, m)); s += m)
		n++;
	return n;
}

/* 1 when BUF[0..LEN) is well-formed UTF-8 (out_clean's rules). */
static int utf8_valid(const char *buf, size_t len)
{
	const unsigned char *s = (const unsigned char *)buf;
	for (size_t i = 0; i < len;) {
		unsigned c = s[i], n, cp, min;
		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			n = 1, cp = c & 0x1f, min = 0x80;
		else if (c >= 0xe0 && c <= 0xef)
			n = 2, cp = c & 0xf, min = 0x800;
		else if (c >= 0xf0 && c <= 0xf4)
			n = 3, cp = c & 7, min = 0x10000;
		else
			return 0;
		if (i + n >= len)
			return 0;
		for (unsigned k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += n + 1;
	}
	return 1;
}

/* ------------------------------------------------------------ profile */

static void test_profile_basic(void)
{
	struct profile *p = profile_new();
	CHECK(fixture_hostile(p) == 0, "fixture");
	CHECK(profile_total(p) == 110, "total %llu", (unsigned long long)profile_total(p));
	CHECK(profile_nstacks(p) == 5, "nstacks %zu", profile_nstacks(p));
	CHECK(profile_nframes(p) == FX_N, "nframes %zu", profile_nframes(p));
	uint64_t sum = 0;
	for (size_t i = 0; i < profile_nstacks(p); i++) {
		pid_t tid;
		const uint32_t *ids;
		size_t depth;
		uint64_t count;
		profile_stack(p, i, &tid, &ids, &depth, &count);
		sum += count;
		CHECK(tid == 42 || tid == 43, "tid %d", (int)tid);
		CHECK(depth == 3 || depth == 6, "depth %zu", depth);
		/* outermost first: the root frame leads */
		CHECK(profile_frame(p, ids[0])->kind == FRAME_ROOT, "stack %zu root", i);
		if (depth == 6 && profile_frame(p, ids[5])->name == intern("string.format"))
			CHECK(count == (tid == 42 ? 30 : 5), "merged count %llu",
			      (unsigned long long)count);
	}
	CHECK(sum == 110, "sum %llu", (unsigned long long)sum);

	profile_reset(p);
	CHECK(profile_total(p) == 0 && profile_nstacks(p) == 0, "reset clears stacks");
	CHECK(profile_nframes(p) == FX_N, "reset keeps frames: %zu", profile_nframes(p));
	CHECK(fixture_hostile(p) == 0 && profile_nframes(p) == FX_N &&
	      profile_nstacks(p) == 5 && profile_total(p) == 110, "re-add after reset");
	profile_free(p);
}

static void test_profile_identity(void)
{
	struct profile *p = profile_new();
	struct frame base = fx_frame(FRAME_LUA, "f", "a.lua", NULL, 3, 1, 0, 0);
	struct frame v[7];
	for (int i = 0; i < 7; i++)
		v[i] = base;
	v[1].line = 4;
	v[2].firstline = 2;
	v[3].trace = 9;
	v[4].kind = FRAME_C;
	v[5].module = intern("m.so");
	v[6].addr = 0x1234;  /* not part of a frame's identity */
	for (int i = 0; i < 7; i++)
		CHECK(fx_add(p, 1, &v[i], 1, 1) == 0, "add %d", i);
	CHECK(profile_nframes(p) == 6, "nframes %zu", profile_nframes(p));
	CHECK(profile_nstacks(p) == 6, "nstacks %zu", profile_nstacks(p));
	/* same stack, other thread: a distinct entry */
	CHECK(fx_add(p, 2, &v[0], 1, 1) == 0 && profile_nstacks(p) == 7, "tid splits");
	/* an empty stack is counted too */
	struct stack empty = { 0 };
	CHECK(profile_add(p, 1, &empty, 4) == 0 && profile_total(p) == 12, "empty stack");
	profile_free(p);
}

/* One function, one name (docs/naming.md §1): the prototype a.lua:6,
 * met as "leaf" (5 samples), "__index" (9) and "function <a.lua:6>"
 * (20), is "leaf" everywhere and its stacks merge; a function met only
 * as a metamethod keeps that name, main chunks and C frames keep theirs. */
static void test_profile_one_name(void)
{
	struct profile *p = profile_new();
	struct frame caller = fx_frame(FRAME_LUA, "caller", "a.lua", NULL, 20, 18, 0, 0);
	struct frame v[3][2];
	const char *names[3] = { "leaf", "__index", "function <a.lua:6>" };
	uint64_t counts[3] = { 5, 9, 20 };
	for (int i = 0; i < 3; i++) {
		v[i][0] = caller;
		v[i][1] = fx_frame(FRAME_LUA, names[i], "a.lua", NULL, 7, 6, 0, 0);
		CHECK(fx_add(p, 1, v[i], 2, counts[i]) == 0, "add %d", i);
	}
	struct frame mm[2] = { caller, fx_frame(FRAME_LUA, "__lt", "a.lua", NULL, 31, 30, 0, 0) };
	CHECK(fx_add(p, 1, mm, 2, 2) == 0, "add __lt");
	struct frame c[2] = { caller, fx_frame(FRAME_C, "__index", NULL, "m.so", 0, 0, 0, 0) };
	CHECK(fx_add(p, 1, c, 2, 1) == 0, "add C");
	struct fn_names *nm = fn_names_new();
	CHECK(nm && fn_names_count(nm, p) == 0, "first count changes nothing handed out");
	CHECK(strcmp(fn_names_best(nm, &v[1][1]), "leaf") == 0, "best: %s", fn_names_best(nm, &v[1][1]));
	CHECK(strcmp(fn_names_best(nm, &mm[1]), "__lt") == 0, "metamethod only");
	CHECK(strcmp(fn_names_best(nm, &c[1]), "__index") == 0, "C frame untouched");
	/* a later count where "__index" alone has samples: the name changes */
	profile_reset(p);
	CHECK(fx_add(p, 1, v[1], 2, 3) == 0, "add after reset");
	CHECK(fn_names_count(nm, p) == 1, "a handed-out name changed");
	CHECK(strcmp(fn_names_best(nm, &v[0][1]), "__index") == 0, "now __index");
	fn_names_free(nm);
	/* record: the three stacks become one of 34 samples */
	profile_reset(p);
	for (int i = 0; i < 3; i++)
		CHECK(fx_add(p, 1, v[i], 2, counts[i]) == 0, "re-add %d", i);
	CHECK(profile_name_functions(p) == 0, "rename");
	CHECK(profile_nstacks(p) == 1 && profile_total(p) == 34, "one stack: %zu, %llu",
	      profile_nstacks(p), (unsigned long long)profile_total(p));
	const uint32_t *ids;
	size_t depth;
	profile_stack(p, 0, NULL, &ids, &depth, NULL);
	CHECK(depth == 2 && strcmp(profile_frame(p, ids[1])->name, "leaf") == 0, "named leaf");
	profile_free(p);
}

static void test_profile_scale(void)
{
	struct profile *p = profile_new();
	CHECK(fixture_big(p, 100000, 50) == 0, "big fixture");
	uint64_t want = 0;
	for (int i = 0; i < 100000; i++)
		want += 1 + (uint64_t)(i % 7);
	CHECK(profile_nstacks(p) == 100000, "nstacks %zu", profile_nstacks(p));
	CHECK(profile_total(p) == want, "total");
	CHECK(fixture_big(p, 100000, 50) == 0, "again");
	CHECK(profile_nstacks(p) == 100000 && profile_total(p) == 2 * want,
	      "second pass only counts");
	profile_free(p);
}

/* ------------------------------------------------------------ helpers */

static void test_clean(void)
{
	char buf[64];
	CHECK(strcmp(out_clean("plain", buf, sizeof buf, 0), "plain") == 0, "plain");
	CHECK(strcmp(out_clean(NULL, buf, sizeof buf, 0), "") == 0, "NULL");
	CHECK(strcmp(out_clean("a\xff" "b", buf, sizeof buf, 0), "a\xef\xbf\xbd" "b") == 0,
	      "0xff -> U+FFFD: %s", buf);
	CHECK(strcmp(out_clean("\xc3", buf, sizeof buf, 0), "\xef\xbf\xbd") == 0,
	      "truncated sequence");
	CHECK(strcmp(out_clean("\xc3\xa9t\xc3\xa9", buf, sizeof buf, 0), "\xc3\xa9t\xc3\xa9") == 0,
	      "valid UTF-8 kept");
	CHECK(strcmp(out_clean("\xed\xa0\x80", buf, sizeof buf, 0),
		     "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd") == 0, "surrogate refused");
	CHECK(strcmp(out_clean("\xc0\xaf", buf, sizeof buf, 0),
		     "\xef\xbf\xbd\xef\xbf\xbd") == 0, "overlong refused");
	CHECK(strcmp(out_clean("a\nb\tc\x7f", buf, sizeof buf, 0),
		     "a\xef\xbf\xbd" "b\xef\xbf\xbd" "c\xef\xbf\xbd") == 0, "controls");
	CHECK(strcmp(out_clean("a;b", buf, sizeof buf, 0), "a;b") == 0, "; kept");
	CHECK(strcmp(out_clean("a;b", buf, sizeof buf, OUT_CLEAN_FOLDED), "a:b") == 0,
	      "; folded");
	/* truncation never splits a character */
	out_clean("ab\xc3\xa9", buf, 4, 0);
	CHECK(strcmp(buf, "ab") == 0, "cut at boundary: %s", buf);

	char *out = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&out, &n);
	out_put_xml(f, "<a href=\"x\">&'</a>");
	fputc('|', f);
	out_put_json(f, "q\"b\\s");
	fputc('|', f);
	out_put_fixed(f, 12.345, 2);
	fputc('|', f);
	out_put_fixed(f, 0.004, 2);
	fputc('|', f);
	out_put_fixed(f, 99.999, 1);
	fclose(f);
	CHECK(strcmp(out, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;|\"q\\\"b\\\\s\"|"
		      "12.35|0.00|100.0") == 0, "escapes: %s", out);
	free(out);
}

/* out_json_string on S[0..N) equals WANT (quotes included). */
static void json_case(const char *s, size_t n, const char *want, const char *what)
{
	char buf[6 * 64 + 2];
	size_t w = out_json_string(buf, s, n);
	CHECK(w == strlen(want) && memcmp(buf, want, w) == 0, "json %s: got '%.*s', want '%s'",
	      what, (int)w, buf, want);
}

static void test_json_string(void)
{
#define JC(lit, want, what) json_case(lit, sizeof lit - 1, want, what)
	JC("plain", "\"plain\"", "ascii");
	JC("", "\"\"", "empty");
	JC("q\"b\\s/", "\"q\\\"b\\\\s/\"", "quote, backslash");
	JC("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf",
	   "\"\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xef\xbf\xbf\"", "valid multi-byte");
	JC("a\0b", "\"a\\u0000b\"", "NUL inside");
	JC("\n\t\x1f\x7f", "\"\\u000a\\u0009\\u001f\\u007f\"", "C0 and DEL");
	JC("\xc2\x85\xc2\x9f\xc2\xa0", "\"\\u0085\\u009f\xc2\xa0\"", "C1 escaped, NBSP kept");
	JC("\xc3", "\"\\ufffd\"", "truncated 2-byte at the end");
	JC("\xe2\x82" "x", "\"\\ufffd\\ufffdx\"", "truncated 3-byte");
	JC("\xf0\x9f\x98", "\"\\ufffd\\ufffd\\ufffd\"", "truncated 4-byte at the end");
	JC("\xc0\xaf", "\"\\ufffd\\ufffd\"", "overlong 2-byte");
	JC("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\"", "overlong 3-byte");
	JC("\xf0\x80\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"", "overlong 4-byte");
	JC("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"", "surrogate");
	JC("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"", "above U+10FFFF");
	JC("\x80" "a\xff\xf5", "\"\\ufffda\\ufffd\\ufffd\"", "stray continuation, 0xff, 0xf5");
#undef JC

	/* the FILE writer: same bytes, also for strings longer than its
	 * pieces with characters across every boundary */
	char *big = malloc(3000 * 4 + 1), *want = malloc(6 * 3000 * 4 + 3);
	size_t n = 0;
	for (int i = 0; i < 3000; i++) {
		static const char *const ch[] = { "a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80",
						  "\x01", "\xff", "\"" };
		const char *c = ch[(i * 7 + i / 5) % 7];
		memcpy(big + n, c, strlen(c));
		n += strlen(c);
	}
	big[n] = 0;
	size_t wn = out_json_string(want, big, n);
	char *got = NULL;
	size_t gn = 0;
	FILE *f = open_memstream(&got, &gn);
	out_put_json(f, big);
	fputc('|', f);
	out_put_json(f, NULL);
	fclose(f);
	CHECK(gn == wn + 3 && memcmp(got, want, wn) == 0 && memcmp(got + wn, "|\"\"", 3) == 0,
	      "out_put_json differs from out_json_string (%zu vs %zu bytes)", gn, wn);
	free(got);

	/* random bytes: always valid UTF-8 with no raw control character */
	unsigned seed = 12345;
	int ok = 1;
	for (int r = 0; r < 2000; r++) {
		size_t len = (size_t)(rand_r(&seed) % 40);
		for (size_t i = 0; i < len; i++)
			big[i] = (char)(rand_r(&seed) & 0xff);
		size_t w = out_json_string(want, big, len);
		ok &= w >= 2 && want[0] == '"' && want[w - 1] == '"' && utf8_valid(want, w);
		for (size_t i = 0; i < w; i++)
			ok &= (unsigned char)want[i] >= 0x20 && want[i] != 0x7f;
	}
	CHECK(ok, "random bytes gave invalid JSON text (seed 12345)");
	free(big);
	free(want);
}

static void test_fmt_u64(void)
{
	static const struct {
		uint64_t v;
		const char *s;
	} cases[] = {
		{ 0, "0" }, { 7, "7" }, { 10, "10" }, { 99, "99" }, { 100, "100" },
		{ 1009, "1009" }, { 4294967295ull, "4294967295" },
		{ 18446744073709551615ull, "18446744073709551615" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char buf[24];
		size_t n = out_fmt_u64(buf, cases[i].v);
		buf[n] = 0;
		CHECK(strcmp(buf, cases[i].s) == 0, "out_fmt_u64: %s, want %s", buf, cases[i].s);
	}
}

/* frame_label as it was written with snprintf: the reference. */
static void label_ref(const struct frame *fr, char *buf, size_t len, int with_line)
{
	const char *name = fr->name ? fr->name : "[unknown]";
	if (fr->kind == FRAME_LUA && fr->file && with_line && fr->line > 0)
		snprintf(buf, len, "%s (%s:%d)", name, fr->file, fr->line);
	else if (fr->kind == FRAME_LUA && fr->file && !with_line && fr->firstline > 0)
		snprintf(buf, len, "%s (%s:%d)", name, fr->file, fr->firstline);
	else if (fr->kind == FRAME_LUA && fr->file)
		snprintf(buf, len, "%s (%s)", name, fr->file);
	else if ((fr->kind == FRAME_C || fr->kind == FRAME_NATIVE) && fr->module)
		snprintf(buf, len, "%s (%s)", name, fr->module);
	else
		snprintf(buf, len, "%s", name);
}

static void test_frame_label(void)
{
	static const size_t lens[] = { 1, 2, 3, 7, 12, 40, 1024 };
	struct profile *p = profile_new();
	CHECK(fixture_random(p, 99) == 0, "fixture_random");
	struct frame neg = fx_frame(FRAME_LUA, "n", "f.lua", NULL, -3, -1, 0, 0);
	size_t bad = 0, n = profile_nframes(p);
	for (size_t i = 0; i <= n; i++) {
		const struct frame *fr = i < n ? profile_frame(p, (uint32_t)i) : &neg;
		for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
			for (int wl = 0; wl < 2; wl++) {
				char a[1024], b[1024];
				memset(a, 'x', sizeof a);
				memset(b, 'x', sizeof b);
				frame_label(fr, a, lens[k], wl);
				label_ref(fr, b, lens[k], wl);
				bad += memcmp(a, b, sizeof a) != 0;
			}
		}
	}
	CHECK(bad == 0, "frame_label differs from snprintf in %zu cases", bad);
	profile_free(p);
}

/* out_order ranks frames by strcmp of their labels, then by id: check it
 * against a plain qsort on labels that share prefixes across the 8-byte
 * words the sort compares, end inside and at word boundaries, repeat
 * (frames differing only by trace), and carry bytes >= 0x80. */
static int cmp_naive(const void *a, const void *b, void *arg)
{
	char **label = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(label[x], label[y]);
	return c ? c : (x > y) - (x < y);
}

static void check_order(const struct profile *p, const char *what)
{
	struct out_order o;
	CHECK(out_order_init(&o, p, 1, 0) == 0, "%s: out_order_init", what);
	uint32_t *byrank = malloc(o.nframes * sizeof *byrank);
	for (size_t i = 0; i < o.nframes; i++) {
		byrank[i] = (uint32_t)i;
		CHECK(o.label_len[i] == strlen(o.label[i]), "%s: label_len", what);
	}
	qsort_r(byrank, o.nframes, sizeof *byrank, cmp_naive, o.label);
	size_t bad = 0;
	for (size_t i = 0; i < o.nframes; i++)
		bad += o.rank[byrank[i]] != i;
	CHECK(bad == 0, "%s: %zu of %zu frames ranked out of strcmp order", what, bad,
	      o.nframes);
	free(byrank);
	out_order_free(&o);
}

static void test_order(void)
{
	static const char *const parts[] = { "a", "ab", "abcdefg", "abcdefgh", "abcdefghi",
		"abcdefgh (x", "\xc3\xa9", "z", "~", "fn_1234_work" };
	enum { NP = sizeof parts / sizeof parts[0] };
	/* Ids out of label order, runs led by a label that ends at a word. */
	static const char *const edges[] = { "abcdefgh", "abcdefghz", "abcdefgha",
		"abcdefghijklmnop", "abcdefghijklmnopz", "abcdefghijklmnopa", "abcdefghijklmnopq", "abcdefghijklmnop",
		"abcdefghijklmnop", "abcdefghijklmno", "abcdefghi", "abcdefgh", "abcdefgh",
		"abcdefg", "abcdefgh\xc3\xa9", "abcdefgh~" };
	struct profile *p = profile_new();
	uint64_t rng = 42;
	int r = 0;
	for (int i = 0; i < (int)(sizeof edges / sizeof edges[0]); i++) {
		for (int t = 0; t < 2; t++) {
			struct frame fr = fx_frame(FRAME_VMSTATE, edges[i], NULL, NULL, 0, 0, t, 0);
			r |= fx_add(p, 1, &fr, 1, 1);
		}
	}
	check_order(p, "word edges");
	for (int i = 0; i < 400; i++) {
		char name[128] = "";
		int n = 1 + (int)(fx_rand(&rng) % 4);
		for (int k = 0; k < n; k++)
			strcat(name, parts[fx_rand(&rng) % NP]);
		struct frame fr = fx_frame(FRAME_LUA, name, i % 3 ? "@m.lua" : NULL, NULL,
					   (int)(fx_rand(&rng) % 12), 1, i % 5, 0);
		r |= fx_add(p, 1, &fr, 1, 1);
	}
	CHECK(r == 0, "building the prefix profile");
	check_order(p, "prefixes");
	profile_free(p);
	p = profile_new();
	CHECK(fixture_random(p, 7) == 0, "fixture_random");
	check_order(p, "random");
	profile_free(p);
}

static void test_formats(void)
{
	CHECK(out_format_parse("flamegraph") == OUT_FLAMEGRAPH, "parse flamegraph");
	CHECK(out_format_parse("folded") == OUT_FOLDED, "parse folded");
	CHECK(out_format_parse("speedscope") == OUT_SPEEDSCOPE, "parse speedscope");
	CHECK(out_format_parse("pprof") == OUT_PPROF, "parse pprof");
	CHECK(out_format_parse("svg") == -1 && out_format_parse(NULL) == -1, "unknown");
	CHECK(out_format_from_path("a/b.svg") == OUT_FLAMEGRAPH, ".svg");
	CHECK(out_format_from_path("x.folded") == OUT_FOLDED, ".folded");
	CHECK(out_format_from_path("x.txt") == OUT_FOLDED, ".txt");
	CHECK(out_format_from_path("x.JSON") == OUT_SPEEDSCOPE, ".JSON");
	CHECK(out_format_from_path("x.pb.gz") == OUT_PPROF, ".pb.gz");
	CHECK(out_format_from_path("x.pprof") == OUT_PPROF, ".pprof");
	CHECK(out_format_from_path("x.pb") == OUT_PPROF, ".pb");
	CHECK(out_format_from_path("profile") == OUT_FLAMEGRAPH, "default");
	for (int i = 0; i < OUT_NFORMATS; i++) {
		CHECK(out_format_parse(out_format_name(i)) == i, "name round trip %d", i);
		CHECK(strcmp(out_format_noun(i), "output") != 0, "noun %d", i);
	}
	CHECK(strcmp(out_format_noun(OUT_FLAMEGRAPH), "flame graph") == 0, "noun");
}

/* ------------------------------------------------------------ writers */

static void test_folded(void)
{
	struct profile *p = profile_new();
	fixture_hostile(p);
	size_t len;
	int rc;
	char *s = render(out_folded_write, p, &len, &rc);
	const char *want =
		"process 42;main (luajit);clock_gettime (libc.so.6) 10\n"
		"process 42;main (luajit);lua_pcall (libluajit-5.1.so.2);main chunk (app.lua:10);"
		"<script>alert(1)</script> (evil&\"'.lua:3);cfib (cfib.so) 50\n"
		"process 42;main (luajit);lua_pcall (libluajit-5.1.so.2);main chunk (app.lua:10);"
		"bad\xef\xbf\xbd\xef\xbf\xbdutf8 (t.lua:9);[GC] 15\n"
		"process 42;main (luajit);lua_pcall (libluajit-5.1.so.2);main chunk (app.lua:10);"
		"semi:colon\xef\xbf\xbdnewline (x]]>y.lua:7);string.format 35\n";
	CHECK(rc == 0, "rc %d", rc);
	CHECK(s && strcmp(s, want) == 0, "folded output:\n%s", s ? s : "(null)");
	free(s);

	profile_reset(p);
	s = render(out_folded_write, p, &len, &rc);
	CHECK(rc == 0 && len == 0, "empty folded: %zu bytes", len);
	free(s);
	profile_free(p);
}

static void test_svg(void)
{
	struct profile *p = profile_new();
	fixture_hostile(p);
	size_t len;
	int rc;
	char *s = render(out_svg_write, p, &len, &rc);
	CHECK(rc == 0 && s, "rc %d", rc);
	if (!s)
		return;
	CHECK(utf8_valid(s, len), "SVG is valid UTF-8");
	CHECK(!memchr(s, '\xff', len), "no raw 0xff");
	CHECK(count_substr(s, len, "<script") == 1, "one <script element: %zu",
	      count_substr(s, len, "<script"));
	CHECK(count_substr(s, len, "]]>") == 1, "one CDATA end: %zu",
	      count_substr(s, len, "]]>"));
	CHECK(count_substr(s, len, "&lt;script&gt;alert(1)&lt;/script&gt; (evil&amp;&quot;&#39;.lua:3)"
			   " (50 samples, 45.45%)") == 1, "escaped title");
	CHECK(count_substr(s, len, "x]]&gt;y.lua") >= 1, "]]> escaped");
	CHECK(count_substr(s, len, "semi;colon\xef\xbf\xbdnewline") >= 1, "newline replaced");
	CHECK(count_substr(s, len, ">110 samples, ") == 1, "sample count in subtitle");
	CHECK(count_substr(s, len, "luaspy: luajit &lt;app&gt;.lua &amp; &quot;x&quot; ]]&gt; "
			   "\xef\xbf\xbd</text>") == 1, "title escaped");
	CHECK(count_substr(s, len, "<g><title>") == FX_N + 1, "frames: %zu",
	      count_substr(s, len, "<g><title>"));
	CHECK(count_substr(s, len, "all (110 samples, 100.00%)") == 1, "root frame");
	/* the JIT trace frame is drawn aqua/blue: blue channel dominant */
	const char *t = strstr(s, "bad\xef\xbf\xbd\xef\xbf\xbdutf8 (t.lua:9) (");
	const char *fill = t ? strstr(t, "fill=\"rgb(") : NULL;
	int r = 0, g = 0, b = 0;
	CHECK(fill && sscanf(fill, "fill=\"rgb(%d,%d,%d)", &r, &g, &b) == 3 && b > r && b > 190,
	      "trace colour %d,%d,%d", r, g, b);
	free(s);

	profile_reset(p);
	s = render(out_svg_write, p, &len, &rc);
	CHECK(rc == 0 && s && count_substr(s, len, "0 samples") >= 1, "empty SVG says 0 samples");
	CHECK(s && count_substr(s, len, "<g><title>") == 0, "empty SVG has no frames");
	CHECK(s && count_substr(s, len, "</svg>") == 1, "empty SVG complete");
	free(s);
	profile_free(p);
}

static void test_svg_min_width(void)
{
	/* 1 sample among 1e6 is 0.00118 px: dropped, but its sample keeps
	 * the parent's width. */
	struct profile *p = profile_new();
	struct frame a = fx_frame(FRAME_LUA, "a", "x.lua", NULL, 1, 1, 0, 0);
	struct frame st[2] = { a, fx_frame(FRAME_LUA, "tiny", "x.lua", NULL, 2, 2, 0, 0) };
	fx_add(p, 1, st, 1, 999999);
	fx_add(p, 1, st, 2, 1);
	size_t len;
	int rc;
	char *s = render(out_svg_write, p, &len, &rc);
	CHECK(rc == 0 && s && !strstr(s, "tiny"), "narrow frame dropped");
	CHECK(s && strstr(s, "a (x.lua:1) (1000000 samples, 100.00%)"), "parent keeps sum");
	free(s);
	profile_free(p);
}

static void test_svg_frame_cap(void)
{
	/* 11000 chains of 20 frames, 1 sample each: every frame is 0.107 px,
	 * 220 000 of them would be drawn; the cap raises the threshold. */
	struct profile *p = profile_new();
	struct frame st[20];
	for (int i = 0; i < 11000; i++) {
		for (int d = 0; d < 20; d++)
			st[d] = fx_frame(FRAME_LUA, "f", "x.lua", NULL, i * 20 + d + 1, 1, 0, 0);
		fx_add(p, 1, st, 20, 1);
	}
	size_t len;
	int rc;
	char *s = render(out_svg_write, p, &len, &rc);
	size_t frames = s ? count_substr(s, len, "<g><title>") : 0;
	CHECK(rc == 0 && s && frames >= 1 && frames <= 150001, "drawn frames %zu", frames);
	CHECK(s && strstr(s, "(frames under 0.2 px not drawn)"), "subtitle tells the threshold");
	CHECK(len < 30u << 20, "SVG is %zu bytes", len);
	free(s);
	profile_free(p);
}

static void test_speedscope(void)
{
	struct profile *p = profile_new();
	fixture_hostile(p);
	size_t len;
	int rc;
	char *s = render(out_speedscope_write, p, &len, &rc);
	CHECK(rc == 0 && s, "rc %d", rc);
	if (!s)
		return;
	CHECK(utf8_valid(s, len), "JSON is valid UTF-8");
	CHECK(strstr(s, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""),
	      "schema");
	CHECK(count_substr(s, len, "\"type\":\"sampled\"") == 2, "one profile per thread");
	CHECK(strstr(s, "\"name\":\"<script>alert(1)</script> (evil&\\\"'.lua:3)\""),
	      "quotes escaped");
	CHECK(strstr(s, "\"unit\":\"nanoseconds\""), "ns with a rate");
	/* tid 42: 50 + 30 + 10 samples at 100 Hz */
	CHECK(strstr(s, "\"endValue\":900000000"), "tid 42 endValue");
	CHECK(strstr(s, "\"endValue\":200000000"), "tid 43 endValue");
	free(s);

	profile_reset(p);
	s = render(out_speedscope_write, p, &len, &rc);
	CHECK(rc == 0 && s && strstr(s, "\"samples\":[]"), "empty speedscope");
	free(s);
	profile_free(p);
}

/* Gunzip BUF and unpack it as a Profile. */
static Perftools__Profiles__Profile *pprof_read(const char *buf, size_t len)
{
	size_t cap = 1 << 20, n = 0;
	unsigned char *out = malloc(cap);
	z_stream z = { 0 };
	if (!out || inflateInit2(&z, 15 + 16) != Z_OK)
		return NULL;
	z.next_in = (Bytef *)buf;
	z.avail_in = (uInt)len;
	int zr;
	do {
		if (n == cap)
			out = realloc(out, cap *= 2);
		z.next_out = out + n;
		z.avail_out = (uInt)(cap - n);
		zr = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
	} while (zr == Z_OK);
	inflateEnd(&z);
	Perftools__Profiles__Profile *pb = zr == Z_STREAM_END ?
		perftools__profiles__profile__unpack(NULL, n, out) : NULL;
	free(out);
	return pb;
}

static const char *pb_str(const Perftools__Profiles__Profile *pb, int64_t i)
{
	return i >= 0 && (size_t)i < pb->n_string_table ? pb->string_table[i] : "(bad)";
}

static void test_pprof(void)
{
	struct profile *p = profile_new();
	fixture_hostile(p);
	size_t len;
	int rc;
	char *s = render(out_pprof_write, p, &len, &rc);
	CHECK(rc == 0 && s && len > 2 && (unsigned char)s[0] == 0x1f &&
	      (unsigned char)s[1] == 0x8b, "gzip magic");
	Perftools__Profiles__Profile *pb = s ? pprof_read(s, len) : NULL;
	CHECK(pb, "gunzip + unpack");
	if (pb) {
		CHECK(pb->n_string_table > 0 && strcmp(pb->string_table[0], "") == 0,
		      "string 0 empty");
		for (size_t i = 0; i < pb->n_string_table; i++)
			CHECK(utf8_valid(pb->string_table[i], strlen(pb->string_table[i])),
			      "string %zu valid UTF-8", i);
		CHECK(pb->n_sample_type == 2 &&
		      strcmp(pb_str(pb, pb->sample_type[0]->type), "samples") == 0 &&
		      strcmp(pb_str(pb, pb->sample_type[0]->unit), "count") == 0 &&
		      strcmp(pb_str(pb, pb->sample_type[1]->type), "cpu") == 0 &&
		      strcmp(pb_str(pb, pb->sample_type[1]->unit), "nanoseconds") == 0,
		      "sample types");
		CHECK(pb->period_type && pb->period == 10000000, "period %lld",
		      (long long)pb->period);
		CHECK(pb->duration_nanos == 1100000000, "duration");
		CHECK(pb->n_sample == 5, "samples %zu", pb->n_sample);
		CHECK(pb->n_location == FX_N, "locations %zu", pb->n_location);
		CHECK(pb->n_mapping == 4, "mappings %zu", pb->n_mapping);
		int64_t c = 0, ns = 0;
		for (size_t i = 0; i < pb->n_sample; i++) {
			const Perftools__Profiles__Sample *sm = pb->sample[i];
			CHECK(sm->n_value == 2, "values");
			c += sm->value[0];
			ns += sm->value[1];
			for (size_t k = 0; k < sm->n_location_id; k++)
				CHECK(sm->location_id[k] >= 1 && sm->location_id[k] <= pb->n_location,
				      "location id");
			/* leaf first: the last location is the root frame */
			const Perftools__Profiles__Location *root =
				pb->location[sm->location_id[sm->n_location_id - 1] - 1];
			const Perftools__Profiles__Function *fn =
				pb->function[root->line[0]->function_id - 1];
			CHECK(strcmp(pb_str(pb, fn->name), "process 42") == 0, "root last");
		}
		CHECK(c == 110 && ns == 1100000000, "sums %lld %lld", (long long)c, (long long)ns);
		int found = 0;
		for (size_t i = 0; i < pb->n_function; i++) {
			const Perftools__Profiles__Function *fn = pb->function[i];
			if (strcmp(pb_str(pb, fn->system_name), "<script>alert(1)</script>") == 0) {
				found = 1;
				CHECK(strcmp(pb_str(pb, fn->filename), "evil&\"'.lua") == 0, "filename");
				CHECK(fn->start_line == 1, "start_line");
			}
		}
		CHECK(found, "Lua function present");
		perftools__profiles__profile__free_unpacked(pb, NULL);
	}
	free(s);
	profile_free(p);
}

/* Frames that differ only in what speedscope does not show (the trace
 * a Lua frame ran on) share one entry of shared.frames: two entries
 * would be two rows of one function. */
static void test_speedscope_shared(void)
{
	struct profile *p = profile_new();
	struct frame a[] = { fx_frame(FRAME_LUA, "main chunk", "m.lua", NULL, 9, 0, 0, 0),
			     fx_frame(FRAME_LUA, "work", "m.lua", NULL, 2, 1, 3, 0) };
	struct frame b[] = { a[0], fx_frame(FRAME_LUA, "work", "m.lua", NULL, 2, 1, 0, 0) };
	fx_add(p, 42, a, 2, 5);
	fx_add(p, 42, b, 2, 4);
	size_t len;
	int rc;
	char *s = render(out_speedscope_write, p, &len, &rc);
	CHECK(rc == 0 && s && count_substr(s, len, "{\"name\":") == 2,
	      "speedscope: work on a trace and off it is one frame: %s", s);
	CHECK(s && strstr(s, "\"samples\":[[0,1],[0,1]]"), "both stacks use entry 1: %s", s);
	free(s);
	profile_free(p);
}

/* After a reset, frames no stack uses stay interned but are not written. */
static void test_unused_frames(void)
{
	struct profile *p = profile_new();
	struct frame f[FX_N];
	fixture_hostile(p);
	profile_reset(p);
	fx_hostile_frames(f);
	struct frame d[] = { f[FX_ROOT], f[FX_MAIN], f[FX_CLOCK] };
	fx_add(p, 42, d, 3, 7);
	size_t len;
	int rc;
	char *s = render(out_speedscope_write, p, &len, &rc);
	CHECK(rc == 0 && s && count_substr(s, len, "{\"name\":") == 3,
	      "speedscope: 3 frames: %s", s);
	CHECK(s && strstr(s, "\"samples\":[[0,1,2]]"), "compact indices: %s", s);
	free(s);
	s = render(out_pprof_write, p, &len, &rc);
	Perftools__Profiles__Profile *pb = s ? pprof_read(s, len) : NULL;
	CHECK(rc == 0 && pb && pb->n_location == 3 && pb->n_function == 3 && pb->n_sample == 1,
	      "pprof: only used locations");
	if (pb && pb->n_sample == 1) {
		const Perftools__Profiles__Sample *sm = pb->sample[0];
		CHECK(sm->n_location_id == 3 && sm->location_id[0] == 3 && sm->location_id[2] == 1,
		      "leaf first, compact ids");
	}
	if (pb)
		perftools__profiles__profile__free_unpacked(pb, NULL);
	free(s);
	profile_free(p);
}

/* No control characters but '\n' (and '\t' nowhere) in generated text. */
static int no_controls(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)buf[i];
		if ((c < 0x20 && c != '\n') || c == 0x7f)
			return 0;
	}
	return 1;
}

static void test_random_names(void)
{
	for (uint64_t seed = 1; seed <= 5; seed++) {
		struct profile *p = profile_new();
		CHECK(fixture_random(p, seed) == 0, "fixture");
		size_t len;
		int rc;
		char *s = render(out_svg_write, p, &len, &rc);
		CHECK(rc == 0 && s && utf8_valid(s, len) && no_controls(s, len),
		      "seed %llu: SVG text clean", (unsigned long long)seed);
		CHECK(s && count_substr(s, len, "]]>") == 1 && count_substr(s, len, "<script") == 1,
		      "seed %llu: SVG script intact", (unsigned long long)seed);
		free(s);
		s = render(out_speedscope_write, p, &len, &rc);
		CHECK(rc == 0 && s && utf8_valid(s, len) && no_controls(s, len),
		      "seed %llu: JSON text clean", (unsigned long long)seed);
		free(s);
		s = render(out_folded_write, p, &len, &rc);
		CHECK(rc == 0 && s && utf8_valid(s, len) && no_controls(s, len),
		      "seed %llu: folded text clean", (unsigned long long)seed);
		/* every line splits back into its frames and a count */
		uint64_t sum = 0;
		for (char *line = s, *nl; s && (nl = strchr(line, '\n')); line = nl + 1) {
			*nl = 0;
			char *sp = strrchr(line, ' ');
			CHECK(sp && sp > line, "line has a count");
			if (sp)
				sum += strtoull(sp + 1, NULL, 10);
		}
		CHECK(sum == profile_total(p), "folded sums to total");
		free(s);
		s = render(out_pprof_write, p, &len, &rc);
		Perftools__Profiles__Profile *pb = s ? pprof_read(s, len) : NULL;
		CHECK(rc == 0 && pb, "pprof readable");
		for (size_t i = 0; pb && i < pb->n_string_table; i++)
			CHECK(utf8_valid(pb->string_table[i], strlen(pb->string_table[i])),
			      "pprof string %zu valid UTF-8", i);
		if (pb)
			perftools__profiles__profile__free_unpacked(pb, NULL);
		free(s);
		profile_free(p);
	}
}

/* ------------------------------------------------------------ files */

static int dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_write_file(void)
{
	char dir[] = "/tmp/t_out.XXXXXX", path[256];
	CHECK(mkdtemp(dir), "mkdtemp");
	struct profile *p = profile_new();
	fixture_hostile(p);

	snprintf(path, sizeof path, "%s/missing/x.svg", dir);
	CHECK(out_write_file(p, OUT_FLAMEGRAPH, path) == -ENOENT, "missing dir");
	CHECK(out_write_file(p, OUT_NFORMATS, path) == -EINVAL, "bad format");

	mode_t old = umask(022);
	for (int fmt = 0; fmt < OUT_NFORMATS; fmt++) {
		snprintf(path, sizeof path, "%s/out.%d", dir, fmt);
		CHECK(out_write_file(p, fmt, path) == 0, "write %s", out_format_name(fmt));
		struct stat st;
		CHECK(stat(path, &st) == 0 && st.st_size > 0 && (st.st_mode & 0777) == 0644,
		      "%s: size/mode", path);
	}
	umask(old);
	CHECK(dir_entries(dir) == OUT_NFORMATS, "no temp files left: %d", dir_entries(dir));

	/* a directory in the way: rename fails, the temp file goes away */
	snprintf(path, sizeof path, "%s/sub", dir);
	mkdir(path, 0755);
	CHECK(out_write_file(p, OUT_FOLDED, path) < 0, "rename onto a directory fails");
	CHECK(dir_entries(dir) == OUT_NFORMATS + 1, "temp removed on error");
	rmdir(path);

	if (geteuid() != 0) {
		snprintf(path, sizeof path, "%s/ro", dir);
		mkdir(path, 0555);
		snprintf(path, sizeof path, "%s/ro/x.svg", dir);
		CHECK(out_write_file(p, OUT_FLAMEGRAPH, path) == -EACCES, "unwritable dir");
		snprintf(path, sizeof path, "%s/ro", dir);
		rmdir(path);
	} else {
		printf("skip: unwritable directory check (running as root)\n");
	}
	if (access("/dev/full", W_OK) == 0) {
		/* write errors surface as -errno from the writer */
		FILE *f = fopen("/dev/full", "w");
		int r = f ? out_svg_write(p, f) : 0;
		if (f && r == 0)
			r = fflush(f) ? -errno : 0;
		CHECK(r == -ENOSPC, "/dev/full: %d", r);
		if (f)
			fclose(f);
	}
	for (int fmt = 0; fmt < OUT_NFORMATS; fmt++) {
		snprintf(path, sizeof path, "%s/out.%d", dir, fmt);
		unlink(path);
	}
	rmdir(dir);
	profile_free(p);
}

int main(void)
{
	test_profile_basic();
	test_profile_identity();
	test_profile_one_name();
	test_profile_scale();
	test_clean();
	test_json_string();
	test_fmt_u64();
	test_frame_label();
	test_order();
	test_formats();
	test_folded();
	test_svg();
	test_svg_min_width();
	test_svg_frame_cap();
	test_speedscope();
	test_speedscope_shared();
	test_pprof();
	test_random_names();
	test_unused_frames();
	test_write_file();
	return check_summary("t_out");
}
