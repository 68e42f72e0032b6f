/* fiber_ucontext.c: a C host running Lua 5.4 on makecontext stacks
 * (tests/native-fiber-ucontext.test).
 *
 * main() makes two fibers, each on its own 256 KiB mmap'd stack below a
 * PROT_NONE guard page (as fiber libraries allocate them), and
 * switches between them with swapcontext: every fiber runs the chunk
 * ARGV[1] (a file) through fiber_body -> lua_pcall; the chunk calls
 * yield_() (a C function that swapcontexts back to main) between bursts
 * of work. The native stack of a running fiber is:
 *   Lua frames <- lua_pcall <- fiber_body <- fiber_entry <- __start_context
 * and nothing below: the fiber stack's base. Runs for ARGV[2] seconds.
 * Build: cc -O1 -g $(pkg-config --cflags lua5.4) fiber_ucontext.c
 *        $(pkg-config --libs lua5.4) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>

#define NFIBERS 2
#define STACK_BYTES (256 * 1024)

static ucontext_t main_ctx, fib_ctx[NFIBERS];
static int cur, done[NFIBERS];
static const char *script;

static int yield_(lua_State *L)
{
	(void)L;
	swapcontext(&fib_ctx[cur], &main_ctx);
	return 0;
}

static __attribute__((noinline)) void fiber_body(int id)
{
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	lua_register(L, "yield_", yield_);
	lua_pushinteger(L, id);
	lua_setglobal(L, "FIBER");
	if (luaL_loadfile(L, script) != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK)
		fprintf(stderr, "fiber %d: %s\n", id, lua_tostring(L, -1));
	lua_close(L);
}

static void fiber_entry(int id)
{
	fiber_body(id);
	done[id] = 1;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: fiber_ucontext SCRIPT.lua\n");
		return 2;
	}
	script = argv[1];
	for (int i = 0; i < NFIBERS; i++) {
		getcontext(&fib_ctx[i]);
		char *st = mmap(NULL, STACK_BYTES + 4096, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (st == MAP_FAILED || mprotect(st, 4096, PROT_NONE) < 0) {
			perror("mmap");
			return 1;
		}
		fib_ctx[i].uc_stack.ss_sp = st + 4096;
		fib_ctx[i].uc_stack.ss_size = STACK_BYTES;
		fib_ctx[i].uc_link = &main_ctx;
		makecontext(&fib_ctx[i], (void (*)(void))fiber_entry, 1, i);
	}
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int left = 0;
		for (cur = 0; cur < NFIBERS; cur++)
			if (!done[cur]) {
				left++;
				swapcontext(&main_ctx, &fib_ctx[cur]);
			}
		if (!left)
			break;
	}
	return 0;
}
