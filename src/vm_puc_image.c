/* vm_puc_image.c: the PUC Lua walker over a memory image, without a
 * process, symbols or native frames (unit tests, fuzzing): one lua_State's
 * CallInfo chain copied as capture() would, then walked with the
 * walker's own code. */
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "merge.h"
#include "vm_puc_int.h"

int puc_walk_image(const struct puc_layout *lay, struct mem *m, uint64_t L, struct stack *out)
{
	struct vm *vm = calloc(1, sizeof *vm);
	struct thread_snap *ts = calloc(1, sizeof *ts);
	struct target t;
	uint8_t lb[256];
	int rc;
	if (!vm || !ts) {
		puc_vm_free(vm);
		free(ts);
		return -LS_E_NOMEM;
	}
	memset(&t, 0, sizeof t);
	vm->lay = lay;
	ts->tid = -1;
	ts->mem = m;
	vm->raw_tid = -1;
	stack_clear(out);
	if (lay->L_size > (int)sizeof lb || mem_read(m, L, lb, (size_t)lay->L_size) < 0)
		rc = -LS_E_FAULT;
	else if ((rc = puc_read_chain(vm, m, L, lb)) == 0) {
		struct walk_info info;
		struct lua_walk lw = { 0 };
		rc = puc_walk_raw(vm, &t, ts, &lw, &info);
		/* no native frames: the segments, in order, are the stack */
		if (rc == 0 && merge_stacks(NULL, &ts->native, &lw, out) < 0)
			rc = -LS_E_NOMEM;
		lua_walk_free(&lw);
	}
	puc_vm_free(vm);
	free(ts);
	return rc;
}

