/* gc_host.c: a C host whose collector runs with no Lua frame: it fills
 * a table of 200 000 small tables, then calls lua_gc(LUA_GCCOLLECT)
 * from C in a loop for SECS seconds (tests/record-gc-host.test). Any
 * Lua 5.1-5.4 or LuaJIT:
 *   cc -O1 $(pkg-config --cflags luajit) -o gc_host gc_host.c $(pkg-config --libs luajit)
 *   gc_host SECS */
#include <stdlib.h>
#include <time.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

static const char fill[] =
	"keep = {} for i = 1, 200000 do keep[i] = { i, tostring(i) } end";

int main(int argc, char **argv)
{
	long secs = argc > 1 ? atol(argv[1]) : 10;
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_loadstring(L, fill) || lua_pcall(L, 0, 0, 0))
		return 1;
	time_t t0 = time(NULL);
	while (time(NULL) - t0 < secs)
		lua_gc(L, LUA_GCCOLLECT, 0);
	lua_close(L);
	return 0;
}
