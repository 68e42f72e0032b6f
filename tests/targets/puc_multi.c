/* puc_multi.c: a C host with one lua_State per thread (liblua5.4 shared
 * library, no globalL): thread i runs spin_i() in its own state, so each
 * OS thread must show its own state's frames (tests/puc-multi-state.test).
 * Each runs for 4 * SECS seconds of the process's CPU, reading os.clock (a
 * system call: under load ptrace stops land there out of proportion,
 * docs/sampling.md §5.2) once per k calls, k doubled until they take 0.1 s.
 *   puc_multi NTHREADS SECS */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int secs = 10;

static void *run(void *arg)
{
	long id = (long)arg;
	char code[512];
	snprintf(code, sizeof code,
		 "local function spin_%ld(n) local x = 0 for i = 1, n do x = x + i %% 7 end return x end\n"
		 "local t0, k, c = os.clock(), 1, 0\n"
		 "while c < %d do for _ = 1, k do spin_%ld(1000000) end\n"
		 "  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d end\n",
		 id, secs * 4, id);
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_loadbuffer(L, code, sizeof code - 1 < 512 ? __builtin_strlen(code) : 0, "=multi") ||
	    lua_pcall(L, 0, 0, 0))
		fprintf(stderr, "thread %ld: %s\n", id, lua_tostring(L, -1));
	lua_close(L);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2;
	secs = argc > 2 ? atoi(argv[2]) : 10;
	pthread_t t[16];
	if (n < 1 || n > 16)
		return 2;
	for (long i = 0; i < n; i++)
		pthread_create(&t[i], NULL, run, (void *)(i + 1));
	printf("%d\n", (int)getpid());
	fflush(stdout);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	return 0;
}
