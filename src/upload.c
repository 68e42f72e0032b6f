/* upload.c: the --upload sender: a bounded queue of gzipped pprof
 * bodies and one thread that POSTs them to Pyroscope's /ingest with
 * libcurl, retrying with back-off; with --upload-queue the queue is a
 * directory (upload.h, docs/report.md §7, docs/upload-queue.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include "config.h"
#include "msg.h"
#include "upload.h"

char *upload_label_value(const char *s, char *buf, size_t len)
{
	size_t o = 0;
	for (; s && *s && o + 1 < len && o < 100; s++) {
		char c = *s;
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '_' || c == '.' || c == ':' || c == '/' || c == '+' || c == '-';
		buf[o++] = ok ? c : '_';
	}
	if (len)
		buf[o] = 0;
	return buf;
}

int upload_name_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		char c = s[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return n > 0 && n <= 100;
}

#ifndef HAVE_LIBCURL

int upload_available(void) { return 0; }
int upload_start(const char *url, const char *const *headers, int nheaders,
		 const struct upload_queue_opts *q, char *why, size_t whylen)
{
	(void)url; (void)headers; (void)nheaders; (void)q;
	snprintf(why, whylen, "luaspy was built without libcurl (apt-get install libcurl4-openssl-dev, then configure again)");
	return -1;
}
int upload_queue(char *body, size_t len, const char *name, uint64_t from_s, uint64_t until_s,
		 double rate_hz)
{
	(void)len; (void)name; (void)from_s; (void)until_s; (void)rate_hz;
	free(body);
	return -1;
}
void upload_counts(struct upload_counts *c) { memset(c, 0, sizeof *c); }
void upload_finish(double wait_s) { (void)wait_s; }

#else

#include <curl/curl.h>

struct item {
	struct item *next;
	char *body;           /* in memory; NULL while it waits in its file */
	size_t len;           /* the body's bytes */
	char *query;          /* the request's query (after "/ingest?") */
	char *path;           /* --upload-queue: its file, else NULL */
	unsigned tries;
	int busy;             /* being sent: not to be dropped */
};

/* A queued profile's file: this line, the query and a newline, then
 * the body (gzipped pprof) to the end of the file. */
#define QFILE_MAGIC "luaspy upload queue 1\n"
#define QFILE_SUFFIX ".lsq"

static struct {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running;
	int stop;             /* upload_finish: exit once idle or past the deadline */
	uint64_t deadline_ns; /* with stop: CLOCK_MONOTONIC */
	struct item *head, *tail;
	size_t nbytes;
	unsigned max;         /* the queue's bounds (upload_queue_opts) */
	size_t max_bytes;
	char *dir;            /* --upload-queue DIR, or NULL */
	int dirfd;            /* DIR, locked (flock) while we run */
	unsigned seq;         /* files written */
	struct upload_counts c;
	char *base;           /* URL up to and including "/ingest" */
	struct curl_slist *headers;
	CURL *curl;
} up = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .dirfd = -1 };

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int upload_available(void) { return 1; }

/* Back-off before try N+1 (N >= 1): 0.5 s doubling, at most 30 s. */
static uint64_t backoff_ns(unsigned tries)
{
	uint64_t ns = 500000000ull;
	for (unsigned i = 1; i < tries && ns < 30000000000ull; i++)
		ns *= 2;
	return ns < 30000000000ull ? ns : 30000000000ull;
}

static size_t discard(char *ptr, size_t size, size_t n, void *arg)
{
	(void)ptr; (void)arg;
	return size * n;
}

static void item_free(struct item *it)
{
	free(it->body);
	free(it->query);
	free(it->path);
	free(it);
}

/* Append IT to the queue (held: up.mu). */
static void item_append(struct item *it)
{
	if (up.tail)
		up.tail->next = it;
	else
		up.head = it;
	up.tail = it;
	up.nbytes += it->len;
	up.c.queued++;
}

/* Take IT out of the queue (held: up.mu) and free it, its file too. */
static void item_remove(struct item *it)
{
	struct item **pp = &up.head, *prev = NULL;
	while (*pp && *pp != it) {
		prev = *pp;
		pp = &(*pp)->next;
	}
	if (!*pp)
		return;
	*pp = it->next;
	if (up.tail == it)
		up.tail = prev;
	up.nbytes -= it->len;
	up.c.queued--;
	if (it->path)
		unlink(it->path);
	item_free(it);
}

/* Make room for one more profile of LEN bytes (held: up.mu): drop the
 * oldest profiles not being sent. */
static void make_room(size_t len)
{
	struct item *it = up.head;
	while (it && (up.c.queued + 1 > up.max || up.nbytes + len > up.max_bytes)) {
		struct item *next = it->next;
		if (!it->busy) {
			msg_debug(1, "upload: queue full (at most %u profiles, %zu MiB): dropped the oldest "
				  "(%zu bytes%s%s)", up.max, up.max_bytes >> 20, it->len, it->path ? ", " : "",
				  it->path ? it->path : "");
			up.c.dropped++;
			item_remove(it);
		}
		it = next;
	}
}

/* Write IT's query and BODY (IT->len bytes) to a new file of the queue
 * directory, its path into IT->path. 0 or -errno. */
static int qfile_write(struct item *it, const char *body)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	char name[96], tmp[112];
	/* names sort in queue order: the time, then our pid and counter */
	snprintf(name, sizeof name, "%010lld%09ld-%d-%06u" QFILE_SUFFIX, (long long)ts.tv_sec,
		 ts.tv_nsec, (int)getpid(), up.seq++ % 1000000);
	snprintf(tmp, sizeof tmp, ".%s.tmp", name);
	int fd = openat(up.dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int e = 0;
	struct { const char *p; size_t n; } part[4] = {
		{ QFILE_MAGIC, sizeof QFILE_MAGIC - 1 }, { it->query, strlen(it->query) },
		{ "\n", 1 }, { body, it->len } };
	for (int i = 0; i < 4 && !e; i++) {
		size_t off = 0;
		while (off < part[i].n) {
			ssize_t w = write(fd, part[i].p + off, part[i].n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				e = w < 0 ? errno : ENOSPC;
				break;
			}
			off += (size_t)w;
		}
	}
	if (close(fd) < 0 && !e)
		e = errno;
	if (!e && renameat(up.dirfd, tmp, up.dirfd, name) < 0)
		e = errno;
	if (e) {
		unlinkat(up.dirfd, tmp, 0);
		return -e;
	}
	size_t pl = strlen(up.dir) + strlen(name) + 2;
	if (!(it->path = malloc(pl))) {
		unlinkat(up.dirfd, name, 0);
		return -ENOMEM;
	}
	snprintf(it->path, pl, "%s/%s", up.dir, name);
	return 0;
}

/* Read the queue file PATH (untrusted: an earlier run's, or written by
 * anybody who can write there), at most MAX bytes: its query into
 * *QUERY (malloc'ed), its body's length into *LEN and, when BODY is not
 * NULL, the body into *BODY (malloc'ed). 0, or -1 (not a queue file,
 * larger than MAX, torn, unreadable). */
static int qfile_read(const char *path, size_t max, char **query, size_t *len, char **body)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	struct stat sb;
	char *buf = NULL;
	int rc = -1;
	size_t ml = sizeof QFILE_MAGIC - 1;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0 ||
	    (uint64_t)sb.st_size > max + ml + UPLOAD_URL_MAX + 1)
		goto out;
	/* without BODY only the header is read */
	size_t n = (size_t)sb.st_size, hmax = ml + UPLOAD_URL_MAX + 1;
	size_t want = body || n < hmax ? n : hmax;
	if (!(buf = malloc(want + 1)))
		goto out;
	size_t got = 0;
	while (got < want) {
		ssize_t r = read(fd, buf + got, want - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (got != want || got < ml || memcmp(buf, QFILE_MAGIC, ml) != 0)
		goto out;
	char *q = buf + ml, *nl = memchr(q, '\n', got - ml);
	if (!nl || nl == q || (size_t)(nl - q) > UPLOAD_URL_MAX)
		goto out;
	for (const char *c = q; c < nl; c++)
		if (*c <= ' ' || *c > '~')
			goto out; /* a query is printable ASCII, escaped */
	size_t hl = (size_t)(nl + 1 - buf);
	if (hl >= n || n - hl > max)
		goto out; /* no body, or one larger than the queue */
	if (!(*query = strndup(q, (size_t)(nl - q))))
		goto out;
	*len = n - hl;
	if (body) {
		if (!(*body = malloc(*len))) {
			free(*query);
			*query = NULL;
			goto out;
		}
		memcpy(*body, buf + hl, *len);
	}
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Queue the files an earlier run left in up.dir, oldest first (at
 * upload_start, before the sender runs). */
static void qdir_load(void)
{
	int fd = dup(up.dirfd);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	size_t sl = sizeof QFILE_SUFFIX - 1;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);
		if (de->d_name[0] == '.' || l <= sl || strcmp(de->d_name + l - sl, QFILE_SUFFIX))
			continue; /* not ours (a .tmp of a run that died is left alone) */
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			char **a = realloc(names, nc * sizeof *a);
			if (!a)
				break;
			names = a;
			cap = nc;
		}
		if (!(names[n] = strdup(de->d_name)))
			break;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, name_cmp);
	for (size_t i = 0; i < n; i++) {
		size_t pl = strlen(up.dir) + strlen(names[i]) + 2;
		struct item *it = calloc(1, sizeof *it);
		char *path = malloc(pl);
		if (!it || !path) {
			free(it);
			free(path);
			continue;
		}
		snprintf(path, pl, "%s/%s", up.dir, names[i]);
		if (qfile_read(path, up.max_bytes, &it->query, &it->len, NULL) < 0) {
			up.c.bad_files++;
			msg_debug(1, "upload: '%s' is not a queued profile (or larger than the queue): left alone",
				  path);
			free(it);
			free(path);
			continue;
		}
		it->path = path;
		make_room(it->len);
		item_append(it);
		up.c.earlier++;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (up.c.earlier)
		msg_debug(1, "upload: %llu profiles queued in '%s' by an earlier run: sent first",
			  (unsigned long long)up.c.earlier, up.dir);
}

/* One POST of IT with BODY. 0 sent, 1 retry later, 2 refused for good. */
static int send_one(const struct item *it, const char *body, char *err, size_t errlen)
{
	char curlerr[CURL_ERROR_SIZE] = "";
	size_t ul = strlen(up.base) + strlen(it->query) + 2;
	char *url = malloc(ul);
	if (!url) {
		snprintf(err, errlen, "out of memory");
		return 1;
	}
	snprintf(url, ul, "%s?%s", up.base, it->query);
	CURL *c = up.curl;
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)it->len);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, up.headers);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "luaspy/" PACKAGE_VERSION);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 20000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curlerr);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	CURLcode rc = curl_easy_perform(c);
	free(url);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s", curlerr[0] ? curlerr : curl_easy_strerror(rc));
		return 1;
	}
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 200 && status < 300)
		return 0;
	snprintf(err, errlen, "HTTP status %ld", status);
	/* the server said this request is wrong: sending it again will not help */
	if (status >= 400 && status < 500 && status != 408 && status != 429)
		return 2;
	return 1;
}

static void *sender(void *arg)
{
	(void)arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);  /* signals are the main thread's */
	uint64_t not_before = 0;
	pthread_mutex_lock(&up.mu);
	for (;;) {
		uint64_t now = mono_ns();
		if (up.stop && (!up.head || now >= up.deadline_ns))
			break;
		if (up.stop && up.dir)
			not_before = 0; /* one try at once; a failure ends it (the files stay) */
		if (!up.head || now < not_before) {
			uint64_t until = up.head ? not_before : now + 1000000000ull;
			if (up.stop && until > up.deadline_ns)
				until = up.deadline_ns;
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t wait = until > now ? until - now : 0;
			ts.tv_sec += (time_t)(wait / 1000000000ull);
			ts.tv_nsec += (long)(wait % 1000000000ull);
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&up.cv, &up.mu, &ts);
			continue;
		}
		struct item *it = up.head;
		it->busy = 1;
		pthread_mutex_unlock(&up.mu);
		char err[200];
		char *body = it->body, *q = NULL;
		size_t blen = it->len;
		int r;
		if (!body && qfile_read(it->path, up.max_bytes, &q, &blen, &body) < 0) {
			snprintf(err, sizeof err, "'%s': the queued profile is gone or unreadable", it->path);
			r = 3;
		} else {
			r = blen == it->len ? send_one(it, body, err, sizeof err) : 3;
			if (r == 3)
				snprintf(err, sizeof err, "'%s': the queued profile changed", it->path);
		}
		if (body != it->body)
			free(body);
		free(q);
		pthread_mutex_lock(&up.mu);
		it->busy = 0;
		it->tries++;
		if (r == 1) {
			up.c.attempts_failed++;
			snprintf(up.c.last_error, sizeof up.c.last_error, "%s", err);
			not_before = mono_ns() + backoff_ns(it->tries);
			if (up.stop && up.dir)
				break; /* the rest waits in the directory for the next run */
			continue;
		}
		if (r == 2) {
			up.c.attempts_failed++;
			up.c.rejected++;
		} else if (r == 3) {
			up.c.dropped++;
		} else {
			up.c.sent++;
		}
		if (r)
			snprintf(up.c.last_error, sizeof up.c.last_error, "%s", err);
		not_before = 0;
		item_remove(it);
	}
	pthread_mutex_unlock(&up.mu);
	return NULL;
}

/* --upload-queue DIR: create it (one level) when missing, open and lock
 * it. 0, or -1 with WHY filled. */
static int qdir_open(const char *dir, char *why, size_t whylen)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create the queue directory '%s': %s", dir, strerror(errno));
		return -1;
	}
	up.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (up.dirfd < 0) {
		snprintf(why, whylen, "cannot open the queue directory '%s': %s", dir, strerror(errno));
		return -1;
	}
	if (flock(up.dirfd, LOCK_EX | LOCK_NB) < 0) {
		snprintf(why, whylen, "the queue directory '%s' is in use by another luaspy", dir);
		close(up.dirfd);
		up.dirfd = -1;
		return -1;
	}
	if (!(up.dir = strdup(dir))) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	return 0;
}

int upload_start(const char *url, const char *const *headers, int nheaders,
		 const struct upload_queue_opts *q, char *why, size_t whylen)
{
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		snprintf(why, whylen, "'%s' is not an http:// or https:// URL", url);
		return -1;
	}
	int disk = q && q->dir;
	up.max = q && q->max ? q->max : disk ? UPLOAD_DISK_MAX : UPLOAD_QUEUE_MAX;
	up.max_bytes = q && q->max_bytes ? q->max_bytes : disk ? UPLOAD_DISK_MAX_BYTES : UPLOAD_QUEUE_MAX_BYTES;
	if (disk && qdir_open(q->dir, why, whylen) < 0)
		return -1;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || !(up.curl = curl_easy_init())) {
		snprintf(why, whylen, "libcurl could not start");
		return -1;
	}
	size_t n = strlen(url);
	while (n > 0 && url[n - 1] == '/')
		n--;
	if (!(up.base = malloc(n + sizeof "/ingest"))) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	memcpy(up.base, url, n);
	memcpy(up.base + n, "/ingest", sizeof "/ingest");
	up.headers = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	for (int i = 0; up.headers && i < nheaders; i++)
		up.headers = curl_slist_append(up.headers, headers[i]);
	if (!up.headers) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	if (up.dir)
		qdir_load();
	if (pthread_create(&up.thread, NULL, sender, NULL) != 0) {
		snprintf(why, whylen, "cannot start the sender thread: %s", strerror(errno));
		return -1;
	}
	up.running = 1;
	return 0;
}

/* Append "&KEY=escaped VALUE" (no '&' for the first) to *Q. */
static int q_add(char **q, size_t *len, const char *key, const char *val)
{
	char *esc = curl_easy_escape(NULL, val, 0);
	if (!esc)
		return -1;
	size_t need = *len + strlen(key) + strlen(esc) + 3;
	char *nq = realloc(*q, need);
	if (!nq) {
		curl_free(esc);
		return -1;
	}
	*len += (size_t)sprintf(nq + *len, "%s%s=%s", *len ? "&" : "", key, esc);
	*q = nq;
	curl_free(esc);
	return 0;
}

int upload_queue(char *body, size_t len, const char *name, uint64_t from_s, uint64_t until_s,
		 double rate_hz)
{
	struct item *it = calloc(1, sizeof *it);
	char *q = NULL;
	size_t ql = 0;
	char from[24], until[24], rate[24];
	snprintf(from, sizeof from, "%llu", (unsigned long long)from_s);
	snprintf(until, sizeof until, "%llu", (unsigned long long)until_s);
	snprintf(rate, sizeof rate, "%.0f", rate_hz);
	if (!it || q_add(&q, &ql, "name", name) || q_add(&q, &ql, "from", from) ||
	    q_add(&q, &ql, "until", until) || q_add(&q, &ql, "format", "pprof") ||
	    q_add(&q, &ql, "sampleRate", rate) || q_add(&q, &ql, "spyName", "luaspy") ||
	    ql > UPLOAD_URL_MAX || len > up.max_bytes) {
		free(it);
		free(q);
		free(body);
		pthread_mutex_lock(&up.mu);
		up.c.dropped++;
		pthread_mutex_unlock(&up.mu);
		return -1;
	}
	it->query = q;
	it->len = len;
	it->body = body;
	if (up.dir) {
		/* to its file first, no lock held (the sender reads only
		 * files already queued) */
		int e = qfile_write(it, body);
		if (e == 0) {
			free(body);
			it->body = NULL;
		} else {
			pthread_mutex_lock(&up.mu);
			if (!up.c.disk_failed++)
				msg_error("--upload-queue '%s': cannot write a profile there: %s; kept in memory "
					  "(--stats counts them)", up.dir, strerror(-e));
			snprintf(up.c.last_error, sizeof up.c.last_error, "writing to '%s': %s", up.dir,
				 strerror(-e));
			pthread_mutex_unlock(&up.mu);
		}
	}
	pthread_mutex_lock(&up.mu);
	make_room(len);
	item_append(it);
	pthread_cond_signal(&up.cv);
	pthread_mutex_unlock(&up.mu);
	return 0;
}

void upload_counts(struct upload_counts *c)
{
	pthread_mutex_lock(&up.mu);
	*c = up.c;
	pthread_mutex_unlock(&up.mu);
}

void upload_finish(double wait_s)
{
	if (!up.running)
		return;
	pthread_mutex_lock(&up.mu);
	up.stop = 1;
	up.deadline_ns = mono_ns() + (uint64_t)(wait_s * 1e9);
	pthread_cond_signal(&up.cv);
	pthread_mutex_unlock(&up.mu);
	pthread_join(up.thread, NULL);
	up.running = 0;
	while (up.head) {
		struct item *it = up.head;
		up.head = it->next;
		if (it->path) {
			up.c.kept++; /* its file stays for the next run */
		} else {
			up.c.dropped++;
		}
		up.c.queued--;
		item_free(it);
	}
	up.tail = NULL;
	up.nbytes = 0;
	curl_slist_free_all(up.headers);
	curl_easy_cleanup(up.curl);
	free(up.base);
	if (up.dirfd >= 0)
		close(up.dirfd); /* and its lock */
	up.dirfd = -1;
	free(up.dir);
	up.dir = NULL;
	curl_global_cleanup();
}

#endif
