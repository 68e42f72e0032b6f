/* cfib.c: C module for the LuaJIT sandwich tests (luajit-sandwich.test).
 * Build: cc -shared -fPIC $(pkg-config --cflags luajit) -o cfib.so cfib.c
 * Lua:   local cfib = require("cfib")
 *   cfib.sandwich_c(n)      recursive C Fibonacci (lua_CFunction -> cfib)
 *   cfib.sandwich_cb(f, n)  calls the Lua function f(n) with lua_call
 * FFI:   int cfib(int n) is exported for ffi.load(...).cfib. */
#include <lua.h>
#include <lauxlib.h>

/* noinline + a side effect keep every level a real native frame */
__attribute__((noinline)) int cfib(int n)
{
	if (n < 2)
		return n;
	int a = cfib(n - 1);
	__asm__ volatile("" ::: "memory");
	return a + cfib(n - 2);
}

int sandwich_c(lua_State *L)
{
	int n = (int)luaL_checkinteger(L, 1);
	lua_pushinteger(L, cfib(n));
	return 1;
}

int sandwich_cb(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TFUNCTION);
	lua_pushvalue(L, 1);
	lua_pushvalue(L, 2);
	lua_call(L, 1, 1);
	return 1;
}

int luaopen_cfib(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "sandwich_c", sandwich_c },
		{ "sandwich_cb", sandwich_cb },
		{ NULL, NULL },
	};
	luaL_register(L, "cfib", fns);
	return 1;
}
