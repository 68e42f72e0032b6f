/* vm_luajit_image.c: the LuaJIT walker over a memory image, without a
 * process (fuzzing, tests): the probe's state validation and name
 * learning, then one thread's Lua frames, all with the walker's own code. */
#include <stdlib.h>
#include "err.h"
#include "vm_luajit.h"

int lj_walk_image(const struct lj_layout *lay, struct mem *m, uint64_t g, uint64_t L,
		  struct frame *out, int max)
{
	struct vm *vm = calloc(1, sizeof *vm);
	if (!vm)
		return -LS_E_NOMEM;
	vm->lay = lay;
	vm->ol = (lay->flags & LJL_GC64) ? &lj_obj_gc64 : &lj_obj_32;
	/* vm_start = vm_end = 0: no VM code, no dispatch boundary check */
	int rc = 0;
	if (g && lj_add_g(vm, m, g, "image") < 0)
		rc = -LS_E_GARBAGE;
	if (rc == 0 && !L && g && (lj_read_ref(vm->ol, m, g + lay->g_cur_L, &L) < 0 || !L))
		L = g - lay->sizeof_L;   /* idle: the main thread */
	if (rc == 0)
		rc = L ? lj_thread_frames(vm, m, L, out, max) : -LS_E_GARBAGE;
	lj_vm_free(vm);
	return rc;
}

int lj_resumers_image(const struct lj_layout *lay, struct mem *m, uint64_t L, uint64_t main_L,
		      uint64_t *out, int max)
{
	struct vm *vm = calloc(1, sizeof *vm);
	uint8_t (*hdrs)[128] = calloc(max > 0 ? (size_t)max : 1, 128);
	uint8_t hdr[128];
	int rc = -LS_E_NOMEM;
	if (vm && hdrs) {
		vm->lay = lay;
		vm->ol = (lay->flags & LJL_GC64) ? &lj_obj_gc64 : &lj_obj_32;
		uint64_t noscan = 0;
		rc = lj_read_thread(vm->ol, m, L, hdr);
		if (rc == 0)
			rc = lj_find_resumers(vm, m, L, main_L, hdr, out, hdrs, max, &noscan);
	}
	free(hdrs);
	lj_vm_free(vm);
	return rc;
}
