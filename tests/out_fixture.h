/* out_fixture.h: synthetic profiles for the output tests and the
 * benchmark (header-only; static functions).
 *
 *   fixture_hostile: small, known counts; names, files and modules carry
 *     markup, quotes, ']]>', ';', newlines and invalid UTF-8.
 *   fixture_demo: a plausible LuaJIT-ish profile (recursion, C calls, JIT
 *     traces, GC) for looking at the flame graph.
 *   fixture_random: names, files and modules of random bytes (any value
 *     but NUL), random kinds, lines and depths; for escaping checks.
 *   fixture_big: N distinct stacks of DEPTH frames drawn from a pool of
 *     2000 functions, sharing prefixes like a real call tree.
 */
#ifndef LUASPY_TESTS_OUT_FIXTURE_H
#define LUASPY_TESTS_OUT_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frame.h"
#include "intern.h"
#include "profile.h"

static struct frame fx_frame(int kind, const char *name, const char *file,
			     const char *module, int line, int firstline, int trace,
			     uint64_t addr)
{
	struct frame fr = {
		.kind = (uint8_t)kind,
		.line = line,
		.firstline = firstline,
		.trace = trace,
		.addr = addr,
		.name = intern(name),
		.file = intern(file),
		.module = intern(module),
	};
	return fr;
}

/* Add the frames FR[0..N-1], given OUTERMOST first for readability. */
static int fx_add(struct profile *p, pid_t tid, const struct frame *fr, int n,
		  uint64_t count)
{
	struct stack st = { 0 };
	for (int i = n - 1; i >= 0; i--)
		stack_push(&st, &fr[i]);
	int r = profile_add(p, tid, &st, count);
	stack_free(&st);
	return r;
}

enum {
	FX_ROOT, FX_MAIN, FX_PCALL, FX_CHUNK, FX_EVIL, FX_SEMI, FX_BADUTF,
	FX_FORMAT, FX_CFIB, FX_GC, FX_CLOCK, FX_N
};

static void fx_hostile_frames(struct frame *f)
{
	f[FX_ROOT] = fx_frame(FRAME_ROOT, "process 42", NULL, NULL, 0, 0, 0, 0);
	f[FX_MAIN] = fx_frame(FRAME_NATIVE, "main", NULL, "luajit", 0, 0, 0, 0x401000);
	f[FX_PCALL] = fx_frame(FRAME_NATIVE, "lua_pcall", NULL, "libluajit-5.1.so.2",
			       0, 0, 0, 0x7f0000001000);
	f[FX_CHUNK] = fx_frame(FRAME_LUA, "main chunk", "app.lua", NULL, 10, 0, 0, 0);
	f[FX_EVIL] = fx_frame(FRAME_LUA, "<script>alert(1)</script>", "evil&\"'.lua",
			      NULL, 3, 1, 0, 0);
	f[FX_SEMI] = fx_frame(FRAME_LUA, "semi;colon\nnewline", "x]]>y.lua", NULL,
			      7, 5, 0, 0);
	f[FX_BADUTF] = fx_frame(FRAME_LUA, "bad\xff\xc3utf8", "t.lua", NULL, 9, 8, 5, 0);
	f[FX_FORMAT] = fx_frame(FRAME_C, "string.format", NULL, NULL, 0, 0, 0, 0x4a0000);
	f[FX_CFIB] = fx_frame(FRAME_C, "cfib", NULL, "cfib.so", 0, 0, 0, 0x7f0000200000);
	f[FX_GC] = fx_frame(FRAME_VMSTATE, "[GC]", NULL, NULL, 0, 0, 0, 0);
	f[FX_CLOCK] = fx_frame(FRAME_NATIVE, "clock_gettime", NULL, "libc.so.6", 0, 0, 0,
			       0x7f0000300000);
}

/* 110 samples: tid 42 gets 50 + 30 + 10, tid 43 gets 5 + 15. */
__attribute__((unused)) static int fixture_hostile(struct profile *p)
{
	struct frame f[FX_N];
	fx_hostile_frames(f);
	struct frame a[] = { f[FX_ROOT], f[FX_MAIN], f[FX_PCALL], f[FX_CHUNK], f[FX_EVIL], f[FX_CFIB] };
	struct frame b[] = { f[FX_ROOT], f[FX_MAIN], f[FX_PCALL], f[FX_CHUNK], f[FX_SEMI], f[FX_FORMAT] };
	struct frame c[] = { f[FX_ROOT], f[FX_MAIN], f[FX_PCALL], f[FX_CHUNK], f[FX_BADUTF], f[FX_GC] };
	struct frame d[] = { f[FX_ROOT], f[FX_MAIN], f[FX_CLOCK] };
	struct profile_meta *m = profile_meta(p);
	m->title = "luajit <app>.lua & \"x\" ]]> \xff";
	m->pid = 42;
	m->rate_hz = 100;
	m->duration_ns = 1100000000ull;
	m->start_unix_ns = 1764456000000000000ull;
	m->runtime = "LuaJIT 2.1 GC64";
	int r = 0;
	r |= fx_add(p, 42, a, 6, 50);
	r |= fx_add(p, 42, b, 6, 10);
	r |= fx_add(p, 42, b, 6, 20);
	r |= fx_add(p, 43, b, 6, 5);
	r |= fx_add(p, 43, c, 6, 15);
	r |= fx_add(p, 42, d, 3, 10);
	m->samples = profile_total(p);
	return r;
}

static uint64_t fx_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A main loop calling a few workloads: recursive fib (partly JIT
 * compiled), string building with C calls, table sorting, and GC. */
__attribute__((unused)) static int fixture_demo(struct profile *p)
{
	static const char *const work[] = { "handle_request", "render_page",
		"parse_json", "update_stats" };
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	struct profile_meta *m = profile_meta(p);
	m->title = "luajit examples/server.lua --port 8080";
	m->pid = 4242;
	m->rate_hz = 99;
	m->duration_ns = 40400000000ull;  /* 4000 samples at 99 Hz */
	m->runtime = "LuaJIT 2.1.1700008891 GC64";
	struct frame base[] = {
		fx_frame(FRAME_ROOT, "process 4242", NULL, NULL, 0, 0, 0, 0),
		fx_frame(FRAME_NATIVE, "_start", NULL, "luajit", 0, 0, 0, 0x401020),
		fx_frame(FRAME_NATIVE, "__libc_start_main", NULL, "libc.so.6", 0, 0, 0, 0x7f0000029d90),
		fx_frame(FRAME_NATIVE, "main", NULL, "luajit", 0, 0, 0, 0x401200),
		fx_frame(FRAME_NATIVE, "lua_pcall", NULL, "libluajit-5.1.so.2", 0, 0, 0, 0x7f0000101000),
		fx_frame(FRAME_LUA, "main chunk", "@examples/server.lua", NULL, 88, 0, 0, 0),
		fx_frame(FRAME_LUA, "serve_forever", "@examples/server.lua", NULL, 71, 60, 0, 0),
	};
	int nb = (int)(sizeof base / sizeof base[0]);
	int r = 0;
	for (int i = 0; i < 4000; i++) {
		struct frame st[80];
		memcpy(st, base, sizeof base);
		int n = nb;
		int w = (int)(fx_rand(&rng) % 4);
		st[n++] = fx_frame(FRAME_LUA, work[w], "@examples/server.lua", NULL,
				   20 + w * 10 + (int)(fx_rand(&rng) % 3), 18 + w * 10, 0, 0);
		uint64_t k = fx_rand(&rng) % 100;
		if (w == 0 || k < 15) {
			int depth = 1 + (int)(fx_rand(&rng) % 20);
			int jit = fx_rand(&rng) % 3 == 0 ? 7 : 0;
			for (int d = 0; d < depth && n < 70; d++)
				st[n++] = fx_frame(FRAME_LUA, "fib", "@examples/fib.lua", NULL,
						   d + 1 < depth ? 4 : 3, 1, jit, 0);
			if (fx_rand(&rng) % 4 == 0)
				st[n++] = fx_frame(FRAME_C, "cfib", NULL, "cfib.so", 0, 0, 0,
						   0x7f0000200000);
		} else if (w == 1) {
			st[n++] = fx_frame(FRAME_LUA, "format_row", "@examples/template.lua",
					   NULL, 12, 10, 0, 0);
			st[n++] = fx_frame(FRAME_C, k % 2 ? "string.format" : "table.concat",
					   NULL, NULL, 0, 0, 0, 0x4a0000);
			if (k % 5 == 0)
				st[n++] = fx_frame(FRAME_NATIVE, "lj_str_new", NULL,
						   "libluajit-5.1.so.2", 0, 0, 0, 0x7f0000105000);
		} else if (w == 2) {
			st[n++] = fx_frame(FRAME_LUA, "decode_value", "@examples/json.lua",
					   NULL, 140 + (int)(k % 4), 130, k % 3 ? 12 : 0, 0);
			if (k % 3 == 0)
				st[n++] = fx_frame(FRAME_LUA, "decode_string", "@examples/json.lua",
						   NULL, 99, 90, 0, 0);
			if (k % 7 == 0)
				st[n++] = fx_frame(FRAME_VMSTATE, "[GC]", NULL, NULL, 0, 0, 0, 0);
		} else {
			st[n++] = fx_frame(FRAME_C, "table.sort", NULL, NULL, 0, 0, 0, 0x4b0000);
			st[n++] = fx_frame(FRAME_LUA, "by_count", "@examples/stats.lua", NULL,
					   33, 32, 0, 0);
			if (k % 4 == 0)
				st[n++] = fx_frame(FRAME_NATIVE, "clock_gettime", NULL,
						   "libc.so.6", 0, 0, 0, 0x7f00000e0000);
		}
		r |= fx_add(p, 4242 + (int)(fx_rand(&rng) % 2), st, n, 1);
	}
	m->samples = profile_total(p);
	return r;
}

/* 300 random frames in 2000 stacks of depth 1..60 over 3 threads. */
__attribute__((unused)) static int fixture_random(struct profile *p, uint64_t seed)
{
	enum { NF = 300 };
	uint64_t rng = seed | 1;
	struct frame pool[NF];
	for (int i = 0; i < NF; i++) {
		char txt[3][48];
		for (int t = 0; t < 3; t++) {
			int len = 1 + (int)(fx_rand(&rng) % 40);
			for (int k = 0; k < len; k++) {
				unsigned char c = (unsigned char)fx_rand(&rng);
				/* bias towards the bytes that break formats */
				static const char nasty[] = "<>&\"';\n\r\t]]\\\x7f\xc3\xff\xe2\x80";
				if (c % 3 == 0)
					c = (unsigned char)nasty[c % (sizeof nasty - 1)];
				txt[t][k] = c ? (char)c : 'z';
			}
			txt[t][len] = 0;
		}
		int kind = (int)(fx_rand(&rng) % FRAME_KIND_MAX);
		pool[i] = fx_frame(kind, txt[0], i % 4 ? txt[1] : NULL, i % 3 ? NULL : txt[2],
				   (int)(fx_rand(&rng) % 5000), (int)(fx_rand(&rng) % 100),
				   i % 5 == 0 ? (int)(fx_rand(&rng) % 50) : 0, fx_rand(&rng) & 0xffffffff);
	}
	struct profile_meta *m = profile_meta(p);
	m->title = "random \x01\xfe<&>";
	m->rate_hz = 250;
	int r = 0;
	for (int i = 0; i < 2000; i++) {
		struct frame st[60];
		int n = 1 + (int)(fx_rand(&rng) % 60);
		for (int d = 0; d < n; d++)
			st[d] = pool[fx_rand(&rng) % (d < 3 ? 5 : NF)];
		r |= fx_add(p, 7 + (int)(fx_rand(&rng) % 3), st, n, 1 + fx_rand(&rng) % 5);
	}
	m->samples = profile_total(p);
	return r;
}

/* NSTACKS distinct stacks of DEPTH frames. */
__attribute__((unused)) static int fixture_big(struct profile *p, int nstacks, int depth)
{
	enum { POOL = 2000 };
	static const char *names[POOL], *files[16];
	if (!names[0]) {
		for (int i = 0; i < POOL; i++)
			names[i] = internf("fn_%d_%s", i, i % 3 ? "work" : "helper");
		for (int i = 0; i < 16; i++)
			files[i] = internf("@src/module%d.lua", i);
	}
	struct frame *st = calloc((size_t)depth, sizeof *st);
	if (!st)
		return -1;
	struct profile_meta *m = profile_meta(p);
	m->title = "luajit bench.lua";
	m->rate_hz = 100;
	int r = 0;
	int shared = depth / 3;
	for (int i = 0; i < nstacks; i++) {
		for (int d = 0; d < depth; d++) {
			uint64_t key = d < shared ? (uint64_t)i >> (shared - d) : (uint64_t)i;
			uint64_t h = (key + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)d * 0xbf58476d1ce4e5b9ull;
			h ^= h >> 31;
			h *= 0x94d049bb133111ebull;
			h ^= h >> 29;
			int fn = (int)(h % POOL);
			st[d] = (struct frame){
				.kind = fn % 10 == 0 ? FRAME_C : FRAME_LUA,
				.name = names[fn],
				.file = fn % 10 == 0 ? NULL : files[fn % 16],
				.line = 1 + (int)((h >> 20) % 200),
				.firstline = 1 + fn % 50,
				.trace = fn % 7 == 0 ? 1 + fn % 40 : 0,
			};
		}
		r |= fx_add(p, 100 + i % 4, st, depth, 1 + (uint64_t)(i % 7));
	}
	free(st);
	m->samples = profile_total(p);
	return r;
}

#endif
