/* cmd_heap.c: `luaspy heap`: what a Lua process's heap holds, by object
 * type, with the largest tables (and their paths) and strings. Every
 * thread of the process is stopped for the walk (as dump
 * --all-coroutines holds them) and released on every path; the pause is
 * reported. docs/heap.md. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "err.h"
#include "heap.h"
#include "msg.h"
#include "proc_ptrace.h"
#include "proc_task.h"
#include "target.h"
#include "timeutil.h"
#include "vm.h"

#define HEAP_CACHE_BLOCK (64u << 10)   /* block cache: 64 KiB blocks... */
#define HEAP_CACHE_BLOCKS 64           /* ...64 of them: 4 MiB */
#define HEAP_STOP_TIMEOUT_NS (1000 * 1000000ull)

/* Close the output F (not stdout) of a heap that failed, and remove it. */
static void drop_output(const struct cli_opts *o, FILE *f)
{
	if (f && f != stdout) {
		fclose(f);
		unlink(o->output);
	}
}

static int heap_run(struct cli_opts *o, FILE *f);

int cmd_heap(struct cli_opts *o)
{
	FILE *f = stdout;
	/* an OLD that is no paths file is refused before the stop */
	if (o->diff) {
		FILE *in = fopen(o->diff, "r");
		char line[64] = "";
		if (!in) {
			msg_error("cannot read '%s': %s", o->diff, strerror(errno));
			return err_exit_code(LS_E_USAGE);
		}
		if (!fgets(line, sizeof line, in) || strcmp(line, "# luaspy heap paths 1\n") != 0) {
			fclose(in);
			msg_error("'%s' is not a heap paths file (luaspy heap -f paths)", o->diff);
			return err_exit_code(LS_E_USAGE);
		}
		fclose(in);
	}
	/* an output that cannot be written is refused before the stop */
	if (o->output) {
		f = fopen(o->output, "w");
		if (!f) {
			int e = errno;
			msg_error("cannot write '%s': %s", o->output, strerror(e));
			return err_exit_code(LS_E_USAGE);
		}
	}
	int code = heap_run(o, f);
	if (code != 0)
		drop_output(o, f);
	else if (f != stdout && fclose(f) != 0) {
		msg_error("cannot write '%s': %s", o->output, strerror(errno));
		return err_exit_code(LS_E_IO);
	}
	return code;
}

static int heap_run(struct cli_opts *o, FILE *f)
{
	struct target *t;
	int vmrc;
	char why[512];
	int rc = target_open(o->pid, VM_PROBE, &t, &vmrc, why, sizeof why);
	if (rc < 0)
		return msg_err_pid(o->pid, rc);
	if (!t->vm) {
		target_close(t);
		if (vmrc == -LS_E_UNSUPPORTED)
			return msg_unsupported(o->pid, why);
		return msg_err_pid(o->pid, vmrc < 0 ? vmrc : -LS_E_NOTLUA);
	}
	if (!t->vm_ops->heap) {
		target_close(t);
		return msg_unsupported(o->pid, "no heap walker for this runtime");
	}
	struct proc_thread *th;
	int nth;
	rc = proc_threads(o->pid, &th, &nth);
	if (rc < 0) {
		target_close(t);
		return msg_err_pid(o->pid, rc == -LS_E_GONE ? -LS_E_EXITED : rc);
	}
	struct ptrace_stop *stops = calloc((size_t)nth + 1, sizeof *stops);
	int *stopped = calloc((size_t)nth + 1, sizeof *stopped);
	if (!stops || !stopped) {
		free(stops);
		free(stopped);
		free(th);
		target_close(t);
		return msg_err_pid(o->pid, -LS_E_NOMEM);
	}
	/* stop every thread: the walk reads the collector's lists once */
	uint64_t t0 = time_now_ns();
	int nstopped = 0, notstopped = 0;
	for (int i = 0; i < nth; i++) {
		int src = ptrace_stop(th[i].tid, HEAP_STOP_TIMEOUT_NS, &stops[i]);
		if (src == 0) {
			stopped[i] = 1;
			nstopped++;
		} else if (src != -LS_E_GONE) {
			notstopped++;
			if (src == -LS_E_PERM || src == -LS_E_TRACED) {
				rc = src;
				break;
			}
		}
	}
	struct heap_state *hs = NULL;
	int n = rc < 0 ? rc : 0;
	if (rc == 0) {
		struct mem_cache mc;
		mem_cache_init(&mc, &t->mem.base, HEAP_CACHE_BLOCK, HEAP_CACHE_BLOCKS);
		unsigned flags = o->heap_format == HEAP_FMT_HEAPSNAPSHOT ? HEAP_WANT_NAMES : 0;
		n = t->vm_ops->heap(t->vm, t, &mc.base, flags, &hs);
		mem_cache_free(&mc);
	}
	for (int i = 0; i < nth; i++)
		if (stopped[i])
			ptrace_release(&stops[i]);
	uint64_t pause_ns = time_now_ns() - t0;
	ptrace_reap_pending();
	/* dominators and paths need no target memory: after the release */
	for (int i = 0; i < n; i++)
		heap_graph_finish(&hs[i]);
	free(stops);
	free(stopped);
	free(th);
	/* gone, or a zombie its parent has not reaped yet */
	int pc = proc_check(o->pid);
	int gone = pc == -LS_E_NOPID || pc == -LS_E_ZOMBIE || pc == -LS_E_GONE || pc == -LS_E_EXITED;
	if (n < 0) {
		target_close(t);
		if (gone)
			return msg_err_pid(o->pid, -LS_E_EXITED);
		if (n == -LS_E_UNSUPPORTED)
			return msg_unsupported(o->pid, "the heap of this Lua release is not described (docs/heap.md)");
		return msg_err_pid(o->pid, n);
	}
	if (gone)
		for (int i = 0; i < n; i++)
			hs[i].cut = "the target exiting (what was read is shown)";
	const char *desc = t->vm_ops->describe ? t->vm_ops->describe(t->vm) : NULL;
	int werr = 0;
	if (o->heap_format == HEAP_FMT_HEAPSNAPSHOT) {
		werr = out_heapsnapshot_write(f, hs, n) < 0;
		/* what the snapshot cannot say goes to stderr, one line each */
		for (int i = 0; i < n; i++) {
			if (hs[i].cut)
				msg_error("pid %d: state 0x%llx: partial heap: the walk stopped at %s", (int)o->pid,
					  (unsigned long long)hs[i].addr, hs[i].cut);
			if (hs[i].graph_cut)
				msg_error("pid %d: state 0x%llx: no references in the snapshot: %s", (int)o->pid,
					  (unsigned long long)hs[i].addr, hs[i].graph_cut);
		}
		if (notstopped)
			msg_error("pid %d: %d of %d threads could not be stopped; the walk may be inconsistent",
				  (int)o->pid, notstopped, nth);
	} else if (o->heap_format == HEAP_FMT_PPROF) {
		werr = heap_pprof_write(f, hs, n) < 0;
		for (int i = 0; i < n; i++)
			if (hs[i].cut)
				msg_error("pid %d: state 0x%llx: partial heap: the walk stopped at %s", (int)o->pid,
					  (unsigned long long)hs[i].addr, hs[i].cut);
	} else if (o->heap_format == HEAP_FMT_PATHS || o->diff) {
		int prc = o->diff ? heap_diff_write(f, o->diff, hs, n) : heap_paths_write(f, hs, n);
		if (prc == -LS_E_GARBAGE || (prc == -LS_E_IO && o->diff && !ferror(f)))
			msg_error("cannot read '%s' as a heap paths file", o->diff);
		werr = prc < 0;
		for (int i = 0; i < n; i++)
			if (hs[i].cut)
				msg_error("pid %d: state 0x%llx: partial heap: the walk stopped at %s", (int)o->pid,
					  (unsigned long long)hs[i].addr, hs[i].cut);
	} else {
		heap_print_text(f, (int)o->pid, desc, hs, n, (double)pause_ns / 1e6);
		if (notstopped)
			fprintf(f, "\nwarning: %d of %d threads could not be stopped; the walk may be inconsistent\n",
				notstopped, nth);
	}
	werr |= fflush(f) != 0 || ferror(f);
	for (int i = 0; i < n; i++)
		heap_state_free(&hs[i]);
	free(hs);
	target_close(t);
	if (werr) {
		msg_error("writing the heap summary failed");
		return err_exit_code(LS_E_IO);
	}
	if (gone) {
		msg_error("pid %d exited during the heap walk: what was read is written, marked partial",
			  (int)o->pid);
		return err_exit_code(LS_E_EXITED);
	}
	return 0;
}
