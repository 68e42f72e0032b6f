/* puc_cfib.c: C module "cfib" for the PUC Lua sandwich tests, built once
 * per Lua version (Makefile.am: tests/targets/puc_cfib5N.so with
 * `pkg-config --cflags lua5.N`).
 *   cfib.fib(n)       Fibonacci by C recursion (native frames fib_rec)
 *   cfib.call(f, ...) calls the Lua function f through lua_call: Lua -> C -> Lua */
#include <lua.h>
#include <lauxlib.h>

__attribute__((noinline)) long fib_rec(long n)
{
	if (n < 2)
		return n;
	return fib_rec(n - 1) + fib_rec(n - 2);
}

static int cfib_fib(lua_State *L)
{
	long n = (long)luaL_checkinteger(L, 1);
	lua_pushinteger(L, (lua_Integer)fib_rec(n));
	return 1;
}

static int cfib_call(lua_State *L)
{
	int nargs = lua_gettop(L) - 1;
	luaL_checktype(L, 1, LUA_TFUNCTION);
	lua_call(L, nargs, 1);
	return 1;
}

static const luaL_Reg cfib_funcs[] = {
	{ "fib", cfib_fib },
	{ "call", cfib_call },
	{ NULL, NULL },
};

int luaopen_cfib(lua_State *L)
{
#if LUA_VERSION_NUM >= 502
	luaL_newlib(L, cfib_funcs);
#else
	luaL_register(L, "cfib", cfib_funcs);
#endif
	return 1;
}
