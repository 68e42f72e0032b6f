/* proc_maps.c: /proc/PID/maps parsing. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "err.h"
#include "intern.h"
#include "proc_maps.h"

static int hexval(const char **p, const char *end, uint64_t *v)
{
	uint64_t x = 0;
	int n = 0;
	while (*p < end) {
		char c = **p;
		int d;
		if (c >= '0' && c <= '9') d = c - '0';
		else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
		else break;
		if (n >= 16)
			return -1;
		x = (x << 4) | (uint64_t)d;
		n++;
		(*p)++;
	}
	*v = x;
	return n ? 0 : -1;
}

static int decval(const char **p, const char *end, uint64_t *v)
{
	uint64_t x = 0;
	int n = 0;
	while (*p < end && **p >= '0' && **p <= '9') {
		x = x * 10 + (uint64_t)(**p - '0');
		(*p)++;
		n++;
	}
	*v = x;
	return n ? 0 : -1;
}

static int skip_spaces(const char **p, const char *end)
{
	int n = 0;
	while (*p < end && **p == ' ') {
		(*p)++;
		n++;
	}
	return n;
}

/* Parse one line [p, end); returns 0 on success. */
static int parse_line(const char *p, const char *end, struct proc_map *m)
{
	uint64_t dev;
	memset(m, 0, sizeof *m);
	if (hexval(&p, end, &m->start) || p >= end || *p++ != '-' ||
	    hexval(&p, end, &m->end) || !skip_spaces(&p, end))
		return -1;
	if (end - p < 4)
		return -1;
	if (p[0] == 'r') m->perms |= MAP_R;
	if (p[1] == 'w') m->perms |= MAP_W;
	if (p[2] == 'x') m->perms |= MAP_X;
	if (p[3] == 'p') m->perms |= MAP_P;
	p += 4;
	if (!skip_spaces(&p, end) || hexval(&p, end, &m->offset) || !skip_spaces(&p, end) ||
	    hexval(&p, end, &dev) || p >= end || *p++ != ':' || hexval(&p, end, &dev) ||
	    !skip_spaces(&p, end) || decval(&p, end, &m->inode))
		return -1;
	skip_spaces(&p, end);
	size_t len = (size_t)(end - p);
	static const char del[] = " (deleted)";
	if (len >= sizeof del - 1 && memcmp(end - (sizeof del - 1), del, sizeof del - 1) == 0) {
		m->deleted = 1;
		len -= sizeof del - 1;
	}
	m->path = intern_n(p, len);
	const char *slash = strrchr(m->path, '/');
	m->name = slash ? intern(slash + 1) : m->path;
	return m->end > m->start ? 0 : -1;
}

int proc_maps_parse(const char *text, size_t len, struct proc_maps *out)
{
	const char *p = text, *end = text + len;
	int cap = 64, n = 0;
	struct proc_map *arr = malloc((size_t)cap * sizeof *arr);
	if (!arr)
		return -LS_E_NOMEM;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		if (n == cap) {
			struct proc_map *na = realloc(arr, (size_t)cap * 2 * sizeof *arr);
			if (!na) {
				free(arr);
				return -LS_E_NOMEM;
			}
			arr = na;
			cap *= 2;
		}
		if (parse_line(p, le, &arr[n]) == 0)
			n++;
		p = nl ? nl + 1 : end;
	}
	if (n == 0) {
		free(arr);
		return -LS_E_GARBAGE;
	}
	/* the kernel lists mappings sorted; keep the invariant for bsearch */
	for (int i = 1; i < n; i++) {
		if (arr[i].start < arr[i - 1].start) {
			struct proc_map t = arr[i];
			int j = i - 1;
			while (j >= 0 && arr[j].start > t.start) {
				arr[j + 1] = arr[j];
				j--;
			}
			arr[j + 1] = t;
		}
	}
	proc_maps_free(out);
	out->m = arr;
	out->n = n;
	return 0;
}

int proc_maps_read(pid_t pid, struct proc_maps *out)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_from_errno(errno);
	size_t cap = 65536, len = 0;
	char *buf = malloc(cap);
	if (!buf) {
		close(fd);
		return -LS_E_NOMEM;
	}
	for (;;) {
		if (len == cap) {
			if (cap >= (64u << 20)) /* 64 MiB of maps: refuse */
				break;
			char *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				close(fd);
				return -LS_E_NOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			free(buf);
			close(fd);
			return err_from_errno(e);
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	int rc = len ? proc_maps_parse(buf, len, out) : -LS_E_GONE;
	free(buf);
	return rc;
}

void proc_maps_free(struct proc_maps *maps)
{
	free(maps->m);
	maps->m = NULL;
	maps->n = 0;
}

const struct proc_map *proc_maps_find(const struct proc_maps *maps, uint64_t addr)
{
	int lo = 0, hi = maps->n - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		const struct proc_map *m = &maps->m[mid];
		if (addr < m->start)
			hi = mid - 1;
		else if (addr >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

int proc_map_is_file(const struct proc_map *m)
{
	return m->path[0] == '/';
}

uint64_t proc_maps_module_base(const struct proc_maps *maps, const char *path)
{
	for (int i = 0; i < maps->n; i++)
		if (maps->m[i].path == path && maps->m[i].offset == 0)
			return maps->m[i].start;
	return 0;
}
