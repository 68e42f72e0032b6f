/* puc_states.c: many PUC Lua states in one process (liblua5.4, a C host
 * with no globalL): 8 threads, each opens 12 states and spins 50 ms in
 * each in turn, in function spin<i> of chunk "t<i>", which calls the C
 * function burn() (tests/puc-many-states.test).
 * Build: cc -O1 -g $(pkg-config --cflags lua5.4) -o puc_states puc_states.c
 *        $(pkg-config --libs lua5.4) -lpthread
 * Run:   puc_states SECS     prints its pid once every state is open
 * The spin ends on the wall clock (now(), a C function: os.clock is the
 * process's CPU time). */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 8
#define NSTATES 12

/* burn(N): N iterations of C work (a C function under Lua) */
static int l_burn(lua_State *L)
{
	volatile unsigned x = 0;
	for (long i = (long)luaL_checknumber(L, 1); i > 0; i--)
		x = x * 31 + (unsigned)i;
	lua_pushnumber(L, x);
	return 1;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int l_now(lua_State *L)
{
	lua_pushnumber(L, now());
	return 1;
}

static double end_time;
static pthread_barrier_t opened;

static void *run(void *arg)
{
	int i = (int)(long)arg;
	char code[512], name[16];
	lua_State *L[NSTATES];
	snprintf(code, sizeof code,
		 "function spin%d(n) local s = 0 for i = 1, n do s = s + burn(1000) end return s end\n"
		 "function run(secs) local t1 = now() + secs while now() < t1 do spin%d(1000) end end\n",
		 i, i);
	snprintf(name, sizeof name, "@t%d", i);
	for (int k = 0; k < NSTATES; k++) {
		L[k] = luaL_newstate();
		if (!L[k])
			exit(1);
		luaL_openlibs(L[k]);
		lua_register(L[k], "now", l_now);
		lua_register(L[k], "burn", l_burn);
		if (luaL_loadbuffer(L[k], code, strlen(code), name) || lua_pcall(L[k], 0, 0, 0)) {
			fprintf(stderr, "%s\n", lua_tostring(L[k], -1));
			exit(1);
		}
	}
	pthread_barrier_wait(&opened);
	while (now() < end_time)
		for (int k = 0; k < NSTATES; k++) {
			lua_getglobal(L[k], "run");
			lua_pushnumber(L[k], 0.05);
			if (lua_pcall(L[k], 1, 0, 0) != 0) {
				fprintf(stderr, "%s\n", lua_tostring(L[k], -1));
				exit(1);
			}
		}
	for (int k = 0; k < NSTATES; k++)
		lua_close(L[k]);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: puc_states SECS\n");
		return 2;
	}
	end_time = now() + atof(argv[1]);
	pthread_t t[NTHREADS];
	pthread_barrier_init(&opened, NULL, NTHREADS + 1);
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&t[i], NULL, run, (void *)i) != 0)
			return 1;
	pthread_barrier_wait(&opened);
	printf("%d\n", (int)getpid());
	fflush(stdout);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	return 0;
}
