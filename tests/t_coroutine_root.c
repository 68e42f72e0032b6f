/* t_coroutine_root.c: the root frames of record --coroutines
 * (merge_coroutine_root, src/merge.c) from synthetic walk results. */
#include <string.h>
#include "check.h"
#include "intern.h"
#include "vm.h"

static const char *root(const struct walk_info *wi)
{
	struct frame fr;
	merge_coroutine_root(wi, &fr);
	CHECK(fr.kind == FRAME_ROOT);
	return fr.name;
}

int main(void)
{
	struct walk_info wi;
	memset(&wi, 0, sizeof wi);
	CHECK(!strcmp(root(&wi), "[no Lua]"));
	wi.coro = 0x7f0011;
	wi.coro_main = 1;
	CHECK(!strcmp(root(&wi), "main"));
	wi.coro_main = 0;
	CHECK(!strcmp(root(&wi), "coroutine 0x7f0011"), "%s", root(&wi));
	wi.coro_body = (struct frame){ .kind = FRAME_LUA, .name = intern("function <w.lua:2>"),
				       .file = intern("w.lua"), .firstline = 2, .line = 4 };
	CHECK(!strcmp(root(&wi), "coroutine 0x7f0011 function <w.lua:2>"), "%s", root(&wi));
	wi.coro_body.name = intern("worker");
	CHECK(!strcmp(root(&wi), "coroutine 0x7f0011 worker (w.lua:2)"), "%s", root(&wi));
	/* the same address, another body: another root (nothing cached) */
	const char *a = root(&wi);
	wi.coro_body.firstline = 9;
	CHECK(strcmp(root(&wi), a) != 0 && !strcmp(root(&wi), "coroutine 0x7f0011 worker (w.lua:9)"));
	/* a C frame is no body */
	wi.coro_body.kind = FRAME_C;
	CHECK(!strcmp(root(&wi), "coroutine 0x7f0011"));
	return check_summary("t_coroutine_root");
}
