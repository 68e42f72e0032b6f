/* puc_static.c: a host linked with a static liblua5.X.a (built and
 * stripped by tests/puc-static-stripped.test): no lua_ident symbol, only
 * its text in .rodata. Runs spin_static() -> leaf() for SECS seconds.
 *   puc_static SECS */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <string.h>

static const char code[] =
	"local function leaf(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end\n"
	"function spin_static(n) return leaf(n) + 1 end\n"
	/* os.time, not os.clock (a system call: on a loaded machine the
	 * stops land at its return far more often than its share) */
	"local t0 = os.time()\n"
	"while os.time() - t0 < tonumber(...) do spin_static(100000) end\n";

int main(int argc, char **argv)
{
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_loadbuffer(L, code, strlen(code), "=static"))
		return 1;
	lua_pushstring(L, argc > 1 ? argv[1] : "10");
	if (lua_pcall(L, 1, 0, 0)) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	lua_close(L);
	return 0;
}
