/* jitdump.c: reading a target's jitdump file (jit-PID.dump), bounded and
 * incremental. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "err.h"
#include "htab.h"
#include "jitdump.h"

#define HDR_MIN      40u          /* the header's fields */
#define REC_PREFIX   16u          /* id, total_size, timestamp */
#define LOAD_FIXED   40u          /* pid, tid, vma, code_addr, code_size, code_index */
#define MOVE_FIXED   48u          /* pid, tid, vma, old, new, code_size, code_index */
#define ID_LOAD      0u
#define ID_MOVE      1u
#define ID_CLOSE     3u
#define WINDOW       (1u << 20)   /* bytes of a pread window */
#define TEXT_CHUNK   (1u << 20)   /* bytes of a block of names */

/* The latest region made for one code_index. */
struct code_ref {
	uint64_t index;
	size_t raw;
};

struct jitdump {
	uint64_t off;                /* next byte to read; 0: the header */
	uint8_t hdr[HDR_MIN];        /* the header read: a file rewritten has another */
	struct code_region *raw;   /* regions in the order written */
	size_t nraw, capraw;
	struct code_ref *ref;        /* code_index -> latest region */
	size_t nref, capref;
	struct htab refs;
	char **chunk;                /* names, in blocks that never move */
	size_t nchunk, capchunk, chunk_used;
	uint64_t text_bytes;
	struct code_table t;      /* built from raw when dirty */
	int dirty;
	struct jitdump_stats st;
};

/* ---- where the bytes come from: memory, or a file read in windows ---- */

struct src {
	const uint8_t *mem;          /* the whole file, or NULL: read FD */
	int fd;
	uint64_t size;
	uint8_t *win;
	uint64_t win_off;
	size_t win_len;
	int io_error;
};

/* LEN bytes (at most WINDOW) at OFF, valid until the next call, or NULL
 * when the file ends before (or a read failed: io_error set). */
static const uint8_t *src_get(struct src *s, uint64_t off, size_t len)
{
	if (off > s->size || len > s->size - off || len > WINDOW)
		return NULL;
	if (s->mem)
		return s->mem + off;
	if (s->win && off >= s->win_off && off + len <= s->win_off + s->win_len)
		return s->win + (off - s->win_off);
	if (!s->win && !(s->win = malloc(WINDOW))) {
		s->io_error = -LS_E_NOMEM;
		return NULL;
	}
	size_t want = s->size - off < WINDOW ? (size_t)(s->size - off) : WINDOW, got = 0;
	while (got < want) {
		ssize_t r = pread(s->fd, s->win + got, want - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	s->win_off = off;
	s->win_len = got;
	if (got < len) {
		s->io_error = -LS_E_IO; /* the file shrank under us, or EIO */
		return NULL;
	}
	return s->win;
}

static uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* ---- regions ---- */

struct ref_key {
	const struct jitdump *jd;
	uint64_t index;
};

static int ref_eq(const void *ctx, uint32_t i)
{
	const struct ref_key *k = ctx;
	return k->jd->ref[i].index == k->index;
}

/* The region last made for code_index INDEX, or -1. */
static int64_t ref_find(struct jitdump *jd, uint64_t index, size_t *pos)
{
	struct ref_key k = { jd, index };
	uint64_t h = htab_fnv1a_word(HTAB_FNV_INIT, index);
	int64_t i = htab_find(&jd->refs, h, ref_eq, &k, pos);
	return i < 0 ? -1 : (int64_t)jd->ref[i].raw;
}

/* Make code_index INDEX point to region RAW. 0 or -1 (no memory). */
static int ref_set(struct jitdump *jd, uint64_t index, size_t raw)
{
	if (htab_reserve(&jd->refs) < 0)
		return -1;
	struct ref_key k = { jd, index };
	uint64_t h = htab_fnv1a_word(HTAB_FNV_INIT, index);
	size_t pos;
	int64_t i = htab_find(&jd->refs, h, ref_eq, &k, &pos);
	if (i >= 0) {
		jd->ref[i].raw = raw;
		return 0;
	}
	if (array_grow(&jd->ref, &jd->capref, jd->nref + 1, sizeof *jd->ref) < 0)
		return -1;
	jd->ref[jd->nref] = (struct code_ref){ index, raw };
	htab_insert(&jd->refs, pos, h, (uint32_t)jd->nref);
	jd->nref++;
	return 0;
}

/* A copy of the LEN name bytes at S, cleaned, in JD's blocks; NULL when
 * past JITDUMP_MAX_TEXT (*OVER set) or out of memory. */
static const char *name_keep(struct jitdump *jd, const uint8_t *s, size_t len, int *over)
{
	if (len > CODE_NAME_MAX + 4)
		len = CODE_NAME_MAX + 4; /* room for the cut to find a character's start */
	if (jd->text_bytes + len + 1 > JITDUMP_MAX_TEXT) {
		*over = 1;
		return NULL;
	}
	if (jd->nchunk == 0 || jd->chunk_used + len + 1 > TEXT_CHUNK) {
		if (array_grow(&jd->chunk, &jd->capchunk, jd->nchunk + 1, sizeof *jd->chunk) < 0)
			return NULL;
		if (!(jd->chunk[jd->nchunk] = malloc(TEXT_CHUNK)))
			return NULL;
		jd->nchunk++;
		jd->chunk_used = 0;
	}
	char *d = jd->chunk[jd->nchunk - 1] + jd->chunk_used;
	memcpy(d, s, len);
	len = code_name_clean(d, len);
	d[len] = 0;
	jd->chunk_used += len + 1;
	jd->text_bytes += len + 1;
	return d;
}

/* Append region [START, END) named NAME for code_index INDEX. 0, 1 (past
 * a limit: counted) or -LS_E_NOMEM. */
static int region_add(struct jitdump *jd, uint64_t start, uint64_t end, const char *name,
		      uint64_t index)
{
	if (jd->nraw >= CODE_MAX_REGIONS) {
		jd->st.over_count++;
		return 1;
	}
	if (array_grow(&jd->raw, &jd->capraw, jd->nraw + 1, sizeof *jd->raw) < 0 ||
	    ref_set(jd, index, jd->nraw) < 0)
		return -LS_E_NOMEM;
	jd->raw[jd->nraw++] = (struct code_region){ start, end, name };
	jd->dirty = 1;
	return 0;
}

/* ---- records ---- */

/* A JIT_CODE_LOAD of TSZ bytes at OFF. 0 or -LS_E_*. */
static int rec_load(struct jitdump *jd, struct src *s, uint64_t off, uint32_t tsz)
{
	if (tsz < REC_PREFIX + LOAD_FIXED + 2) { /* a name of one byte and its NUL */
		jd->st.malformed++;
		return 0;
	}
	uint32_t region = tsz - REC_PREFIX - LOAD_FIXED; /* name, NUL, code */
	size_t scan = region < JITDUMP_MAX_NAME_SCAN ? region : JITDUMP_MAX_NAME_SCAN;
	const uint8_t *p = src_get(s, off, REC_PREFIX + LOAD_FIXED + scan);
	if (!p)
		return s->io_error ? s->io_error : -LS_E_IO;
	const uint8_t *f = p + REC_PREFIX;
	uint64_t addr = rd64(f + 16), size = rd64(f + 24), index = rd64(f + 32);
	if (size == 0 || addr + size < addr || size > region - 2) {
		jd->st.malformed++;
		return 0;
	}
	uint64_t name_room = region - size; /* the name and its NUL */
	if (name_room < scan)
		scan = (size_t)name_room;
	const uint8_t *name = f + LOAD_FIXED;
	const uint8_t *nul = memchr(name, 0, scan);
	if ((!nul && scan == name_room) || nul == name) {
		jd->st.malformed++; /* no NUL before the code, or no name */
		return 0;
	}
	size_t len = nul ? (size_t)(nul - name) : scan;
	if (jd->nraw >= CODE_MAX_REGIONS) { /* before its name takes room */
		jd->st.over_count++;
		return 0;
	}
	int over = 0;
	const char *kept = name_keep(jd, name, len, &over);
	if (!kept) {
		if (!over)
			return -LS_E_NOMEM;
		jd->st.over_count++;
		return 0;
	}
	int rc = region_add(jd, addr, addr + size, kept, index);
	if (rc == 0)
		jd->st.loads++;
	return rc < 0 ? rc : 0;
}

/* A JIT_CODE_MOVE of TSZ bytes at OFF. 0 or -LS_E_*. */
static int rec_move(struct jitdump *jd, struct src *s, uint64_t off, uint32_t tsz)
{
	if (tsz < REC_PREFIX + MOVE_FIXED) {
		jd->st.malformed++;
		return 0;
	}
	const uint8_t *p = src_get(s, off, REC_PREFIX + MOVE_FIXED);
	if (!p)
		return s->io_error ? s->io_error : -LS_E_IO;
	const uint8_t *f = p + REC_PREFIX;
	uint64_t old = rd64(f + 16), addr = rd64(f + 24), size = rd64(f + 32), index = rd64(f + 40);
	int64_t from = ref_find(jd, index, NULL);
	if (from < 0 || size == 0 || addr + size < addr) {
		jd->st.malformed++;
		return 0;
	}
	if (jd->nraw >= CODE_MAX_REGIONS) { /* before the old region goes */
		jd->st.over_count++;
		return 0;
	}
	struct code_region *o = &jd->raw[from];
	const char *name = o->name;
	if (o->start == old)
		o->end = o->start; /* gone from there */
	int rc = region_add(jd, addr, addr + size, name, index);
	if (rc == 0)
		jd->st.moves++;
	return rc < 0 ? rc : 0;
}

/* Check the header; 1 when whole and good (jd->off past it), 0 when not
 * whole yet, -1 when refused (st.bad_header set). */
static int header(struct jitdump *jd, struct src *s)
{
	const uint8_t *p = src_get(s, 0, HDR_MIN);
	if (!p)
		return 0;
	uint32_t magic = rd32(p), version = rd32(p + 4), tsz = rd32(p + 8);
	if (magic != JITDUMP_MAGIC)
		jd->st.bad_header = magic == __builtin_bswap32(JITDUMP_MAGIC) ?
			"written in the other byte order" : "no jitdump magic";
	else if (version != 1)
		jd->st.bad_header = "version not 1";
	else if (tsz < HDR_MIN || tsz > JITDUMP_MAX_HEADER)
		jd->st.bad_header = "header size out of bounds";
	if (jd->st.bad_header)
		return -1;
	if (s->size < tsz)
		return 0;
	memcpy(jd->hdr, p, HDR_MIN);
	jd->off = tsz;
	return 1;
}

static void reset(struct jitdump *jd);

static long feed(struct jitdump *jd, struct src *s)
{
	struct jitdump_stats *st = &jd->st;
	if (jd->off) {
		/* the same file still? one rewritten from its start (an agent
		 * started again) has another header: read it anew */
		const uint8_t *h = src_get(s, 0, HDR_MIN);
		if (!h && s->io_error)
			return s->io_error;
		if (!h || memcmp(h, jd->hdr, HDR_MIN))
			reset(jd);
	}
	if (st->bad_header || st->broken || st->closed || st->cut_bytes)
		return (long)jd->nraw;
	if (jd->off == 0 && header(jd, s) <= 0)
		return s->io_error ? s->io_error : (long)jd->nraw;
	for (;;) {
		uint64_t off = jd->off;
		const uint8_t *p = src_get(s, off, REC_PREFIX);
		if (!p)
			break; /* the end, or a prefix not whole yet */
		uint32_t id = rd32(p), tsz = rd32(p + 4);
		if (tsz < REC_PREFIX || tsz > JITDUMP_MAX_RECORD) {
			st->broken = tsz < REC_PREFIX ? "record size under 16 bytes" :
				"record size over the limit";
			st->broken_at = off;
			break;
		}
		if (off + tsz > JITDUMP_MAX_BYTES) {
			st->cut_bytes = 1;
			break;
		}
		if (s->size - off < tsz)
			break; /* torn: the writer is still at it */
		int rc = 0;
		if (id == ID_LOAD)
			rc = rec_load(jd, s, off, tsz);
		else if (id == ID_MOVE)
			rc = rec_move(jd, s, off, tsz);
		else if (id == ID_CLOSE)
			st->closed = 1;
		else
			st->other++;
		if (rc < 0)
			return rc;
		jd->off = off + tsz;
		if (st->closed)
			break;
	}
	if (s->io_error)
		return s->io_error;
	return (long)jd->nraw;
}

/* ---- the API ---- */

struct jitdump *jitdump_new(void)
{
	return calloc(1, sizeof(struct jitdump));
}

/* Forget all JD read: it is new again. */
static void reset(struct jitdump *jd)
{
	for (size_t i = 0; i < jd->nchunk; i++)
		free(jd->chunk[i]);
	free(jd->chunk);
	free(jd->raw);
	free(jd->ref);
	htab_free(&jd->refs);
	code_table_free(&jd->t);
	memset(jd, 0, sizeof *jd);
}

void jitdump_free(struct jitdump *jd)
{
	if (!jd)
		return;
	reset(jd);
	free(jd);
}

long jitdump_feed(struct jitdump *jd, const void *data, size_t len)
{
	struct src s = { .mem = data, .fd = -1, .size = len };
	return feed(jd, &s);
}

long jitdump_feed_fd(struct jitdump *jd, int fd, uint64_t size)
{
	struct src s = { .fd = fd, .size = size };
	long rc = feed(jd, &s);
	free(s.win);
	return rc;
}

uint64_t jitdump_offset(const struct jitdump *jd)
{
	return jd->off;
}

const struct code_table *jitdump_table(struct jitdump *jd)
{
	if (jd->dirty) {
		jd->st.overlapped = 0;
		if (code_table_build(&jd->t, jd->raw, jd->nraw, &jd->st.overlapped) < 0)
			return NULL;
		jd->dirty = 0;
	}
	return &jd->t;
}

const struct jitdump_stats *jitdump_stats(const struct jitdump *jd)
{
	return &jd->st;
}
