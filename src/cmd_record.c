/* cmd_record.c: `luaspy record`: sample into a profile and write it. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include "cli.h"
#include "elf_sym.h"
#include "err.h"
#include "msg.h"
#include "out.h"
#include "perfmap.h"
#include "period_out.h"
#include "pgrep.h"
#include "profile.h"
#include "profile_read.h"
#include "session.h"
#include "timeutil.h"
#include "upload.h"
#include "vm.h"

/* Can we write PATH? Tried before sampling, so a run is not lost to an
 * output that cannot be written (-o /proc/x.svg): a new file is created
 * and removed again, an existing one opened for writing, and its
 * directory must take the temporary file out_write_file renames. 0 or
 * -errno. */
static int check_output(const char *path)
{
	struct stat sb;
	if (stat(path, &sb) == 0 && (S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode)))
		return 0; /* written in place (record_write_file): opening a FIFO would wait for its reader */
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd >= 0) {
		close(fd);
		unlink(path);
		return 0;
	}
	if (errno != EEXIST)
		return -errno;
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	close(fd);
	char *dup = strdup(path);
	if (!dup)
		return -ENOMEM;
	int rc = access(dirname(dup), W_OK | X_OK) == 0 ? 0 : -errno;
	free(dup);
	return rc;
}

struct status {
	int tty;
	int printed;
	struct period *per;   /* --period, or NULL */
};

static void resolve_line(struct frame *fr, void *arg)
{
	(void)arg;
	symtab_resolve_line(fr);
}

/* record --gc (gc_filter.h, docs/gc.md): what was left out, after the
 * "Samples:" line (which counts the samples kept). */
static void record_say_gc(const struct cli_opts *o, const struct session_stats *st)
{
	if (!o->gc)
		return;
	fprintf(stderr, "--gc: %llu samples outside the GC, left out", (unsigned long long)st->gc_outside);
	if (st->gc_unknown)
		fprintf(stderr, "; %llu of processes whose collector was not found, left out",
			(unsigned long long)st->gc_unknown);
	if (st->gc_no_lua)
		fprintf(stderr, "; %llu kept in the GC with no Lua frame", (unsigned long long)st->gc_no_lua);
	if (st->gc_cut)
		fprintf(stderr, "; %llu in the GC left out: no Lua frame and the native walk cut short",
			(unsigned long long)st->gc_cut);
	fputc('\n', stderr);
}

/* -s or several --pgrep matches: the run ended and no process was Lua. */
static void record_say_nolua(const struct cli_opts *o, const struct session *s)
{
	if (o->npids > 1)
		msg_error("no Lua runtime appeared in the %d processes --pgrep '%s' matched%s", o->npids,
			  o->pgrep, o->subprocesses ? " or their descendants" : "");
	else
		msg_error("no Lua runtime appeared in pid %d or its descendants", (int)session_pid(s));
}

/* ------------------------------------------------------------ --period */

/* record --period: the profile is cut every period_ns (boundaries at
 * start + k * period, so they do not drift); each period's stacks move
 * into a profile of their own, written to the -o pattern, and the
 * sampling aggregate is reset, so memory stays that of one period (plus
 * the frames interned, which do not grow with run time). */
struct period {
	struct cli_opts *o;
	struct session *s;
	struct profile *p;        /* the aggregate session_run counts into */
	uint64_t period_ns;
	uint64_t run_start;       /* CLOCK_MONOTONIC at the start of the run */
	uint64_t end_ns;          /* monotonic end of --duration, or UINT64_MAX */
	uint64_t start;           /* this period: monotonic start */
	uint64_t start_unix;      /* ... and wall clock */
	uint64_t errors0;         /* session errors when this period began */
	unsigned long long n;     /* periods cut so far */
	unsigned long long written, failed; /* by the writer thread (__atomic) */
	unsigned long long dropped;         /* periods the full queue refused */
	uint64_t dropped_samples;           /* ... and their samples */
	uint64_t queued_samples;            /* samples of the periods handed to the writer and
	                                     * not done yet (__atomic) */
	int abandoned;                      /* the end gave up waiting: the writer runs no more
	                                     * job (__atomic) */
	int said_waiting;                   /* the end said it waits for the output */
};

/* One finished period on its way to the writer thread (period_out.h):
 * cut, its lines resolved and functions named on the sampling thread
 * (the symbol tables are that thread's), encoded, written and pushed on
 * the writer's. */
struct period_job {
	struct profile *q;        /* its stacks (owned) */
	unsigned long long n;     /* period number, from 1 */
	uint64_t from_ns, until_ns; /* Unix time, ns */
	pid_t pid;                /* the session's main process */
	const char *runtime;      /* session_runtime (interned), or NULL */
	char path[4096];          /* the file, "" for --upload alone */
	char cmd[512];            /* session_cmdline, copied */
	char title[600];          /* q's title points here */
};

/* The series name of --upload into OUT (LEN bytes):
 * APP{hostname=..,pid=PID[,process=PROC],runtime=..,TAGS} (Pyroscope's
 * labelset syntax; values made safe by upload_label_value). */
static void upload_name(const struct cli_opts *o, const struct period_job *j, char *out,
			size_t len, pid_t pid, const char *process)
{
	char app[128], v[128], host[256] = "";
	if (o->app) {
		snprintf(app, sizeof app, "%s", o->app);
	} else {
		/* the command's base name: "luajit" of "/usr/bin/luajit app.lua" */
		const char *cmd = j->cmd;
		const char *sp = strchr(cmd, ' ');
		size_t n = sp ? (size_t)(sp - cmd) : strlen(cmd);
		const char *sl = memrchr(cmd, '/', n);
		if (sl) {
			n -= (size_t)(sl + 1 - cmd);
			cmd = sl + 1;
		}
		char tmp[128];
		snprintf(tmp, sizeof tmp, "%.*s", (int)(n < 100 ? n : 100), cmd);
		upload_label_value(tmp, app, sizeof app);
		for (char *c = app; *c; c++)
			if (*c == ':' || *c == '/' || *c == '+')
				*c = '_';
		if (!upload_name_ok(app))
			snprintf(app, sizeof app, "luaspy");
	}
	gethostname(host, sizeof host - 1);
	size_t o2 = (size_t)snprintf(out, len, "%s{hostname=%s,pid=%d", app,
				     upload_label_value(host, v, sizeof v), (int)pid);
	if (process && o2 < len)
		o2 += (size_t)snprintf(out + o2, len - o2, ",process=%s",
				       upload_label_value(process, v, sizeof v));
	if (j->runtime && o2 < len) {
		/* "LuaJIT 2.1 GC64" of "LuaJIT 2.1 GC64, upstream ... (Debian ...)" */
		char rt[128];
		snprintf(rt, sizeof rt, "%s", j->runtime);
		rt[strcspn(rt, ",(")] = 0;
		size_t l = strlen(rt);
		while (l && rt[l - 1] == ' ')
			rt[--l] = 0;
		o2 += (size_t)snprintf(out + o2, len - o2, ",runtime=%s",
				       upload_label_value(rt, v, sizeof v));
	}
	for (int i = 0; i < o->ntags && o2 < len; i++) {
		const char *eq = strchr(o->tags[i], '=');
		o2 += (size_t)snprintf(out + o2, len - o2, ",%.*s=%s", (int)(eq - o->tags[i]),
				       o->tags[i], upload_label_value(eq + 1, v, sizeof v));
	}
	if (o2 < len)
		snprintf(out + o2, len - o2, "}");
}

/* Encode Q as pprof and queue it under NAME. */
static void upload_one(const struct cli_opts *o, const struct period_job *j,
		       const struct profile *q, const char *name, uint64_t from_s, uint64_t until_s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f) {
		msg_error("period %llu: out of memory; not uploaded", j->n);
		return;
	}
	int rc = out_pprof_write(q, f);
	if (fclose(f) != 0 && !rc)
		rc = -ENOMEM;
	if (rc < 0) {
		free(buf);
		msg_error("period %llu: cannot encode the profile: %s", j->n, strerror(-rc));
		return;
	}
	if (upload_queue(buf, len, name, from_s, until_s, o->rate_hz) < 0)
		msg_debug(1, "period %llu: not queued for upload (out of memory, or larger than the "
			  "whole queue); dropped", j->n);
}

/* Most processes one period of -s uploads as series of their own; the
 * stacks of the others go in the root's series. */
#define UPLOAD_MAX_PROCESSES 256

/* Queue Q (one period, FROM..UNTIL ns since the epoch) for --upload: one
 * series, or with -s one per process (its root frame, "process PID
 * "CMD"", labels pid and process). */
static void period_upload(const struct cli_opts *o, const struct period_job *j)
{
	const struct profile *q = j->q;
	/* from/until in whole seconds (the API's unit), until > from */
	uint64_t from_s = j->from_ns / 1000000000ull, until_s = j->until_ns / 1000000000ull;
	if (until_s <= from_s)
		until_s = from_s + 1;
	char name[1024];
	if (!o->subprocesses && !o->pgrep) {
		upload_name(o, j, name, sizeof name, j->pid, NULL);
		upload_one(o, j, q, name, from_s, until_s);
		return;
	}
	/* the roots (outermost frames naming a process), at most
	 * UPLOAD_MAX_PROCESSES; slot 0 collects the rest */
	uint32_t root[UPLOAD_MAX_PROCESSES + 1];
	size_t nroot = 1, ns = profile_nstacks(q);
	root[0] = UINT32_MAX;
	for (size_t i = 0; i < ns; i++) {
		pid_t tid;
		const uint32_t *ids;
		size_t depth;
		uint64_t count;
		profile_stack(q, i, &tid, &ids, &depth, &count);
		const struct frame *fr = depth ? profile_frame(q, ids[0]) : NULL;
		if (!fr || fr->kind != FRAME_ROOT || strncmp(fr->name, "process ", 8))
			continue;
		size_t k = 1;
		while (k < nroot && root[k] != ids[0])
			k++;
		if (k == nroot && nroot <= UPLOAD_MAX_PROCESSES)
			root[nroot++] = ids[0];
	}
	struct stack st = { 0 };
	for (size_t k = 0; k < nroot; k++) {
		struct profile *qr = profile_new();
		if (!qr)
			break;
		for (size_t i = 0; i < ns; i++) {
			pid_t tid;
			const uint32_t *ids;
			size_t depth;
			uint64_t count;
			profile_stack(q, i, &tid, &ids, &depth, &count);
			size_t r = 1;
			while (r < nroot && (!depth || root[r] != ids[0]))
				r++;
			if ((k == 0 && r < nroot) || (k > 0 && r != k) || !count)
				continue;
			stack_clear(&st);
			for (size_t d = depth; d-- > 0;)
				stack_push(&st, profile_frame(q, ids[d]));
			profile_add(qr, tid, &st, count);
		}
		if (profile_total(qr) > 0 || (k == 0 && nroot == 1)) {
			*profile_meta(qr) = *profile_meta_const(q);
			profile_meta(qr)->samples = profile_total(qr);
			int pid = (int)j->pid;
			char proc[128] = "";
			if (k > 0) {
				/* "process 42 "/usr/bin/luajit app.lua"": pid and command's base name */
				const char *rn = profile_frame(q, root[k])->name;
				const char *qt = strchr(rn, '"');
				pid = atoi(rn + 8);
				if (qt) {
					size_t n = strcspn(qt + 1, " \"");
					const char *sl = memrchr(qt + 1, '/', n);
					const char *b = sl ? sl + 1 : qt + 1;
					n -= (size_t)(b - (qt + 1));
					snprintf(proc, sizeof proc, "%.*s", (int)(n < 100 ? n : 100), b);
				}
			}
			upload_name(o, j, name, sizeof name, pid, k > 0 && proc[0] ? proc : NULL);
			upload_one(o, j, qr, name, from_s, until_s);
		}
		profile_free(qr);
	}
	stack_free(&st);
}

/* PAT with %p (pid), %t (UTC start, 20260102T030405Z), %n (counter from
 * 1) and %% expanded into BUF (LEN bytes). -1 when it does not fit or
 * PAT holds another %-sequence. */
static int period_path(const char *pat, pid_t pid, uint64_t unix_ns, unsigned long long n,
		       char *buf, size_t len)
{
	size_t o = 0;
	for (const char *c = pat; *c; c++) {
		char tmp[40];
		const char *add = tmp;
		if (*c != '%') {
			tmp[0] = *c;
			tmp[1] = 0;
		} else if (c[1] == 'p') {
			snprintf(tmp, sizeof tmp, "%d", (int)pid);
			c++;
		} else if (c[1] == 'n') {
			snprintf(tmp, sizeof tmp, "%llu", n);
			c++;
		} else if (c[1] == 't') {
			time_t t = (time_t)(unix_ns / 1000000000ull);
			struct tm tm;
			gmtime_r(&t, &tm);
			strftime(tmp, sizeof tmp, "%Y%m%dT%H%M%SZ", &tm);
			c++;
		} else if (c[1] == '%') {
			add = "%";
			c++;
		} else {
			return -1;
		}
		size_t l = strlen(add);
		if (o + l >= len)
			return -1;
		memcpy(buf + o, add, l);
		o += l;
	}
	buf[o] = 0;
	return 0;
}

/* Does PAT name one file per period (%n or %t)? */
static int period_pattern_ok(const char *pat)
{
	for (const char *c = pat; *c; c++)
		if (*c == '%' && c[1]) {
			if (c[1] == 'n' || c[1] == 't')
				return 1;
			c++;
		}
	return 0;
}

/* The writers record can call on any thread (out_write_file's table is
 * out_file.c's own). */
static int (*const format_writer[OUT_NFORMATS])(const struct profile *, FILE *) = {
	[OUT_FLAMEGRAPH] = out_svg_write, [OUT_FOLDED] = out_folded_write,
	[OUT_SPEEDSCOPE] = out_speedscope_write, [OUT_PPROF] = out_pprof_write,
	[OUT_CALLGRIND] = out_callgrind_write,
};

/* Write Q as FMT to PATH: a FIFO or a character device (a pipe to a log
 * shipper, /dev/stdout) is opened and written in place, waiting for its
 * reader; anything else goes through out_write_file (a temporary file
 * renamed). 0 or -errno. */
static int record_write_file(const struct profile *q, int fmt, const char *path)
{
	struct stat sb;
	if (stat(path, &sb) < 0 || !(S_ISFIFO(sb.st_mode) || S_ISCHR(sb.st_mode)))
		return out_write_file(q, fmt, path);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = -errno;
		close(fd);
		return e;
	}
	errno = 0;
	int rc = format_writer[fmt](q, f);
	if (rc == 0 && fflush(f) != 0)
		rc = errno > 0 ? -errno : -EIO;
	if (rc == 0)
		rc = out_ferror(f);
	if (fclose(f) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* -v: luaspy's own heap after period N was written and freed, what
 * bench/fleet-rss.sh reads to tell live data from RSS (docs/report.md §5). */
static void period_say_heap(unsigned long long n)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
	if (msg_verbose < 1)
		return;
	struct mallinfo2 mi = mallinfo2();
	msg_debug(1, "period %llu: luaspy's heap: %zu kB in use (%zu kB of it mmapped), %zu kB free "
		  "in the allocator (mallinfo2)", n, (mi.uordblks + mi.hblkhd) >> 10, mi.hblkhd >> 10,
		  mi.fordblks >> 10);
#else
	(void)n;
#endif
}

/* The writer thread's job (period_out_fn): push J to --upload, write
 * it to its file, count, free it. */
static void period_write(void *jv, void *arg)
{
	struct period_job *j = jv;
	struct period *pr = arg;
	uint64_t samples = profile_meta_const(j->q)->samples;
	if (__atomic_load_n(&pr->abandoned, __ATOMIC_ACQUIRE)) {
		profile_free(j->q);
		free(j);
		return;
	}
	if (pr->o->upload)
		period_upload(pr->o, j);
	if (j->path[0] && !__atomic_load_n(&pr->abandoned, __ATOMIC_ACQUIRE)) {
		int wrc = record_write_file(j->q, pr->o->format, j->path);
		if (wrc < 0) {
			__atomic_add_fetch(&pr->failed, 1, __ATOMIC_RELAXED);
			msg_error("period %llu: cannot write '%s': %s", j->n, j->path, strerror(-wrc));
		} else {
			__atomic_add_fetch(&pr->written, 1, __ATOMIC_RELAXED);
			fprintf(stderr, "%sWrote %s of %llu samples to '%s'\n", isatty(2) ? "\r" : "",
				out_format_noun(pr->o->format),
				(unsigned long long)profile_meta_const(j->q)->samples, j->path);
		}
	}
	unsigned long long n = j->n;
	profile_free(j->q);
	free(j);
	__atomic_sub_fetch(&pr->queued_samples, samples, __ATOMIC_RELAXED);
	period_say_heap(n);
}

/* Cut the period that ends now: its stacks into a profile of their own
 * (lines resolved, functions named: the symbol tables are this
 * thread's), handed to the writer thread; the aggregate is reset. When
 * PERIOD_OUT_QUEUE_MAX periods wait already the period is dropped,
 * counted and said, unless FINAL (sampling is over: wait for room). */
static void period_cut(struct period *pr, uint64_t now, int final)
{
	const struct session_stats *st = session_stats(pr->s);
	uint64_t unix_now = time_unix_ns();
	struct profile *q = profile_new();
	struct period_job *j = calloc(1, sizeof *j);
	pr->n++;
	if (!q || !j || profile_add_filtered(q, pr->p, NULL) < 0) {
		profile_free(q);
		free(j);
		profile_reset(pr->p);
		__atomic_add_fetch(&pr->failed, 1, __ATOMIC_RELAXED);
		msg_error("period %llu: out of memory; its samples are lost", pr->n);
		goto next;
	}
	profile_reset(pr->p);
	j->q = q;
	j->n = pr->n;
	j->from_ns = pr->start_unix;
	j->until_ns = unix_now;
	j->pid = session_pid(pr->s);
	j->runtime = session_runtime(pr->s);
	snprintf(j->cmd, sizeof j->cmd, "%s", session_cmdline(pr->s));
	snprintf(j->title, sizeof j->title, "%s", j->cmd);
	struct profile_meta *m = profile_meta(q);
	m->title = j->title;
	m->pid = j->pid;
	m->rate_hz = pr->o->rate_hz;
	m->duration_ns = now - pr->start;
	m->start_unix_ns = pr->start_unix;
	m->samples = profile_total(q);
	m->errors = st->errors - pr->errors0;
	m->runtime = j->runtime;
	if (profile_name_functions(q) < 0)
		msg_debug(1, "out of memory: Lua functions keep their call-site names");
	if (pr->o->output &&
	    period_path(pr->o->output, m->pid, pr->start_unix, pr->n, j->path, sizeof j->path) < 0) {
		__atomic_add_fetch(&pr->failed, 1, __ATOMIC_RELAXED);
		msg_error("period %llu: the output name is too long", pr->n);
		j->path[0] = 0;
		if (!pr->o->upload) {
			profile_free(q);
			free(j);
			goto next;
		}
	}
	__atomic_add_fetch(&pr->queued_samples, m->samples, __ATOMIC_RELAXED);
	uint64_t t0 = time_now_ns();
	while (period_out_push(j) < 0) {
		if (final && !session_stop_signal) {
			/* the last period: wait for room, as record_wait_output waits */
			if (!pr->said_waiting && time_now_ns() - t0 >= 1000000000ull) {
				msg_error("waiting for the output of %d period(s) (a FIFO nobody reads?); "
					  "Ctrl-C drops them", period_out_pending() + 1);
				pr->said_waiting = 1;
			}
			struct timespec ts = { 0, 10 * 1000000L };
			nanosleep(&ts, NULL);
			continue;
		}
		/* the writer is PERIOD_OUT_QUEUE_MAX periods behind (a stalled
		 * disk, a FIFO nobody reads): sampling goes on, this period goes */
		__atomic_sub_fetch(&pr->queued_samples, m->samples, __ATOMIC_RELAXED);
		pr->dropped++;
		pr->dropped_samples += m->samples;
		if (pr->dropped == 1)
			msg_error("period %llu: %d periods wait for the output already: dropped (%llu samples); "
				  "more drops are counted, not said (-v says each)", pr->n,
				  PERIOD_OUT_QUEUE_MAX, (unsigned long long)m->samples);
		else
			msg_debug(1, "period %llu: %d periods wait for the output already: dropped (%llu samples)",
				  pr->n, PERIOD_OUT_QUEUE_MAX, (unsigned long long)m->samples);
		profile_free(q);
		free(j);
		break;
	}
next:
	pr->start = now;
	pr->start_unix = unix_now;
	pr->errors0 = st->errors;
}

/* Between samples: is a period boundary due? The last period of a
 * --duration run is left to the end (no sliver of a period after it). */
static void period_tick(struct period *pr)
{
	uint64_t now = time_now_ns();
	uint64_t due = pr->run_start + (pr->n + 1) * pr->period_ns;
	if (now < due || (pr->end_ns != UINT64_MAX && pr->end_ns - due < pr->period_ns / 10 + 1))
		return;
	period_cut(pr, now, 0);
}

static int status_tick(void *arg, const struct session_stats *st)
{
	struct status *ss = arg;
	if (ss->per)
		period_tick(ss->per);
	if (!ss->tty)
		return 0;
	double el = (double)st->elapsed_ns / 1e9;
	fprintf(stderr, "\rluaspy: %.1fs  samples %llu  errors %llu  rate %.1f Hz   ", el,
		(unsigned long long)st->samples, (unsigned long long)st->errors,
		el > 0 ? (double)st->ticks / el : 0.0);
	if (ss->per && ss->per->o->upload) {
		struct upload_counts uc;
		upload_counts(&uc);
		fprintf(stderr, "uploads %llu queued %llu failed %llu   ", (unsigned long long)uc.sent,
			(unsigned long long)uc.queued, (unsigned long long)uc.attempts_failed);
	}
	fflush(stderr);
	ss->printed = 1;
	return 0;
}

/* Seconds the end of a run waits for the upload queue to drain. */
#define UPLOAD_DRAIN_S 15.0

/* The end of record --period: every period queued is written (a FIFO:
 * once its reader comes), however long that takes, unless Ctrl-C (or
 * SIGTERM, SIGHUP) comes meanwhile: then what still waits is dropped,
 * counted, and the writer is left behind (its job ends with the
 * process). */
static void record_wait_output(struct period *pr)
{
	uint64_t t0 = time_now_ns();
	for (int n; (n = period_out_pending()) > 0;) {
		if (session_stop_signal) {
			__atomic_store_n(&pr->abandoned, 1, __ATOMIC_RELEASE);
			pr->dropped += (unsigned long long)n;
			pr->dropped_samples += __atomic_load_n(&pr->queued_samples, __ATOMIC_RELAXED);
			msg_error("%d period(s) not written: dropped at your request", n);
			return;
		}
		if (!pr->said_waiting && time_now_ns() - t0 >= 1000000000ull) {
			msg_error("waiting for the output of %d period(s) (a FIFO nobody reads?); "
				  "Ctrl-C drops them", n);
			pr->said_waiting = 1;
		}
		struct timespec ts = { 0, 20 * 1000000L };
		nanosleep(&ts, NULL);
	}
	period_out_finish();
}

/* record --period: sample, cutting a profile every period, until the
 * run ends; then the last period. Exit status as cmd_record's. */
static int record_periods(struct cli_opts *o, struct session *s, struct profile *p)
{
	/* static: a writer left waiting for a FIFO's reader at the end
	 * (see record_wait_output) may still read it after this returns */
	static struct period pr;
	pr = (struct period){ .o = o, .s = s, .p = p };
	pr.period_ns = (uint64_t)(o->period_s * 1e9);
	pr.run_start = pr.start = time_now_ns();
	pr.start_unix = time_unix_ns();
	pr.end_ns = o->duration_s > 0 ? pr.run_start + (uint64_t)(o->duration_s * 1e9) : UINT64_MAX;
	struct status ss = { isatty(2), 0, &pr };
	int e = period_out_start(period_write, &pr);
	if (e < 0) {
		msg_error("cannot start the output thread: %s", strerror(-e));
		profile_free(p);
		session_finish(s);
		return 1;
	}
	/* ticks often enough that a period ends within 50 ms of its time */
	session_run(s, p, 50 * 1000000ull, status_tick, &ss);
	if (ss.printed)
		fputc('\n', stderr);
	/* from here a stop signal drops the output still waiting */
	session_stop_signal = 0;
	if (profile_total(p) > 0 || pr.n == 0)
		period_cut(&pr, time_now_ns(), 1);
	record_wait_output(&pr);
	unsigned long long written = __atomic_load_n(&pr.written, __ATOMIC_RELAXED);
	unsigned long long failed = __atomic_load_n(&pr.failed, __ATOMIC_RELAXED);
	const struct session_stats *st = session_stats(s);
	int nolua = (o->subprocesses || o->npids > 1) && !session_runtime(s);
	if (nolua)
		record_say_nolua(o, s);
	session_report_lag(s);
	fprintf(stderr, "Samples: %llu  Errors: %llu  Periods: %llu written, %llu failed",
		(unsigned long long)st->samples, (unsigned long long)st->errors, written, failed);
	if (pr.dropped)
		fprintf(stderr, ", %llu dropped (%llu samples)", pr.dropped,
			(unsigned long long)pr.dropped_samples);
	fputc('\n', stderr);
	record_say_gc(o, st);
	struct upload_counts uc = { 0 };
	if (o->upload) {
		/* the last period and any backlog: a bounded wait */
		upload_finish(UPLOAD_DRAIN_S);
		upload_counts(&uc);
		fprintf(stderr, "Uploads: %llu sent, %llu failed attempts, %llu refused, %llu dropped\n",
			(unsigned long long)uc.sent, (unsigned long long)uc.attempts_failed,
			(unsigned long long)uc.rejected, (unsigned long long)uc.dropped);
		if (o->upload_queue)
			fprintf(stderr, "Upload queue '%s': %llu from an earlier run, %llu kept for the next\n",
				o->upload_queue, (unsigned long long)uc.earlier, (unsigned long long)uc.kept);
		if (uc.last_error[0] && (uc.rejected || uc.dropped || uc.kept))
			msg_error("upload to '%s': last failure: %s", o->upload, uc.last_error);
	}
	if (o->stats) {
		session_print_stats(s, stderr);
		fprintf(stderr, "periods: %llu written, %llu failed, %llu dropped of %llu samples (of %.0f s "
			"each; the output queue holds %d)\n", written, failed, pr.dropped,
			(unsigned long long)pr.dropped_samples, o->period_s, PERIOD_OUT_QUEUE_MAX);
		if (o->upload)
			fprintf(stderr, "uploads: %llu sent, %llu failed attempts, %llu refused, %llu dropped "
				"(queue: %u profiles, %zu MiB%s%s%s); %llu files not ours, %llu not written\n",
				(unsigned long long)uc.sent, (unsigned long long)uc.attempts_failed,
				(unsigned long long)uc.rejected, (unsigned long long)uc.dropped,
				o->upload_queue_max ? o->upload_queue_max :
				o->upload_queue ? UPLOAD_DISK_MAX : UPLOAD_QUEUE_MAX,
				o->upload_queue_mib ? (size_t)o->upload_queue_mib :
				(size_t)(o->upload_queue ? UPLOAD_DISK_MAX_BYTES : UPLOAD_QUEUE_MAX_BYTES) >> 20,
				o->upload_queue ? " in '" : "", o->upload_queue ? o->upload_queue : "",
				o->upload_queue ? "'" : "", (unsigned long long)uc.bad_files,
				(unsigned long long)uc.disk_failed);
	}
	profile_free(p);
	int code = session_finish(s);
	if (failed || pr.dropped || uc.rejected || uc.dropped)
		return 1;
	if (nolua && code == 0)
		return err_exit_code(LS_E_NOTLUA);
	return code;
}

/* Before sampling: --period's file pattern (and its default), the
 * --upload thread, -o writable. 0, or the exit status (the line said). */
static int record_prepare_outputs(struct cli_opts *o)
{
	if (o->period_s > 0) {
		if (!o->output && o->upload)
			goto upload;
		if (!o->output)
			o->output = o->format == OUT_PPROF ? "luaspy-%p-%t.pb.gz" :
				    o->format == OUT_FOLDED ? "luaspy-%p-%t.txt" :
				    o->format == OUT_SPEEDSCOPE ? "luaspy-%p-%t.json" :
				    o->format == OUT_CALLGRIND ? "callgrind.out.%p.%n" : "luaspy-%p-%t.svg";
		char path[4096];
		if (!period_pattern_ok(o->output) ||
		    period_path(o->output, 1, time_unix_ns(), 1, path, sizeof path) < 0) {
			msg_error("--period needs -o with %%n or %%t (one file per period) and no %%-sequence "
				  "but %%p, %%t, %%n, %%%%: '%s' (see 'luaspy --help')", o->output);
			return err_exit_code(LS_E_USAGE);
		}
		int rc = check_output(path);
		if (rc < 0) {
			msg_error("cannot write '%s': %s", path, strerror(-rc));
			return err_exit_code(LS_E_USAGE);
		}
upload:
		if (o->upload) {
			char why[300];
			struct upload_queue_opts uq = { o->upload_queue, o->upload_queue_max,
							(size_t)o->upload_queue_mib << 20 };
			if (upload_start(o->upload, o->upload_headers, o->nupload_headers, &uq, why,
					 sizeof why) < 0) {
				msg_error("--upload: %s", why);
				return err_exit_code(LS_E_USAGE);
			}
		}
	} else if (o->output) {
		int rc = check_output(o->output);
		if (rc < 0) {
			msg_error("cannot write '%s': %s", o->output, strerror(-rc));
			return err_exit_code(LS_E_USAGE);
		}
	}
	return 0;
}

/* P's metadata after the run of session S started at T0 (monotonic ns)
 * and U0 (Unix ns); TITLE (TITLELEN bytes) holds the title it points to. */
static void record_meta(struct profile *p, struct session *s, const struct cli_opts *o,
			char *title, size_t titlelen, uint64_t t0, uint64_t u0)
{
	const struct session_stats *st = session_stats(s);
	struct profile_meta *m = profile_meta(p);
	snprintf(title, titlelen, "%s", session_cmdline(s));
	m->title = title;
	m->pid = session_pid(s);
	m->rate_hz = o->rate_hz;
	m->duration_ns = time_now_ns() - t0;
	m->start_unix_ns = u0;
	m->samples = st->samples;
	m->errors = st->errors;
	m->runtime = session_runtime(s);
}

/* The lines on stderr after a run: lag, samples and errors, what helps
 * when most samples tore, --stats. */
static void record_summary(const struct cli_opts *o, struct session *s)
{
	const struct session_stats *st = session_stats(s);
	session_report_lag(s);
	fprintf(stderr, "Samples: %llu  Errors: %llu\n", (unsigned long long)st->samples,
		(unsigned long long)st->errors);
	record_say_gc(o, st);
	/* most errors are reads the running target tore (deep LuaJIT stacks
	 * walked after the release), or a frame shape the walker does not
	 * know (the target stopped makes no difference then): say what helps */
	uint64_t torn = st->err_by_kind[LS_E_GARBAGE] + st->err_by_kind[LS_E_TORN];
	uint64_t all = st->samples + st->errors + st->gc_outside + st->gc_unknown + st->gc_cut;
	if (!o->blocking && !o->nonblocking && torn * 10 > all && torn >= 10)
		msg_error("%llu of %llu samples could not be walked (inconsistent data: torn by the "
			  "running target, or a frame shape luaspy does not know); %s; if that fails too, "
			  "please report it with the output of `luaspy dump -v -v`",
			  (unsigned long long)torn, (unsigned long long)all,
			  session_sampler_perf(s)
			  ? "the perf sampler reads from the heap what it did not copy at the tick, so "
			    "the kept samples favour code that runs long between coroutine switches; "
			    "--sampler ptrace --blocking walks while the thread is stopped"
			  : "--blocking walks while the thread is stopped");
	if (o->stats)
		session_print_stats(s, stderr);
}

int cmd_record(struct cli_opts *o)
{
	char defname[64];
	int code = record_prepare_outputs(o);
	if (code)
		return code;
	int pg = pgrep_resolve(o);
	if (pg) {
		if (o->upload)
			upload_finish(0);
		return pg;
	}
	struct session *s;
	/* native lines are looked up once, at the end, not in the first
	 * sample (the DWARF of libc alone held it up by 65+ ms of CPU);
	 * periodic profiles carry none (symtab_set_lines) */
	symtab_set_lines(o->period_s > 0 ? SYMTAB_LINES_NONE : SYMTAB_LINES_LATER);
	code = session_start(o, &s);
	if (code) {
		if (o->upload)
			upload_finish(0);
		return code;
	}
	/* --perf-map: a writer process of its own (perfmap.h) */
	if (o->perf_map && (code = perfmap_record_start(session_pid(s), session_runtime(s),
							o->perf_map_append)) != 0) {
		session_finish(s);
		if (o->upload)
			upload_finish(0);
		return code;
	}
	if (!o->output && !o->period_s) {
		snprintf(defname, sizeof defname, "luaspy-%d.%s", (int)session_pid(s),
			 o->format == OUT_FOLDED ? "txt" : o->format == OUT_SPEEDSCOPE ? "json" :
			 o->format == OUT_PPROF ? "pb.gz" : o->format == OUT_CALLGRIND ? "callgrind" :
			 "svg");
		o->output = defname;
	}
	struct profile *p = profile_new();
	if (!p) {
		session_finish(s);
		return msg_err_pid(0, -LS_E_NOMEM);
	}
	if (o->period_s > 0)
		return record_periods(o, s, p);
	struct status ss = { isatty(2), 0, NULL };
	uint64_t t0 = time_now_ns(), u0 = time_unix_ns();
	int why = session_run(s, p, 250 * 1000000ull, status_tick, &ss);
	if (ss.printed)
		fputc('\n', stderr);
	char title[600];
	record_meta(p, s, o, title, sizeof title, t0, u0);
	if (why == END_EXITED)
		msg_debug(1, "target exited; writing the profile");
	if (profile_map_frames(p, resolve_line, NULL) < 0)
		msg_debug(1, "out of memory: native frames keep no source lines");
	if (profile_name_functions(p) < 0)
		msg_debug(1, "out of memory: Lua functions keep their call-site names");
	int wrc = out_write_file(p, o->format, o->output);
	int nolua = (o->subprocesses || o->npids > 1) && !session_runtime(s);
	if (nolua)
		record_say_nolua(o, s);
	record_summary(o, s);
	if (wrc < 0)
		msg_error("cannot write '%s': %s", o->output, strerror(-wrc));
	else
		fprintf(stderr, "Wrote %s to '%s'\n", out_format_noun(o->format), o->output);
	profile_free(p);
	code = session_finish(s);
	if (wrc < 0)
		return 1;
	/* as without -s: a run that met no Lua at all is "not a Lua process" */
	if (nolua && code == 0)
		return err_exit_code(LS_E_NOTLUA);
	return code;
}
