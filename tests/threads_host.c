/* tests/threads_host.c: a C host embedding Lua 5.4 whose main thread runs
 * a busy Lua script while other threads do native work:
 *   threads_host churn SCRIPT      a thread creates and joins a thread
 *                                  every millisecond (1 kHz)
 *   threads_host idle N SCRIPT     N threads sleep in pause()
 * Prints its pid on stdout when the threads are up. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *nothing(void *arg) { return arg; }

static void *churn(void *arg)
{
	struct timespec ms = { 0, 1000000 };
	for (;;) {
		pthread_t t;
		if (pthread_create(&t, NULL, nothing, NULL) == 0)
			pthread_join(t, NULL);
		nanosleep(&ms, NULL);
	}
	return arg;
}

static void *idle(void *arg)
{
	for (;;)
		pause();
	return arg;
}

int main(int argc, char **argv)
{
	const char *script;
	pthread_t t;
	if (argc == 3 && !strcmp(argv[1], "churn")) {
		pthread_create(&t, NULL, churn, NULL);
		script = argv[2];
	} else if (argc == 4 && !strcmp(argv[1], "idle")) {
		int n = atoi(argv[2]);
		for (int i = 0; i < n; i++)
			pthread_create(&t, NULL, idle, NULL);
		script = argv[3];
	} else {
		fprintf(stderr, "usage: threads_host churn SCRIPT | idle N SCRIPT\n");
		return 2;
	}
	printf("%d\n", (int)getpid());
	fflush(stdout);
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_dofile(L, script) != 0) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	lua_close(L);
	return 0;
}
