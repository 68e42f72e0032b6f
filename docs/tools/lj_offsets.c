/* lj_offsets.c: print the offsets a luaspy LuaJIT layout row holds, as
 * compiled against one LuaJIT tree's own headers (docs/luajit.md §15).
 * Built and run by lj-offsets.sh; not part of luaspy. Output: one
 * "field value" line per column of struct lj_layout, in row order. */
#include <stdio.h>
#include <stddef.h>
#include "lj_obj.h"
#include "lj_jit.h"
#include "lj_dispatch.h"

#define GG(f) ((long)offsetof(GG_State, f))
#define G(f) ((long)offsetof(global_State, f))

int main(void)
{
	printf("gc64 %d\n", LJ_GC64);
	printf("g2disp %ld\n", GG(dispatch) - GG(g));
	printf("sizeof_L %ld\n", GG(g));
	printf("g_gc_state %ld\n", G(gc.state));
	printf("g_gc_root %ld\n", G(gc.root));
	printf("g_vmstate %ld\n", G(vmstate));
	printf("g_strempty %ld\n", G(strempty));
	printf("g_mainthref %ld\n", G(mainthref));
	printf("g_registrytv %ld\n", G(registrytv));
	printf("g_cur_L %ld\n", G(cur_L));
	printf("g_jit_base %ld\n", G(jit_base));
	printf("g_jtrace %ld\n", GG(J) - GG(g) + (long)offsetof(jit_State, trace));
	printf("str_len %ld\n", (long)offsetof(GCstr, len));
	printf("str_data %ld\n", (long)sizeof(GCstr));
	printf("sizeof_SnapShot %ld\n", (long)sizeof(SnapShot));
	printf("tr_nsnap %ld\n", (long)offsetof(GCtrace, nsnap));
	printf("tr_mcode %ld\n", (long)offsetof(GCtrace, mcode));
	printf("tr_spadjust %ld\n", (long)offsetof(GCtrace, spadjust));
	printf("pt_size %ld\n", (long)sizeof(GCproto));
	printf("L_cframe %ld\n", (long)offsetof(lua_State, cframe));
	return 0;
}
