// fiber_boost.cc: a C++ host running Lua 5.4 on boost.context stacks
// (tests/native-fiber-boost.test), as DNS servers run their Lua hooks.
//
// main() makes two boost::context::fiber, each on a
// protected_fixedsize_stack (mmap'd, guard page), and resumes them in
// turn; each runs the chunk ARGV[1] through fiber_body -> lua_pcall in
// its own lua_State; the chunk's yield_() resumes main. The native stack
// of a running fiber is:
//   Lua frames <- lua_pcallk <- fiber_body <- (boost's fiber_entry
//   template) <- make_fcontext (its trampoline)
// and nothing below: the fiber stack's base.
// Build: g++ -O1 -g $(pkg-config --cflags lua5.4) fiber_boost.cc
//        $(pkg-config --libs lua5.4) -lboost_context
#include <cstdio>
#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
extern "C" {
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
}

namespace ctx = boost::context;

static ctx::fiber *back; // where yield_ returns to (main)
static const char *script;

static int yield_(lua_State *)
{
	*back = std::move(*back).resume();
	return 0;
}

extern "C" __attribute__((noinline)) void fiber_body(int id)
{
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	lua_register(L, "yield_", yield_);
	lua_pushinteger(L, id);
	lua_setglobal(L, "FIBER");
	if (luaL_loadfile(L, script) != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK)
		std::fprintf(stderr, "fiber %d: %s\n", id, lua_tostring(L, -1));
	lua_close(L);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		std::fprintf(stderr, "usage: fiber_boost SCRIPT.lua\n");
		return 2;
	}
	script = argv[1];
	const int n = 2;
	ctx::fiber f[n];
	ctx::fiber mainf[n];
	bool done[n] = { false, false };
	for (int i = 0; i < n; i++)
		f[i] = ctx::fiber(std::allocator_arg, ctx::protected_fixedsize_stack(256 * 1024),
				  [i, &mainf, &done](ctx::fiber &&m) {
					  mainf[i] = std::move(m);
					  back = &mainf[i];
					  fiber_body(i);
					  done[i] = true;
					  return std::move(mainf[i]);
				  });
	std::printf("ready\n");
	std::fflush(stdout);
	for (;;) {
		int left = 0;
		for (int i = 0; i < n; i++)
			if (!done[i]) {
				left++;
				f[i] = std::move(f[i]).resume();
			}
		if (!left)
			break;
	}
	return 0;
}
