/* luajit_mt.c: two threads, each with its own LuaJIT state, running
 * different busy Lua code (luajit-threads.test).
 * Build: cc -O1 -g $(pkg-config --cflags luajit) -o luajit_mt luajit_mt.c
 *        $(pkg-config --libs luajit) -lpthread
 * Run:   luajit_mt SECONDS (of the process's CPU)
 * os.clock (a system call: under load ptrace stops land there out of
 * proportion, docs/sampling.md §5.2) is read once per k calls, k doubled
 * until they take 0.1 s of CPU. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

static const char *const code[2] = {
	"local secs = ...\n"
	"local function alpha(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end\n"
	"local t0, k, c = os.clock(), 1, 0\n"
	"while c < secs do for _ = 1, k do local r = alpha(100000) end\n"
	"  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d end\n",
	"local secs = ...\n"
	"local function beta(n) if n < 2 then return n end return beta(n - 1) + beta(n - 2) end\n"
	"local t0, k, c = os.clock(), 1, 0\n"
	"while c < secs do for _ = 1, k do local r = beta(20) end\n"
	"  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d end\n",
};

static double secs;

static void *run(void *arg)
{
	int k = (int)(long)arg;
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_loadbuffer(L, code[k], __builtin_strlen(code[k]), k ? "=beta" : "=alpha") != 0) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		exit(1);
	}
	lua_pushnumber(L, secs);
	if (lua_pcall(L, 1, 0, 0) != 0) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		exit(1);
	}
	lua_close(L);
	return NULL;
}

int main(int argc, char **argv)
{
	secs = argc > 1 ? atof(argv[1]) : 10;
	pthread_t t[2];
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, run, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	return 0;
}
