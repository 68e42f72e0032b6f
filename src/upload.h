/* upload.h: record --upload: each period's pprof pushed to Grafana
 * Pyroscope's ingest API (POST /ingest?name=APP{labels}&from=&until=
 * &format=pprof&sampleRate=&spyName=luaspy, the body the gzipped pprof:
 * grafana/pyroscope pkg/ingester/pyroscope/ingest_handler.go, served by
 * Pyroscope 0.37 and Grafana Pyroscope 1.x; docs/report.md §7) through
 * libcurl, from a thread of its own so sampling never waits for the
 * network. Profiles wait in a bounded queue; a failed send is retried
 * with back-off; what the queue cannot hold is dropped and counted. */
#ifndef LUASPY_UPLOAD_H
#define LUASPY_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#define UPLOAD_MAX_TAGS 32
#define UPLOAD_MAX_HEADERS 16
#define UPLOAD_QUEUE_MAX 64                  /* profiles waiting in memory (default) */
#define UPLOAD_QUEUE_MAX_BYTES (64u << 20)   /* their bytes */
#define UPLOAD_DISK_MAX 1000                 /* profiles waiting in --upload-queue DIR (default) */
#define UPLOAD_DISK_MAX_BYTES (256u << 20)   /* their bytes */
#define UPLOAD_URL_MAX 8192                  /* bytes of a queued request's query */

struct upload_counts {
	uint64_t sent;        /* profiles the server accepted (2xx) */
	uint64_t attempts_failed; /* sends that failed (network or non-2xx) */
	uint64_t rejected;    /* profiles the server refused for good (4xx but 408/429) */
	uint64_t dropped;     /* profiles dropped: the oldest when the queue was full */
	uint64_t queued;      /* waiting now */
	uint64_t earlier;     /* --upload-queue: profiles found there from an earlier run */
	uint64_t bad_files;   /* --upload-queue: files there not read (not ours, too large, torn) */
	uint64_t kept;        /* --upload-queue: left there at upload_finish, for the next run */
	uint64_t disk_failed; /* --upload-queue: profiles that could not be written (kept in memory) */
	char last_error[200]; /* the last failure, "" when none */
};

/* Where and how many profiles wait (upload_start). */
struct upload_queue_opts {
	const char *dir;      /* --upload-queue DIR, or NULL: in memory */
	unsigned max;         /* profiles, 0: the default (UPLOAD_QUEUE_MAX / UPLOAD_DISK_MAX) */
	size_t max_bytes;     /* their bytes, 0: the default (..._MAX_BYTES) */
};

/* Is upload built in (libcurl found at configure time)? */
int upload_available(void);

/* Start the sender for base URL (http:// or https://; "/ingest" is
 * appended), with the request headers HEADERS[0..NHEADERS-1] ("Name:
 * value", copied) and the queue Q. With Q->dir, each profile waits in a
 * file of its own there (created with mode 0700 when missing; locked
 * against a second luaspy), and those an earlier run left are queued
 * first, oldest first (docs/upload-queue.md). Returns 0, or -1 with WHY
 * filled. */
int upload_start(const char *url, const char *const *headers, int nheaders,
		 const struct upload_queue_opts *q, char *why, size_t whylen);

/* Queue one profile: BODY (LEN bytes, gzipped pprof; taken over, freed
 * by the sender) for the series NAME ("app{k=v,...}", copied), sampled
 * FROM_S to UNTIL_S (Unix seconds) at RATE_HZ. Never blocks on the
 * network (with --upload-queue it writes one file). When the queue is
 * full, the oldest profiles not being sent are dropped (counted, said
 * with -v) to make room. Returns 0, or -1 when BODY could not be queued
 * (out of memory, or larger than the whole queue: freed, counted as
 * dropped). */
int upload_queue(char *body, size_t len, const char *name, uint64_t from_s, uint64_t until_s,
		 double rate_hz);

/* The counters, consistent at the time of the call. */
void upload_counts(struct upload_counts *c);

/* Send what is queued for up to WAIT_S seconds, then stop the sender and
 * free the queue. In memory, what is left is counted as dropped; with
 * --upload-queue, the sender stops at the first failed send and what is
 * left stays in the directory for the next run (counted as kept). */
void upload_finish(double wait_s);

/* Copy S into BUF (LEN bytes) as a Pyroscope label value: bytes outside
 * [A-Za-z0-9_.:/+-] become '_', at most 100 bytes. Returns BUF. */
char *upload_label_value(const char *s, char *buf, size_t len);

/* Is S a valid label or app name ([A-Za-z0-9_.-]+, <= 100 bytes)? 1 or 0. */
int upload_name_ok(const char *s);

#endif
