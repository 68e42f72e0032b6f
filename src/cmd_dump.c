/* cmd_dump.c: `luaspy dump`: one consistent stack of every thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "cmd_dump_core.h"
#include "err.h"
#include "fiber_tarantool.h"
#include "msg.h"
#include "out_dump.h"
#include "pgrep.h"
#include "proc_ptrace.h"
#include "proc_task.h"
#include "sampler.h"
#include "timeutil.h"

#define DUMP_RETRIES 3
/* How long dump waits for a thread to stop: the stop timeout (1 s),
 * then this long in all for the stop still pending (a loaded machine
 * may not run the thread for seconds: CI's stressed runs, load 20) */
#define DUMP_STOP_WAIT_NS (5 * 1000000000ull)

/* Names of Lua functions by prototype, from the variables that hold
 * them in the threads' frames (vm_var.func_proto): a coroutine's body
 * function is named by them. */
#define DUMP_MAX_NAMES 4096
struct body_names {
	struct { uint64_t proto; const char *name; } *e;
	int n;
};

/* Add the functions held by named variables of DV to BN (first name wins). */
static void body_names_add(struct body_names *bn, const struct dump_vars *dv)
{
	for (int i = 0; i < dv->n; i++)
		for (int k = 0; k < dv->f[i].nvars; k++) {
			const struct vm_var *v = &dv->f[i].vars[k];
			if (!v->func_proto || !v->name || v->name[0] == '(')
				continue;
			int seen = 0;
			for (int j = 0; j < bn->n && !seen; j++)
				seen = bn->e[j].proto == v->func_proto;
			if (seen || bn->n >= DUMP_MAX_NAMES)
				continue;
			if (!bn->e && !(bn->e = calloc(DUMP_MAX_NAMES, sizeof *bn->e)))
				return;
			bn->e[bn->n].proto = v->func_proto;
			bn->e[bn->n++].name = v->name;
		}
}

static const char *body_name(const struct body_names *bn, uint64_t proto)
{
	for (int j = 0; bn && proto && j < bn->n; j++)
		if (bn->e[j].proto == proto)
			return bn->e[j].name;
	return NULL;
}

struct coro_arg {
	FILE *f;
	int json;
	int count;
	const struct body_names *names;
	struct target *t;
	size_t locals_length;
	struct dump_vars *dv;      /* --locals: each coroutine's variables, else NULL */
	const struct fiber_list *fl; /* Tarantool's fibers, or NULL (docs/coroutines.md §2) */
	char *fl_met;              /* per fiber of FL: its coroutine was listed */
};

/* The body function of a coroutine: its outermost Lua frame, as
 * "worker (w.lua:2)" (the line it is defined on), named by a variable
 * that holds it (BN), else by the frame ("function <w.lua:2>"), into
 * BUF; NULL when the stack has no Lua frame. */
static const char *coroutine_body(const struct stack *st, const struct body_names *bn, char *buf,
				  size_t len)
{
	for (int i = st->n - 1; i >= 0; i--) {
		const struct frame *fr = &st->f[i];
		if (fr->kind != FRAME_LUA)
			continue;
		const char *nm = body_name(bn, fr->addr);
		if (nm && fr->firstline > 0 && fr->file)
			snprintf(buf, len, "%s (%s:%d)", nm, fr->file, (int)fr->firstline);
		else if (fr->firstline > 0 && fr->file && strncmp(fr->name, "function <", 10) != 0)
			snprintf(buf, len, "%s (%s:%d)", fr->name, fr->file, (int)fr->firstline);
		else
			frame_label(fr, buf, len, 0);
		for (char *c = buf; *c; c++)
			if ((unsigned char)*c < 32)
				*c = '?';
		return buf;
	}
	return NULL;
}

static void print_coroutine(void *arg, uint64_t addr, const char *status, const struct stack *st,
			    int err)
{
	struct coro_arg *ca = arg;
	char buf[1024], body[512];
	const char *bname = coroutine_body(st, ca->names, body, sizeof body);
	int cur = 0;
	/* a Tarantool fiber's coroutine: the fiber's state; another one the
	 * VM calls running is not while the cord runs no Lua (the event
	 * loop's epoll_wait: g->cur_L is left as it was) */
	const struct fiber_info *fi = ca->fl ? fiber_list_find(ca->fl, addr) : NULL;
	if (fi) {
		status = fi->state;
		ca->fl_met[fi - ca->fl->f] = 1;
	} else if (ca->fl && ca->fl->running && !strcmp(status, "running")) {
		status = "normal";
	}
	if (ca->dv) {
		dump_vars_clear(ca->dv);
		ca->t->vm_ops->locals(ca->t->vm, ca->t, NULL, ca->locals_length, dump_vars_add, ca->dv);
	}
	if (ca->json) {
		fprintf(ca->f, "%s{\"addr\":\"0x%llx\",\"status\":", ca->count ? "," : "",
			(unsigned long long)addr);
		out_put_json(ca->f, status);
		if (fi) {
			fprintf(ca->f, ",\"fiber\":{\"id\":%u,\"name\":", fi->fid);
			out_put_json(ca->f, fi->name);
			fputc('}', ca->f);
		}
		if (bname) {
			fputs(",\"body\":", ca->f);
			out_put_json(ca->f, bname);
		}
		if (err < 0) {
			fputs(",\"error\":", ca->f);
			out_put_json(ca->f, err_text(err));
		}
		fputs(",\"frames\":[", ca->f);
		for (int i = 0; i < st->n; i++) {
			if (i)
				fputc(',', ca->f);
			fputs("{\"kind\":", ca->f);
			out_put_json(ca->f, frame_kind_name(st->f[i].kind));
			fputs(",\"name\":", ca->f);
			out_put_json(ca->f, st->f[i].name);
			if (st->f[i].file) {
				fputs(",\"file\":", ca->f);
				out_put_json(ca->f, st->f[i].file);
			}
			if (st->f[i].line > 0)
				fprintf(ca->f, ",\"line\":%d", st->f[i].line);
			if (st->f[i].trace > 0)
				fprintf(ca->f, ",\"trace\":%d", st->f[i].trace);
			out_dump_frame_vars(ca->f, 1, ca->dv, &st->f[i], &cur);
			fputc('}', ca->f);
		}
		fputs("]}", ca->f);
	} else {
		if (bname)
			fprintf(ca->f, "Coroutine 0x%llx %s (%s)", (unsigned long long)addr, bname, status);
		else
			fprintf(ca->f, "Coroutine 0x%llx (%s)", (unsigned long long)addr, status);
		if (fi)
			fprintf(ca->f, " fiber %u \"%s\"", fi->fid, fi->name);
		fputc('\n', ca->f);
		if (err < 0)
			fprintf(ca->f, "    <error: %s>\n", err_text(err));
		for (int i = 0; i < st->n; i++) {
			frame_label(&st->f[i], buf, sizeof buf, 1);
			for (char *c = buf; *c; c++)
				if ((unsigned char)*c < 32)
					*c = '?';
			fprintf(ca->f, "    %s", buf);
			if (st->f[i].trace > 0)
				fprintf(ca->f, " [JIT trace %d]", st->f[i].trace);
			fputc('\n', ca->f);
			out_dump_frame_vars(ca->f, 0, ca->dv, &st->f[i], &cur);
		}
	}
	ca->count++;
}

/* Per-thread state of one dump: the state letter of each of the NTH
 * threads and, with --all-coroutines (HOLD), the stops that hold them
 * until the coroutines are listed and what the coroutine walk needs of
 * each held thread. */
struct dump_hold {
	char *states;
	int *stoprc;
	struct ptrace_stop *stops;
	struct thread_snap *held;
	int nheld;
};

static void dump_hold_free(struct dump_hold *h)
{
	free(h->states);
	free(h->stoprc);
	free(h->stops);
	free(h->held);
}

/* Allocate H for NTH threads; 0 or -LS_E_NOMEM (H freed). */
static int dump_hold_alloc(struct dump_hold *h, int nth, int hold)
{
	size_t n = (size_t)nth + 1;
	memset(h, 0, sizeof *h);
	h->states = calloc(n, 1);
	if (hold) {
		h->stoprc = calloc(n, sizeof *h->stoprc);
		h->stops = calloc(n, sizeof *h->stops);
		h->held = calloc(n, sizeof *h->held);
	}
	if (!h->states || (hold && (!h->stoprc || !h->stops || !h->held))) {
		dump_hold_free(h);
		return -LS_E_NOMEM;
	}
	return 0;
}

/* Release the threads H holds (of NTH). */
static void dump_release(struct dump_hold *h, int nth, int core)
{
	for (int i = 0; i < nth && !core; i++)
		if (h->states[i] != '?' && h->stoprc[i] == 0)
			ptrace_release(&h->stops[i]);
}

/* --all-coroutines of Tarantool: every live fiber of the main cord (FL),
 * its id, name, state and coroutine (MET: listed above), then what the
 * cord runs when no Lua fiber runs; text "Fiber 103 "alpha" (suspended)
 * coroutine 0x...", JSON "fibers":[{"id","name","state","coroutine"}],
 * "fiber_running", "fibers_cut". */
static void dump_fibers(FILE *f, int json, const struct fiber_list *fl, const char *met)
{
	if (json) {
		fputs(",\"fibers\":[", f);
		for (int i = 0; i < fl->n; i++) {
			const struct fiber_info *fi = &fl->f[i];
			fprintf(f, "%s{\"id\":%u,\"name\":", i ? "," : "", fi->fid);
			out_put_json(f, fi->name);
			fprintf(f, ",\"state\":\"%s\"", fi->state);
			if (fi->L)
				fprintf(f, ",\"coroutine\":\"0x%llx\"", (unsigned long long)fi->L);
			if (fi->L && !met[i])
				fputs(",\"coroutine_listed\":false", f);
			fputc('}', f);
		}
		fputc(']', f);
		if (fl->running) {
			fputs(",\"fiber_running\":", f);
			out_put_json(f, fl->running);
		}
		if (fl->cut) {
			fputs(",\"fibers_cut\":", f);
			out_put_json(f, fl->cut);
		}
		return;
	}
	fprintf(f, "\nFibers (%s, main cord): %d%s%s\n", fl->layout, fl->n,
		fl->running ? ", running: " : "", fl->running ? fl->running : "");
	for (int i = 0; i < fl->n; i++) {
		const struct fiber_info *fi = &fl->f[i];
		fprintf(f, "Fiber %u \"%s\" (%s)", fi->fid, fi->name, fi->state);
		if (fi->L)
			fprintf(f, " coroutine 0x%llx%s", (unsigned long long)fi->L,
				met[i] ? "" : " (not met on the VM's lists)");
		else
			fputs(" (no Lua)", f);
		fputc('\n', f);
	}
	if (fl->cut)
		fprintf(f, "<fiber list cut: %s>\n", fl->cut);
}

/* --all-coroutines: list the coroutines of T while the threads are held
 * (H), say where a bound cut the list. */
static void dump_coroutines(FILE *f, const struct cli_opts *o, struct target *t, struct dump_hold *h,
			    const struct body_names *bn)
{
	struct dump_vars dv = { 0 };
	struct coro_arg ca = { f, o->json, 0, bn, t, o->locals_length,
			       o->locals && t->vm_ops->locals ? &dv : NULL, NULL, NULL };
	struct fiber_list fl;
	char why[256] = "";
	int nfib = !strcmp(t->vm_ops->family, "luajit") ? fiber_tarantool_list(t, &fl, why, sizeof why)
							 : -LS_E_NOTLUA;
	if (nfib == -LS_E_UNSUPPORTED)
		msg_error("pid %d: Tarantool fibers not listed: %s", (int)o->pid, why);
	else if (nfib < 0 && nfib != -LS_E_NOTLUA)
		msg_debug(1, "pid %d: Tarantool fibers: %s", (int)o->pid, err_text(nfib));
	if (nfib >= 0 && (ca.fl_met = calloc((size_t)fl.n + 1, 1)))
		ca.fl = &fl;
	if (o->json)
		fputs(",\"coroutines\":[", f);
	else
		fputc('\n', f);
	const char *cut = NULL;
	int n = t->vm_ops->coroutines(t->vm, t, h->held, h->nheld, print_coroutine, &ca, &cut);
	if (o->json)
		fputc(']', f);
	/* a bound stopped the list: say so where it is cut */
	if (n >= 0 && cut && o->json) {
		fputs(",\"coroutines_cut\":", f);
		out_put_json(f, cut);
	} else if (n >= 0 && cut) {
		fprintf(f, "<coroutine list cut: %s>\n", cut);
	}
	if (ca.fl)
		dump_fibers(f, o->json, &fl, ca.fl_met);
	if (nfib >= 0)
		fiber_list_free(&fl);
	free(ca.fl_met);
	dump_vars_clear(&dv);
	free(dv.f);
	if (n < 0)
		msg_error("pid %d: listing coroutines failed: %s", (int)o->pid, err_text(n));
}

/* -s: one line for a process that is not dumped (PID, its command line
 * when readable, E and WHY): text "Process PID: CMD" then
 * "    <not dumped: ...>", JSON {"pid":..,"cmdline":..,"error":..,"reason":..}. */
static void dump_skipped(FILE *f, const struct cli_opts *o, pid_t pid, int e, const char *why)
{
	char cmd[512] = "";
	proc_cmdline(pid, cmd, sizeof cmd);
	if (o->json) {
		fprintf(f, "{\"pid\":%d,\"cmdline\":", (int)pid);
		out_put_json(f, cmd);
		fputs(",\"error\":", f);
		out_put_json(f, err_text(e));
		if (why && *why) {
			fputs(",\"reason\":", f);
			out_put_json(f, why);
		}
		fputc('}', f);
	} else {
		fprintf(f, "Process %d: %s\n    <not dumped: %s%s%s>\n", (int)pid, cmd, err_text(e),
			why && *why ? ": " : "", why && *why ? why : "");
	}
}

/* Dump process PID. SUB (-s): a process without Lua, or one that can't
 * be opened, gets one line (dump_skipped) and no stacks; errors are not
 * printed to stderr but returned. Returns 0, or -LS_E_* (SUB: the
 * process was listed as not dumped), or (not SUB) an exit status > 0
 * after the message. */
/* What the walks of one dump's threads share. */
struct dump_ctx {
	struct cli_opts *o;
	struct target *t;
	pid_t pid;
	FILE *f;
	const char *desc;      /* the runtime's description, or NULL */
	char vmjson[600];      /* the same as a JSON object, when desc */
	struct sampler_opts so;
	int hold;              /* threads held stopped for the whole dump */
	int vars;              /* variables read (--locals, coroutine names) */
	int coros;             /* --all-coroutines */
	struct thread_snap ts;
	struct stack st;
	struct dump_vars dv;
	struct body_names bn;
	struct dump_hold h;
	int shown;
};

/* The process's header: pid, command line, runtime (and the core's). */
static void dump_header(struct dump_ctx *d)
{
	struct target *t = d->t;
	FILE *f = d->f;
	d->desc = t->vm && t->vm_ops->describe ? t->vm_ops->describe(t->vm) : NULL;
	if (d->desc) {
		FILE *mf = fmemopen(d->vmjson, sizeof d->vmjson - 1, "w");
		if (mf) {
			fprintf(mf, "{\"runtime\":\"%s\",\"description\":", t->vm_ops->family);
			out_put_json(mf, d->desc);
			fputc('}', mf);
			fclose(mf);
		}
	}
	if (d->o->json) {
		fprintf(f, "{\"pid\":%d,\"cmdline\":", (int)d->pid);
		out_put_json(f, t->cmdline);
		if (d->desc) {
			fputs(",\"vm\":", f);
			fputs(d->vmjson, f);
		}
		if (t->core)
			dump_core_header(f, d->o, t);
		fputs(",\"threads\":[", f);
	} else {
		fprintf(f, "Process %d: %s\n", (int)d->pid, t->cmdline);
		if (d->desc)
			fprintf(f, "Runtime: %s\n", d->desc);
		if (t->core)
			dump_core_header(f, d->o, t);
	}
}

/* Thread I (TH, in STATE) sampled and shown; a held one's snapshot kept
 * for the coroutine walk. */
static void dump_thread(struct dump_ctx *d, const struct proc_thread *th, int i, char state)
{
	struct target *t = d->t;
	struct walk_info info;
	struct sampler_opts sh = d->so;
	sh.held = (d->hold && d->h.stoprc[i] == 0) || t->core;
	if (t->core) /* no stop: the registers the core holds */
		sh.regs = &t->core->th[i].regs;
	d->ts.want_vars = d->vars;
	memset(&info, 0, sizeof info);
	stack_clear(&d->st);
	int rc = d->hold ? d->h.stoprc[i] : 0;
	uint64_t busy_until = 0;
	for (int k = 0; (!d->hold || sh.held) && k < DUMP_RETRIES; k++) {
		rc = sampler_sample_thread(t, th->tid, state, -1, &sh, &d->ts, &d->st, &info, NULL);
		/* a thread a loaded machine did not run within the stop
		 * timeout: its stop stays pending, and is taken when it
		 * comes, up to DUMP_STOP_WAIT_NS in all (not a retry) */
		if (rc == -LS_E_BUSY) {
			uint64_t now = time_now_ns();
			if (!busy_until)
				busy_until = now + DUMP_STOP_WAIT_NS;
			if (now < busy_until) {
				struct timespec nap = { 0, 5 * 1000000L };
				nanosleep(&nap, NULL);
				k--;
				continue;
			}
		}
		/* again after a torn read, or once the walker could look
		 * for a state it did not know (not while the thread was held) */
		if (rc != -LS_E_TORN && rc != -LS_E_GARBAGE && !(rc == 0 && info.discover))
			break;
		if (sh.held && !t->core && (rc == -LS_E_TORN || rc == -LS_E_GARBAGE) &&
		    k + 1 < DUMP_RETRIES) {
			/* held where the VM's state is between two consistent
			 * ones (PUC's luaD_poscall popping a CallInfo): let
			 * this thread run a moment and hold it again; the
			 * others stay held, so the dump is still one moment
			 * for everything listed after it */
			ptrace_release(&d->h.stops[i]);
			struct timespec nap = { 0, 1000000L };
			nanosleep(&nap, NULL);
			d->h.stoprc[i] = ptrace_stop(th->tid, d->so.stop_timeout_ns, &d->h.stops[i]);
			if (d->h.stoprc[i] < 0) {
				sh.held = 0;
				rc = d->h.stoprc[i];
				break;
			}
			stack_clear(&d->st);
			memset(&info, 0, sizeof info);
		}
	}
	if (t->core && rc == -LS_E_TORN)
		rc = -LS_E_GARBAGE; /* a core does not run: not torn, inconsistent */
	if (d->hold && sh.held) {
		/* what the coroutine walk needs of it: registers, capture */
		struct thread_snap *hs = &d->h.held[d->h.nheld++];
		hs->tid = d->ts.tid;
		hs->state = d->ts.state;
		hs->regs = d->ts.regs;
		memcpy(hs->vm_data, d->ts.vm_data, sizeof d->ts.vm_data);
		hs->mem = &t->mem.base;
	}
	if (rc == -LS_E_GONE)
		return;
	dump_vars_clear(&d->dv);
	if (d->vars && rc == 0 && info.lua_frames > 0) {
		int lr = t->vm_ops->locals(t->vm, t, &d->ts, d->o->locals_length, dump_vars_add, &d->dv);
		if (lr < 0)
			msg_debug(1, "pid %d: tid %d: locals: %s", (int)d->pid, (int)th->tid, err_text(lr));
		if (d->coros)
			body_names_add(&d->bn, &d->dv);
	}
	const char *err = rc < 0 ? err_text(rc) : NULL;
	struct dump_vars *dv = d->o->locals ? &d->dv : NULL;
	if (d->o->json) {
		if (d->shown)
			fputc(',', d->f);
		out_dump_thread_json(d->f, th->tid, th->name, state, &d->st, d->desc ? d->vmjson : NULL,
				     info.vmstate, err, d->ts.native.truncated, dv);
	} else {
		if (d->shown)
			fputc('\n', d->f);
		out_dump_thread_text(d->f, th->tid, th->name, state, &d->st, info.vmstate, err,
				     d->ts.native.truncated, dv);
	}
	d->shown++;
}

static int dump_pid(struct cli_opts *o, pid_t pid, int sub)
{
	struct target *t;
	int vmrc;
	char why[512] = "";
	int rc;
	if (o->core) { /* a core file: dump_core_open() says what it lacks */
		if ((rc = dump_core_open(o, &t, &vmrc)) != 0)
			return rc;
		pid = o->pid; /* the core's */
	} else {
		rc = target_open(pid, !o->native_only, &t, &vmrc, why, sizeof why);
		if (rc < 0 && sub) {
			dump_skipped(stdout, o, pid, rc == -LS_E_GONE ? -LS_E_EXITED : rc, NULL);
			return rc;
		}
		if (rc < 0)
			return msg_err_pid(pid, rc);
	}
	if (sub && vmrc < 0 && !o->native_only) {
		dump_skipped(stdout, o, pid, vmrc == -LS_E_UNSUPPORTED ? vmrc : -LS_E_NOTLUA,
			     vmrc == -LS_E_UNSUPPORTED ? why : NULL);
		target_close(t);
		return vmrc == -LS_E_UNSUPPORTED ? vmrc : -LS_E_NOTLUA;
	}
	if (!t->core && vmrc == -LS_E_UNSUPPORTED)
		msg_error("pid %d: unsupported runtime: %s; showing native stacks only", (int)pid, why);
	else if (!t->core && vmrc < 0)
		msg_debug(1, "pid %d: no Lua runtime found; showing native stacks only", (int)pid);

	struct dump_ctx *d = calloc(1, sizeof *d);
	if (!d) {
		target_close(t);
		return msg_err_pid(pid, -LS_E_NOMEM);
	}
	d->o = o;
	d->t = t;
	d->pid = pid;
	d->f = stdout;
	sampler_opts_default(&d->so);
	d->so.idle = 1;
	d->so.walk_stopped = 1;
	d->so.native = o->native;
	d->so.stack_copy_bytes = 64 * 1024;
	d->so.stop_timeout_ns = 1000 * 1000000ull;

	struct proc_thread *th;
	int nth;
	rc = t->core ? dump_core_threads(t, &th, &nth) : proc_threads(pid, &th, &nth);
	if (rc < 0) {
		free(d);
		target_close(t);
		return msg_err_pid(pid, rc == -LS_E_GONE ? -LS_E_EXITED : rc);
	}
	dump_header(d);
	/* --all-coroutines: every thread is held stopped from before the
	 * first walk until the coroutines are listed, so that the list and
	 * the threads' stacks are one moment (a coroutine that runs on a
	 * thread is walked from its registers) */
	d->coros = o->all_coroutines && t->vm && t->vm_ops->coroutines;
	/* --locals: values are read while the thread is still stopped, so
	 * every thread is held the same way */
	int locals = o->locals && t->vm && t->vm_ops->locals;
	d->hold = d->coros || locals;
	/* the variables are read for --all-coroutines too: they name the
	 * coroutines' body functions */
	d->vars = (locals || d->coros) && t->vm_ops->locals;
	if (dump_hold_alloc(&d->h, nth, d->hold) < 0) {
		free(th);
		free(d);
		target_close(t);
		return msg_err_pid(pid, -LS_E_NOMEM);
	}
	char *states = d->h.states;
	for (int i = 0; i < nth; i++) {
		states[i] = t->core ? th[i].state : proc_thread_state(pid, th[i].tid);
		if (d->hold && states[i] != '?' && !t->core)
			d->h.stoprc[i] = ptrace_stop(th[i].tid, d->so.stop_timeout_ns, &d->h.stops[i]);
	}
	for (int i = 0; i < nth; i++)
		if (states[i] != '?') /* gone since listing */
			dump_thread(d, &th[i], i, states[i]);
	if (o->json)
		fputc(']', d->f);
	if (d->coros)
		dump_coroutines(d->f, o, t, &d->h, &d->bn);
	if (d->hold)
		dump_release(&d->h, nth, t->core != NULL);
	dump_vars_clear(&d->dv);
	free(d->dv.f);
	free(d->bn.e);
	if (o->json)
		fputs("}\n", d->f);
	fflush(d->f);
	ptrace_reap_pending();
	thread_snap_free(&d->ts);
	stack_free(&d->st);
	dump_hold_free(&d->h);
	free(th);
	int shown = d->shown;
	free(d);
	int status = t->core ? dump_core_status(o, t, vmrc) : 0;
	target_close(t);
	if (shown == 0 && sub)
		return -LS_E_EXITED;
	if (shown == 0)
		return msg_err_pid(pid, -LS_E_EXITED);
	return status;
}

#define DUMP_MAX_PROCS 4096  /* processes dump -s lists; past it, it says so */

/* The processes to dump: ROOTS[NROOTS] (--pid, or --pgrep's matches)
 * and, SUB (-s), their descendants, parents before children (breadth
 * first, luaspy itself and repeats left out), into *OUT (the caller
 * frees it). Returns the count; *CUT is set when DUMP_MAX_PROCS stopped
 * the list. */
static int dump_tree(const pid_t *roots, int nroots, int sub, pid_t **out, int *cut)
{
	pid_t *list = malloc(DUMP_MAX_PROCS * sizeof *list), *kids = NULL;
	size_t capkids = 0;
	int n = 0;
	*cut = 0;
	if (!list)
		return -LS_E_NOMEM;
	for (int i = 0; i < nroots && n < DUMP_MAX_PROCS; i++)
		list[n++] = roots[i];
	for (int i = 0; sub && i < n; i++) {
		int k = proc_children(list[i], &kids, &capkids);
		for (int j = 0; j < k; j++) {
			int seen = kids[j] == getpid();
			for (int m = 0; m < n && !seen; m++)
				seen = list[m] == kids[j];
			if (seen)
				continue;
			if (n == DUMP_MAX_PROCS) {
				*cut = 1;
				break;
			}
			list[n++] = kids[j];
		}
	}
	free(kids);
	*out = list;
	return n;
}

int cmd_dump(struct cli_opts *o)
{
	int pg = pgrep_resolve(o);
	if (pg)
		return pg;
	if (!o->subprocesses && o->npids < 2)
		return dump_pid(o, o->pid, 0);
	if (!proc_alive(o->pid) && o->npids < 2)
		return msg_err_pid(o->pid, -LS_E_NOPID);
	pid_t *list;
	int cut;
	int n = o->npids ? dump_tree(o->pids, o->npids, o->subprocesses, &list, &cut)
			 : dump_tree(&o->pid, 1, 1, &list, &cut);
	if (n < 0)
		return msg_err_pid(o->pid, n);
	FILE *f = stdout;
	if (o->json)
		fputs("{\"processes\":[", f);
	int lua = 0, first_rc = 0;
	for (int i = 0; i < n; i++) {
		if (i)
			fputs(o->json ? "," : "\n", f);
		fflush(f);
		int rc = dump_pid(o, list[i], 1);
		if (rc == 0)
			lua++;
		if (i == 0)
			first_rc = rc;
	}
	if (o->json) {
		fputc(']', f);
		if (cut)
			fprintf(f, ",\"processes_cut\":\"more than %d processes\"", DUMP_MAX_PROCS);
		fputs("}\n", f);
	} else if (cut) {
		fprintf(f, "\n<process list cut: more than %d processes>\n", DUMP_MAX_PROCS);
	}
	fflush(f);
	free(list);
	if (lua > 0)
		return 0;
	/* nothing dumped: the root's reason, as without -s */
	return msg_err_pid(o->pid, first_rc < 0 && first_rc != -LS_E_EXITED ? first_rc : -LS_E_NOTLUA);
}
