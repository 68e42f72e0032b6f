/* pgrep.c: --pgrep: processes picked by name or command line (pgrep.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "err.h"
#include "msg.h"
#include "pgrep.h"
#include "timeutil.h"

#define PGREP_MAX_ANCESTORS 64

/* Read at most LEN-1 bytes of PATH into BUF, NUL-terminated. Bytes read
 * or -1. */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t got = 0;
	while (got < len - 1) {
		ssize_t n = read(fd, buf + got, len - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = 0;
	return (ssize_t)got;
}

/* PID's parent (stat field 4), or -1. */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	ssize_t n = read_small(path, buf, sizeof buf);
	if (n <= 0)
		return -1;
	char *p = memrchr(buf, ')', (size_t)n); /* comm may hold ')' and spaces */
	int pp;
	if (!p || sscanf(p + 1, " %*c %d", &pp) != 1)
		return -1;
	return pp;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

int pgrep_match(const regex_t *re, int full, pid_t *out, int max)
{
	/* luaspy and its ancestors: a shell running `luaspy record
	 * --pgrep-full app.lua` matches its own pattern */
	pid_t skip[PGREP_MAX_ANCESTORS + 1];
	int nskip = 0;
	for (pid_t p = getpid(); p > 0 && nskip < PGREP_MAX_ANCESTORS + 1; p = parent_of(p))
		skip[nskip++] = p;
	DIR *d = opendir("/proc");
	if (!d)
		return errno == ENOMEM ? -LS_E_NOMEM : -LS_E_IO;
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		char *end;
		long v = strtol(de->d_name, &end, 10);
		if (*end || end == de->d_name || v <= 0)
			continue;
		pid_t pid = (pid_t)v;
		int mine = 0;
		for (int i = 0; i < nskip && !mine; i++)
			mine = skip[i] == pid;
		if (mine)
			continue;
		char path[64], cmd[PGREP_CMDLINE_BYTES + 1], comm[64];
		snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
		ssize_t len = read_small(path, cmd, sizeof cmd);
		if (len <= 0)
			continue; /* gone, a kernel thread or a zombie */
		const char *subject = cmd;
		if (full) {
			/* arguments joined by spaces, as pgrep -f and ps show them */
			while (len > 0 && cmd[len - 1] == 0)
				len--;
			for (ssize_t i = 0; i < len; i++)
				if (cmd[i] == 0)
					cmd[i] = ' ';
			cmd[len] = 0;
		} else {
			snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
			ssize_t cl = read_small(path, comm, sizeof comm);
			if (cl <= 0)
				continue;
			if (comm[cl - 1] == '\n')
				comm[cl - 1] = 0;
			subject = comm;
		}
		if (regexec(re, subject, 0, NULL, 0) != 0)
			continue;
		if (n < max)
			out[n] = pid;
		n++;
	}
	closedir(d);
	qsort(out, (size_t)(n < max ? n : max), sizeof *out, cmp_pid);
	return n;
}

int pgrep_resolve(struct cli_opts *o)
{
	if (!o->pgrep)
		return 0;
	regex_t re;
	int rc = regcomp(&re, o->pgrep, REG_EXTENDED | REG_NOSUB);
	if (rc != 0) {
		char why[200];
		regerror(rc, &re, why, sizeof why);
		msg_error("invalid --pgrep pattern '%s': %s (see 'luaspy --help')", o->pgrep, why);
		return err_exit_code(LS_E_USAGE);
	}
	_Static_assert(sizeof o->pids / sizeof o->pids[0] == PGREP_MAX, "cli_opts.pids");
	pid_t *pids = o->pids;
	uint64_t t0 = time_now_ns();
	uint64_t deadline = t0 + (uint64_t)(o->timeout_s * 1e9);
	int n, said = 0;
	for (;;) {
		n = pgrep_match(&re, o->pgrep_full, pids, PGREP_MAX);
		if (n != 0)
			break;
		uint64_t now = time_now_ns();
		if (now >= deadline)
			break;
		if (!said++)
			msg_debug(1, "--pgrep '%s': no match yet; waiting up to %g s (--timeout)", o->pgrep,
				  o->timeout_s);
		uint64_t wait = deadline - now < PGREP_POLL_NS ? deadline - now : PGREP_POLL_NS;
		struct timespec ts = { (time_t)(wait / 1000000000ull), (long)(wait % 1000000000ull) };
		nanosleep(&ts, NULL);
	}
	regfree(&re);
	if (n < 0) {
		msg_error("--pgrep: cannot list /proc: %s", err_text(n));
		return err_exit_code(-n);
	}
	if (n == 0) {
		msg_error("no process %s matches '%s' (waited %g s; --timeout)",
			  o->pgrep_full ? "command line" : "name", o->pgrep, o->timeout_s);
		return err_exit_code(LS_E_NOPID);
	}
	if (n > PGREP_MAX) {
		msg_error("--pgrep '%s' matches %d processes: the first %d (by pid) are profiled",
			  o->pgrep, n, PGREP_MAX);
		n = PGREP_MAX;
	}
	for (int i = 0; i < n; i++) {
		char cmd[200] = "";
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pids[i]);
		ssize_t l = read_small(path, cmd, sizeof cmd);
		while (l > 0 && cmd[l - 1] == 0)
			l--;
		if (l >= 0)
			cmd[l] = 0;
		for (ssize_t k = 0; k < l; k++)
			if ((unsigned char)cmd[k] < 32 || cmd[k] == 127)
				cmd[k] = ' ';
		msg_debug(1, "--pgrep '%s': pid %d \"%s\"", o->pgrep, (int)pids[i], cmd);
	}
	o->pid = pids[0];
	o->npids = n;
	return 0;
}
