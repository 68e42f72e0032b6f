/* lsbench.c: a Lua C module for the benchmarks (bench/), built once for
 * LuaJIT and once for Lua 5.4 (bench/Makefile fragment in Makefile.am):
 *   cc -O2 -shared -fPIC $(pkg-config --cflags luajit) -o bench/lsbench_jit.so
 *   cc -O2 -shared -fPIC $(pkg-config --cflags lua5.4) -o bench/lsbench_54.so
 * Both export luaopen_lsbench; the scripts pick the file by version.
 *
 *   lsbench.now_ns() -> CLOCK_MONOTONIC in ns (a Lua number; exact to 2^53)
 *   lsbench.gaps(SECS, THRESH_NS) -> start_ns, end_ns, nstop, sumstop_ns,
 *                                    nother, sumother_ns, stoplist, otherlist
 *       Spin on CLOCK_MONOTONIC for SECS seconds. Every step between two
 *       reads longer than THRESH_NS (1000) is a gap: time this thread was
 *       not running. A gap during which the thread made a voluntary
 *       context switch (getrusage RUSAGE_THREAD ru_nvcsw; a ptrace stop is
 *       one, the loop itself never blocks) is a stop; the others are
 *       preemption by other tasks, interrupts, the hypervisor. Lists are
 *       comma separated gaps in ns, "-" when empty. The thread is in C code
 *       the whole time, so a sampler sees "Lua -> C gaps".
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
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

#define MAX_GAPS (1u << 18)

static unsigned gap_stop[MAX_GAPS], gap_other[MAX_GAPS];

static void push_list(lua_State *L, const unsigned *v, size_t n)
{
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	char num[24];
	for (size_t i = 0; i < n; i++) {
		int len = snprintf(num, sizeof num, i ? ",%u" : "%u", v[i]);
		luaL_addlstring(&b, num, (size_t)len);
	}
	if (!n)
		luaL_addstring(&b, "-");
	luaL_pushresult(&b);
}

/* Context switches of this thread so far: voluntary (the thread blocked or
 * was stopped: a ptrace stop is a voluntary switch in TASK_TRACED) and
 * involuntary (preempted by another task). */
static void csw(long *vol, long *invol)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	*vol = ru.ru_nvcsw;
	*invol = ru.ru_nivcsw;
}

static int l_gaps(lua_State *L)
{
	double secs = luaL_checknumber(L, 1);
	unsigned long long thresh = (unsigned long long)luaL_optnumber(L, 2, 1000);
	size_t ns = 0, no = 0;
	unsigned long long sums = 0, sumo = 0;
	long vol, invol, v2, i2;
	csw(&vol, &invol);
	unsigned long long t0 = mono_ns(), end = t0 + (unsigned long long)(secs * 1e9);
	unsigned long long prev = t0, now;
	do {
		now = mono_ns();
		unsigned long long d = now - prev;
		if (d > thresh) {
			unsigned g = d > 0xffffffffull ? 0xffffffffu : (unsigned)d;
			csw(&v2, &i2);
			if (v2 != vol) {        /* stopped (or blocked): a sample */
				sums += d;
				if (ns < MAX_GAPS)
					gap_stop[ns++] = g;
			} else {                /* preempted, interrupt, hypervisor */
				sumo += d;
				if (no < MAX_GAPS)
					gap_other[no++] = g;
			}
			vol = v2;
			invol = i2;
			now = mono_ns();        /* the getrusage call is not a gap */
		}
		prev = now;
	} while (now < end);
	lua_pushnumber(L, (lua_Number)t0);
	lua_pushnumber(L, (lua_Number)now);
	lua_pushnumber(L, (lua_Number)ns);
	lua_pushnumber(L, (lua_Number)sums);
	lua_pushnumber(L, (lua_Number)no);
	lua_pushnumber(L, (lua_Number)sumo);
	push_list(L, gap_stop, ns);
	push_list(L, gap_other, no);
	return 8;
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
