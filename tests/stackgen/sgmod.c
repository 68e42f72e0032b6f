/* sgmod: the C module of the differential stack fuzzer (tests/stackgen).
 *
 * Built once per runtime by run.py against that runtime's headers
 * (liblua5.X-dev, libluajit-5.1-dev) and loaded with require("sgmod").
 * It gives the generated programs (gen.py) C functions that call back
 * into Lua (lua_call, lua_pcall, lua_resume) and the stop point:
 * sgmod.stop() records the true stack with lua_getstack/lua_getinfo,
 * across the coroutines that are resuming each other, writes it to the
 * fd named by $SG_OUT_FD and blocks in read() on $SG_IN_FD until the
 * harness has dumped the process and writes one byte.
 *
 * Record format (one line per level, innermost first, tab-separated):
 *   STOP <n>
 *   <thread#> <what> <namewhat> <name> <short_src> <linedefined>
 *             <currentline> <cfunc address or 0> <istailcall>
 *   END
 * thread# 0 is the running coroutine, 1 the one that resumed it, ...
 * Names and sources come from our own generated programs; they are cut
 * to a fixed length and tabs/newlines are replaced, never trusted.
 *
 * FFI stops (LuaJIT): sgmod.prepare() records the stack of its caller
 * (level 1 and out) into a static buffer; the FFI function
 * sgmod_ffi_stop(id, i, at) later writes it as record "FFISTOP <n> <id>" and
 * blocks, so a stop can sit inside a JIT trace (no Lua API there). */
#include <lua.h>
#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if LUA_VERSION_NUM >= 502
#define SG_HAS_TAIL 1
#define sg_len(L, i) lua_rawlen(L, i)
#else
#define sg_len(L, i) lua_objlen(L, i)
#define SG_HAS_TAIL 0
#endif

#define SG_REC_MAX (1 << 20)	/* one record; deeper stacks are cut (marked) */

static int sg_out_fd = -1, sg_in_fd = -1;
static long sg_stops, sg_max_stops = -1;
static char sg_rec[SG_REC_MAX];
static size_t sg_rec_len;
static char sg_prep[SG_REC_MAX];
static size_t sg_prep_len;
static char sg_chain_key;	/* registry key: array of resuming threads */

static void sg_init(void)
{
	const char *s;
	if (sg_out_fd >= 0 || sg_max_stops == 0)
		return;
	s = getenv("SG_OUT_FD");
	sg_out_fd = s ? atoi(s) : -1;
	s = getenv("SG_IN_FD");
	sg_in_fd = s ? atoi(s) : -1;
	s = getenv("SG_MAX_STOPS");
	sg_max_stops = s ? atol(s) : 8;
	if (sg_out_fd < 0 || sg_in_fd < 0)
		sg_max_stops = 0;
}

static void sg_put(const char *s)
{
	size_t n = strlen(s);
	if (sg_rec_len + n < sizeof(sg_rec)) {
		memcpy(sg_rec + sg_rec_len, s, n);
		sg_rec_len += n;
	}
}

/* copy at most 200 bytes of S into D, replacing tabs and newlines */
static void sg_clean(char *d, const char *s)
{
	size_t i;
	if (!s || !*s) {
		strcpy(d, "-");
		return;
	}
	for (i = 0; i < 200 && s[i]; i++)
		d[i] = (s[i] == '\t' || s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
	d[i] = 0;
}

/* append one line per level of L from FROM_LEVEL out, as thread TNO */
static void sg_walk_thread(lua_State *L, int tno, int from_level)
{
	lua_Debug ar;
	int level;
	char line[600], name[256], src[256];
	for (level = from_level; level < 100000 && lua_getstack(L, level, &ar); level++) {
		void *cf = NULL;
		int tail = 0;
		if (!lua_getinfo(L, "nSlf", &ar)) {
			sg_put("?\tgetinfo failed\n");
			continue;
		}
		if (lua_iscfunction(L, -1))
			cf = (void *)lua_tocfunction(L, -1);
		lua_pop(L, 1);
#if SG_HAS_TAIL
		lua_getinfo(L, "t", &ar);
		tail = ar.istailcall;
#endif
		sg_clean(name, ar.name);
		sg_clean(src, ar.short_src);
		snprintf(line, sizeof(line), "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%p\t%d\n",
			 tno, ar.what ? ar.what : "-",
			 ar.namewhat && *ar.namewhat ? ar.namewhat : "-",
			 name, src, ar.linedefined, ar.currentline, cf, tail);
		sg_put(line);
	}
}

/* the true stack of L and of every thread resuming it, into sg_rec */
static void sg_record(lua_State *L, int from_level)
{
	int n, i, tno = 1;
	sg_walk_thread(L, 0, from_level);
	lua_pushlightuserdata(L, &sg_chain_key);
	lua_rawget(L, LUA_REGISTRYINDEX);
	if (lua_istable(L, -1)) {
		n = (int)sg_len(L, -1);
		for (i = n; i >= 1; i--, tno++) {
			lua_rawgeti(L, -1, i);
			if (lua_isthread(L, -1))
				sg_walk_thread(lua_tothread(L, -1), tno, 0);
			lua_pop(L, 1);
		}
	}
	lua_pop(L, 1);
}

static void sg_write_all(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(sg_out_fd, p, n);
		if (w <= 0)
			_exit(3);
		p += w;
		n -= (size_t)w;
	}
}

/* write sg_rec and block until the harness answers with one byte */
static void sg_block(void)
{
	char b;
	sg_write_all(sg_rec, sg_rec_len);
	if (read(sg_in_fd, &b, 1) != 1)
		_exit(3);
}

static int sg_budget(void)
{
	sg_init();
	if (sg_max_stops >= 0 && sg_stops >= sg_max_stops)
		return 0;
	sg_stops++;
	return 1;
}

/* sgmod.stop(): record the stack (level 0 is this function) and block */
static int sgmod_stop(lua_State *L)
{
	char head[64];
	if (!sg_budget())
		return 0;
	sg_rec_len = 0;
	snprintf(head, sizeof(head), "STOP %ld\n", sg_stops);
	sg_put(head);
	sg_record(L, 0);
	sg_put("END\n");
	sg_block();
	return 0;
}

/* sgmod.prepare(): keep the stack of the caller (level 1 and out) for a
 * later sgmod_ffi_stop */
static int sgmod_prepare(lua_State *L)
{
	size_t save = sg_rec_len;
	sg_rec_len = 0;
	sg_record(L, 1);
	memcpy(sg_prep, sg_rec, sg_rec_len);
	sg_prep_len = sg_rec_len;
	sg_rec_len = save;
	return 0;
}

/* called through the FFI on every iteration of a hot loop (from JIT code
 * or the interpreter): when I == AT, write the prepared stack under stop
 * ID and block */
int sgmod_ffi_stop(int id, int i, int at);
int sgmod_ffi_stop(int id, int i, int at)
{
	char head[64];
	if (i != at || !sg_budget())
		return 0;
	sg_rec_len = 0;
	snprintf(head, sizeof(head), "FFISTOP %ld %d\n", sg_stops, id);
	sg_put(head);
	if (sg_rec_len + sg_prep_len < sizeof(sg_rec)) {
		memcpy(sg_rec + sg_rec_len, sg_prep, sg_prep_len);
		sg_rec_len += sg_prep_len;
	}
	sg_put("END\n");
	sg_block();
	return id;
}

/* a plain C function for the FFI to call (never blocks) */
int sgmod_ffi_add(int a, int b);
int sgmod_ffi_add(int a, int b)
{
	return a + b;
}

/* FFI callback caller: C calls the Lua function pointer FN */
int sgmod_ffi_callback(int (*fn)(int), int x);
int sgmod_ffi_callback(int (*fn)(int), int x)
{
	return fn(x) + 1;
}

static void sg_chain_push(lua_State *L)
{
	lua_pushlightuserdata(L, &sg_chain_key);
	lua_rawget(L, LUA_REGISTRYINDEX);
	lua_pushthread(L);
	lua_rawseti(L, -2, (int)sg_len(L, -2) + 1);
	lua_pop(L, 1);
}

static void sg_chain_pop(lua_State *L)
{
	int n;
	lua_pushlightuserdata(L, &sg_chain_key);
	lua_rawget(L, LUA_REGISTRYINDEX);
	n = (int)sg_len(L, -1);
	if (n > 0) {
		lua_pushnil(L);
		lua_rawseti(L, -2, n);
	}
	lua_pop(L, 1);
}

/* sgmod.push(), sgmod.pop(): the Lua side resumes a coroutine */
static int sgmod_push(lua_State *L)
{
	sg_chain_push(L);
	return 0;
}

static int sgmod_pop(lua_State *L)
{
	sg_chain_pop(L);
	return 0;
}

/* sgmod.call(f, ...): lua_call from C */
static int sgmod_call(lua_State *L)
{
	int base = lua_gettop(L);
	luaL_checktype(L, 1, LUA_TFUNCTION);
	lua_call(L, base - 1, LUA_MULTRET);
	return lua_gettop(L);
}

/* sgmod.pcall(f, ...): lua_pcall from C; returns ok, results... */
static int sgmod_pcall(lua_State *L)
{
	int base = lua_gettop(L), st;
	luaL_checktype(L, 1, LUA_TFUNCTION);
	st = lua_pcall(L, base - 1, LUA_MULTRET, 0);
	lua_pushboolean(L, st == 0);
	lua_insert(L, 1);
	return lua_gettop(L);
}

/* sgmod.resume(co, ...): lua_resume from C; returns ok (true also on a
 * yield) and drops the coroutine's results */
static int sgmod_resume(lua_State *L)
{
	lua_State *co = lua_tothread(L, 1);
	int nargs = lua_gettop(L) - 1, st;
	if (!co)
		return luaL_error(L, "sgmod.resume: not a coroutine");
	lua_xmove(L, co, nargs);
	sg_chain_push(L);
#if LUA_VERSION_NUM >= 504
	{
		int nres = 0;
		st = lua_resume(co, L, nargs, &nres);
		if (st == LUA_OK || st == LUA_YIELD)
			lua_pop(co, nres);
	}
#elif LUA_VERSION_NUM >= 502
	st = lua_resume(co, L, nargs);
	if (st == LUA_OK || st == LUA_YIELD)
		lua_settop(co, 0);
#else
	st = lua_resume(co, nargs);
	if (st == 0 || st == LUA_YIELD)
		lua_settop(co, 0);
#endif
	sg_chain_pop(L);
	lua_pushboolean(L, st == 0 || st == LUA_YIELD);
	return 1;
}

static const luaL_Reg sgmod_funcs[] = {
	{"stop", sgmod_stop},
	{"prepare", sgmod_prepare},
	{"push", sgmod_push},
	{"pop", sgmod_pop},
	{"call", sgmod_call},
	{"pcall", sgmod_pcall},
	{"resume", sgmod_resume},
	{NULL, NULL}
};

int luaopen_sgmod(lua_State *L);
int luaopen_sgmod(lua_State *L)
{
	lua_pushlightuserdata(L, &sg_chain_key);
	lua_newtable(L);
	lua_rawset(L, LUA_REGISTRYINDEX);
	lua_newtable(L);
#if LUA_VERSION_NUM >= 502
	luaL_setfuncs(L, sgmod_funcs, 0);
#else
	luaL_register(L, NULL, sgmod_funcs);
#endif
	return 1;
}
