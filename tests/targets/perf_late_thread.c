/* perf_late_thread.c: a LuaJIT host whose main thread runs early() and
 * that starts a second thread, with its own state running late(), once a
 * line arrives on stdin (perf-sampler-threads.test).
 * Build: cc -O1 -g $(pkg-config --cflags luajit) -o perf_late_thread
 *        perf_late_thread.c $(pkg-config --libs luajit) -lpthread
 * Run:   perf_late_thread SECONDS <FIFO; prints "ready", then "started". */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

static const char *const code[2] = {
	"local secs = ...\n"
	"local function early(n) local s = 0 for i = 1, n do s = s + i % 7 end return s end\n"
	"local t0 = os.time()\n"
	"while os.time() - t0 < secs do local r = early(100000) end\n",
	"local secs = ...\n"
	"local function late(n) if n < 2 then return n end return late(n - 1) + late(n - 2) end\n"
	"local t0 = os.time()\n"
	"while os.time() - t0 < secs do local r = late(20) end\n",
};

static double secs;

static void *run(void *arg)
{
	int k = (int)(long)arg;
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_loadbuffer(L, code[k], strlen(code[k]), k ? "=late" : "=early") != 0) {
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
	pthread_create(&t[0], NULL, run, (void *)0L);
	printf("ready\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	pthread_create(&t[1], NULL, run, (void *)1L);
	printf("started\n");
	fflush(stdout);
	pthread_join(t[1], NULL);
	pthread_join(t[0], NULL);
	return 0;
}
