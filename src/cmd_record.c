/* cmd_record.c: `luaspy record`: sample into a profile and write it. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "elf_sym.h"
#include "err.h"
#include "msg.h"
#include "out.h"
#include "profile.h"
#include "session.h"
#include "timeutil.h"
#include "vm.h"

/* Can we write PATH? Tried before sampling, so a run is not lost to an
 * output that cannot be written (-o /proc/x.svg): a new file is created
 * and removed again, an existing one opened for writing, and its
 * directory must take the temporary file out_write_file renames. 0 or
 * -errno. */
static int check_output(const char *path)
{
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
};

static int status_tick(void *arg, const struct session_stats *st)
{
	struct status *ss = arg;
	if (!ss->tty)
		return 0;
	double el = (double)st->elapsed_ns / 1e9;
	fprintf(stderr, "\rluaspy: %.1fs  samples %llu  errors %llu  rate %.1f Hz   ", el,
		(unsigned long long)st->samples, (unsigned long long)st->errors,
		el > 0 ? (double)st->ticks / el : 0.0);
	fflush(stderr);
	ss->printed = 1;
	return 0;
}

static void resolve_line(struct frame *fr, void *arg)
{
	(void)arg;
	symtab_resolve_line(fr);
}

int cmd_record(struct cli_opts *o)
{
	char defname[64];
	if (o->output) {
		int rc = check_output(o->output);
		if (rc < 0) {
			msg_error("cannot write '%s': %s", o->output, strerror(-rc));
			return err_exit_code(LS_E_USAGE);
		}
	}
	struct session *s;
	/* native lines are looked up once, at the end, not in the first
	 * sample (the DWARF of libc alone held it up by 65+ ms of CPU) */
	symtab_defer_lines(1);
	int code = session_start(o, &s);
	if (code)
		return code;
	if (!o->output) {
		snprintf(defname, sizeof defname, "luaspy-%d.%s", (int)session_pid(s),
			 o->format == OUT_FOLDED ? "txt" : o->format == OUT_SPEEDSCOPE ? "json" :
			 o->format == OUT_PPROF ? "pb.gz" : "svg");
		o->output = defname;
	}
	struct profile *p = profile_new();
	if (!p) {
		session_finish(s);
		return msg_err_pid(0, -LS_E_NOMEM);
	}
	struct status ss = { isatty(2), 0 };
	uint64_t t0 = time_now_ns(), u0 = time_unix_ns();
	int why = session_run(s, p, 250 * 1000000ull, status_tick, &ss);
	if (ss.printed)
		fputc('\n', stderr);
	const struct session_stats *st = session_stats(s);
	struct profile_meta *m = profile_meta(p);
	char title[600];
	snprintf(title, sizeof title, "%s", session_cmdline(s));
	m->title = title;
	m->pid = session_pid(s);
	m->rate_hz = o->rate_hz;
	m->duration_ns = time_now_ns() - t0;
	m->start_unix_ns = u0;
	m->samples = st->samples;
	m->errors = st->errors;
	m->runtime = session_runtime(s);
	if (why == END_EXITED)
		msg_debug(1, "target exited; writing the profile");
	if (profile_map_frames(p, resolve_line, NULL) < 0)
		msg_debug(1, "out of memory: native frames keep no source lines");
	if (profile_name_functions(p) < 0)
		msg_debug(1, "out of memory: Lua functions keep their call-site names");
	int wrc = out_write_file(p, o->format, o->output);
	int nolua = o->subprocesses && !session_runtime(s);
	if (nolua)
		msg_error("no Lua runtime appeared in pid %d or its descendants", (int)session_pid(s));
	session_report_lag(s);
	fprintf(stderr, "Samples: %llu  Errors: %llu\n", (unsigned long long)st->samples,
		(unsigned long long)st->errors);
	/* most errors are reads the running target tore (deep LuaJIT stacks
	 * walked after the release): say what helps */
	uint64_t torn = st->err_by_kind[LS_E_GARBAGE] + st->err_by_kind[LS_E_TORN];
	if (!o->blocking && !o->nonblocking && torn * 10 > st->samples + st->errors && torn >= 10)
		msg_error("%llu of %llu samples were torn by the running target (inconsistent data); "
			  "--blocking walks while the thread is stopped",
			  (unsigned long long)torn, (unsigned long long)(st->samples + st->errors));
	if (o->stats)
		session_print_stats(s, stderr);
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
