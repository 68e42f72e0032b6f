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
#include "jitdump.h"
#include "msg.h"
#include "perfmap.h"
#include "proc_maps.h"
#include "timeutil.h"

/* ---- parsing ---- */

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
static int parse_line(char *s, char *end, struct code_region *e)
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
	end = b + code_name_clean(b, (size_t)(end - b));
	*end = 0;
	e->name = b;
	return 0;
}


/* Parse the lines of BUF (LEN bytes and one more, writable: names are
 * cut and terminated in place) into *V (*N entries of *CAP, appended to,
 * SEQ their order), counting in ST. 0 or -LS_E_NOMEM (*V as it was). */
static int parse_lines(char *buf, size_t len, struct code_region **v, size_t *n, size_t *cap,
		       struct perfmap_stats *st)
{
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
		if (*n >= PERFMAP_MAX_ENTRIES) {
			st->over_count++;
			p = next;
			continue;
		}
		struct code_region e;
		if (parse_line(p, le, &e) < 0) {
			st->malformed++;
			p = next;
			continue;
		}
		if (array_grow(v, cap, *n + 1, sizeof **v) < 0)
			return -LS_E_NOMEM;
		(*v)[(*n)++] = e;
		p = next;
	}
	return 0;
}

long perfmap_parse(const char *text, size_t len, struct code_table *out,
		   struct perfmap_stats *st)
{
	long k;
	memset(st, 0, sizeof *st);
	code_table_free(out);
	char *buf = malloc(len + 1);
	if (!buf)
		return -LS_E_NOMEM;
	memcpy(buf, text, len);
	buf[len] = 0;
	struct code_region *v = NULL;
	size_t n = 0, cap = 0;
	if (parse_lines(buf, len, &v, &n, &cap, st) < 0) {
		free(v);
		free(buf);
		return -LS_E_NOMEM;
	}
	k = code_table_build(out, v, n, &st->overlapped);
	free(v);
	if (k < 0) {
		free(buf);
		return k;
	}
	out->text = buf;
	return k;
}

/* ---- the target's file ---- */

struct perfmap {
	pid_t pid;
	pid_t nspid;              /* its pid in its own namespace: names the file */
	struct code_table t;
	struct perfmap_stats st;
	uint64_t next_check_ns;
	int have;                 /* a file was read: the fields below are its */
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int warned;
	/* what was read of it: whole lines, in the order written; a file
	 * that only grew is read on from DONE_OFF */
	struct code_region *raw;
	size_t nraw, capraw;
	char **texts;             /* the bytes read, names cut in place */
	size_t ntexts, captexts;
	uint64_t done_off;        /* bytes of whole lines read */
	char tail[256];           /* the last bytes before done_off */
	size_t tail_len;
	/* the jitdump file the target maps (jitdump.h) */
	struct jitdump *jd;       /* NULL until one is found */
	char jd_path[CODE_NAME_MAX + 1]; /* its path in the target, cleaned, for messages */
	dev_t jd_dev;
	ino_t jd_ino;
	uint64_t jd_next_check_ns;
	int jd_warned;
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

static void forget(struct perfmap *pm);

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
	forget(pm);
	jitdump_free(pm->jd);
	free(pm);
}

const struct perfmap_stats *perfmap_last_stats(const struct perfmap *pm)
{
	return &pm->st;
}

static void forget(struct perfmap *pm)
{
	code_table_free(&pm->t);
	memset(&pm->st, 0, sizeof pm->st);
	pm->have = 0;
	free(pm->raw);
	pm->raw = NULL;
	pm->nraw = pm->capraw = 0;
	for (size_t i = 0; i < pm->ntexts; i++)
		free(pm->texts[i]);
	free(pm->texts);
	pm->texts = NULL;
	pm->ntexts = pm->captexts = 0;
	pm->done_off = 0;
	pm->tail_len = 0;
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

/* Whether the open file FD (its stat in *FS) may be read: a regular
 * file owned by root or by the target's user, as perf requires. */
static int usable(const struct perfmap *pm, int fd, struct stat *fs)
{
	struct stat ps;
	char ppath[32];
	snprintf(ppath, sizeof ppath, "/proc/%d", (int)pm->pid);
	return fstat(fd, fs) == 0 && S_ISREG(fs->st_mode) && stat(ppath, &ps) == 0 &&
	       (fs->st_uid == 0 || fs->st_uid == ps.st_uid);
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
	struct stat fs;
	if (!usable(pm, fd, &fs)) {
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
	/* grown, the bytes before what was read unchanged: read on */
	int on = pm->have && fs.st_dev == pm->dev && fs.st_ino == pm->ino &&
		 (uint64_t)fs.st_size >= pm->done_off;
	if (on && pm->tail_len) {
		char old[sizeof pm->tail];
		on = pread(fd, old, pm->tail_len, (off_t)(pm->done_off - pm->tail_len)) ==
			     (ssize_t)pm->tail_len && !memcmp(old, pm->tail, pm->tail_len);
	}
	if (!on)
		forget(pm);
	int cut = (uint64_t)fs.st_size > PERFMAP_MAX_BYTES;
	uint64_t end = cut ? PERFMAP_MAX_BYTES : (uint64_t)fs.st_size;
	size_t want = end > pm->done_off ? (size_t)(end - pm->done_off) : 0, got = 0;
	char *buf = malloc(want + 1);
	while (buf && got < want) {
		ssize_t r = pread(fd, buf + got, want - got, (off_t)(pm->done_off + got));
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
	/* whole lines only: the last one may be half written (or cut by the
	 * limit); it is read once its newline is there */
	char *nl = got ? memrchr(buf, '\n', got) : NULL;
	size_t keep = nl ? (size_t)(nl - buf) + 1 : 0;
	/* the tail to recognise the file by next time */
	if (keep >= sizeof pm->tail) {
		memcpy(pm->tail, buf + keep - sizeof pm->tail, sizeof pm->tail);
		pm->tail_len = sizeof pm->tail;
	} else if (keep) {
		size_t from_old = pm->tail_len + keep > sizeof pm->tail ? sizeof pm->tail - keep : pm->tail_len;
		memmove(pm->tail, pm->tail + pm->tail_len - from_old, from_old);
		memcpy(pm->tail + from_old, buf, keep);
		pm->tail_len = from_old + keep;
	}
	long k = (long)pm->t.n;
	if (keep) {
		buf[keep] = 0;
		if (array_grow(&pm->texts, &pm->captexts, pm->ntexts + 1, sizeof *pm->texts) < 0 ||
		    parse_lines(buf, keep, &pm->raw, &pm->nraw, &pm->capraw, &pm->st) < 0) {
			free(buf);
			forget(pm);
			return;
		}
		pm->texts[pm->ntexts++] = buf;
		pm->done_off += keep;
		pm->st.overlapped = 0;
		k = code_table_build(&pm->t, pm->raw, pm->nraw, &pm->st.overlapped);
		if (k < 0) {
			forget(pm);
			return;
		}
	} else {
		free(buf);
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

/* ---- the target's jitdump file ---- */

/* One line on what the reads of PM's jitdump skipped, the first time. */
static void jd_warn(struct perfmap *pm)
{
	const struct jitdump_stats *st = jitdump_stats(pm->jd);
	if (pm->jd_warned || (!st->malformed && !st->over_count && !st->bad_header && !st->broken &&
			      !st->cut_bytes))
		return;
	pm->jd_warned = 1;
	char b[1200];
	int o = snprintf(b, sizeof b, "pid %d: jitdump %s:", (int)pm->pid, pm->jd_path);
	const char *sep = "";
#define JD_ADD(...)                                                            \
	do {                                                                   \
		if (o > 0 && (size_t)o < sizeof b) {                           \
			o += snprintf(b + o, sizeof b - (size_t)o, __VA_ARGS__); \
			sep = ";";                                             \
		}                                                              \
	} while (0)
	if (st->bad_header)
		JD_ADD(" not read (%s)", st->bad_header);
	if (st->malformed)
		JD_ADD("%s %lu malformed records skipped", sep, st->malformed);
	if (st->over_count)
		JD_ADD("%s %lu records past the first %d regions or %u MiB of names ignored", sep,
		       st->over_count, PERFMAP_MAX_ENTRIES, JITDUMP_MAX_TEXT >> 20);
	if (st->broken)
		JD_ADD("%s not read past byte %llu (%s)", sep, (unsigned long long)st->broken_at,
		       st->broken);
	if (st->cut_bytes)
		JD_ADD("%s read up to %llu MiB only", sep, (unsigned long long)(JITDUMP_MAX_BYTES >> 20));
#undef JD_ADD
	msg_error("%s", b);
}

/* The mapping of MAPS that is PM's target's jitdump (basename
 * jit-NSPID.dump or jit-PID.dump: a child's inherited mapping of its
 * parent's file is not its own), or NULL. */
static const struct proc_map *jd_find(const struct perfmap *pm, const struct proc_maps *maps)
{
	char want[40], want2[40];
	snprintf(want, sizeof want, "jit-%d.dump", (int)pm->nspid);
	snprintf(want2, sizeof want2, "jit-%d.dump", (int)pm->pid);
	for (int i = 0; i < maps->n; i++) {
		const struct proc_map *m = &maps->m[i];
		if (m->name && m->path && m->path[0] == '/' &&
		    (!strcmp(m->name, want) || !strcmp(m->name, want2)))
			return m;
	}
	return NULL;
}

/* Read on in the target's jitdump (jitdump.h), found in MAPS. */
static void jd_refresh(struct perfmap *pm, const struct proc_maps *maps)
{
	uint64_t now = time_now_ns();
	if (!maps || (pm->jd_next_check_ns && now < pm->jd_next_check_ns))
		return;
	pm->jd_next_check_ns = now + PERFMAP_RECHECK_NS;
	const struct proc_map *m = jd_find(pm, maps);
	if (!m)
		return; /* none (yet); what was read stays: its code may still run */
	char shown[CODE_NAME_MAX + 1]; /* the path for messages: the target's bytes */
	size_t sn = strnlen(m->path, sizeof shown - 1);
	memcpy(shown, m->path, sn);
	shown[code_name_clean(shown, sn)] = 0;
	/* the very file mapped, through map_files (deleted or not, whatever
	 * the mount namespace); else its path in the target's root */
	char path[4200];
	snprintf(path, sizeof path, "/proc/%d/map_files/%llx-%llx", (int)pm->pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	const char *via = "map_files";
	if (fd < 0 && !m->deleted) {
		via = "the target's root";
		int n = snprintf(path, sizeof path, "/proc/%d/root%s", (int)pm->pid, m->path);
		if (n > 0 && (size_t)n < sizeof path)
			fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	}
	if (fd < 0) {
		msg_debug(1, "pid %d: jitdump %s: cannot open: %s", (int)pm->pid, shown, strerror(errno));
		return;
	}
	struct stat fs;
	if (!usable(pm, fd, &fs)) {
		msg_debug(1, "pid %d: jitdump %s: not a regular file owned by root or the target's user: not read",
			  (int)pm->pid, shown);
		close(fd);
		return;
	}
	if (pm->jd && (fs.st_dev != pm->jd_dev || fs.st_ino != pm->jd_ino ||
		       (uint64_t)fs.st_size < jitdump_offset(pm->jd))) {
		jitdump_free(pm->jd); /* another file, or this one cut short: read anew */
		pm->jd = NULL;
		pm->jd_warned = 0;
	}
	if (!pm->jd) {
		if (!(pm->jd = jitdump_new())) {
			close(fd);
			return;
		}
		pm->jd_dev = fs.st_dev;
		pm->jd_ino = fs.st_ino;
		memcpy(pm->jd_path, shown, sizeof pm->jd_path);
	}
	long k = jitdump_feed_fd(pm->jd, fd, (uint64_t)fs.st_size);
	close(fd);
	msg_debug(1, "pid %d: jitdump %s (through %s): %ld regions, read up to byte %llu of %llu",
		  (int)pm->pid, pm->jd_path, via, k, (unsigned long long)jitdump_offset(pm->jd),
		  (unsigned long long)fs.st_size);
	jd_warn(pm);
}

const char *perfmap_lookup(struct perfmap *pm, uint64_t addr, const struct proc_maps *maps,
			   const char **module)
{
	static const char *perf_map_mod, *jitdump_mod;
	if (!pm)
		return NULL;
	refresh(pm);
	const struct code_region *e = code_table_find(&pm->t, addr);
	if (e) {
		if (!perf_map_mod)
			perf_map_mod = intern("[perf-map]");
		if (module)
			*module = perf_map_mod;
		return intern(e->name);
	}
	jd_refresh(pm, maps);
	const struct code_table *t = pm->jd ? jitdump_table(pm->jd) : NULL;
	if (!t || !(e = code_table_find(t, addr)))
		return NULL;
	if (!jitdump_mod)
		jitdump_mod = intern("[jitdump]");
	if (module)
		*module = jitdump_mod;
	return intern(e->name);
}
