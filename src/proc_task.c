/* proc_task.c: processes and threads from /proc. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "err.h"
#include "htab.h"
#include "proc_task.h"

#define PF_KTHREAD 0x00200000

static ssize_t read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0)
		return -e;
	buf[n] = 0;
	return n;
}

int proc_stat_state_cpu(const char *buf, char *state, int *cpu)
{
	const char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return -EINVAL;
	*state = p[2];
	*cpu = -1;
	int field = 2; /* p[1] starts field 3, the state */
	for (p++; *p && field < 39; p++)
		if (*p == ' ')
			field++;
	if (field == 39 && *p >= '0' && *p <= '9')
		*cpu = atoi(p);
	return 0;
}

/* Parse /proc/.../stat: state letter, flags, last CPU (-1 unknown).
 * Returns 0 or -errno. */
static int read_stat(const char *path, char *state, unsigned long *flags, char *comm, size_t commlen,
		     int *cpu)
{
	char buf[1024];
	ssize_t n = read_file(path, buf, sizeof buf);
	if (n < 0)
		return (int)n;
	char *lp = strchr(buf, '(');
	char *rp = strrchr(buf, ')');
	if (!lp || !rp || rp[1] == 0)
		return -EINVAL;
	if (comm) {
		size_t cl = (size_t)(rp - lp - 1);
		if (cl >= commlen)
			cl = commlen - 1;
		memcpy(comm, lp + 1, cl);
		comm[cl] = 0;
		for (size_t i = 0; i < cl; i++)
			if ((unsigned char)comm[i] < 32 || comm[i] == '"' || comm[i] == '\\')
				comm[i] = '?';
	}
	char st = 0;
	unsigned long fl = 0;
	/* fields after ')': state(3) ppid pgrp session tty_nr tpgid flags(9) */
	if (sscanf(rp + 2, "%c %*d %*d %*d %*d %*d %lu", &st, &fl) < 2)
		return -EINVAL;
	if (state)
		*state = st;
	if (flags)
		*flags = fl;
	if (cpu) {
		char stc;
		proc_stat_state_cpu(buf, &stc, cpu);
	}
	return 0;
}

int proc_alive(pid_t pid)
{
	return kill(pid, 0) == 0 || errno == EPERM;
}

pid_t proc_tracer(pid_t pid)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (read_file(path, buf, sizeof buf) <= 0)
		return 0;
	const char *t = strstr(buf, "\nTracerPid:");
	pid_t tracer = t ? (pid_t)atoi(t + 11) : 0;
	if (tracer <= 0)
		return 0;
	/* a thread of ours (a sample's stop, or one that timed out) */
	snprintf(path, sizeof path, "/proc/self/task/%d", (int)tracer);
	return access(path, F_OK) == 0 ? 0 : tracer;
}

#define TRACED_CHECKS 10
#define TRACED_CHECK_NS (10 * 1000000L)

/* Is PID held by another tracer for good? Another profiler's sample
 * holds it for microseconds: the same tracer must be seen TRACED_CHECKS
 * times 10 ms apart (100 ms, only when some tracer is seen at all). */
static int traced_for_good(pid_t pid)
{
	pid_t first = proc_tracer(pid);
	for (int i = 1; first && i < TRACED_CHECKS; i++) {
		struct timespec ts = { 0, TRACED_CHECK_NS };
		nanosleep(&ts, NULL);
		if (proc_tracer(pid) != first)
			return 0;
	}
	return first != 0;
}

int proc_comm(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int rc = read_stat(path, NULL, NULL, buf, len, NULL);
	return rc < 0 ? err_from_errno(-rc) : 0;
}

int proc_check(pid_t pid)
{
	char path[64], state;
	unsigned long flags;
	if (pid <= 0)
		return -LS_E_NOPID;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	int rc = read_stat(path, &state, &flags, NULL, 0, NULL);
	if (rc == -ENOENT || rc == -ESRCH)
		return -LS_E_NOPID;
	if (rc < 0)
		return -LS_E_NOPID;
	/* /proc/PID/stat also resolves thread ids; we want a process */
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	char buf[4096];
	if (read_file(path, buf, sizeof buf) > 0) {
		char *t = strstr(buf, "\nTgid:");
		if (t && atoi(t + 6) != pid)
			return -LS_E_NOPID;
	}
	if (flags & PF_KTHREAD)
		return -LS_E_KTHREAD;
	if (state == 'Z' || state == 'X')
		return -LS_E_ZOMBIE;
	if (traced_for_good(pid))
		return -LS_E_TRACED;
	/* can we read its memory map? (fails for other users' processes) */
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM ? -LS_E_PERM : -LS_E_NOPID;
	char c;
	ssize_t r = read(fd, &c, 1);
	int e = errno;
	close(fd);
	if (r < 0)
		return e == EACCES || e == EPERM ? -LS_E_PERM : -LS_E_NOPID;
	/* ELF class of the executable */
	snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM ? -LS_E_PERM : 0;
	unsigned char ident[EI_NIDENT];
	r = read(fd, ident, sizeof ident);
	close(fd);
	if (r == (ssize_t)sizeof ident && memcmp(ident, ELFMAG, SELFMAG) == 0 &&
	    ident[EI_CLASS] == ELFCLASS32)
		return -LS_E_ARCH32;
	return 0;
}

char proc_thread_state(pid_t pid, pid_t tid)
{
	char path[96], st = '?';
	snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (read_stat(path, &st, NULL, NULL, 0, NULL) < 0)
		return '?';
	return st;
}

static int cmp_tid(const void *a, const void *b)
{
	const struct proc_thread *x = a, *y = b;
	return (x->tid > y->tid) - (x->tid < y->tid);
}

int proc_threads(pid_t pid, struct proc_thread **out, int *n)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return err_from_errno(errno);
	int cap = 16, cnt = 0;
	struct proc_thread *arr = malloc((size_t)cap * sizeof *arr);
	if (!arr) {
		closedir(d);
		return -LS_E_NOMEM;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		if (cnt == 65536)
			break;
		if (cnt == cap) {
			struct proc_thread *na = realloc(arr, (size_t)cap * 2 * sizeof *arr);
			if (!na)
				break;
			arr = na;
			cap *= 2;
		}
		struct proc_thread *t = &arr[cnt];
		t->tid = atoi(de->d_name);
		char sp[128];
		snprintf(sp, sizeof sp, "/proc/%d/task/%d/stat", (int)pid, (int)t->tid);
		if (read_stat(sp, &t->state, NULL, t->name, sizeof t->name, &t->cpu) < 0)
			continue; /* gone between readdir and read: skip */
		cnt++;
	}
	closedir(d);
	if (cnt == 0) {
		free(arr);
		return -LS_E_GONE;
	}
	qsort(arr, (size_t)cnt, sizeof *arr, cmp_tid);
	*out = arr;
	*n = cnt;
	return 0;
}

int proc_cmdline(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
	ssize_t n = read_file(path, buf, len);
	if (n < 0)
		return err_from_errno((int)-n);
	while (n > 0 && buf[n - 1] == 0)
		n--;
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == 0)
			buf[i] = ' ';
		else if ((unsigned char)buf[i] < 32 || buf[i] == 127)
			buf[i] = '?';
	}
	buf[n] = 0;
	if (n == 0) { /* kernel threads and zombies: fall back to comm */
		snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
		n = read_file(path, buf, len);
		if (n > 0 && buf[n - 1] == '\n')
			buf[n - 1] = 0;
	}
	return 0;
}

long long proc_cpu_ticks(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (read_file(path, buf, sizeof buf) < 0)
		return -1;
	char *rp = strrchr(buf, ')');
	if (!rp)
		return -1;
	unsigned long long ut, st;
	if (sscanf(rp + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	return (long long)(ut + st);
}

/* The whole of file PATH into *BUF (grown with array_grow, *CAP bytes,
 * NUL-terminated). Its length, or -errno. */
static ssize_t read_file_all(const char *path, char **buf, size_t *cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	size_t len = 0;
	for (;;) {
		if (array_grow(buf, cap, len + 4097, 1) < 0) {
			close(fd);
			return -ENOMEM;
		}
		ssize_t n = read(fd, *buf + len, *cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	(*buf)[len] = 0;
	return (ssize_t)len;
}

int proc_children(pid_t pid, pid_t **out, size_t *cap)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return 0;
	char *buf = NULL;
	size_t bcap = 0, cnt = 0;
	struct dirent *de;
	while ((de = readdir(d)) && cnt < INT_MAX) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char cp[320];
		snprintf(cp, sizeof cp, "/proc/%d/task/%s/children", (int)pid, de->d_name);
		if (read_file_all(cp, &buf, &bcap) <= 0)
			continue;
		char *p = buf;
		while (*p && cnt < INT_MAX) {
			char *e;
			long v = strtol(p, &e, 10);
			if (e == p)
				break;
			if (array_grow(out, cap, cnt + 1, sizeof **out) < 0) {
				closedir(d);
				free(buf);
				return -1;
			}
			(*out)[cnt++] = (pid_t)v;
			p = e;
		}
	}
	closedir(d);
	free(buf);
	return (int)cnt;
}
