/* target.c: opening, refreshing and closing a target process. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "elf_sym.h"
#include "err.h"
#include "intern.h"
#include "proc_core.h"
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

/* T->mem.base reads the core: the one reader every module uses */
static ssize_t core_mem_read(struct mem *m, uint64_t addr, void *buf, size_t len)
{
	struct target *t = (struct target *)((char *)m - offsetof(struct target, mem.base));
	return t->core->base.read(&t->core->base, addr, buf, len);
}

static int core_open_file(void *arg, const char *path, const char **open_path)
{
	return proc_core_open_file(arg, path, open_path);
}

static uint64_t core_bias_of(void *arg, const char *path)
{
	return proc_core_file_bias(arg, path);
}

/* The name the executable ran as: argv[0]'s basename when it is the
 * same file next to it (a symlink such as luajit -> luajit-2.1.x), as
 * elf_sym.c finds it for a live process. */
static const char *core_exe_name(const struct proc_core *c)
{
	const struct core_file *f = c->exe ? proc_core_file(c, c->exe) : NULL;
	if (!f || f->fd < 0)
		return NULL;
	char a0[96];
	size_t n = strcspn(c->psargs, " ");
	snprintf(a0, sizeof a0, "%.*s", (int)n, c->psargs);
	const char *b = strrchr(a0, '/') ? strrchr(a0, '/') + 1 : a0;
	const char *sl = strrchr(f->open_path, '/');
	if (!b[0] || !sl || !strcmp(b, sl + 1))
		return NULL;
	char path[4096];
	struct stat a, e;
	snprintf(path, sizeof path, "%.*s/%s", (int)(sl - f->open_path), f->open_path, b);
	if (stat(path, &a) < 0 || fstat(f->fd, &e) < 0 || a.st_ino != e.st_ino || a.st_dev != e.st_dev)
		return NULL;
	return intern(b);
}

int target_open_core(const char *core, const char *exe, int probe_vm, struct target **out,
		     int *vmrc, char *why, size_t whylen)
{
	struct target *t = calloc(1, sizeof *t);
	struct symtab_source *src = calloc(1, sizeof *src);
	if (!t || !src) {
		free(t);
		free(src);
		return -LS_E_NOMEM;
	}
	int rc = proc_core_open(core, exe, &t->core, why, whylen);
	if (rc < 0) {
		free(src);
		free(t);
		return rc;
	}
	struct proc_core *c = t->core;
	t->pid = c->pid;
	proc_mem_init(&t->mem, c->pid);
	t->mem.base.read = core_mem_read;
	snprintf(t->cmdline, sizeof t->cmdline, "%s",
		 c->cmdline[0] ? c->cmdline : c->psargs[0] ? c->psargs : c->fname);
	src->pid = c->pid;
	src->maps = &c->maps;
	src->exe_path = c->exe;
	src->exe_name = core_exe_name(c);
	src->open_file = core_open_file;
	src->bias_of = core_bias_of;
	src->arg = c;
	src->vdso = c->vdso;
	src->vdso_len = c->vdso_len;
	t->core_src = src;
	rc = symtab_open_source(src, &t->sym);
	if (rc == 0)
		rc = unwind_open(t->sym, &t->unw);
	if (rc < 0) {
		snprintf(why, whylen, "%s", err_text(rc));
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
	proc_core_close(t->core);
	free(t->core_src);
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
	if (t->core)
		return 0; /* a core does not change */
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
