/* puc_offsets.c: print, as "struct field offset" lines, the offsets a
 * luaspy PUC layout row holds, compiled against one Lua release's own
 * internal headers (docs/puc-lua.md §15). The lines use the names and
 * the order of `tests/t_vm_puc --rows MINOR PATCH`, so the two outputs
 * diff cleanly. Built and run by puc-rows.sh; not part of luaspy. */
#include <stdio.h>
#include <stddef.h>
#include "lua.h"
#include "lstate.h"
#include "lobject.h"
#define P(st, fld, ty, m) printf("%s %s %zu\n", st, fld, offsetof(ty, m))
int main(void) {
	P("lua_State", "status", lua_State, status);
	P("lua_State", "top", lua_State, top);
#if LUA_VERSION_NUM == 501
	P("lua_State", "base", lua_State, base);
#endif
	P("lua_State", "l_G", lua_State, l_G);
	P("lua_State", "ci", lua_State, ci);
#if LUA_VERSION_NUM == 501
	P("lua_State", "savedpc", lua_State, savedpc);
#endif
	P("lua_State", "stack_last", lua_State, stack_last);
	P("lua_State", "stack", lua_State, stack);
#if LUA_VERSION_NUM == 501
	P("lua_State", "end_ci", lua_State, end_ci);
#endif
	P("lua_State", "base_ci", lua_State, base_ci);
	P("lua_State", "nCcalls", lua_State, nCcalls);
	P("lua_State", "errorJmp", lua_State, errorJmp);
	P("CallInfo", "func", CallInfo, func);
	P("CallInfo", "top", CallInfo, top);
#if LUA_VERSION_NUM == 501
	P("CallInfo", "base", CallInfo, base);
#elif LUA_VERSION_NUM < 504
	P("CallInfo", "base", CallInfo, u.l.base);
#endif
#if LUA_VERSION_NUM > 501
	P("CallInfo", "previous", CallInfo, previous);
	P("CallInfo", "next", CallInfo, next);
	P("CallInfo", "savedpc", CallInfo, u.l.savedpc);
	P("CallInfo", "callstatus", CallInfo, callstatus);
#else
	P("CallInfo", "savedpc", CallInfo, savedpc);
	P("CallInfo", "tailcalls", CallInfo, tailcalls);
#endif
	P("global_State", "frealloc", global_State, frealloc);
	P("global_State", "ud", global_State, ud);
	P("global_State", "l_registry", global_State, l_registry);
	P("global_State", "currentwhite", global_State, currentwhite);
#if LUA_VERSION_NUM == 501
	P("global_State", "rootgc", global_State, rootgc);
#else
	P("global_State", "allgc", global_State, allgc);
#endif
	P("global_State", "mainthread", global_State, mainthread);
	P("global_State", "tmname", global_State, tmname);
	P("CClosure", "nupvalues", CClosure, nupvalues);
	P("CClosure", "f", CClosure, f);
	P("CClosure", "upvalue", CClosure, upvalue);
	P("LClosure", "p", LClosure, p);
	P("Proto", "sizeupvalues", Proto, sizeupvalues);
	P("Proto", "sizek", Proto, sizek);
	P("Proto", "sizecode", Proto, sizecode);
	P("Proto", "sizelineinfo", Proto, sizelineinfo);
	P("Proto", "sizep", Proto, sizep);
	P("Proto", "sizelocvars", Proto, sizelocvars);
#if LUA_VERSION_NUM >= 504
	P("Proto", "sizeabslineinfo", Proto, sizeabslineinfo);
#endif
	P("Proto", "linedefined", Proto, linedefined);
	P("Proto", "lastlinedefined", Proto, lastlinedefined);
	P("Proto", "k", Proto, k);
	P("Proto", "code", Proto, code);
	P("Proto", "p", Proto, p);
	P("Proto", "upvalues", Proto, upvalues);
	P("Proto", "lineinfo", Proto, lineinfo);
#if LUA_VERSION_NUM >= 504
	P("Proto", "abslineinfo", Proto, abslineinfo);
#endif
	P("Proto", "locvars", Proto, locvars);
	P("Proto", "source", Proto, source);
#if LUA_VERSION_NUM == 501
	P("Proto", "nups", Proto, nups);
#endif
	P("Table", "lsizenode", Table, lsizenode);
	P("Table", "array", Table, array);
	P("Table", "node", Table, node);
#if LUA_VERSION_NUM >= 504
	P("Table", "alimit", Table, alimit);
#else
	P("Table", "sizearray", Table, sizearray);
#endif
	P("Table", "metatable", Table, metatable);
	printf("sizeof lua_State %zu\nsizeof CallInfo %zu\n", sizeof(lua_State), sizeof(CallInfo));
	return 0;
}
