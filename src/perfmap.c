/* perfmap.c: reading a target's perf map (/tmp/perf-PID.map), bounded. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "err.h"
#include "htab.h"
#include "intern.h"
#include "msg.h"
#include "perfmap.h"
#include "timeutil.h"

/* ---- parsing ---- */

/* An entry while parsing: SEQ is its line's order in the file. */
struct pm_ent {
	uint64_t start, end;
	const char *name;
	size_t seq;
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Parse a hex number (optional 0x, 1 to 16 digits) at *P, before END.
 * Advances *P; 0 or -1 (none, or too long). */
static int parse_hex(char **p, char *end, uint64_t *out)
{
	char *s = *p;
	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && hexval(s[2]) >= 0)
		s += 2;
	uint64_t v = 0;
	int nd = 0;
	for (; s < end && hexval(*s) >= 0; s++) {
		if (++nd > 16)
			return -1;
		v = v << 4 | (uint64_t)hexval(*s);
	}
	if (nd == 0)
		return -1;
	*p = s;
	*out = v;
	return 0;
}

static char *skip_blank(char *s, char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

/* Parse the line [S, END) (END is writable: the name's NUL goes at or
 * before it). 0 and *E filled, or -1 (malformed). */
static int parse_line(char *s, char *end, struct pm_ent *e)
{
	s = skip_blank(s, end);
	if (parse_hex(&s, end, &e->start) < 0)
		return -1;
	char *b = skip_blank(s, end);
	if (b == s)
		return -1; /* "12ab" glued to what follows */
	s = b;
	uint64_t size;
	if (parse_hex(&s, end, &size) < 0)
		return -1;
	b = skip_blank(s, end);
	if (b == s || size == 0 || e->start + size < e->start)
		return -1;
	e->end = e->start + size;
	/* the name: the rest, trailing blanks and CR dropped */
	while (end > b && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		end--;
	if (end == b)
		return -1;
	if (end - b > PERFMAP_MAX_NAME) {
		end = b + PERFMAP_MAX_NAME;
		/* not inside a UTF-8 sequence */
		while (end > b && ((unsigned char)*end & 0xc0) == 0x80)
			end--;
	}
	for (char *q = b; q < end; q++)
		if ((unsigned char)*q < 0x20 || *q == 0x7f)
			*q = '?';
	*end = 0;
	e->name = b;
	return 0;
}

static int ent_cmp(const void *a, const void *b)
{
	const struct pm_ent *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void perfmap_table_free(struct perfmap_table *t)
{
	free(t->e);
	free(t->text);
	memset(t, 0, sizeof *t);
}

long perfmap_parse(const char *text, size_t len, struct perfmap_table *out,
		   struct perfmap_stats *st)
{
	memset(st, 0, sizeof *st);
	perfmap_table_free(out);
	char *buf = malloc(len + 1);
	if (!buf)
		return -LS_E_NOMEM;
	memcpy(buf, text, len);
	buf[len] = 0;
	struct pm_ent *v = NULL;
	size_t n = 0, cap = 0;
	char *p = buf, *bend = buf + len;
	while (p < bend) {
		char *nl = memchr(p, '\n', (size_t)(bend - p));
		char *le = nl ? nl : bend;
		char *next = nl ? nl + 1 : bend;
		if (le == p) { /* an empty line is nothing */
			p = next;
			continue;
		}
		st->lines++;
		if (le - p > PERFMAP_MAX_LINE) {
			st->too_long++;
			p = next;
			continue;
		}
		if (n >= PERFMAP_MAX_ENTRIES) {
			st->over_count++;
			p = next;
			continue;
		}
		struct pm_ent e;
		if (parse_line(p, le, &e) < 0) {
			st->malformed++;
			p = next;
			continue;
		}
		if (array_grow(&v, &cap, n + 1, sizeof *v) < 0) {
			free(v);
			free(buf);
			return -LS_E_NOMEM;
		}
		e.seq = n;
		v[n++] = e;
		p = next;
	}
	if (n > 1)
		qsort(v, n, sizeof *v, ent_cmp);
	/* overlaps: of two overlapping regions the later line wins; the kept
	 * ones stay sorted and disjoint (a replaced entry's predecessor ends
	 * before it started, so before the new one too) */
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k > 0 && v[i].start < v[k - 1].end) {
			st->overlapped++;
			if (v[i].seq > v[k - 1].seq)
				v[k - 1] = v[i];
			continue;
		}
		v[k++] = v[i];
	}
	struct perfmap_entry *e = NULL;
	if (k > 0 && !(e = malloc(k * sizeof *e))) {
		free(v);
		free(buf);
		return -LS_E_NOMEM;
	}
	for (size_t i = 0; i < k; i++) {
		e[i].start = v[i].start;
		e[i].end = v[i].end;
		e[i].name = v[i].name;
	}
	free(v);
	out->e = e;
	out->n = k;
	out->text = buf;
	return (long)k;
}

const struct perfmap_entry *perfmap_table_find(const struct perfmap_table *t, uint64_t addr)
{
	size_t lo = 0, hi = t->n; /* the first entry starting past ADDR is in [lo, hi] */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->e[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct perfmap_entry *e = &t->e[lo - 1];
	return addr < e->end ? e : NULL;
}

/* ---- the target's file ---- */

struct perfmap {
	pid_t pid;
	pid_t nspid;              /* its pid in its own namespace: names the file */
	struct perfmap_table t;
	struct perfmap_stats st;
	uint64_t next_check_ns;
	int have;                 /* a file was read: the fields below are its */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int warned;
};

pid_t perfmap_ns_pid(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	pid_t nsp = pid;
	if (!f)
		return pid;
	while (fgets(line, sizeof line, f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		char *s = line + 6, *end;
		for (;;) {
			long v = strtol(s, &end, 10);
			if (end == s)
				break;
			if (v > 0 && v <= 0x7fffffff)
				nsp = (pid_t)v;
			s = end;
		}
		break;
	}
	fclose(f);
	return nsp;
}

struct perfmap *perfmap_open(pid_t pid)
{
	struct perfmap *pm = calloc(1, sizeof *pm);
	if (pm) {
		pm->pid = pid;
		pm->nspid = perfmap_ns_pid(pid);
	}
	return pm;
}

void perfmap_close(struct perfmap *pm)
{
	if (!pm)
		return;
	perfmap_table_free(&pm->t);
	free(pm);
}

const struct perfmap_stats *perfmap_last_stats(const struct perfmap *pm)
{
	return &pm->st;
}

static void forget(struct perfmap *pm)
{
	perfmap_table_free(&pm->t);
	memset(&pm->st, 0, sizeof pm->st);
	pm->have = 0;
}

/* One line on what the read of PM's file skipped, the first time. */
static void warn_cut(struct perfmap *pm)
{
	const struct perfmap_stats *st = &pm->st;
	unsigned long skipped = st->malformed + st->too_long;
	if (pm->warned || (!skipped && !st->over_count && !st->cut_bytes))
		return;
	pm->warned = 1;
	char b[400];
	int o = snprintf(b, sizeof b, "pid %d: perf map /tmp/perf-%d.map:", (int)pm->pid, (int)pm->nspid);
	const char *sep = "";
	if (skipped && o > 0 && (size_t)o < sizeof b) {
		o += snprintf(b + o, sizeof b - (size_t)o, " %lu lines skipped (%lu malformed, %lu over %d bytes)",
			      skipped, st->malformed, st->too_long, PERFMAP_MAX_LINE);
		sep = ";";
	}
	if (st->over_count && o > 0 && (size_t)o < sizeof b) {
		o += snprintf(b + o, sizeof b - (size_t)o, "%s %lu lines past the first %d entries ignored",
			      sep, st->over_count, PERFMAP_MAX_ENTRIES);
		sep = ";";
	}
	if (st->cut_bytes && o > 0 && (size_t)o < sizeof b)
		snprintf(b + o, sizeof b - (size_t)o, "%s read up to %u MiB only", sep, PERFMAP_MAX_BYTES >> 20);
	msg_error("%s", b);
}

/* Read PM's file again when it changed (bounded, see perfmap.h). */
static void refresh(struct perfmap *pm)
{
	uint64_t now = time_now_ns();
	if (pm->next_check_ns && now < pm->next_check_ns)
		return;
	pm->next_check_ns = now + PERFMAP_RECHECK_NS;
	char path[96];
	snprintf(path, sizeof path, "/proc/%d/root/tmp/perf-%d.map", (int)pm->pid, (int)pm->nspid);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		forget(pm);
		return;
	}
	struct stat fs, ps;
	char ppath[32];
	snprintf(ppath, sizeof ppath, "/proc/%d", (int)pm->pid);
	if (fstat(fd, &fs) < 0 || !S_ISREG(fs.st_mode) || stat(ppath, &ps) < 0 ||
	    (fs.st_uid != 0 && fs.st_uid != ps.st_uid)) {
		if (pm->have || pm->t.n)
			forget(pm);
		msg_debug(1, "pid %d: %s: not a regular file owned by root or the target's user: not read",
			  (int)pm->pid, path);
		close(fd);
		return;
	}
	if (pm->have && fs.st_dev == pm->dev && fs.st_ino == pm->ino && fs.st_size == pm->size &&
	    fs.st_mtim.tv_sec == pm->mtime.tv_sec && fs.st_mtim.tv_nsec == pm->mtime.tv_nsec) {
		close(fd);
		return;
	}
	int cut = (uint64_t)fs.st_size > PERFMAP_MAX_BYTES;
	size_t want = cut ? PERFMAP_MAX_BYTES : (size_t)fs.st_size;
	char *buf = malloc(want ? want : 1);
	size_t got = 0;
	while (buf && got < want) {
		ssize_t r = pread(fd, buf + got, want - got, (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	if (!buf) {
		forget(pm);
		return;
	}
	if (cut) { /* a line cut by the limit is no line */
		char *nl = memrchr(buf, '\n', got);
		got = nl ? (size_t)(nl - buf) + 1 : 0;
	}
	long k = perfmap_parse(buf, got, &pm->t, &pm->st);
	free(buf);
	if (k < 0) {
		forget(pm);
		return;
	}
	pm->st.cut_bytes = cut;
	pm->have = 1;
	pm->dev = fs.st_dev;
	pm->ino = fs.st_ino;
	pm->size = fs.st_size;
	pm->mtime = fs.st_mtim;
	msg_debug(1, "pid %d: perf map %s: %ld entries from %lu lines", (int)pm->pid, path, k, pm->st.lines);
	warn_cut(pm);
}

const char *perfmap_lookup(struct perfmap *pm, uint64_t addr)
{
	if (!pm)
		return NULL;
	refresh(pm);
	const struct perfmap_entry *e = perfmap_table_find(&pm->t, addr);
	return e ? intern(e->name) : NULL;
}
