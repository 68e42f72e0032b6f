/* sig_host.c: a Lua 5.4 host whose Lua code is interrupted by a signal
 * whose handler never returns (it spins until the test kills the process),
 * for the signal frame in a merged stack (tests/dump-signal-frame.test).
 * Build (Makefile.am): cc -O1 -g $(pkg-config --cflags lua5.4) sig_host.c
 *   $(pkg-config --libs lua5.4)
 * Usage: sig_host SCRIPT: runs SCRIPT with the global function arm(),
 * which sends this thread SIGALRM 0.1 s later; the handler writes
 * "handler" to stdout and spins. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

static volatile sig_atomic_t spin = 1;

__attribute__((noinline)) static void sig_host_handler(int sig)
{
	(void)sig;
	static const char msg[] = "handler\n";
	if (write(1, msg, sizeof msg - 1) < 0)
		return;
	while (spin)
		;
}

static int sig_host_arm(lua_State *L)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = sig_host_handler;
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = { .it_value = { .tv_usec = 100000 } };
	setitimer(ITIMER_REAL, &it, NULL);
	(void)L;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: sig_host SCRIPT\n");
		return 2;
	}
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	lua_register(L, "arm", sig_host_arm);
	if (luaL_dofile(L, argv[1])) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	lua_close(L);
	return 0;
}
