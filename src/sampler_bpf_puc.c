/* sampler_bpf_puc.c: the eBPF tick copy's configuration for PUC Lua:
 * the main lua_State and the walker's offsets and tags, from its layout
 * row (vm_puc_layout.c), for the program's map (sampler_bpf_rec.h). A
 * file of its own: it sees PUC's struct vm (vm_puc_int.h), sampler_bpf.c
 * sees LuaJIT's. docs/sampling.md §8. */
#include "config.h"
#include <string.h>
#include "sampler_bpf.h"
#include "sampler_bpf_rec.h"
#include "target.h"
#include "vm_puc_int.h"

int sampler_bpf_puc_cfg(const struct target *t, struct lsbpf_cfg *c)
{
	const struct vm *vm = t->vm;
	const struct puc_layout *lay = vm ? vm->lay : NULL;
	if (!lay || vm->nstates < 1 || !ptr_ok(vm->states[0]))
		return 0;
	memset(c, 0, sizeof *c);
	c->kind = LSBPF_KIND_PUC;
	c->g = vm->states[0];
	c->puc51 = lay->L_end_ci >= 0;
	c->p_L_size = (unsigned)lay->L_size;
	c->p_L_ci = (unsigned)lay->L_ci;
	c->p_L_base_ci = (unsigned)lay->L_base_ci;
	c->p_ci_size = (unsigned)lay->ci_size;
	c->p_ci_func = (unsigned)lay->ci_func;
	c->p_ci_previous = lay->ci_previous >= 0 ? (unsigned)lay->ci_previous : 0;
	c->p_tt_size = (unsigned)lay->tv_tt_size;
	c->p_tag_lcf = lay->tag_lcf;
	c->p_tag_ccl = lay->tag_ccl;
	c->p_tag_thread = lay->tag_thread;
	c->p_ccl_upvalue = (unsigned)lay->ccl_upvalue;
	c->p_L_errorJmp = (unsigned)lay->L_errorJmp;
	for (int i = 0; i < vm->nstates && c->p_nstates < LSBPF_PUC_STATES; i++)
		if (ptr_ok(vm->states[i]))
			c->p_states[c->p_nstates++] = vm->states[i];
	if (lay->L_size > (int)LSBPF_CHUNK_MAX || lay->ci_size > (int)LSBPF_CHUNK_MAX ||
	    (!c->puc51 && lay->ci_previous < 0))
		return 0;
	return 1;
}
