/* lsbench.c: a Lua C module for the benchmarks (bench/), built once for
 * LuaJIT and once for Lua 5.4 (bench/Makefile fragment in Makefile.am):
 *   cc -O2 -shared -fPIC $(pkg-config --cflags luajit) -o bench/lsbench_jit.so
 *   cc -O2 -shared -fPIC $(pkg-config --cflags lua5.4) -o bench/lsbench_54.so
 * Both export luaopen_lsbench; the scripts pick the file by version.
 *
 *   lsbench.now_ns() -> CLOCK_MONOTONIC in ns (a Lua number; exact to 2^53)
 *   lsbench.gaps(SECS, THRESH_NS) -> start_ns, end_ns, n, sum_ns, list
 *       Spin on CLOCK_MONOTONIC for SECS seconds. Every step between two
 *       reads longer than THRESH_NS is a gap: time this thread was not
 *       running (stopped by ptrace, preempted, interrupted). Returns the
 *       window, the number of gaps, their sum and a comma separated list
 *       of each gap in ns (for the harness's quantiles). The thread is in
 *       C code the whole time, so a sampler sees "Lua -> C gaps".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <lua.h>
#include <lauxlib.h>

static inline unsigned long long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static int l_now_ns(lua_State *L)
{
	lua_pushnumber(L, (lua_Number)mono_ns());
	return 1;
}

#define MAX_GAPS (1u << 20)

static int l_gaps(lua_State *L)
{
	double secs = luaL_checknumber(L, 1);
	unsigned long long thresh = (unsigned long long)luaL_optnumber(L, 2, 2000);
	static unsigned gap[MAX_GAPS];
	size_t n = 0;
	unsigned long long sum = 0;
	unsigned long long t0 = mono_ns(), end = t0 + (unsigned long long)(secs * 1e9);
	unsigned long long prev = t0, now;
	do {
		now = mono_ns();
		unsigned long long d = now - prev;
		if (d > thresh) {
			sum += d;
			if (n < MAX_GAPS)
				gap[n++] = d > 0xffffffffull ? 0xffffffffu : (unsigned)d;
		}
		prev = now;
	} while (now < end);
	lua_pushnumber(L, (lua_Number)t0);
	lua_pushnumber(L, (lua_Number)now);
	lua_pushnumber(L, (lua_Number)n);
	lua_pushnumber(L, (lua_Number)sum);
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	char num[24];
	for (size_t i = 0; i < n; i++) {
		int len = snprintf(num, sizeof num, i ? ",%u" : "%u", gap[i]);
		luaL_addlstring(&b, num, (size_t)len);
	}
	luaL_pushresult(&b);
	return 5;
}

static const luaL_Reg funcs[] = {
	{ "now_ns", l_now_ns },
	{ "gaps", l_gaps },
	{ NULL, NULL },
};

int luaopen_lsbench(lua_State *L)
{
#if LUA_VERSION_NUM >= 502
	luaL_newlib(L, funcs);
#else
	lua_newtable(L);
	luaL_register(L, NULL, funcs);
#endif
	return 1;
}
