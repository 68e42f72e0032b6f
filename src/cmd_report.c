/* cmd_report.c: `luaspy report`: read profiles luaspy wrote (pprof,
 * folded), merge, filter and write them in any format, or compare two
 * (--diff): a differential flame graph, folded "stack BASE NEW" lines or
 * a table of the functions whose share changed most (docs/report.md). */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "err.h"
#include "htab.h"
#include "intern.h"
#include "msg.h"
#include "out.h"
#include "profile.h"
#include "profile_read.h"

/* ------------------------------------------------------------ keyed counts */

/* A key (interned string: a function's label, or a folded stack) with a
 * count per side (0 base, 1 new) and, for functions, self counts. */
struct kc {
	const char *key;
	uint64_t total[2];
	uint64_t self[2];
};

struct kc_tab {
	struct kc *v;
	size_t n, cap;
	struct htab index;
};

static int kc_eq(const void *ctx, uint32_t i)
{
	const void *const *k = ctx;
	const struct kc_tab *t = k[0];
	return t->v[i].key == k[1];
}

/* The entry of KEY (interned), created zeroed; NULL when out of memory. */
static struct kc *kc_get(struct kc_tab *t, const char *key)
{
	const void *k[2] = { t, key };
	uint64_t h = htab_fnv1a_ptr(HTAB_FNV_INIT, key);
	size_t pos;
	if (htab_reserve(&t->index) < 0)
		return NULL;
	int64_t i = htab_find(&t->index, h, kc_eq, k, &pos);
	if (i >= 0)
		return &t->v[i];
	if (array_grow(&t->v, &t->cap, t->n + 1, sizeof *t->v) < 0)
		return NULL;
	t->v[t->n] = (struct kc){ .key = key };
	htab_insert(&t->index, pos, h, (uint32_t)t->n);
	return &t->v[t->n++];
}

static void kc_free(struct kc_tab *t)
{
	free(t->v);
	htab_free(&t->index);
}

/* Count P's functions into T on SIDE: self (the leaf's function) and
 * total (each function once per stack). Labels without lines. */
static int count_functions(struct kc_tab *t, const struct profile *p, int side)
{
	size_t nf = profile_nframes(p);
	const char **fn = calloc(nf ? nf : 1, sizeof *fn);
	size_t *seen = NULL;   /* entries met in this stack, by index */
	size_t seen_cap = 0;
	if (!fn)
		return -1;
	char buf[OUT_LABEL_MAX];
	for (size_t i = 0; i < nf; i++)
		fn[i] = intern(out_label(profile_frame(p, (uint32_t)i), buf, sizeof buf, 0, 0));
	int rc = 0;
	size_t ns = profile_nstacks(p);
	for (size_t i = 0; i < ns && !rc; i++) {
		struct profile_row r;
		if (!profile_row(p, i, &r))
			continue;
		if (array_grow(&seen, &seen_cap, r.depth, sizeof *seen) < 0) {
			rc = -1;
			break;
		}
		size_t nseen = 0;
		for (size_t d = 0; d < r.depth; d++) {
			struct kc *e = kc_get(t, fn[r.ids[d]]);
			if (!e) {
				rc = -1;
				break;
			}
			if (d + 1 == r.depth)
				e->self[side] += r.count;
			size_t k = 0, ei = (size_t)(e - t->v);
			while (k < nseen && seen[k] != ei)
				k++;
			if (k == nseen) { /* recursion: counted once per stack */
				seen[nseen++] = ei;
				e->total[side] += r.count;
			}
		}
	}
	free(seen);
	free(fn);
	return rc;
}

/* ------------------------------------------------------------ top tables */

static uint64_t g_tot[2];

static double share(uint64_t n, uint64_t tot)
{
	return tot ? 100.0 * (double)n / (double)tot : 0;
}

static int by_self(const void *a, const void *b)
{
	const struct kc *x = a, *y = b;
	if (x->self[1] != y->self[1])
		return x->self[1] < y->self[1] ? 1 : -1;
	if (x->total[1] != y->total[1])
		return x->total[1] < y->total[1] ? 1 : -1;
	return strcmp(x->key, y->key);
}

static double growth(const struct kc *x)
{
	return share(x->self[1], g_tot[1]) - share(x->self[0], g_tot[0]);
}

static int by_growth(const void *a, const void *b)
{
	double gx = growth(a), gy = growth(b);
	if (gx != gy)
		return gx < gy ? 1 : -1;
	return by_self(a, b);
}

/* The functions of P by self samples: "SELF% TOTAL% SELF TOTAL name". */
static int print_top(const struct profile *p)
{
	struct kc_tab t = { 0 };
	if (count_functions(&t, p, 1) < 0) {
		kc_free(&t);
		return -1;
	}
	g_tot[1] = profile_total(p);
	qsort(t.v, t.n, sizeof *t.v, by_self);
	printf("Total samples: %llu\n%7s %7s %10s %10s  %s\n", (unsigned long long)g_tot[1],
	       "self%", "total%", "self", "total", "function");
	for (size_t i = 0; i < t.n; i++)
		printf("%6.2f%% %6.2f%% %10llu %10llu  %s\n", share(t.v[i].self[1], g_tot[1]),
		       share(t.v[i].total[1], g_tot[1]), (unsigned long long)t.v[i].self[1],
		       (unsigned long long)t.v[i].total[1], t.v[i].key);
	kc_free(&t);
	return 0;
}

/* Functions of BASE and NEW by the growth of their self share, in
 * percentage points: grown first, shrunk last; unchanged ones left out. */
static int print_diff_top(const struct profile *base, const struct profile *cur)
{
	struct kc_tab t = { 0 };
	if (count_functions(&t, base, 0) < 0 || count_functions(&t, cur, 1) < 0) {
		kc_free(&t);
		return -1;
	}
	g_tot[0] = profile_total(base);
	g_tot[1] = profile_total(cur);
	qsort(t.v, t.n, sizeof *t.v, by_growth);
	printf("Base samples: %llu  New samples: %llu\n%8s %7s %7s %8s %8s  %s\n",
	       (unsigned long long)g_tot[0], (unsigned long long)g_tot[1], "delta", "base%",
	       "new%", "base", "new", "function (self share, grown first)");
	for (size_t i = 0; i < t.n; i++) {
		const struct kc *e = &t.v[i];
		double g = growth(e);
		if (e->self[0] == 0 && e->self[1] == 0)
			continue;
		if (g > -0.005 && g < 0.005)
			continue;
		printf("%+7.2f%% %6.2f%% %6.2f%% %8llu %8llu  %s\n", g, share(e->self[0], g_tot[0]),
		       share(e->self[1], g_tot[1]), (unsigned long long)e->self[0],
		       (unsigned long long)e->self[1], e->key);
	}
	kc_free(&t);
	return 0;
}

/* ------------------------------------------------------------ diff stacks */

/* Folded stack of stack I of P, interned. */
static const char *folded_key(const struct profile *p, const uint32_t *ids, size_t depth,
			      char **buf, size_t *cap)
{
	size_t n = 0;
	char lab[OUT_LABEL_MAX];
	for (size_t d = 0; d < depth; d++) {
		out_label(profile_frame(p, ids[d]), lab, sizeof lab, 1, OUT_CLEAN_FOLDED);
		size_t l = strlen(lab);
		if (array_grow(buf, cap, n + l + 2, 1) < 0)
			return NULL;
		if (d)
			(*buf)[n++] = ';';
		memcpy(*buf + n, lab, l);
		n += l;
	}
	if (array_grow(buf, cap, n + 1, 1) < 0)
		return NULL;
	(*buf)[n] = 0;
	return intern(*buf);
}

/* Stacks of BASE (side 0) and CUR (side 1) by their folded form, threads
 * merged, into T (sorted by key). */
static int diff_stacks(struct kc_tab *t, const struct profile *base, const struct profile *cur)
{
	char *buf = NULL;
	size_t cap = 0;
	for (int side = 0; side < 2; side++) {
		const struct profile *p = side ? cur : base;
		size_t ns = profile_nstacks(p);
		for (size_t i = 0; i < ns; i++) {
			struct profile_row r;
			if (!profile_row(p, i, &r))
				continue;
			const char *k = folded_key(p, r.ids, r.depth, &buf, &cap);
			struct kc *e = k ? kc_get(t, k) : NULL;
			if (!e) {
				free(buf);
				return -1;
			}
			e->total[side] += r.count;
		}
	}
	free(buf);
	return 0;
}

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct kc *)a)->key, ((const struct kc *)b)->key);
}

/* --- the differential flame graph: widths by NEW, colour by the change
 * of each frame's share of all samples from BASE to NEW (red grew, blue
 * shrank, white unchanged), as flamegraph.pl draws difffolded.pl's
 * output (Brendan Gregg, "Differential Flame Graphs", 2014). */

struct dnode {
	const char *label;     /* interned frame label */
	uint64_t n[2];         /* inclusive samples: base, new */
	uint32_t child, next;  /* first child, next sibling (indexes, 0 none) */
};

struct dtree {
	struct dnode *v;
	size_t n, cap;
	int maxdepth;
};

static uint32_t dnode_child(struct dtree *t, uint32_t parent, const char *label)
{
	uint32_t c = t->v[parent].child, last = 0;
	for (; c; last = c, c = t->v[c].next)
		if (t->v[c].label == label)
			return c;
	if (array_grow(&t->v, &t->cap, t->n + 1, sizeof *t->v) < 0)
		return 0;
	uint32_t id = (uint32_t)t->n++;
	t->v[id] = (struct dnode){ .label = label };
	if (last)
		t->v[last].next = id;
	else
		t->v[parent].child = id;
	return id;
}

/* Add the folded stack KEY (side counts N) under the root. */
static int dtree_add(struct dtree *t, const char *key, const uint64_t n[2])
{
	uint32_t at = 0;
	t->v[0].n[0] += n[0];
	t->v[0].n[1] += n[1];
	int depth = 0;
	for (const char *s = key;;) {
		const char *e = strchr(s, ';');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		at = dnode_child(t, at, intern_n(s, l));
		if (!at)
			return -1;
		t->v[at].n[0] += n[0];
		t->v[at].n[1] += n[1];
		depth++;
		if (!e)
			break;
		s = e + 1;
	}
	if (depth > t->maxdepth)
		t->maxdepth = depth;
	return 0;
}

#define SVG_W 1200.0
#define SVG_PAD 10.0
#define SVG_FRAME_H 16
#define SVG_MIN_W 0.1

static double node_delta(const struct dtree *t, uint32_t i)
{
	return share(t->v[i].n[1], t->v[0].n[1]) - share(t->v[i].n[0], t->v[0].n[0]);
}

static double g_maxabs;

/* One frame's <g>: title, rect and the label that fits. Not inlined into
 * svg_node, so its label buffer is not on the stack of every level of
 * the recursion (stacks may be 4096 frames deep). */
static __attribute__((noinline)) void svg_frame(FILE *f, const struct dtree *t, uint32_t i,
						 double x, double y, double w)
{
	const struct dnode *nd = &t->v[i];
	double d = node_delta(t, i);
	int r = 255, g = 255, b = 255;
	if (g_maxabs > 0) {
		int k = (int)(210.0 * (d < 0 ? -d : d) / g_maxabs);
		if (d > 0)
			g = b = 255 - k;
		else if (d < 0)
			r = g = 255 - k;
	}
	const char *label = i ? nd->label : "all";
	char clean[OUT_LABEL_MAX];
	out_clean(label, clean, sizeof clean, 0);
	fputs("<g><title>", f);
	out_put_xml(f, clean);
	fprintf(f, " (base %llu samples, %.2f%%; new %llu samples, %.2f%%; %+.2f points)</title>",
		(unsigned long long)nd->n[0], share(nd->n[0], t->v[0].n[0]),
		(unsigned long long)nd->n[1], share(nd->n[1], t->v[0].n[1]), d);
	fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" "
		"rx=\"2\" ry=\"2\"/>", x, y, w, SVG_FRAME_H - 1, r, g, b);
	size_t fit = w > 10 ? (size_t)((w - 6) / 7) : 0;
	if (fit >= 3) {
		size_t len = strlen(clean);
		if (len > fit) {
			/* cut at a character boundary, then ".." */
			size_t k = fit - 2;
			while (k > 0 && ((unsigned char)clean[k] & 0xc0) == 0x80)
				k--;
			clean[k] = 0;
			strcat(clean, "..");
		}
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", x + 3, y + 11.5);
		out_put_xml(f, clean);
		fputs("</text>", f);
	}
	fputs("</g>\n", f);
}

static void svg_node(FILE *f, const struct dtree *t, uint32_t i, double x, int depth, int height,
		     uint64_t *cut)
{
	const struct dnode *nd = &t->v[i];
	double scale = (SVG_W - 2 * SVG_PAD) / (double)(t->v[0].n[1] ? t->v[0].n[1] : 1);
	double w = (double)nd->n[1] * scale;
	if (w < SVG_MIN_W) {
		*cut += 1;
		return;
	}
	svg_frame(f, t, i, x, height - 30 - (depth + 1) * SVG_FRAME_H, w);
	/* children in label order, left to right */
	double cx = x;
	for (uint32_t c = nd->child; c; c = t->v[c].next) {
		svg_node(f, t, c, cx, depth + 1, height, cut);
		cx += (double)t->v[c].n[1] * scale;
	}
}

static int diff_svg(FILE *f, struct kc_tab *st, const char *title)
{
	struct dtree t = { 0 };
	if (array_grow(&t.v, &t.cap, 1, sizeof *t.v) < 0)
		return -ENOMEM;
	t.v[0] = (struct dnode){ 0 };
	t.n = 1;
	qsort(st->v, st->n, sizeof *st->v, by_key);
	for (size_t i = 0; i < st->n; i++)
		if (dtree_add(&t, st->v[i].key, st->v[i].total) < 0) {
			free(t.v);
			return -ENOMEM;
		}
	g_maxabs = 0;
	for (size_t i = 1; i < t.n; i++) {
		double d = node_delta(&t, (uint32_t)i);
		if (d < 0)
			d = -d;
		if (d > g_maxabs)
			g_maxabs = d;
	}
	int height = (t.maxdepth + 1) * SVG_FRAME_H + 70;
	fprintf(f, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style>text { font-family: Verdana, sans-serif; font-size: 12px; fill: #000; }</style>\n"
		"<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f8\"/>\n"
		"<text x=\"%d\" y=\"24\" text-anchor=\"middle\" style=\"font-size:17px\">",
		(int)SVG_W, height, (int)SVG_W, height, (int)(SVG_W / 2));
	char clean[OUT_LABEL_MAX];
	out_put_xml(f, out_clean(title, clean, sizeof clean, 0));
	fprintf(f, "</text>\n<text x=\"%d\" y=\"42\" text-anchor=\"middle\">widths: new profile "
		"(%llu samples); red: share grew, blue: share shrank since base (%llu samples); "
		"strongest %.2f points</text>\n", (int)(SVG_W / 2), (unsigned long long)t.v[0].n[1],
		(unsigned long long)t.v[0].n[0], g_maxabs);
	uint64_t cut = 0;
	if (t.v[0].n[1])
		svg_node(f, &t, 0, SVG_PAD, 0, height, &cut);
	if (cut)
		fprintf(f, "<text x=\"%d\" y=\"%d\">%llu frames narrower than %.1f px not drawn"
			"</text>\n", (int)SVG_PAD, height - 8, (unsigned long long)cut, SVG_MIN_W);
	fputs("</svg>\n", f);
	free(t.v);
	return out_ferror(f);
}

/* ------------------------------------------------------------ the command */

/* Read the files INPUTS[0..N-1] into one profile, then filter it by O
 * into a new one (*OUT). Prints the error; returns 0 or an exit status. */
static int load(const struct cli_opts *o, char **inputs, size_t n, const struct pread_filter *flt,
		struct profile **out)
{
	*out = NULL;
	struct profile *raw = profile_new(), *p = profile_new();
	if (!raw || !p) {
		profile_free(raw);
		profile_free(p);
		return msg_err_pid(0, -LS_E_NOMEM);
	}
	int seen[2] = { 0, 0 };
	for (size_t i = 0; i < n; i++) {
		char why[300];
		int fmt = PREAD_PPROF;
		if (profile_read_file(raw, inputs[i], &fmt, why, sizeof why) < 0) {
			msg_error("cannot read '%s': %s", inputs[i], why);
			profile_free(raw);
			profile_free(p);
			return 1;
		}
		seen[fmt] = 1;
		msg_debug(1, "read '%s': %llu samples so far", inputs[i],
			  (unsigned long long)profile_total(raw));
	}
	(void)o;
	struct pread_filter f2 = *flt;
	f2.flatten = seen[PREAD_PPROF] && seen[PREAD_FOLDED];
	if (profile_add_filtered(p, raw, &f2) < 0) {
		profile_free(raw);
		profile_free(p);
		return msg_err_pid(0, -LS_E_NOMEM);
	}
	*profile_meta(p) = *profile_meta_const(raw);
	profile_meta(p)->samples = profile_total(p);
	profile_free(raw);
	*out = p;
	return 0;
}

static int compile(const char *what, const char *re, regex_t *rx)
{
	int rc = regcomp(rx, re, REG_EXTENDED | REG_NOSUB);
	if (rc) {
		char err[200];
		regerror(rc, rx, err, sizeof err);
		msg_error("invalid %s regex '%s': %s", what, re, err);
		return err_exit_code(LS_E_USAGE);
	}
	return 0;
}

/* Open O->output for a diff (stdout for "-" or none). */
static FILE *open_out(const char *path)
{
	if (!path || !strcmp(path, "-"))
		return stdout;
	return fopen(path, "we");
}

static int write_diff(const struct cli_opts *o, struct profile *base, struct profile *cur)
{
	if (o->format == CLI_FORMAT_TOP)
		return print_diff_top(base, cur) < 0 ? msg_err_pid(0, -LS_E_NOMEM) : 0;
	struct kc_tab t = { 0 };
	if (diff_stacks(&t, base, cur) < 0) {
		kc_free(&t);
		return msg_err_pid(0, -LS_E_NOMEM);
	}
	FILE *f = open_out(o->output);
	if (!f) {
		msg_error("cannot write '%s': %s", o->output, strerror(errno));
		kc_free(&t);
		return 1;
	}
	int rc = 0;
	if (o->format == OUT_FOLDED) {
		/* difffolded.pl's form: "stack BASE NEW", for flamegraph.pl */
		qsort(t.v, t.n, sizeof *t.v, by_key);
		for (size_t i = 0; i < t.n; i++)
			fprintf(f, "%s %llu %llu\n", t.v[i].key, (unsigned long long)t.v[i].total[0],
				(unsigned long long)t.v[i].total[1]);
		rc = out_ferror(f);
	} else {
		char title[600];
		snprintf(title, sizeof title, "Differential flame graph: %s -> %s", o->inputs[0],
			 o->inputs[1]);
		rc = diff_svg(f, &t, title);
	}
	if (f != stdout && fclose(f) != 0 && !rc)
		rc = -errno;
	else if (f == stdout && fflush(f) != 0 && !rc)
		rc = -errno;
	kc_free(&t);
	if (rc < 0) {
		msg_error("cannot write '%s': %s", o->output ? o->output : "-", strerror(-rc));
		return 1;
	}
	if (o->output && strcmp(o->output, "-"))
		fprintf(stderr, "Wrote differential %s to '%s'\n",
			o->format == OUT_FOLDED ? "folded stacks" : "flame graph", o->output);
	return 0;
}

int cmd_report(struct cli_opts *o)
{
	regex_t focus, ignore;
	struct pread_filter flt = { .function = o->function, .nolineno = o->nolineno, .tid = o->tid };
	int code;
	if (o->focus) {
		if ((code = compile("--focus", o->focus, &focus)))
			return code;
		flt.focus = &focus;
	}
	if (o->ignore) {
		if ((code = compile("--ignore", o->ignore, &ignore))) {
			if (o->focus)
				regfree(&focus);
			return code;
		}
		flt.ignore = &ignore;
	}
	size_t n = 0;
	while (o->inputs[n])
		n++;
	struct profile *p = NULL, *base = NULL;
	if (o->diff) {
		code = load(o, o->inputs, 1, &flt, &base);
		if (!code)
			code = load(o, o->inputs + 1, 1, &flt, &p);
		if (!code)
			code = write_diff(o, base, p);
	} else {
		code = load(o, o->inputs, n, &flt, &p);
		if (!code && o->format == CLI_FORMAT_TOP) {
			if (print_top(p) < 0)
				code = msg_err_pid(0, -LS_E_NOMEM);
		} else if (!code) {
			const char *out = o->output ? o->output : "-";
			int wrc = out_write_file(p, o->format, out);
			if (wrc < 0) {
				msg_error("cannot write '%s': %s", out, strerror(-wrc));
				code = 1;
			} else if (strcmp(out, "-")) {
				fprintf(stderr, "Wrote %s of %llu samples from %zu profile%s to '%s'\n",
					out_format_noun(o->format), (unsigned long long)profile_total(p),
					n, n == 1 ? "" : "s", out);
			}
		}
	}
	profile_free(p);
	profile_free(base);
	if (o->focus)
		regfree(&focus);
	if (o->ignore)
		regfree(&ignore);
	return code;
}
