/* cmd_perfmap.c: `luaspy perf-map`: write the target's perf map
 * (/tmp/perf-PID.map) for its LuaJIT traces, so that perf names them
 * (docs/perf-maps.md).
 *
 * Every PERFMAP_SCAN_NS the traces of every LuaJIT state found are read
 * (vm_luajit_traces(), from the running target: it is never stopped)
 * and each one not written yet gets a line
 *   MCODE SIZE TRACE_N::FILE:LINE
 * as LuaJIT's own -DLUAJIT_USE_PERFTOOLS build writes it (lj_trace.c,
 * perftools_addtrace). Lines are only appended, one write(2) of whole
 * lines per scan on an O_APPEND descriptor: a flushed trace's region
 * that a new trace reuses gets a new line, and perf takes the last one.
 * The file is created (never truncated); one that exists is the
 * target's or an earlier run's and is refused unless
 * --perf-map-append. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "err.h"
#include "msg.h"
#include "perfmap.h"
#include "session.h"
#include "target.h"
#include "timeutil.h"
#include "vm.h"

#define PERFMAP_SCAN_NS (200 * 1000000ull) /* between scans of the traces */
#define PERFMAP_WRITE_MAX (1u << 20)         /* lines written at most per run */
#define PERFMAP_SEEN_BITS 21                 /* the written set: 2 M slots, 16 MiB */


/* What was written: a set of line hashes (open addressing, never full:
 * PERFMAP_WRITE_MAX is a quarter of the slots), a buffer of lines. */
struct pm_writer {
	uint64_t *seen;
	unsigned nseen;
	char *buf;
	size_t len, cap;
	unsigned long written, cut;
};

static uint64_t hash_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* 1 when H was not in W's set (it is now), 0 when it was or the set is
 * at its bound (counted in W->cut). */
static int seen_add(struct pm_writer *w, uint64_t h)
{
	if (!h)
		h = 1;
	size_t mask = ((size_t)1 << PERFMAP_SEEN_BITS) - 1;
	for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
		if (w->seen[i] == h)
			return 0;
		if (!w->seen[i]) {
			if (w->nseen >= PERFMAP_WRITE_MAX) {
				w->cut++;
				return 0;
			}
			w->seen[i] = h;
			w->nseen++;
			return 1;
		}
	}
}

static void add_trace(void *arg, const struct vm_trace *tr)
{
	struct pm_writer *w = arg;
	char line[256];
	int n = snprintf(line, sizeof line, "%llx %x TRACE_%d::%s:%d\n", (unsigned long long)tr->mcode,
			 tr->size, tr->n, tr->file, tr->line);
	if (n <= 0)
		return;
	if ((size_t)n >= sizeof line) { /* a long file name: cut, still one line */
		n = (int)sizeof line - 1;
		line[n - 1] = '\n';
	}
	uint64_t h = hash_str(0xcbf29ce484222325ull, line);
	if (!seen_add(w, h))
		return;
	if (w->len + (size_t)n > w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 65536;
		while (cap < w->len + (size_t)n)
			cap *= 2;
		char *b = realloc(w->buf, cap);
		if (!b)
			return;
		w->buf = b;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, line, (size_t)n);
	w->len += (size_t)n;
	w->written++;
}

/* Open the map at PATH (SHOWN for messages): created, or with APPEND an
 * existing regular file appended to. The fd, or -1 (said). */
static int open_map(const char *path, const char *shown, pid_t pid, int append)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0 || errno != EEXIST) {
		if (fd < 0)
			msg_error("pid %d: cannot create %s: %s", (int)pid, shown, strerror(errno));
		return fd;
	}
	if (!append) {
		msg_error("pid %d: %s exists (the target's own perf map, or an earlier run's): not changed; "
			  "remove it, or add to it with --perf-map-append", (int)pid, shown);
		return -1;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		msg_error("pid %d: cannot append to %s: %s", (int)pid, shown,
			  fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* With --perf-map-append: the lines FD's file already has (its first
 * PERFMAP_READ_MAX bytes) count as written, so a second run adds only
 * new traces. */
#define PERFMAP_READ_MAX (64u << 20)
static void seed_seen(struct pm_writer *w, const char *path)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return;
	char *buf = malloc(65536 + 256);
	char line[256];
	size_t ll = 0, total = 0;
	int skip = 0; /* inside a line longer than ours: never one of ours */
	ssize_t r;
	while (buf && total < PERFMAP_READ_MAX && (r = read(fd, buf, 65536)) > 0) {
		total += (size_t)r;
		for (ssize_t i = 0; i < r; i++) {
			char ch = buf[i];
			if (!skip && ll < sizeof line - 1)
				line[ll++] = ch;
			else
				skip = 1;
			if (ch != '\n')
				continue;
			if (!skip) {
				line[ll] = 0;
				seen_add(w, hash_str(0xcbf29ce484222325ull, line));
			}
			ll = 0;
			skip = 0;
		}
	}
	free(buf);
	close(fd);
}

/* Write W's buffered lines to FD: whole lines per write(2). 0 or -1. */
static int flush_lines(struct pm_writer *w, int fd)
{
	size_t off = 0;
	while (off < w->len) {
		ssize_t r = write(fd, w->buf + off, w->len - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		off += (size_t)r;
	}
	w->len = 0;
	return 0;
}

/* Write lines for T's LuaJIT traces (T is process PID) through W to FD
 * (SHOWN in messages) every PERFMAP_SCAN_NS, until END_NS (0: no end), a
 * stop signal or the target's exit. Returns 0, or an exit status when a
 * write failed (said). */
static int write_loop(struct target *t, pid_t pid, struct pm_writer *w, int fd, const char *shown,
		      uint64_t end)
{
	int status = 0, said_cut = 0;
	msg_debug(1, "pid %d: writing %s", (int)pid, shown);
	for (;;) {
		int gone = target_refresh(t) == -LS_E_GONE || kill(pid, 0) < 0;
		if (gone)
			break;
		vm_luajit_traces(t, add_trace, w);
		if (flush_lines(w, fd) < 0) {
			msg_error("pid %d: writing %s: %s", (int)pid, shown, strerror(errno));
			status = err_exit_code(LS_E_IO);
			break;
		}
		if (w->cut && !said_cut) {
			said_cut = 1;
			msg_error("pid %d: %s: %u lines written, the most one run writes; later traces are not named",
				  (int)pid, shown, PERFMAP_WRITE_MAX);
		}
		uint64_t now = time_now_ns();
		if (session_stop_signal || (end && now >= end))
			break;
		uint64_t wait = PERFMAP_SCAN_NS;
		if (end && end - now < wait)
			wait = end - now;
		struct timespec ts = { (time_t)(wait / 1000000000ull), (long)(wait % 1000000000ull) };
		nanosleep(&ts, NULL);
		if (session_stop_signal)
			break;
	}
	return status;
}

/* Open PID's map for writing (the refusal rules of open_map()), its
 * path shown in SHOWN (64 bytes), W's set seeded with what is there
 * when APPEND. The fd, or -1 with an exit status in *STATUS (said). */
static int writer_open(pid_t pid, int append, struct pm_writer *w, char *shown, int *status)
{
	pid_t nsp = perfmap_ns_pid(pid);
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/root/tmp/perf-%d.map", (int)pid, (int)nsp);
	snprintf(shown, 64, "/tmp/perf-%d.map", (int)nsp);
	memset(w, 0, sizeof *w);
	w->seen = calloc((size_t)1 << PERFMAP_SEEN_BITS, sizeof *w->seen);
	if (!w->seen) {
		*status = msg_err_pid(pid, -LS_E_NOMEM);
		return -1;
	}
	int fd = open_map(path, shown, pid, append);
	if (fd < 0) {
		free(w->seen);
		*status = err_exit_code(LS_E_IO);
		return -1;
	}
	if (append)
		seed_seen(w, path);
	return fd;
}

int cmd_perfmap(struct cli_opts *o)
{
	struct target *t = NULL;
	int vmrc;
	char why[512];
	int rc = target_open(o->pid, VM_PROBE, &t, &vmrc, why, sizeof why);
	if (rc < 0)
		return msg_err_pid(o->pid, rc);
	if (vmrc == -LS_E_UNSUPPORTED) {
		target_close(t);
		return msg_unsupported(o->pid, why);
	}
	if (vmrc < 0) {
		target_close(t);
		return msg_err_pid(o->pid, vmrc);
	}
	if (t->vm_ops != &vm_luajit_ops) {
		target_close(t);
		return msg_unsupported(o->pid, "perf-map names LuaJIT traces; PUC Lua has no JIT code");
	}
	struct pm_writer w;
	char shown[64];
	int status = 0;
	int fd = writer_open(o->pid, o->perf_map_append, &w, shown, &status);
	if (fd < 0) {
		target_close(t);
		return status;
	}
	session_install_signals();
	uint64_t start = time_now_ns();
	uint64_t end = o->duration_s > 0 ? start + (uint64_t)(o->duration_s * 1e9) : 0;
	status = write_loop(t, o->pid, &w, fd, shown, end);
	close(fd);
	if (!status)
		printf("Wrote %lu perf map lines for LuaJIT traces to %s\n", w.written, shown);
	free(w.seen);
	free(w.buf);
	target_close(t);
	return status;
}

/* ---- record --perf-map: the same writer in a child process ---- */

static pid_t record_child;

/* At luaspy's exit: end the writer (it finishes its scan, says what it
 * wrote) and reap it. */
static void record_child_end(void)
{
	if (record_child <= 0)
		return;
	kill(record_child, SIGTERM);
	int st;
	while (waitpid(record_child, &st, 0) < 0 && errno == EINTR)
		;
	record_child = 0;
}

int perfmap_record_start(pid_t pid, const char *runtime, int append)
{
	if (!runtime || strncmp(runtime, "LuaJIT", 6))
		return msg_unsupported(pid, "--perf-map names LuaJIT traces; PUC Lua has no JIT code");
	struct pm_writer w;
	char shown[64];
	int status = 0;
	int fd = writer_open(pid, append, &w, shown, &status);
	if (fd < 0)
		return status;
	pid_t parent = getpid();
	fflush(NULL);
	pid_t c = fork();
	if (c < 0) {
		msg_error("pid %d: --perf-map: fork: %s", (int)pid, strerror(errno));
		close(fd);
		free(w.seen);
		return err_exit_code(LS_E_IO);
	}
	if (c > 0) {
		close(fd);
		free(w.seen);
		record_child = c;
		atexit(record_child_end);
		return 0;
	}
	/* the child: a reader of the target's memory of its own (no stop,
	 * no ptrace), until luaspy ends it or dies */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(0);
	struct target *t = NULL;
	int vmrc;
	char why[512];
	int rc = target_open(pid, VM_PROBE, &t, &vmrc, why, sizeof why);
	if (rc < 0 || vmrc < 0 || t->vm_ops != &vm_luajit_ops) {
		msg_error("pid %d: --perf-map: the LuaJIT VM was not found again: %s", (int)pid,
			  rc < 0 ? err_text(rc) : vmrc < 0 ? err_text(vmrc) : "not LuaJIT");
		_exit(1);
	}
	status = write_loop(t, pid, &w, fd, shown, 0);
	if (!status)
		fprintf(stderr, "Wrote %lu perf map lines for LuaJIT traces to %s\n", w.written, shown);
	fflush(NULL);
	_exit(status);
}
