/* target.c: opening, refreshing and closing a target process. */
#include <stdlib.h>
#include "elf_sym.h"
#include "err.h"
#include "proc_maps.h"
#include "proc_task.h"
#include "sampler_perf.h"
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
	*vmrc = probe_vm ? vm_probe(t, (unsigned)probe_vm, why, whylen) : -LS_E_NOTLUA;
	*out = t;
	return 0;
}

void target_close(struct target *t)
{
	if (!t)
		return;
	perf_proc_close(t->perf);
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

/* Walkers read the target in many small pieces: a LuaJIT walk of 20 fib
 * frames made ~140 process_vm_readv of 1-104 bytes, nearly all in 2-3
 * pages; a Lua 5.4 capture (while the thread is stopped) ~50 reads in 6
 * pages. Each read is a syscall (~1 us here) and a 4 KiB read costs
 * little more than a small one, so a sample reads whole pages, each once:
 * filled during capture (while stopped, so those pages are a consistent
 * snapshot) and the walk after it. */
#define SAMPLE_CACHE_PAGES 64

void target_sample_reader(struct target *t, struct thread_snap *ts, int cached)
{
	struct mem *under = &t->mem.base;
	if (cached) {
		if (!ts->pages.nblocks)
			mem_cache_init(&ts->pages, under, 4096, SAMPLE_CACHE_PAGES);
		mem_cache_reset(&ts->pages, under);
		under = &ts->pages.base;
	}
	mem_overlay_init(&ts->ov, under, ts->stack_addr, ts->stack, ts->stack_len);
	ts->mem = &ts->ov.base;
}
