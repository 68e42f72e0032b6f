/* out.c: the text cleaning, escaping and ordering every writer shares.
 * Formats and file writing are out_file.c (it calls the writers; the
 * writers call this file). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "htab.h"
#include "out.h"

/* ------------------------------------------------------------ writing */

int out_ferror(FILE *f)
{
	if (!ferror(f))
		return 0;
	return errno > 0 ? -errno : -EIO;
}

/* ------------------------------------------------------------ text */

/* Decode one UTF-8 character at S (N bytes left). Returns its length and
 * sets *CP, or 0 when the bytes are not well-formed UTF-8. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	unsigned char c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	size_t len;
	uint32_t v, min;
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2, v = c & 0x1f, min = 0x80;
	} else if (c >= 0xe0 && c <= 0xef) {
		len = 3, v = c & 0x0f, min = 0x800;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, v = c & 0x07, min = 0x10000;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

char *out_clean(const char *s, char *buf, size_t len, int flags)
{
	static const char fffd[] = "\xef\xbf\xbd";
	size_t o = 0;
	if (len == 0)
		return buf;
	if (s) {
		const unsigned char *u = (const unsigned char *)s;
		size_t n = strlen(s);
		unsigned char semi = (flags & OUT_CLEAN_FOLDED) ? ';' : 0;
		for (size_t i = 0; i < n;) {
			unsigned char c = u[i];
			if (c >= 0x20 && c < 0x7f && c != semi) {
				/* printable ASCII, the common case: as is */
				if (o + 1 >= len)
					break;
				buf[o++] = (char)c;
				i++;
				continue;
			}
			uint32_t cp = 0;
			size_t k = utf8_decode(u + i, n - i, &cp);
			const char *piece = (const char *)u + i;
			size_t plen = k;
			if (k == 0) {
				piece = fffd, plen = 3, k = 1;
			} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) ||
				   cp == 0xfffe || cp == 0xffff) {
				piece = fffd, plen = 3;
			} else if (cp == ';' && (flags & OUT_CLEAN_FOLDED)) {
				piece = ":", plen = 1;
			}
			if (o + plen >= len)
				break;
			memcpy(buf + o, piece, plen);
			o += plen;
			i += k;
		}
	}
	buf[o] = 0;
	return buf;
}

char *out_label(const struct frame *fr, char *buf, size_t len, int with_line,
		int flags)
{
	char raw[OUT_LABEL_MAX];
	frame_label(fr, raw, sizeof raw, with_line);
	return out_clean(raw, buf, len, flags);
}

void out_put_xml(FILE *f, const char *s)
{
	const char *run = s;
	for (; *s; s++) {
		const char *esc;
		switch (*s) {
		case '&': esc = "&amp;"; break;
		case '<': esc = "&lt;"; break;
		case '>': esc = "&gt;"; break;
		case '"': esc = "&quot;"; break;
		case '\'': esc = "&#39;"; break;
		default: continue;
		}
		fwrite(run, 1, (size_t)(s - run), f);
		fputs(esc, f);
		run = s + 1;
	}
	fwrite(run, 1, (size_t)(s - run), f);
}

size_t out_json_string(char *dst, const char *src, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)src;
	char *d = dst;
	*d++ = '"';
	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			/* printable ASCII, the common case: as is */
			*d++ = (char)c;
			i++;
			continue;
		}
		if (c == '"' || c == '\\') {
			*d++ = '\\';
			*d++ = (char)c;
			i++;
			continue;
		}
		uint32_t cp = 0;
		size_t k = utf8_decode(s + i, n - i, &cp);
		if (k == 0) {
			memcpy(d, "\\ufffd", 6);   /* not well-formed: replaced */
			d += 6;
			i++;
		} else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) {
			memcpy(d, "\\u00", 4);     /* C0, DEL, C1: escaped */
			d[4] = hex[cp >> 4];
			d[5] = hex[cp & 15];
			d += 6;
			i += k;
		} else {
			memcpy(d, s + i, k);
			d += k;
			i += k;
		}
	}
	*d++ = '"';
	return (size_t)(d - dst);
}

void out_put_json(FILE *f, const char *s)
{
	/* in pieces that end on a character boundary (a character is at
	 * most 4 bytes, escaped at most 6 per byte) */
	enum { PIECE = 1024 };
	char buf[6 * PIECE + 2];
	size_t n = s ? strlen(s) : 0, i = 0;
	putc('"', f);
	do {
		size_t k = n - i < PIECE ? n - i : PIECE;
		while (k < n - i && k > PIECE - 4 && ((unsigned char)s[i + k] & 0xc0) == 0x80)
			k--;   /* do not cut a sequence; a longer run is invalid anyway */
		size_t w = out_json_string(buf, s ? s + i : "", k);
		fwrite(buf + 1, 1, w - 2, f);
		i += k;
	} while (i < n);
	putc('"', f);
}

size_t out_fmt_u64(char *buf, uint64_t v)
{
	static const char pairs[201] =
		"00010203040506070809101112131415161718192021222324252627282930313233343536373839"
		"40414243444546474849505152535455565758596061626364656667686970717273747576777879"
		"8081828384858687888990919293949596979899";
	char tmp[20];
	char *e = tmp + sizeof tmp, *d = e;
	while (v >= 100) {
		d -= 2;
		memcpy(d, pairs + 2 * (v % 100), 2);
		v /= 100;
	}
	if (v >= 10) {
		d -= 2;
		memcpy(d, pairs + 2 * v, 2);
	} else {
		*--d = (char)('0' + v);
	}
	size_t n = (size_t)(e - d);
	memcpy(buf, d, n);
	return n;
}

void out_put_fixed(FILE *f, double v, int decimals)
{
	static const uint64_t pow10[] = { 1, 10, 100, 1000, 10000, 100000, 1000000 };
	if (decimals < 0)
		decimals = 0;
	if (decimals > 6)
		decimals = 6;
	if (!(v == v)) /* NaN */
		v = 0;
	if (v < 0) {
		putc('-', f);
		v = -v;
	}
	if (v > 1e15)
		v = 1e15;
	uint64_t scaled = (uint64_t)(v * (double)pow10[decimals] + 0.5);
	fprintf(f, "%llu", (unsigned long long)(scaled / pow10[decimals]));
	if (decimals)
		fprintf(f, ".%0*llu", decimals,
			(unsigned long long)(scaled % pow10[decimals]));
}

uint32_t *out_used_frames(const struct profile *p, size_t *nused)
{
	size_t nf = profile_nframes(p), ns = profile_nstacks(p), n = 0;
	uint32_t *map = calloc(nf ? nf : 1, sizeof *map);
	if (!map)
		return NULL;
	for (size_t i = 0; i < ns; i++) {
		const uint32_t *ids;
		size_t depth;
		profile_stack(p, i, NULL, &ids, &depth, NULL);
		for (size_t d = 0; d < depth; d++)
			map[ids[d]] = 1;
	}
	for (size_t id = 0; id < nf; id++)
		if (map[id])
			map[id] = (uint32_t)++n;
	*nused = n;
	return map;
}

/* ------------------------------------------------------------ ordering */

/* Labels are sorted a word at a time: entries carry 8 bytes of their
 * label (from DEPTH on, big-endian, NUL padded) and are sorted by that
 * integer, stably, with a byte-wise LSD radix sort; runs of equal words
 * are sorted again on the next 8 bytes. Starting from id order, this is
 * strcmp's order (unsigned bytes), ties by id, without chasing 400 000
 * label pointers through a comparison callback. */
struct label_key {
	uint64_t word;  /* label bytes DEPTH .. DEPTH+7, big-endian */
	uint32_t id;
};

/* Stable sort of V[0..N) by word; TMP has room for N entries. */
static void sort_words(struct label_key *v, struct label_key *tmp, size_t n)
{
	if (n < 32) {
		for (size_t i = 1; i < n; i++) {
			struct label_key k = v[i];
			size_t j = i;
			for (; j > 0 && v[j - 1].word > k.word; j--)
				v[j] = v[j - 1];
			v[j] = k;
		}
		return;
	}
	uint32_t count[8][256] = { { 0 } };
	for (size_t i = 0; i < n; i++)
		for (int b = 0; b < 8; b++)
			count[b][(v[i].word >> (8 * b)) & 0xff]++;
	struct label_key *src = v, *dst = tmp;
	for (int b = 0; b < 8; b++) {
		uint32_t *c = count[b];
		if (c[(v[0].word >> (8 * b)) & 0xff] == n)
			continue;  /* all entries share this byte */
		uint32_t sum = 0;
		for (int k = 0; k < 256; k++) {
			uint32_t t = c[k];
			c[k] = sum;
			sum += t;
		}
		for (size_t i = 0; i < n; i++)
			dst[c[(src[i].word >> (8 * b)) & 0xff]++] = src[i];
		struct label_key *t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof *v);
}

static void sort_labels(struct label_key *v, struct label_key *tmp, size_t n,
			size_t depth, char *const *label, const uint32_t *len)
{
	for (size_t i = 0; i < n; i++) {
		const unsigned char *s = (const unsigned char *)label[v[i].id];
		size_t l = len[v[i].id];
		uint64_t w = 0;
		for (size_t k = 0; k < 8; k++)
			w = (w << 8) | (depth + k < l ? s[depth + k] : 0);
		v[i].word = w;
	}
	sort_words(v, tmp, n);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && v[j].word == v[i].word)
			j++;
		/* Equal words: a label shorter than DEPTH+8 ends inside the
		 * word, so all of the run are the same string (in id order
		 * already); otherwise all run on, compare the next word. */
		if (j - i > 1 && len[v[i].id] >= depth + 8)
			sort_labels(v + i, tmp, j - i, depth + 8, label, len);
		i = j;
	}
}

/* A stack as the comparison sees it, copied out of the profile once. */
struct stack_key {
	const uint32_t *ids;
	uint32_t depth;
	pid_t tid;
	size_t idx;
};

static int cmp_stack(const void *a, const void *b, void *arg)
{
	const uint32_t *rank = arg;
	const struct stack_key *x = a, *y = b;
	size_t n = x->depth < y->depth ? x->depth : y->depth;
	for (size_t k = 0; k < n; k++) {
		if (x->ids[k] != y->ids[k])
			return rank[x->ids[k]] < rank[y->ids[k]] ? -1 : 1;
	}
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

int out_order_init(struct out_order *o, const struct profile *p, int with_line,
		   int flags)
{
	memset(o, 0, sizeof *o);
	size_t nf = profile_nframes(p), ns = profile_nstacks(p);
	struct label_key *keys = NULL;
	struct stack_key *sk = NULL;
	size_t *off = NULL, used = 0, cap = 0;
	char *text = NULL;
	o->label = calloc(nf ? nf : 1, sizeof *o->label);
	o->label_len = calloc(nf ? nf : 1, sizeof *o->label_len);
	o->rank = calloc(nf ? nf : 1, sizeof *o->rank);
	o->stack = calloc(ns ? ns : 1, sizeof *o->stack);
	off = calloc(nf ? nf : 1, sizeof *off);
	o->nframes = nf;
	o->nstacks = ns;
	if (!o->label || !o->label_len || !o->rank || !o->stack || !off)
		goto nomem;
	/* All labels back to back in one block (offsets until it stops
	 * moving). */
	char buf[OUT_LABEL_MAX];
	for (size_t i = 0; i < nf; i++) {
		out_label(profile_frame(p, (uint32_t)i), buf, sizeof buf, with_line, flags);
		size_t l = strlen(buf);
		if (array_grow(&text, &cap, used + l + 1, 1) < 0)
			goto nomem;
		memcpy(text + used, buf, l + 1);
		off[i] = used;
		o->label_len[i] = (uint32_t)l;
		used += l + 1;
	}
	o->text = text;
	text = NULL;
	for (size_t i = 0; i < nf; i++)
		o->label[i] = o->text + off[i];
	free(off);
	off = NULL;

	if (!(keys = malloc(2 * (nf ? nf : 1) * sizeof *keys)))
		goto nomem;
	for (size_t i = 0; i < nf; i++)
		keys[i].id = (uint32_t)i;
	sort_labels(keys, keys + nf, nf, 0, o->label, o->label_len);
	for (size_t i = 0; i < nf; i++)
		o->rank[keys[i].id] = (uint32_t)i;
	free(keys);
	keys = NULL;

	if (!(sk = malloc((ns ? ns : 1) * sizeof *sk)))
		goto nomem;
	for (size_t i = 0; i < ns; i++) {
		size_t depth;
		profile_stack(p, i, &sk[i].tid, &sk[i].ids, &depth, NULL);
		sk[i].depth = (uint32_t)depth;
		sk[i].idx = i;
	}
	qsort_r(sk, ns, sizeof *sk, cmp_stack, o->rank);
	for (size_t i = 0; i < ns; i++)
		o->stack[i] = sk[i].idx;
	free(sk);
	return 0;
nomem:
	free(keys);
	free(sk);
	free(off);
	free(text);
	out_order_free(o);
	return -ENOMEM;
}

void out_order_free(struct out_order *o)
{
	free(o->label);
	free(o->label_len);
	free(o->text);
	free(o->rank);
	free(o->stack);
	memset(o, 0, sizeof *o);
}
