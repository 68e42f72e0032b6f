// names_cxx.cc: a C++ host embedding Lua 5.4 whose Lua runs under a
// method of a class in a namespace (tests/names-cxx-demangle.test, issue
// 19): the native frame below lua_pcallk is the symbol
// _ZN2ns5Class6methodEi, shown demangled as "ns::Class::method(int)"
// (and mangled with --no-demangle). Lua: leaf <- work, called by name
// from C++ in a loop for SECS seconds (argv[1], default 60; the test
// kills it first). Not stripped: the symbol is in .symtab.
// Build: g++ -O1 -g $(pkg-config --cflags lua5.4) names_cxx.cc
//        $(pkg-config --libs lua5.4)
#include <cstdio>
#include <cstdlib>
#include <ctime>
extern "C" {
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
}

static const char chunk[] =
	"local function leaf(n)\n"
	"  local s = 0\n"
	"  for i = 1, n do s = s + i * 7 % 13 end\n"
	"  return s\n"
	"end\n"
	"function work()\n"
	"  local r = leaf(200000)\n"
	"  return r\n"
	"end\n";

namespace ns {
class Class {
public:
	explicit Class(lua_State *L) : L_(L) {}
	__attribute__((noinline)) int method(int secs);
private:
	lua_State *L_;
};

int Class::method(int secs)
{
	long n = 0;
	std::time_t end = std::time(nullptr) + secs;
	while (std::time(nullptr) < end) {
		lua_getglobal(L_, "work");
		if (lua_pcall(L_, 0, 1, 0) != LUA_OK) {
			std::fprintf(stderr, "%s\n", lua_tostring(L_, -1));
			return -1;
		}
		lua_pop(L_, 1);
		n++;
	}
	return (int)(n & 0x7f);
}
} // namespace ns

int main(int argc, char **argv)
{
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	if (luaL_loadbuffer(L, chunk, sizeof chunk - 1, "=names_cxx") != LUA_OK ||
	    lua_pcall(L, 0, 0, 0) != LUA_OK) {
		std::fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 1;
	}
	ns::Class c(L);
	int r = c.method(argc > 1 ? std::atoi(argv[1]) : 60);
	lua_close(L);
	return r < 0;
}
