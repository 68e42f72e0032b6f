/* puc_late.c: a C host (liblua5.4 shared library, no globalL) whose
 * Lua work starts in a second lua_State created after a profiler
 * attached: the first state exists from the start and idles; after a
 * line on stdin the host creates the second one and runs spin() in it
 * for SECS seconds of CPU (tests/puc-torn-kept.test), reading os.clock
 * (a system call: under load ptrace stops land there out of proportion,
 * docs/sampling.md §5.2) once per k calls, k doubled until they take
 * 0.1 s.
 *   puc_late SECS */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char code[] =
	"local function spin(n) local x = 0 for i = 1, n do x = x + i % 7 end return x end\n"
	"local t0, k, c, secs = os.clock(), 1, 0, tonumber(...)\n"
	"while c < secs do for _ = 1, k do spin(100000) end\n"
	"  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d end\n";

int main(int argc, char **argv)
{
	const char *secs = argc > 1 ? argv[1] : "10";
	lua_State *first = luaL_newstate();
	luaL_openlibs(first);
	if (luaL_dostring(first, "started = true"))
		return 1;
	printf("ready\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof line, stdin))
		return 1;
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_loadbuffer(L, code, strlen(code), "=late"))
		return 1;
	lua_pushstring(L, secs);
	if (lua_pcall(L, 1, 0, 0)) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	printf("done\n");
	lua_close(L);
	lua_close(first);
	return 0;
}
