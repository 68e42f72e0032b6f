/* core_crash.c: a Lua 5.1 host whose C function crash() calls abort(),
 * for a kernel core of a crash inside C called from Lua
 * (tests/dump-core-kernel.test).
 * Build (Makefile.am): cc -O1 -g $(pkg-config --cflags lua5.1) core_crash.c
 *   $(pkg-config --libs lua5.1)
 * Usage: core_crash SCRIPT: runs SCRIPT with the global function crash(). */
#include <stdio.h>
#include <stdlib.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

__attribute__((noinline)) static int core_crash_abort(lua_State *L)
{
	(void)L;
	abort();
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: core_crash SCRIPT\n");
		return 2;
	}
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	lua_register(L, "crash", core_crash_abort);
	if (luaL_dofile(L, argv[1])) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	lua_close(L);
	return 0;
}
