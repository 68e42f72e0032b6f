/* luajit_host.c: run a Lua script on Debian's shared, stripped
 * libluajit-5.1.so.2 (as OpenResty's nginx module does), with arg[1..]
 * as luajit would set them (luajit-vm-labels.test).
 * Build: cc -O1 -g $(pkg-config --cflags luajit) -o luajit_host luajit_host.c
 *        $(pkg-config --libs luajit)
 * Run:   luajit_host SCRIPT [ARG...] */
#include <stdio.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: luajit_host SCRIPT [ARG...]\n");
		return 2;
	}
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	lua_createtable(L, argc, 0);
	for (int i = 1; i < argc; i++) {
		lua_pushstring(L, argv[i]);
		lua_rawseti(L, -2, i - 1);
	}
	lua_setglobal(L, "arg");
	if (luaL_dofile(L, argv[1])) {
		fprintf(stderr, "luajit_host: %s\n", lua_tostring(L, -1));
		return 1;
	}
	lua_close(L);
	return 0;
}
