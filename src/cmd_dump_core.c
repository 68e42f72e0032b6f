/* cmd_dump_core.c: `luaspy dump --core`: opening a core file, its threads
 * and its header lines (cmd_dump_core.h). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "cmd_dump_core.h"
#include "err.h"
#include "msg.h"
#include "out.h"
#include "proc_core.h"
#include "vm.h"

/* Open O->core as *T and say its problems (dump_core_open()); WHAT
 * ends the line of a core with no Lua runtime found ("; showing native
 * stacks only" for dump). 0 or the exit status after saying why it
 * can't be read. */
static int core_open_said(struct cli_opts *o, struct target **t, int *vmrc, const char *what)
{
	char why[512];
	why[0] = 0;
	int rc = target_open_core(o->core, o->exe, o->native_only ? 0 : 1, t, vmrc, why, sizeof why);
	if (rc < 0) {
		const char *hint = err_hint(rc);
		msg_error("core %s: %s%s%s%s%s", o->core, err_text(rc), why[0] ? ": " : "", why,
			  hint ? "; " : "", hint ? hint : "");
		return err_exit_code(rc);
	}
	const struct proc_core *c = (*t)->core;
	o->pid = c->pid;
	static const char *const state[] = { "build-id matches", "on disk (the core holds no build-id)",
					     "not found", "another build on disk" };
	msg_debug(1, "core %s: pid %d, %d threads, %d segments, %d file mappings, executable %s",
		  o->core, (int)c->pid, c->nth, c->nseg, c->nfmap, c->exe ? c->exe : "unknown");
	for (int i = 0; i < c->nfiles; i++)
		msg_debug(1, "core: %s%s%s: %s", c->files[i].path,
			  c->files[i].open_path != c->files[i].path ? " read from " : "",
			  c->files[i].open_path != c->files[i].path ? c->files[i].open_path : "",
			  state[c->files[i].state]);
	for (int i = 0; i < c->maps.n; i++)
		msg_debug(2, "core: %llx-%llx %c%c%c %08llx %s", (unsigned long long)c->maps.m[i].start,
			  (unsigned long long)c->maps.m[i].end, c->maps.m[i].perms & MAP_R ? 'r' : '-',
			  c->maps.m[i].perms & MAP_W ? 'w' : '-', c->maps.m[i].perms & MAP_X ? 'x' : '-',
			  (unsigned long long)c->maps.m[i].offset, c->maps.m[i].path);
	for (int i = 0; i < c->nwarn; i++)
		msg_error("core %s: %s", o->core, c->warn[i]);
	const struct core_file *x = c->exe ? proc_core_file(c, c->exe) : NULL;
	if (x && x->state >= CORE_FILE_MISSING) {
		/* without it no symbols, no code: say that first, and alone */
		msg_error("core %s: %s: %s %s; %s", o->core, err_text(LS_E_NOEXE), x->path,
			  x->state == CORE_FILE_MISSING ? "not found" : "is another build on disk",
			  err_hint(LS_E_NOEXE));
		return 0;
	}
	if (!o->native_only && *vmrc == -LS_E_UNSUPPORTED)
		msg_error("core %s: unsupported runtime: %s%s", o->core, why, what);
	else if (!o->native_only && *vmrc < 0)
		msg_error("core %s: not a Lua process: %s%s", o->core,
			  why[0] ? why : "no Lua runtime (LuaJIT or PUC Lua 5.1-5.4) found in its memory", what);
	return 0;
}

int dump_core_open(struct cli_opts *o, struct target **t, int *vmrc)
{
	return core_open_said(o, t, vmrc, "; showing native stacks only");
}

int heap_core_open(struct cli_opts *o, struct target **t)
{
	int vmrc;
	int code = core_open_said(o, t, &vmrc, "");
	if (code != 0)
		return code;
	if ((*t)->vm && !(*t)->vm_ops->heap) {
		msg_error("core %s: unsupported runtime: no heap walker for this runtime", o->core);
		code = err_exit_code(LS_E_UNSUPPORTED);
	} else if (!(*t)->vm) {
		code = dump_core_status(o, *t, vmrc);
	}
	if (code != 0) {
		target_close(*t);
		*t = NULL;
	}
	return code;
}

int dump_core_threads(const struct target *t, struct proc_thread **th, int *nth)
{
	const struct proc_core *c = t->core;
	struct proc_thread *a = calloc((size_t)c->nth + 1, sizeof *a);
	if (!a)
		return -LS_E_NOMEM;
	char state = c->sname >= 'A' && c->sname <= 'z' ? c->sname : 'T';
	for (int i = 0; i < c->nth; i++) {
		a[i].tid = c->th[i].tid;
		a[i].state = state;
		a[i].cpu = -1;
		if (c->th[i].tid == c->pid)
			snprintf(a[i].name, sizeof a[i].name, "%s", c->fname);
	}
	*th = a;
	*nth = c->nth;
	return 0;
}

void dump_core_header(FILE *f, const struct cli_opts *o, const struct target *t)
{
	const struct proc_core *c = t->core;
	const char *sig = c->signo > 0 && c->signo < NSIG ? sigabbrev_np(c->signo) : NULL;
	if (o->json) {
		fputs(",\"core\":{\"file\":", f);
		out_put_json(f, o->core);
		if (c->signo > 0)
			fprintf(f, ",\"signal\":%d,\"signal_name\":\"SIG%s\",\"signal_thread\":%d", c->signo,
				sig ? sig : "?", (int)c->th[0].tid);
		fputs(",\"missing_files\":[", f);
		for (int i = 0, k = 0; i < c->nfiles; i++) {
			if (c->files[i].state < CORE_FILE_MISSING || !c->files[i].elf)
				continue;
			fputs(k++ ? "," : "", f);
			fputs("{\"path\":", f);
			out_put_json(f, c->files[i].path);
			fprintf(f, ",\"reason\":\"%s\"",
				c->files[i].state == CORE_FILE_MISSING ? "not found" : "another build");
			if (c->files[i].debug_path) {
				fputs(",\"symbols_from\":", f);
				out_put_json(f, c->files[i].debug_path);
			}
			fputc('}', f);
		}
		fputs("]}", f);
		return;
	}
	char file[512];
	snprintf(file, sizeof file, "%s", o->core);
	for (char *p = file; *p; p++)
		if ((unsigned char)*p < 32)
			*p = '?';
	fprintf(f, "Core: %s", file);
	if (c->signo > 0)
		fprintf(f, "; thread %d got signal %d (SIG%s)", (int)c->th[0].tid, c->signo, sig ? sig : "?");
	fputc('\n', f);
	for (int i = 0; i < c->nfiles; i++)
		if (c->files[i].state >= CORE_FILE_MISSING && c->files[i].elf) {
			snprintf(file, sizeof file, "%s", c->files[i].path);
			for (char *p = file; *p; p++)
				if ((unsigned char)*p < 32)
					*p = '?';
			fprintf(f, "Missing: %s (%s: code the core does not hold is unknown%s%s)\n", file,
				c->files[i].state == CORE_FILE_MISSING ? "not found" : "another build on disk",
				c->files[i].debug_path ? "; symbols from " : "",
				c->files[i].debug_path ? c->files[i].debug_path : "");
		}
}

int dump_core_status(const struct cli_opts *o, const struct target *t, int vmrc)
{
	const struct proc_core *c = t->core;
	const struct core_file *x = c->exe ? proc_core_file(c, c->exe) : NULL;
	if (o->native_only || t->vm)
		return 0;
	/* no Lua found: because the executable was missing, or none ran */
	return err_exit_code(x && x->state >= CORE_FILE_MISSING ? LS_E_NOEXE :
			     vmrc == -LS_E_UNSUPPORTED ? LS_E_UNSUPPORTED : LS_E_NOTLUA);
}
