/* perfmap_host.c: a Lua 5.4 host with a tiny "JIT" of its own, as a
 * runtime that embeds Lua next to another JIT has (tests/perfmap-*.test).
 * It maps anonymous memory, writes a trampoline there (x86_64 machine
 * code: push rbx; mov rax, rdi; mov rdi, rsi; call rax; pop rbx; ret),
 * makes it executable, and writes /tmp/perf-PID.map naming it
 * "perfmap_host::bridge" (the JIT writer's side of the perf map format).
 * Lua calls bridge(f), a C function that calls f through the trampoline:
 *   main chunk -> outer -> bridge (C) -> [trampoline] -> call_back (C)
 *     -> inner (Lua, a busy loop)
 * so the trampoline's frame lies between Lua frames.
 *   perfmap_host SECS      prints "PID START SIZE" (hex) on stdout once ready
 * With SECS <= 0 it runs until killed. The map is removed on a normal
 * exit only. */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef void (*tramp_fn)(void (*cb)(lua_State *), lua_State *L);
static tramp_fn tramp;

static const unsigned char code[] = {
	0x53,             /* push rbx (keeps the stack 16-byte aligned) */
	0x48, 0x89, 0xf8, /* mov rax, rdi */
	0x48, 0x89, 0xf7, /* mov rdi, rsi */
	0xff, 0xd0,       /* call rax */
	0x5b,             /* pop rbx */
	0xc3,             /* ret */
};

/* Called from the trampoline: run the Lua function at index 1. */
__attribute__((noinline)) static void call_back(lua_State *L)
{
	lua_pushvalue(L, 1);
	lua_call(L, 0, 0);
}

static int bridge(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TFUNCTION);
	tramp(call_back, L);
	return 0;
}

static const char script[] =
	"local secs = ...\n"
	"local function inner()\n"
	"  local x = 0\n"
	"  for i = 1, 200000 do x = x + i % 7 end\n"
	"  return x\n"
	"end\n"
	"local function outer()\n"
	"  bridge(inner)\n"
	"end\n"
	"local t0 = os.time()\n"
	"while secs <= 0 or os.time() - t0 < secs do\n"
	"  outer()\n"
	"end\n";

int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 30;
	long page = sysconf(_SC_PAGESIZE);
	void *mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(mem, code, sizeof code);
	if (mprotect(mem, (size_t)page, PROT_READ | PROT_EXEC) < 0) {
		perror("mprotect");
		return 1;
	}
	tramp = (tramp_fn)mem;
	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
	FILE *f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	fprintf(f, "%lx %zx perfmap_host::bridge\n", (unsigned long)mem, sizeof code);
	fclose(f);

	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	lua_register(L, "bridge", bridge);
	if (luaL_loadbuffer(L, script, sizeof script - 1, "=perfmap_host.lua")) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	printf("%d %lx %zx\n", (int)getpid(), (unsigned long)mem, sizeof code);
	fflush(stdout);
	lua_pushinteger(L, secs);
	int rc = 0;
	if (lua_pcall(L, 1, 0, 0)) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		rc = 1;
	}
	lua_close(L);
	unlink(path);
	return rc;
}
