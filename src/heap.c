/* heap.c: per-state heap totals, the largest-object lists, the path
 * search's bookkeeping and the text summary of `luaspy heap` (heap.h). */
#include <ctype.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "heap.h"
#include "out.h"

static const char *const type_names[HEAP_NTYPES] = {
	[HEAP_STRING] = "strings",
	[HEAP_TABLE] = "tables",
	[HEAP_LFUNC] = "Lua closures",
	[HEAP_CFUNC] = "C closures",
	[HEAP_PROTO] = "prototypes",
	[HEAP_UPVAL] = "upvalues",
	[HEAP_THREAD] = "threads",
	[HEAP_UDATA] = "userdata",
	[HEAP_CDATA] = "cdata (header only)",
	[HEAP_TRACE] = "traces",
	[HEAP_STRTAB] = "string table",
	[HEAP_VMBUF] = "VM buffers",
};

const char *heap_type_name(int t)
{
	return t >= 0 && t < HEAP_NTYPES ? type_names[t] : "?";
}

void heap_state_init(struct heap_state *s, uint64_t addr)
{
	memset(s, 0, sizeof *s);
	s->addr = addr;
}

void heap_state_free(struct heap_state *s)
{
	free(s->pn);
	s->pn = NULL;
	s->npn = s->cappn = 0;
	htab_free(&s->pidx);
}

int heap_add(struct heap_state *s, int t, uint64_t bytes)
{
	if (s->objects >= HEAP_MAX_OBJECTS) {
		s->cut = "more than " "50000000" " objects";
		return -1;
	}
	s->objects++;
	s->count[t]++;
	s->bytes[t] += bytes;
	return 0;
}

void heap_table(struct heap_state *s, uint64_t addr, uint64_t bytes, uint32_t asize, uint32_t hsize)
{
	int n = s->ntables;
	if (n == HEAP_TOP && s->tables[n - 1].bytes >= bytes)
		return;
	int i = n < HEAP_TOP ? n : HEAP_TOP - 1;
	while (i > 0 && s->tables[i - 1].bytes < bytes) {
		s->tables[i] = s->tables[i - 1];
		i--;
	}
	s->tables[i] = (struct heap_top_table){ addr, bytes, asize, hsize };
	if (n < HEAP_TOP)
		s->ntables++;
}

int heap_string_wanted(const struct heap_state *s, uint64_t len)
{
	return s->nstrings < HEAP_TOP || s->strings[HEAP_TOP - 1].len < len;
}

void heap_string(struct heap_state *s, uint64_t addr, uint64_t len, uint64_t bytes,
		 const char *preview, int n)
{
	if (!heap_string_wanted(s, len))
		return;
	int i = s->nstrings < HEAP_TOP ? s->nstrings : HEAP_TOP - 1;
	while (i > 0 && s->strings[i - 1].len < len) {
		s->strings[i] = s->strings[i - 1];
		i--;
	}
	struct heap_top_string *e = &s->strings[i];
	e->addr = addr;
	e->len = len;
	e->bytes = bytes;
	e->npreview = n < 0 ? 0 : n > HEAP_STR_PREVIEW ? HEAP_STR_PREVIEW : n;
	memcpy(e->preview, preview, (size_t)e->npreview);
	if (s->nstrings < HEAP_TOP)
		s->nstrings++;
}

/* ---- path search ------------------------------------------------------- */

struct pn_key {
	const struct heap_state *s;
	uint64_t addr;
};

static int pn_eq(const void *ctx, uint32_t i)
{
	const struct pn_key *k = ctx;
	return k->s->pn[i].addr == k->addr;
}

static uint64_t pn_hash(uint64_t addr)
{
	return htab_fnv1a_word(HTAB_FNV_INIT, addr);
}

int64_t heap_path_add(struct heap_state *s, uint64_t addr, int64_t parent, const char *key,
		      int64_t idx)
{
	if (s->path_cut)
		return -2;
	struct pn_key k = { s, addr };
	uint64_t h = pn_hash(addr);
	if (htab_find(&s->pidx, h, pn_eq, &k, NULL) >= 0)
		return -1;
	if (s->npn >= HEAP_MAX_PATH_TABLES) {
		s->path_cut = "more than 2000000 tables";
		return -2;
	}
	size_t pos;
	if (htab_reserve(&s->pidx) < 0 || array_grow(&s->pn, &s->cappn, s->npn + 1, sizeof *s->pn) < 0) {
		s->path_cut = "out of memory";
		return -2;
	}
	htab_find(&s->pidx, h, pn_eq, &k, &pos);
	s->pn[s->npn] = (struct heap_path_node){ addr, parent, key, idx };
	htab_insert(&s->pidx, pos, h, (uint32_t)s->npn);
	return (int64_t)s->npn++;
}

static int is_ident(const char *k)
{
	if (!*k || isdigit((unsigned char)*k))
		return 0;
	for (const char *c = k; *c; c++)
		if (!isalnum((unsigned char)*c) && *c != '_')
			return 0;
	return 1;
}

/* Append one path segment for entry E to the text at OUT (LEN bytes). */
static void seg_text(const struct heap_path_node *e, int first, char *out, size_t len)
{
	if (e->key && first) {
		char c[96];
		snprintf(out, len, "%s", out_clean(e->key, c, sizeof c, 0));
	} else if (e->key && is_ident(e->key) && strlen(e->key) < 80) {
		snprintf(out, len, ".%s", e->key);
	} else if (e->key) {
		/* quoted like Lua source: out_clean makes it printable UTF-8,
		 * then quotes and backslashes are escaped */
		char c[64], q[140];
		out_clean(e->key, c, sizeof c, 0);
		size_t j = 0;
		for (const char *p = c; *p && j + 3 < sizeof q; p++) {
			if (*p == '"' || *p == '\\')
				q[j++] = '\\';
			q[j++] = *p;
		}
		q[j] = 0;
		snprintf(out, len, "[\"%s%s\"]", q, strlen(e->key) >= sizeof c - 1 ? "..." : "");
	} else {
		snprintf(out, len, "[%" PRId64 "]", e->idx);
	}
}

int heap_path_of(const struct heap_state *s, uint64_t addr, char *buf, size_t len)
{
	struct pn_key k = { s, addr };
	int64_t i = htab_find(&s->pidx, pn_hash(addr), pn_eq, &k, NULL);
	if (i < 0 || len < 8)
		return -1;
	/* the chain from the root: at most 64 segments shown, the rest elided */
	int64_t chain[64];
	int n = 0, more = 0;
	for (int64_t j = i; j >= 0; j = s->pn[j].parent) {
		if (n == 64) {
			more = 1;
			break;
		}
		chain[n++] = j;
	}
	size_t used = 0;
	buf[0] = 0;
	for (int m = n - 1; m >= 0; m--) {
		char seg[160];
		seg_text(&s->pn[chain[m]], m == n - 1 && !more, seg, sizeof seg);
		if (m == n - 1 && more) {
			snprintf(seg, sizeof seg, "...");
		}
		size_t sl = strlen(seg);
		if (used + sl + 4 > len) {
			snprintf(buf + used, len - used, "...");
			return 0;
		}
		memcpy(buf + used, seg, sl + 1);
		used += sl;
	}
	return 0;
}

/* ---- text summary ---------------------------------------------------------- */

static void put_bytes(FILE *f, uint64_t b)
{
	if (b >= 10ull << 20)
		fprintf(f, "%9.1f MiB", (double)b / (1 << 20));
	else if (b >= 10ull << 10)
		fprintf(f, "%9.1f KiB", (double)b / (1 << 10));
	else
		fprintf(f, "%9" PRIu64 " B  ", b);
}

/* PREVIEW (N bytes, any bytes) as a Lua-style quoted string: printable
 * ASCII as is, quotes and backslashes escaped, others as \ddd. */
static void put_preview(FILE *f, const char *p, int n, int cut)
{
	fputc('"', f);
	for (int i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c >= 32 && c < 127)
			fputc(c, f);
		else
			fprintf(f, "\\%03u", c);
	}
	fputc('"', f);
	if (cut)
		fputs("...", f);
}

void heap_print_text(FILE *f, int pid, const char *runtime, const struct heap_state *s, int n,
		     double pause_ms)
{
	fprintf(f, "Process %d: %s, %d state%s, threads stopped for %.1f ms\n", pid,
		runtime ? runtime : "Lua", n, n == 1 ? "" : "s", pause_ms);
	for (int k = 0; k < n; k++) {
		const struct heap_state *st = &s[k];
		uint64_t total = 0, count = 0;
		fprintf(f, "\nState 0x%" PRIx64 "\n", st->addr);
		fprintf(f, "  %-22s %12s %13s\n", "type", "count", "bytes");
		for (int t = 0; t < HEAP_NTYPES; t++) {
			if (!st->count[t] && !st->bytes[t])
				continue;
			fprintf(f, "  %-22s %12" PRIu64 " ", heap_type_name(t), st->count[t]);
			put_bytes(f, st->bytes[t]);
			fputc('\n', f);
			total += st->bytes[t];
			count += st->count[t];
		}
		fprintf(f, "  %-22s %12" PRIu64 " ", "total walked", count);
		put_bytes(f, total);
		fprintf(f, "  (%" PRIu64 " bytes)\n", total);
		if (st->vm_bytes_how) {
			fprintf(f, "  %-22s %12s ", "VM count", "");
			put_bytes(f, st->vm_bytes);
			fprintf(f, "  (%" PRIu64 " bytes, %s", st->vm_bytes, st->vm_bytes_how);
			if (st->vm_bytes)
				fprintf(f, "; walked %.2f %%", 100.0 * (double)total / (double)st->vm_bytes);
			fputs(")\n", f);
		} else {
			fprintf(f, "  VM count: unknown for this layout\n");
		}
		if (st->not_walked)
			fprintf(f, "  not walked: %s\n", st->not_walked);
		if (st->bad)
			fprintf(f, "  skipped: %" PRIu64 " objects that did not validate\n", st->bad);
		if (st->cut)
			fprintf(f, "  PARTIAL: the walk stopped at %s\n", st->cut);
		if (st->ntables) {
			fprintf(f, "\n  Largest tables (own size: header, array and hash parts)\n");
			for (int i = 0; i < st->ntables; i++) {
				const struct heap_top_table *e = &st->tables[i];
				char path[HEAP_PATH_MAX];
				if (heap_path_of(st, e->addr, path, sizeof path) < 0)
					snprintf(path, sizeof path, "(no path from _G or the registry by table keys)");
				fputs("  ", f);
				put_bytes(f, e->bytes);
				fprintf(f, "  0x%-12" PRIx64 " array %u, hash %u  %s\n", e->addr, e->asize,
					e->hsize, path);
			}
			if (st->path_cut)
				fprintf(f, "  (path search cut: %s)\n", st->path_cut);
		}
		if (st->nstrings) {
			fprintf(f, "\n  Largest strings\n");
			for (int i = 0; i < st->nstrings; i++) {
				const struct heap_top_string *e = &st->strings[i];
				fputs("  ", f);
				put_bytes(f, e->bytes);
				fprintf(f, "  0x%-12" PRIx64 " len %" PRIu64 "  ", e->addr, e->len);
				put_preview(f, e->preview, e->npreview, e->len > (uint64_t)e->npreview);
				fputc('\n', f);
			}
		}
	}
}
