/* names_cfunc.c: a C host (liblua5.4) whose Lua calls a static C
 * function that no Lua table holds and no call site names, as nmap's
 * NSE calls its own C functions (tests/names-puc-cfunc.test, issue 19):
 *   spin_c (C, leaf) <- pcall <- main chunk <- lua_pcallk <- main
 * pcall calls it from C, so Lua knows no name for it: the frame is named
 * by its symbol (this build), or by module and ELF offset when the
 * binary is stripped (names_cfunc_stripped, `strip --strip-all`).
 * Prints "spin_c 0xADDR off 0xOFF" (OFF = ADDR - the load bias, the ELF
 * address) once, then runs SECS seconds (argv[1], default 60).
 * Build: cc -O1 -g $(pkg-config --cflags lua5.4) names_cfunc.c
 *        $(pkg-config --libs lua5.4) */
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

static __attribute__((noinline)) int spin_c(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 1);
	volatile unsigned long s = 0;
	for (lua_Integer i = 0; i < n; i++)
		s += (unsigned long)i * 7 % 13;
	lua_pushinteger(L, (lua_Integer)s);
	return 1;
}

/* the main program comes first: its load bias */
static int first_bias(struct dl_phdr_info *info, size_t size, void *arg)
{
	*(ElfW(Addr) *)arg = info->dlpi_addr;
	return 1;
}

/* the loop reads os.time once per 200 calls of 20000 iterations (tens
 * of ms); the test kills the host before SECS pass */
static const char chunk[] =
	"local spin, secs = ...\n"
	"local t0 = os.time()\n"
	"while os.time() - t0 < secs do\n"
	"  for _ = 1, 200 do pcall(spin, 20000) end\n"
	"end\n";

int main(int argc, char **argv)
{
	ElfW(Addr) bias = 0;
	dl_iterate_phdr(first_bias, &bias);
	unsigned long fn = (unsigned long)(void *)spin_c;
	printf("spin_c 0x%lx off 0x%lx\n", fn, fn - (unsigned long)bias);
	fflush(stdout);
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_loadbuffer(L, chunk, sizeof chunk - 1, "=names_cfunc") != LUA_OK) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	lua_pushcfunction(L, spin_c);
	lua_pushinteger(L, argc > 1 ? atoi(argv[1]) : 60);
	if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	lua_close(L);
	return 0;
}
