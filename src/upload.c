/* upload.c: the --upload sender: a bounded queue of gzipped pprof
 * bodies and one thread that POSTs them to Pyroscope's /ingest with
 * libcurl, retrying with back-off (upload.h, docs/report.md §7). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "config.h"
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
int upload_start(const char *url, const char *const *headers, int nheaders, char *why,
		 size_t whylen)
{
	(void)url; (void)headers; (void)nheaders;
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
	char *body;
	size_t len;
	char *url;            /* the whole request URL, query included */
	unsigned tries;
};

static struct {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running;
	int stop;             /* upload_finish: exit once idle or past the deadline */
	uint64_t deadline_ns; /* with stop: CLOCK_MONOTONIC */
	struct item *head, *tail;
	size_t nbytes;
	struct upload_counts c;
	char *base;           /* URL up to and including "/ingest" */
	struct curl_slist *headers;
	CURL *curl;
} up = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

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

/* One POST of IT. 0 sent, 1 retry later, 2 refused for good. */
static int send_one(struct item *it, char *err, size_t errlen)
{
	char curlerr[CURL_ERROR_SIZE] = "";
	CURL *c = up.curl;
	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, it->url);
	curl_easy_setopt(c, CURLOPT_POST, 1L);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, it->body);
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
		pthread_mutex_unlock(&up.mu);
		char err[200];
		int r = send_one(it, err, sizeof err);
		pthread_mutex_lock(&up.mu);
		it->tries++;
		if (r == 1) {
			up.c.attempts_failed++;
			snprintf(up.c.last_error, sizeof up.c.last_error, "%s", err);
			not_before = mono_ns() + backoff_ns(it->tries);
			continue;
		}
		if (r == 2) {
			up.c.attempts_failed++;
			up.c.rejected++;
			snprintf(up.c.last_error, sizeof up.c.last_error, "%s", err);
		} else {
			up.c.sent++;
		}
		not_before = 0;
		up.head = it->next;
		if (!up.head)
			up.tail = NULL;
		up.nbytes -= it->len;
		up.c.queued--;
		free(it->body);
		free(it->url);
		free(it);
	}
	pthread_mutex_unlock(&up.mu);
	return NULL;
}

int upload_start(const char *url, const char *const *headers, int nheaders, char *why,
		 size_t whylen)
{
	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		snprintf(why, whylen, "'%s' is not an http:// or https:// URL", url);
		return -1;
	}
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
	    !(it->url = malloc(strlen(up.base) + ql + 2))) {
		free(it);
		free(q);
		free(body);
		pthread_mutex_lock(&up.mu);
		up.c.dropped++;
		pthread_mutex_unlock(&up.mu);
		return -1;
	}
	sprintf(it->url, "%s?%s", up.base, q);
	free(q);
	it->body = body;
	it->len = len;
	pthread_mutex_lock(&up.mu);
	if (up.c.queued >= UPLOAD_QUEUE_MAX || up.nbytes + len > UPLOAD_QUEUE_MAX_BYTES) {
		up.c.dropped++;
		pthread_mutex_unlock(&up.mu);
		free(it->url);
		free(it->body);
		free(it);
		return -1;
	}
	if (up.tail)
		up.tail->next = it;
	else
		up.head = it;
	up.tail = it;
	up.nbytes += len;
	up.c.queued++;
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
		free(it->body);
		free(it->url);
		free(it);
		up.c.dropped++;
		up.c.queued--;
	}
	up.tail = NULL;
	curl_slist_free_all(up.headers);
	curl_easy_cleanup(up.curl);
	free(up.base);
	curl_global_cleanup();
}

#endif
