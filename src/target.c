/* target.c: opening, refreshing and closing a target process. */
#include <stdlib.h>
#include "elf_sym.h"
#include "err.h"
#include "proc_maps.h"
#include "proc_task.h"
#include "target.h"
#include "unwind.h"
#include "vm.h"

int target_open(pid_t pid, int probe_vm, struct target **out, int *vmrc, char *why, size_t whylen)
{
	int rc = proc_check(pid);
	if (rc < 0)
		return rc;
	struct target *t = calloc(1, sizeof *t);
	if (!t)
		return -LS_E_NOMEM;
	t->pid = pid;
	proc_mem_init(&t->mem, pid);
	proc_cmdline(pid, t->cmdline, sizeof t->cmdline);
	rc = symtab_open(pid, &t->sym);
	if (rc < 0) {
		target_close(t);
		return rc == -LS_E_GONE ? -LS_E_NOPID : rc;
	}
	rc = unwind_open(t->sym, &t->unw);
	if (rc < 0) {
		target_close(t);
		return rc;
	}
	*vmrc = probe_vm ? vm_probe(t, why, whylen) : -LS_E_NOTLUA;
	*out = t;
	return 0;
}

void target_close(struct target *t)
{
	if (!t)
		return;
	if (t->vm && t->vm_ops && t->vm_ops->close)
		t->vm_ops->close(t->vm);
	unwind_close(t->unw);
	symtab_close(t->sym);
	proc_mem_close(&t->mem);
	free(t);
}

static uint64_t maps_digest(const struct proc_maps *m)
{
	uint64_t h = (uint64_t)m->n;
	for (int i = 0; i < m->n; i++)
		h = (h ^ m->m[i].start ^ (m->m[i].end << 1) ^ m->m[i].inode) * 0x100000001b3ull;
	return h;
}

int target_refresh(struct target *t)
{
	struct proc_maps now = { 0 };
	int rc = proc_maps_read(t->pid, &now);
	if (rc < 0)
		return rc;
	int changed = maps_digest(&now) != maps_digest(symtab_maps(t->sym));
	proc_maps_free(&now);
	if (!changed)
		return 0;
	rc = symtab_refresh(t->sym);
	return rc < 0 ? rc : 1;
}
