/* examples/sandwich.c: a Lua C module (csandwich) for the bundled example: Lua calls
 * C, C calls back into Lua. Works with LuaJIT and PUC Lua 5.1-5.4.
 *   csandwich.fib(n)         recursive Fibonacci in C
 *   csandwich.each(n, fn)    calls the Lua function fn(i) n times (lua_call)
 */
#include <lua.h>
#include <lauxlib.h>

static long cfib(int n)
{
	return n < 2 ? n : cfib(n - 1) + cfib(n - 2);
}

static int l_fib(lua_State *L)
{
	lua_pushnumber(L, (lua_Number)cfib((int)luaL_checkinteger(L, 1)));
	return 1;
}

static int l_each(lua_State *L)
{
	int n = (int)luaL_checkinteger(L, 1);
	lua_Number sum = 0;
	luaL_checktype(L, 2, LUA_TFUNCTION);
	for (int i = 1; i <= n; i++) {
		lua_pushvalue(L, 2);
		lua_pushinteger(L, i);
		lua_call(L, 1, 1);
		sum += lua_tonumber(L, -1);
		lua_pop(L, 1);
	}
	lua_pushnumber(L, sum);
	return 1;
}

int luaopen_csandwich(lua_State *L)
{
	lua_newtable(L);
	lua_pushcfunction(L, l_fib);
	lua_setfield(L, -2, "fib");
	lua_pushcfunction(L, l_each);
	lua_setfield(L, -2, "each");
	return 1;
}
