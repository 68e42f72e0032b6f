/* luajit_states.c: LuaJIT states that come and go, and many of them
 * (luajit-reopen-states.test, luajit-many-states.test).
 * Build: cc -O1 -g $(pkg-config --cflags luajit) -o luajit_states luajit_states.c
 *        $(pkg-config --libs luajit) -lpthread
 * Run:   luajit_states reopen SECS   one thread: a state runs chunk "afile"
 *                                    for 200 ms and is closed, then a new one
 *                                    runs "bfile", alternating
 *        luajit_states threads SECS  the same, but each state in a new
 *                                    thread that runs 50 ms and exits
 *        luajit_states many SECS     8 threads, each opens 12 states and
 *                                    spins 50 ms in each in turn, in
 *                                    function spin<i> of chunk "t<i>",
 *                                    which calls the C function burn()
 * Every chunk spins in a Lua function until the wall clock (now(), a C
 * function: os.clock is the process's CPU time) passes its end. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

/* burn(N): N iterations of C work (a C function under Lua) */
static int l_burn(lua_State *L)
{
	volatile unsigned x = 0;
	for (long i = (long)luaL_checknumber(L, 1); i > 0; i--)
		x = x * 31 + (unsigned)i;
	lua_pushnumber(L, x);
	return 1;
}

static int l_now(lua_State *L)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	lua_pushnumber(L, (double)ts.tv_sec + ts.tv_nsec / 1e9);
	return 1;
}

/* Run CODE (chunk NAME) in a new state until SECS from now, then close it
 * unless KEEP; returns the state when kept. */
static lua_State *run_chunk(const char *code, const char *name, double secs, int keep)
{
	lua_State *L = luaL_newstate();
	if (!L)
		exit(1);
	luaL_openlibs(L);
	lua_register(L, "now", l_now);
	lua_register(L, "burn", l_burn);
	if (luaL_loadbuffer(L, code, strlen(code), name) != 0) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		exit(1);
	}
	lua_pushnumber(L, secs);
	if (lua_pcall(L, 1, 0, 0) != 0) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		exit(1);
	}
	if (keep)
		return L;
	lua_close(L);
	return NULL;
}

static const char *const ab_code[2] = {
	"local secs = ...\n"
	"local function afunc(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end\n"
	"local t1 = now() + secs\n"
	"while now() < t1 do afunc(1000) end\n",
	"local secs = ...\n"
	"local function bfunc(n) local s = 0 for i = 1, n do s = s + i % 5 end return s end\n"
	"local t1 = now() + secs\n"
	"while now() < t1 do bfunc(1000) end\n",
};
static const char *const ab_name[2] = { "@afile", "@bfile" };

static void *ab_thread(void *arg)
{
	int k = (int)(long)arg;
	run_chunk(ab_code[k], ab_name[k], 0.05, 0);
	return NULL;
}

static double now(void);
static double many_end;

static void *many_thread(void *arg)
{
	int i = (int)(long)arg;
	char code[512], name[16];
	lua_State *L[12];
	snprintf(code, sizeof code,
		 "function spin%d(n) local s = 0 for i = 1, n do s = s + burn(1000) end return s end\n"
		 "function run(secs) local t1 = now() + secs while now() < t1 do spin%d(1000) end end\n",
		 i, i);
	snprintf(name, sizeof name, "@t%d", i);
	for (int k = 0; k < 12; k++)
		L[k] = run_chunk(code, name, 0, 1);
	while (now() < many_end)
		for (int k = 0; k < 12; k++) {
			lua_getglobal(L[k], "run");
			lua_pushnumber(L[k], 0.05);
			if (lua_pcall(L[k], 1, 0, 0) != 0)
				exit(1);
		}
	return NULL;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: luajit_states reopen|threads|many SECS\n");
		return 2;
	}
	double end = now() + atof(argv[2]);
	if (!strcmp(argv[1], "reopen")) {
		for (int k = 0; now() < end; k ^= 1)
			run_chunk(ab_code[k], ab_name[k], 0.2, 0);
	} else if (!strcmp(argv[1], "threads")) {
		for (long k = 0; now() < end; k ^= 1) {
			pthread_t t;
			if (pthread_create(&t, NULL, ab_thread, (void *)k) != 0)
				return 1;
			pthread_join(t, NULL);
		}
	} else if (!strcmp(argv[1], "many")) {
		pthread_t t[8];
		many_end = end;
		for (long i = 0; i < 8; i++)
			pthread_create(&t[i], NULL, many_thread, (void *)i);
		for (int i = 0; i < 8; i++)
			pthread_join(t[i], NULL);
	} else {
		return 2;
	}
	return 0;
}
