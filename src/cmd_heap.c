/* cmd_heap.c: `luaspy heap`: what a Lua process's heap holds, by object
 * type, with the largest tables (and their paths) and strings. Every
 * thread of the process is stopped for the walk (as dump
 * --all-coroutines holds them) and released on every path; the pause is
 * reported. With -- COMMAND the command is launched and held traced
 * (heap_child.h) for a snapshot at its lua_close, its exit, Ctrl-C or
 * --duration. docs/heap.md. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "child.h"
#include "cli.h"
#include "elf_sym.h"
#include "cmd_dump_core.h"
#include "err.h"
#include "heap.h"
#include "heap_child.h"
#include "msg.h"
#include "proc_core.h"
#include "proc_ptrace.h"
#include "proc_task.h"
#include "session.h"
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

static int heap_run(struct cli_opts *o, FILE *f, int *written);

/* CPU time of this thread, in ns (user + system). */
static uint64_t cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The MiB the object graphs may take: --max-memory, else half of
 * MemAvailable (/proc/meminfo, read when the snapshot starts), at least
 * 64; 4096 when it cannot be read. 0: no bound. */
static uint64_t heap_max_mib(const struct cli_opts *o)
{
	if (o->heap_max_mib_given)
		return (uint64_t)o->heap_max_mib;
	uint64_t mib = 4096;
	FILE *m = fopen("/proc/meminfo", "r");
	char line[128];
	unsigned long long kb;
	while (m && fgets(line, sizeof line, m))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
			mib = kb / 2048 < 64 ? 64 : kb / 2048;
			break;
		}
	if (m)
		fclose(m);
	return mib > 16777215 ? 16777215 : mib;
}

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
	int written = 0;
	int code = heap_run(o, f, &written);
	/* a target that exited mid-walk leaves what was read, marked
	 * partial (exit status 7): kept; so is a snapshot written before
	 * the command's own exit status; any other failure leaves nothing */
	int partial = (code == err_exit_code(LS_E_EXITED) || (o->core && code == err_exit_code(LS_E_CORETRUNC))) &&
		      f != stdout && fflush(f) == 0 && ftell(f) > 0;
	if (code != 0 && !partial && !written)
		drop_output(o, f);
	else if (f != stdout && fclose(f) != 0) {
		msg_error("cannot write '%s': %s", o->output, strerror(errno));
		return err_exit_code(LS_E_IO);
	}
	return code;
}

/* heap --core (docs/core-files.md): the walk of core target T, as
 * heap_take() does it but with no thread to stop (the core does not
 * run) and no target to exit: *HS gets the states, the count returned,
 * or a negative error. */
static int heap_take_core(struct cli_opts *o, struct target *t, struct heap_state **out)
{
	struct heap_state *hs = NULL;
	struct mem_cache mc;
	mem_cache_init(&mc, &t->mem.base, HEAP_CACHE_BLOCK, HEAP_CACHE_BLOCKS);
	unsigned flags = o->heap_format == HEAP_FMT_HEAPSNAPSHOT ? HEAP_WANT_NAMES : 0;
	flags |= HEAP_MAX_MIB_FLAGS(heap_max_mib(o));
	uint64_t c0 = cpu_ns();
	int n = t->vm_ops->heap(t->vm, t, &mc.base, flags, &hs);
	msg_debug(1, "heap: walk of the core %.1f ms of luaspy's CPU", (double)(cpu_ns() - c0) / 1e6);
	mem_cache_free(&mc);
	/* a cut core: what its memory holds is walked, marked partial as
	 * for a target that exited (docs/core-files.md) */
	uint64_t lost = t->core->lost_bytes;
	for (int i = 0; i < n; i++) {
		if (lost && !hs[i].cut)
			hs[i].cut = "the end of a truncated core (the memory past it is missing)";
		heap_graph_finish(&hs[i]);
	}
	*out = n < 0 ? NULL : hs;
	return n < 0 && lost ? -LS_E_CORETRUNC : n;
}

/* One snapshot of target T: stop every thread, walk, release, then the
 * graph (after the release). *HS gets the states; returns their count or
 * a negative error (-LS_E_EXITED when the target is gone), which the
 * caller says. *PAUSE_NS: how long the threads were stopped;
 * *NOTSTOPPED of *NTH threads could not be stopped; *GONE: the target
 * exited during or right after the walk (what was read is in *HS, marked
 * partial). */
static int heap_take(struct cli_opts *o, struct target *t, struct heap_child *hc, struct heap_state **out,
		     uint64_t *pause_ns, int *notstopped, int *nth_out, int *gone_out)
{
	struct proc_thread *th = NULL;
	int nth = 0;
	*out = NULL;
	*notstopped = 0;
	*nth_out = 0;
	*gone_out = 0;
	*pause_ns = 0;
	if (t->core)
		return heap_take_core(o, t, out);
	/* --nonblocking: nothing is stopped, every object is checked (heap.h) */
	int rc = hc || o->nonblocking ? 0 : proc_threads(o->pid, &th, &nth);
	if (rc < 0)
		return rc == -LS_E_GONE ? -LS_E_EXITED : rc;
	*nth_out = nth;
	struct ptrace_stop *stops = calloc((size_t)nth + 1, sizeof *stops);
	int *stopped = calloc((size_t)nth + 1, sizeof *stopped);
	if (!stops || !stopped) {
		free(stops);
		free(stopped);
		free(th);
		return -LS_E_NOMEM;
	}
	/* stop every thread: the walk reads the collector's lists once */
	uint64_t t0 = time_now_ns();
	if (hc) /* our traced command: its threads are held by heap_child.c */
		*notstopped = heap_child_stop(hc, HEAP_STOP_TIMEOUT_NS, &nth), *nth_out = nth;
	for (int i = 0; i < nth && !hc; i++) {
		int src = ptrace_stop(th[i].tid, HEAP_STOP_TIMEOUT_NS, &stops[i]);
		if (src == 0) {
			stopped[i] = 1;
		} else if (src != -LS_E_GONE) {
			(*notstopped)++;
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
		flags |= HEAP_MAX_MIB_FLAGS(heap_max_mib(o));
		if (o->nonblocking)
			flags |= HEAP_NONBLOCKING;
		uint64_t w0 = time_now_ns(), c0 = cpu_ns();
		n = t->vm_ops->heap(t->vm, t, &mc.base, flags, &hs);
		msg_debug(1, "heap: walk %.1f ms, %.1f ms of it on luaspy's CPU",
			  (double)(time_now_ns() - w0) / 1e6, (double)(cpu_ns() - c0) / 1e6);
		mem_cache_free(&mc);
	}
	for (int i = 0; i < nth && !hc; i++)
		if (stopped[i])
			ptrace_release(&stops[i]);
	/* at lua_close or the exit the command stays held: the caller lets it go */
	if (hc && !heap_child_closing(hc) && !heap_child_exiting(hc))
		heap_child_resume(hc);
	*pause_ns = o->nonblocking ? 0 : time_now_ns() - t0;
	if (!hc)
		ptrace_reap_pending();
	/* dominators and paths need no target memory: after the release */
	uint64_t c1 = cpu_ns();
	for (int i = 0; i < n; i++) {
		heap_graph_finish(&hs[i]);
		msg_debug(1, "heap: state 0x%llx: %zu objects, %zu references in the graph",
			  (unsigned long long)hs[i].addr, hs[i].nn, hs[i].ne);
	}
	msg_debug(1, "heap: graph %.1f ms of luaspy's CPU", (double)(cpu_ns() - c1) / 1e6);
	free(stops);
	free(stopped);
	free(th);
	/* gone, or a zombie its parent has not reaped yet; a walk that found
	 * nothing may have met a process killed mid-walk that is still
	 * exiting (its memory gone, not yet a zombie): up to 200 ms for it */
	/* our traced command: proc_check would wait 100 ms on its tracer (us) */
	char cst = hc ? proc_thread_state(o->pid, o->pid) : 0;
	int pc = hc ? (cst == '?' || cst == 'Z' || cst == 'X' ? -LS_E_EXITED : 0) : proc_check(o->pid);
	int gone = pc == -LS_E_NOPID || pc == -LS_E_ZOMBIE || pc == -LS_E_GONE || pc == -LS_E_EXITED;
	for (int k = 0; n < 0 && !gone && k < 20; k++) {
		struct timespec ts = { 0, 10000000 };
		nanosleep(&ts, NULL);
		cst = hc ? proc_thread_state(o->pid, o->pid) : 0;
		pc = hc ? (cst == '?' || cst == 'Z' || cst == 'X' ? -LS_E_EXITED : 0) : proc_check(o->pid);
		gone = pc == -LS_E_NOPID || pc == -LS_E_ZOMBIE || pc == -LS_E_GONE || pc == -LS_E_EXITED;
	}
	if (n < 0)
		return gone ? -LS_E_EXITED : n;
	if (gone)
		for (int i = 0; i < n; i++)
			hs[i].cut = "the target exiting (what was read is shown)";
	*gone_out = gone;
	*out = hs;
	return n;
}

static void heap_states_free(struct heap_state *hs, int n)
{
	for (int i = 0; i < n; i++)
		heap_state_free(&hs[i]);
	free(hs);
}

/* The error of a snapshot that gave no states, said in one line. */
static int heap_take_error(struct cli_opts *o, int n)
{
	if (o->core) { /* heap --core */
		if (n == -LS_E_NOTLUA) {
			/* heap_core_open() found the runtime: its states did not validate */
			msg_error("core %s: no valid lua_State: the Lua runtime is in the core but none of its "
				  "states validates (damaged memory?)", o->core);
			return err_exit_code(LS_E_GARBAGE);
		}
		msg_error("core %s: %s%s", o->core, n == -LS_E_UNSUPPORTED ?
			  "the heap of this Lua release is not described (docs/heap.md)" : err_text(n),
			  n == -LS_E_CORETRUNC ? ": no state could be walked in what it holds" : "");
		return err_exit_code(-n);
	}
	if (n == -LS_E_UNSUPPORTED)
		return msg_unsupported(o->pid, "the heap of this Lua release is not described (docs/heap.md)");
	return msg_err_pid(o->pid, n);
}

/* Wait until DUE_NS (0: none): with HC (heap -- COMMAND) for the
 * command's events (heap_child_wait), else asleep. Returns HC_TIMEOUT at
 * DUE_NS, HC_SIGNAL on Ctrl-C & co., or HC's HC_CLOSE, HC_EXIT, HC_GONE. */
static int heap_wait(struct heap_child *hc, uint64_t due_ns)
{
	if (hc)
		return session_stop_signal ? HC_SIGNAL : heap_child_wait(hc, due_ns, &session_stop_signal);
	while (!session_stop_signal && time_now_ns() < due_ns) {
		uint64_t left = due_ns - time_now_ns();
		struct timespec ts = { 0, (long)(left < 100000000 ? left : 100000000) };
		nanosleep(&ts, NULL);
	}
	return session_stop_signal ? HC_SIGNAL : HC_TIMEOUT;
}

/* heap -- COMMAND: the VM was found as the command started, often
 * before its state was made: look for states again (the map first), as
 * the sampler's discovery does, before each snapshot. Reads memory only:
 * the command may run or be held. */
static void heap_rediscover(struct target *t)
{
	target_refresh(t);
	if (t->vm_ops->discover) {
		int found = t->vm_ops->discover(t->vm, t, VM_DISC_STATES);
		msg_debug(2, "heap: discovery found %d new state(s)", found);
	}
}

/* When a snapshot of the command was taken, for its first line: NULL
 * for one taken on time. */
static const char *heap_when(int ev)
{
	switch (ev) {
	case HC_CLOSE: return "at lua_close: the command was closing its state, nothing freed yet";
	case HC_EXIT: return "at the command's exit: lua_close was not called, nothing freed";
	case HC_SIGNAL: return "on a signal to luaspy (Ctrl-C)";
	default: return NULL;
	}
}

/* --interval SECS --count K: K snapshots SECS apart; after each but the
 * first, what grew since the one before, by type and by path. Ctrl-C
 * ends it between snapshots (exit 0 with what was shown). With HC
 * (heap -- COMMAND), Ctrl-C, the command's lua_close or exit take one
 * last snapshot then, and the first is taken one interval in; *EV gets
 * the event that ended the series. */
static int heap_interval(struct cli_opts *o, struct target *t, struct heap_child *hc, FILE *f, int *ev_out)
{
	struct heap_prev *prev = NULL;
	int code = 0;
	uint64_t start = time_now_ns();
	session_install_signals();
	*ev_out = HC_TIMEOUT;
	for (int k = 1; k <= o->heap_count; k++) {
		int ev = HC_TIMEOUT;
		/* a command's first is one interval in: its state is made by then */
		if (k > 1 || hc || session_stop_signal)
			ev = heap_wait(hc, start + (uint64_t)((k - !hc) * o->heap_interval_s * 1e9));
		*ev_out = ev;
		if (ev == HC_GONE || (ev == HC_SIGNAL && !hc))
			break;
		if (hc)
			heap_rediscover(t);
		struct heap_state *hs;
		uint64_t pause_ns;
		int notstopped, nth, gone;
		int n = heap_take(o, t, hc, &hs, &pause_ns, &notstopped, &nth, &gone);
		if (n < 0) {
			code = heap_take_error(o, n);
			break;
		}
		uint64_t objects = 0, bytes = 0;
		for (int i = 0; i < n; i++) {
			objects += hs[i].objects;
			for (int ty = 0; ty < HEAP_NTYPES; ty++)
				bytes += hs[i].bytes[ty];
		}
		const char *when = heap_when(ev);
		fprintf(f, "%sSnapshot %d of %d at %.1f s%s%s: %llu objects, %llu bytes walked, threads stopped for %.1f ms%s\n",
			k > 1 ? "\n" : "", k, o->heap_count, (double)(time_now_ns() - start) / 1e9,
			when ? " " : "", when ? when : "",
			(unsigned long long)objects, (unsigned long long)bytes, (double)pause_ns / 1e6,
			gone ? " (PARTIAL: the target exited)" : "");
		if (notstopped)
			fprintf(f, "warning: %d of %d threads could not be stopped; the walk may be inconsistent\n",
				notstopped, nth);
		int last = when != NULL;
		int rc = 0;
		if (prev) {
			char since[64];
			snprintf(since, sizeof since, "snapshot %d", k - 1);
			rc = heap_growth_write(f, since, prev, hs, n);
			heap_prev_free(prev);
			prev = NULL;
		}
		if (rc == 0 && k < o->heap_count && !gone && !last)
			rc = heap_prev_take(hs, n, &prev);
		heap_states_free(hs, n);
		fflush(f);
		if (rc < 0 || ferror(f)) {
			msg_error("writing the heap growth failed");
			code = err_exit_code(rc == -LS_E_NOMEM ? LS_E_NOMEM : LS_E_IO);
			break;
		}
		if (gone) {
			msg_error("pid %d exited during the heap walk: what was read is written, marked partial",
				  (int)o->pid);
			code = err_exit_code(LS_E_EXITED);
			break;
		}
		if (last)
			break;
	}
	heap_prev_free(prev);
	return code;
}

/* Write the snapshot HS (N states) of T to F in the format O asks for;
 * WHEN (may be NULL): when it was taken (heap -- COMMAND), the text's
 * first line. Returns 0 or the exit status. */
static int heap_output(struct cli_opts *o, FILE *f, struct target *t, struct heap_state *hs, int n,
		       uint64_t pause_ns, int notstopped, int nth, int gone, const char *when)
{
	const char *desc = t->vm_ops->describe ? t->vm_ops->describe(t->vm) : NULL;
	int werr = 0;
	if (when && o->heap_format == HEAP_FMT_TEXT && !o->diff)
		fprintf(f, "Snapshot %s\n", when);
	else if (when)
		msg_debug(1, "heap: pid %d: snapshot %s", (int)o->pid, when);
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
		for (int i = 0; i < n; i++) {
			if (hs[i].cut)
				msg_error("pid %d: state 0x%llx: partial heap: the walk stopped at %s", (int)o->pid,
					  (unsigned long long)hs[i].addr, hs[i].cut);
			if (hs[i].graph_cut)
				msg_error("pid %d: state 0x%llx: no paths: %s", (int)o->pid,
					  (unsigned long long)hs[i].addr, hs[i].graph_cut);
		}
	} else if (o->heap_format == HEAP_FMT_PATHS || o->diff) {
		int prc = o->diff ? heap_diff_write(f, o->diff, hs, n) : heap_paths_write(f, hs, n);
		if (prc == -LS_E_GARBAGE || (prc == -LS_E_IO && o->diff && !ferror(f)))
			msg_error("cannot read '%s' as a heap paths file", o->diff);
		werr = prc < 0;
		for (int i = 0; i < n; i++) {
			if (hs[i].cut)
				msg_error("pid %d: state 0x%llx: partial heap: the walk stopped at %s", (int)o->pid,
					  (unsigned long long)hs[i].addr, hs[i].cut);
			if (hs[i].graph_cut)
				msg_error("pid %d: state 0x%llx: no paths: %s", (int)o->pid,
					  (unsigned long long)hs[i].addr, hs[i].graph_cut);
		}
	} else {
		heap_print_text(f, (int)o->pid, desc, hs, n, t->core ? -1.0 : (double)pause_ns / 1e6);
		if (notstopped)
			fprintf(f, "\nwarning: %d of %d threads could not be stopped; the walk may be inconsistent\n",
				notstopped, nth);
	}
	werr |= fflush(f) != 0 || ferror(f);
	if (werr) {
		msg_error("writing the heap summary failed");
		return err_exit_code(LS_E_IO);
	}
	if (gone) {
		msg_error("pid %d exited during the heap walk: what was read is written, marked partial",
			  (int)o->pid);
		return err_exit_code(LS_E_EXITED);
	}
	if (t->core && t->core->lost_bytes) /* said as the core was opened */
		return err_exit_code(LS_E_CORETRUNC);
	return 0;
}

/* Open the target O->pid and check it has a Lua VM with a heap walker.
 * Returns 0 with *OUT, else the exit status (said). */
static int heap_open(struct cli_opts *o, struct target **out)
{
	struct target *t;
	int vmrc;
	char why[512];
	if (o->core) { /* heap --core: its problems said there */
		int code = heap_core_open(o, &t);
		if (code != 0)
			return code;
	}
	int rc = o->core ? 0 : target_open(o->pid, VM_PROBE, &t, &vmrc, why, sizeof why);
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
	*out = t;
	return 0;
}

/* ---- heap -- COMMAND (docs/heap.md §10) ----------------------------------- */

#define HEAP_WAIT_MSG_NS (500 * 1000000ull) /* say we wait for Lua after this long */

/* Wait up to --timeout for the Lua VM of the launched command C (O->pid),
 * probing every 50 ms as record does. Returns 0 with *OUT; -1 when the
 * command ended first (said); else the exit status (said). */
static int heap_wait_lua(struct cli_opts *o, struct child *c, struct target **out)
{
	uint64_t t0 = time_now_ns(), deadline = t0 + (uint64_t)(o->timeout_s * 1e9);
	int said = 0;
	for (;;) {
		struct target *t = NULL;
		int vmrc = 0;
		char why[512] = "";
		/* QUICK: the state, made later, is looked for by discovery
		 * before each snapshot (heap_rediscover) */
		int rc = target_open(o->pid, VM_PROBE | VM_PROBE_QUICK, &t, &vmrc, why, sizeof why);
		if (rc == 0 && t->vm && t->vm_ops->heap) {
			*out = t;
			return 0;
		}
		if (rc == 0 && t->vm) {
			target_close(t);
			return msg_unsupported(o->pid, "no heap walker for this runtime");
		}
		target_close(t);
		child_check(c);
		if (c->reaped) {
			msg_error("pid %d: the command ended (exit status %d) before its Lua VM was found: no heap snapshot",
				  (int)o->pid, child_exit_status(c));
			return -1;
		}
		if (rc == -LS_E_PERM || rc == -LS_E_TRACED || rc == -LS_E_ARCH32 || rc == -LS_E_NOMEM)
			return msg_err_pid(o->pid, rc);
		uint64_t now = time_now_ns();
		if (now >= deadline || session_stop_signal) {
			if (vmrc == -LS_E_UNSUPPORTED)
				return msg_unsupported(o->pid, why);
			return msg_err_pid(o->pid, rc < 0 ? rc : vmrc < 0 ? vmrc : -LS_E_NOTLUA);
		}
		if (!said && now - t0 >= HEAP_WAIT_MSG_NS) {
			msg_waiting_for_lua(o->pid, o->timeout_s);
			said = 1;
		}
		struct timespec ts = { 0, 50 * 1000000L };
		nanosleep(&ts, NULL);
	}
}

/* The snapshots of the command T runs, held by HC: --interval's series,
 * or one at lua_close, the exit, Ctrl-C or --duration, whichever comes
 * first. *EV gets the event of the last one. Returns 0 or the exit
 * status (said). */
static int heap_command_snap(struct cli_opts *o, struct target *t, struct heap_child *hc, FILE *f,
			     uint64_t close_addr, int *ev)
{
	if (o->heap_interval_s > 0) {
		int code = heap_interval(o, t, hc, f, ev);
		if (*ev == HC_GONE)
			msg_error("pid %d: the command ended without a snapshot at its exit: %s", (int)o->pid,
				  close_addr ? "it ran another program or was killed before we saw it exit"
					     : "no lua_close in its modules to stop it at");
		return code;
	}
	uint64_t due = o->duration_s > 0 ? time_now_ns() + (uint64_t)(o->duration_s * 1e9) : 0;
	*ev = heap_wait(hc, due);
	if (*ev == HC_GONE) {
		msg_error("pid %d: the command ended with no heap snapshot taken: %s", (int)o->pid,
			  close_addr ? "it ran another program or was killed before we saw it exit"
				     : "no lua_close in its modules to stop it at (docs/heap.md §10)");
		return err_exit_code(LS_E_EXITED);
	}
	heap_rediscover(t);
	struct heap_state *hs;
	uint64_t pause_ns;
	int notstopped, nth, gone;
	int n = heap_take(o, t, hc, &hs, &pause_ns, &notstopped, &nth, &gone);
	if (n < 0)
		return heap_take_error(o, n);
	const char *when = heap_when(*ev);
	if (!when && o->duration_s > 0)
		when = "after --duration";
	int code = heap_output(o, f, t, hs, n, pause_ns, notstopped, nth, gone, when);
	heap_states_free(hs, n);
	return code;
}

/* heap -- COMMAND: launch it, wait for its Lua VM, hold it traced with
 * an int3 at lua_close, take the snapshots, let it go. At lua_close or
 * its exit the command then ends as it would have, and its exit status
 * is ours when the snapshot went well; on Ctrl-C, --duration or the end
 * of --count it is ended as record ends its command (SIGTERM, then
 * SIGKILL after 1 s). *WRITTEN: 1 when the snapshots were written
 * whole (then the output is kept whatever the command's status). */
static int heap_command(struct cli_opts *o, FILE *f, int *written)
{
	struct child c;
	memset(&c, 0, sizeof c);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL); /* heap_child.h: its waits sleep in sigtimedwait */
	session_install_signals();
	int e = 0;
	int lr = child_launch(&c, o->argv, &e);
	if (lr == 1) {
		msg_cannot_run(o->argv[0], e);
		return 127;
	}
	if (lr < 0)
		return msg_err_pid(0, lr);
	o->pid = c.pid;
	struct target *t = NULL;
	int code = heap_wait_lua(o, &c, &t);
	if (code != 0) {
		child_kill(&c);
		return code < 0 ? err_exit_code(LS_E_EXITED) : code;
	}
	const char *mod = NULL;
	uint64_t close_addr = symtab_find(t->sym, "lua_close", NULL, &mod);
	struct heap_child *hc = NULL;
	int rc = heap_child_attach(c.pid, close_addr, &hc);
	if (rc < 0) {
		target_close(t);
		child_kill(&c);
		return msg_err_pid(o->pid, rc);
	}
	if (close_addr)
		msg_debug(1, "heap: pid %d: held at lua_close (0x%llx in %s) for the snapshot at its exit",
			  (int)o->pid, (unsigned long long)close_addr, mod ? mod : "?");
	else
		msg_debug(1, "heap: pid %d: no lua_close symbol: no snapshot at its exit", (int)o->pid);
	int ev = HC_TIMEOUT;
	code = heap_command_snap(o, t, hc, f, close_addr, &ev);
	*written = code == 0;
	int status;
	if (heap_child_status(hc, &status)) {
		c.reaped = 1;
		c.status = status;
	}
	heap_child_detach(hc);
	target_close(t);
	if (ev == HC_CLOSE || ev == HC_EXIT) {
		/* the command ends as it would have: its exit status */
		while (!c.reaped && !session_stop_signal) {
			if (waitpid(c.pid, &status, __WALL) == c.pid && !WIFSTOPPED(status)) {
				c.reaped = 1;
				c.status = status;
			}
		}
	}
	if (!c.reaped)
		child_kill(&c);
	if (code == 0 && c.reaped && (ev == HC_CLOSE || ev == HC_EXIT))
		code = child_exit_status(&c);
	return code;
}

static int heap_run(struct cli_opts *o, FILE *f, int *written)
{
	if (o->argv)
		return heap_command(o, f, written);
	struct target *t = NULL;
	int code = heap_open(o, &t);
	if (code != 0)
		return code;
	if (o->heap_interval_s > 0) {
		int ev;
		code = heap_interval(o, t, NULL, f, &ev);
		target_close(t);
		return code;
	}
	struct heap_state *hs;
	uint64_t pause_ns;
	int notstopped, nth, gone;
	int n = heap_take(o, t, NULL, &hs, &pause_ns, &notstopped, &nth, &gone);
	if (n < 0) {
		target_close(t);
		return heap_take_error(o, n);
	}
	code = heap_output(o, f, t, hs, n, pause_ns, notstopped, nth, gone, NULL);
	heap_states_free(hs, n);
	target_close(t);
	return code;
}
