/* gc_static.c: a host linked with a static liblua5.X.a (built by
 * tests/record-gc-static.test, stripped, with and without -Wl,-E) that
 * runs a Lua file with arg[1], as the lua interpreter would:
 *   gc_static FILE.lua SECS */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	lua_newtable(L);
	lua_pushstring(L, argv[2]);
	lua_rawseti(L, -2, 1);
	lua_setglobal(L, "arg");
	if (luaL_loadfile(L, argv[1]) || lua_pcall(L, 0, 0, 0)) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	lua_close(L);
	return 0;
}
