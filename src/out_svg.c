/* out_svg.c: one self-contained interactive flame graph (SVG + script).
 *
 * Layout: stacks sorted by label (out_order), then merged in one pass the
 * way flamegraph.pl does: keep the path of open frames, close those past
 * the common prefix with the next stack, open the rest. A frame is
 * emitted when it closes, so memory stays O(stacks + depth). Frames
 * narrower than SVG_MIN_WIDTH_PX are dropped (their samples still count
 * in their parent's width). A first, measuring pass counts frames by
 * width (doubling buckets); when more than SVG_MAX_FRAMES would be drawn
 * the threshold rises a bucket at a time, so even pathological profiles
 * stay a file a browser opens (and the subtitle says so).
 *
 * Target text only ever appears escaped in <title> and <text> nodes; the
 * script reads it back through textContent and never contains any.
 *
 *   +--------------------------------------------------+
 *   | Reset Zoom     luaspy: TITLE               Search|  header
 *   |               N samples, rate, duration          |
 *   |        [leaf]                                    |
 *   |    [  callee       ][ other ]                    |  frames, root
 *   | [ all                                        ]   |  at the bottom
 *   | details of hovered frame              Matched: x%|  footer
 *   +--------------------------------------------------+
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"
#include "out.h"

#define SVG_WIDTH 1200
#define SVG_XPAD 10
#define SVG_FRAME_H 16
#define SVG_HEAD_H 60
#define SVG_FOOT_H 34
#define SVG_FONT_PX 12
#define SVG_CHAR_W 7.3        /* advance of one monospace char at 12px */
#define SVG_TITLE_CHAR_W 10.4 /* the same at 17px bold */
#define SVG_MIN_WIDTH_PX 0.1  /* narrower frames are not drawn */
#define SVG_MAX_FRAMES 150000 /* ~25 MB of SVG: raise the threshold above */
#define SVG_NBUCKETS 32       /* width buckets [0.1*2^k, 0.1*2^(k+1)) px */

struct svg {
	const struct profile *p;
	const struct out_order *o;
	FILE *f;
	double px_per_sample;
	uint64_t total;
	int height;
	size_t maxdepth;   /* deepest drawn frame (0 = "all") */
	double min_width;  /* frames narrower than this are not drawn */
	uint64_t bucket_n[SVG_NBUCKETS];     /* measuring pass: frames ... */
	size_t bucket_depth[SVG_NBUCKETS];   /* ... and deepest, by width */
	int emit;          /* 0: measuring pass, 1: writing pass */
};

/* ------------------------------------------------------------ colours */

static uint32_t hash_str(const char *s)
{
	uint32_t h = 2166136261u;
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* Colour family by kind, varied a little by the frame's name so that
 * neighbours differ but the same function keeps its colour. */
static void frame_rgb(const struct frame *fr, int *r, int *g, int *b)
{
	uint32_t h = hash_str(fr->name);
	int v1 = (int)(h & 0xff), v2 = (int)((h >> 8) & 0xff), v3 = (int)((h >> 16) & 0xff);
	if (fr->trace > 0) {                   /* JIT trace: aqua/blue */
		*r = 40 + v1 * 50 / 255;
		*g = 170 + v2 * 50 / 255;
		*b = 200 + v3 * 55 / 255;
		return;
	}
	switch (fr->kind) {
	case FRAME_LUA:                        /* greens */
		*r = 60 + v1 * 60 / 255;
		*g = 170 + v2 * 60 / 255;
		*b = 50 + v3 * 40 / 255;
		break;
	case FRAME_C:                          /* yellow/orange */
		*r = 235 + v1 * 20 / 255;
		*g = 160 + v2 * 60 / 255;
		*b = 30 + v3 * 40 / 255;
		break;
	case FRAME_VMSTATE:                    /* purple */
		*r = 160 + v1 * 40 / 255;
		*g = 110 + v2 * 40 / 255;
		*b = 200 + v3 * 50 / 255;
		break;
	case FRAME_ROOT:                       /* grey */
		*r = *g = *b = 185 + v1 * 25 / 255;
		break;
	default:                               /* native: reds, warm */
		*r = 205 + v1 * 50 / 255;
		*g = 70 + v2 * 80 / 255;
		*b = 50 + v3 * 30 / 255;
		break;
	}
}

/* ------------------------------------------------------------ frames */

static double pct(uint64_t n, uint64_t total)
{
	return total ? 100.0 * (double)n / (double)total : 0.0;
}

/* Write LABEL truncated to what fits in WIDTH_PX at CHAR_W px per
 * character ("abc.." when cut, nothing when fewer than 3 characters
 * fit). Cuts at char boundaries. */
static void put_fitted(FILE *f, const char *label, double width_px, double char_w)
{
	double room = (width_px - 6) / char_w;
	if (room < 3)
		return;
	size_t fit = (size_t)room, nchars = 0, cut = 0;
	const char *s;
	for (s = label; *s; s++) {
		if (((unsigned char)*s & 0xc0) == 0x80)
			continue;
		if (nchars == fit - 2)
			cut = (size_t)(s - label);
		nchars++;
	}
	if (nchars <= fit) {
		out_put_xml(f, label);
		return;
	}
	char buf[OUT_LABEL_MAX];
	memcpy(buf, label, cut);
	buf[cut] = 0;
	out_put_xml(f, buf);
	fputs("..", f);
}

static void emit_frame(struct svg *s, const char *label, const struct frame *fr,
		       size_t depth, uint64_t start, uint64_t count)
{
	double w = (double)count * s->px_per_sample;
	if (w < s->min_width)
		return;
	if (!s->emit) {
		int k = 0;
		for (double lim = 2 * SVG_MIN_WIDTH_PX; w >= lim && k < SVG_NBUCKETS - 1; lim *= 2)
			k++;
		s->bucket_n[k]++;
		if (depth > s->bucket_depth[k])
			s->bucket_depth[k] = depth;
		return;
	}
	FILE *f = s->f;
	double x = SVG_XPAD + (double)start * s->px_per_sample;
	int y = s->height - SVG_FOOT_H - (int)(depth + 1) * SVG_FRAME_H;
	int r, g, b;
	frame_rgb(fr, &r, &g, &b);
	fputs("<g><title>", f);
	out_put_xml(f, label);
	fprintf(f, " (%" PRIu64 " sample%s, ", count, count == 1 ? "" : "s");
	out_put_fixed(f, pct(count, s->total), 2);
	fputs("%)</title><rect x=\"", f);
	out_put_fixed(f, x, 2);
	fprintf(f, "\" y=\"%d\" width=\"", y);
	out_put_fixed(f, w, 2);
	fprintf(f, "\" height=\"%d\" fill=\"rgb(%d,%d,%d)\"/><text x=\"",
		SVG_FRAME_H - 1, r, g, b);
	out_put_fixed(f, x + 3, 2);
	fprintf(f, "\" y=\"%d\">", y + SVG_FRAME_H - 4);
	put_fitted(f, label, w, SVG_CHAR_W);
	fputs("</text></g>\n", f);
}

/* One merging pass over the sorted stacks; emit_frame decides what it
 * does with each closed frame. Depth 0 is the synthetic "all" frame. */
static int svg_pass(struct svg *s)
{
	const struct profile *p = s->p;
	const struct out_order *o = s->o;
	size_t cap = 64, nopen = 0;
	uint32_t *open_id = malloc(cap * sizeof *open_id);
	uint64_t *open_start = malloc(cap * sizeof *open_start);
	uint64_t pos = 0;
	static const struct frame all = { .kind = FRAME_ROOT, .name = "all" };
	if (!open_id || !open_start) {
		free(open_id);
		free(open_start);
		return -ENOMEM;
	}
	for (size_t i = 0; i < o->nstacks; i++) {
		const uint32_t *ids;
		size_t depth, c = 0;
		uint64_t count;
		profile_stack(p, o->stack[i], NULL, &ids, &depth, &count);
		if (count == 0)
			continue;
		while (c < nopen && c < depth && open_id[c] == ids[c])
			c++;
		while (nopen > c) {
			nopen--;
			emit_frame(s, o->label[open_id[nopen]],
				   profile_frame(p, open_id[nopen]), nopen + 1,
				   open_start[nopen], pos - open_start[nopen]);
		}
		size_t cap_start = cap;
		if (array_grow(&open_id, &cap, depth, sizeof *open_id) < 0 ||
		    array_grow(&open_start, &cap_start, depth, sizeof *open_start) < 0) {
			free(open_id);
			free(open_start);
			return -ENOMEM;
		}
		for (; nopen < depth; nopen++) {
			open_id[nopen] = ids[nopen];
			open_start[nopen] = pos;
		}
		pos += count;
		if (s->emit && ferror(s->f))
			break;
	}
	while (nopen > 0) {
		nopen--;
		emit_frame(s, o->label[open_id[nopen]], profile_frame(p, open_id[nopen]),
			   nopen + 1, open_start[nopen], pos - open_start[nopen]);
	}
	if (pos > 0)
		emit_frame(s, "all", &all, 0, 0, pos);
	free(open_id);
	free(open_start);
	return 0;
}

/* After the measuring pass: the smallest width threshold that keeps the
 * number of drawn frames within SVG_MAX_FRAMES, and the depth it needs. */
static void choose_min_width(struct svg *s)
{
	uint64_t n = 0;
	int k0 = 0;
	for (int k = 0; k < SVG_NBUCKETS; k++)
		n += s->bucket_n[k];
	while (n > SVG_MAX_FRAMES && k0 < SVG_NBUCKETS - 1) {
		n -= s->bucket_n[k0++];
		s->min_width *= 2;
	}
	s->maxdepth = 0;
	for (int k = k0; k < SVG_NBUCKETS; k++)
		if (s->bucket_n[k] && s->bucket_depth[k] > s->maxdepth)
			s->maxdepth = s->bucket_depth[k];
}

/* ------------------------------------------------------------ document */

/* The viewer. Reads geometry from the rects and labels from <title>
 * text nodes; holds no target text itself. */
static const char svg_script[] =
"(function () {\n"
"\"use strict\";\n"
"var svg = document.documentElement;\n"
"var xpad = +svg.getAttribute(\"data-xpad\");\n"
"var fw = +svg.getAttribute(\"data-fw\");\n"
"var charw = +svg.getAttribute(\"data-charw\");\n"
"var framesEl = document.getElementById(\"frames\");\n"
"var details = document.getElementById(\"details\");\n"
"var matchedEl = document.getElementById(\"matched\");\n"
"var unzoomBtn = document.getElementById(\"unzoom\");\n"
"var searchBtn = document.getElementById(\"search\");\n"
"var frames = [];\n"
"var gs = framesEl.getElementsByTagName(\"g\");\n"
"for (var i = 0; i < gs.length; i++) {\n"
"  var g = gs[i], r = g.getElementsByTagName(\"rect\")[0];\n"
"  var t = g.getElementsByTagName(\"title\")[0].textContent;\n"
"  var cut = t.lastIndexOf(\" (\");\n"
"  g.lsInfo = t;\n"
"  g.lsLabel = cut >= 0 ? t.substring(0, cut) : t;\n"
"  g.lsX = +r.getAttribute(\"x\");\n"
"  g.lsW = +r.getAttribute(\"width\");\n"
"  g.lsY = +r.getAttribute(\"y\");\n"
"  g.lsFill = r.getAttribute(\"fill\");\n"
"  g.lsRect = r;\n"
"  g.lsText = g.getElementsByTagName(\"text\")[0];\n"
"  frames.push(g);\n"
"}\n"
"function fit(g, w) {\n"
"  var room = Math.floor((w - 6) / charw);\n"
"  var s = g.lsLabel;\n"
"  if (room < 3) { s = \"\"; }\n"
"  else if (s.length > room) {\n"
"    var cs = Array.from(s);\n"
"    if (cs.length > room) s = cs.slice(0, room - 2).join(\"\") + \"..\";\n"
"  }\n"
"  g.lsText.textContent = s;\n"
"}\n"
"function place(g, x, w) {\n"
"  g.lsRect.setAttribute(\"x\", x.toFixed(2));\n"
"  g.lsRect.setAttribute(\"width\", w.toFixed(2));\n"
"  g.lsText.setAttribute(\"x\", (x + 3).toFixed(2));\n"
"  fit(g, w);\n"
"}\n"
"var zoomed = null;\n"
"function zoom(z) {\n"
"  var x0 = z.lsX, x1 = z.lsX + z.lsW, scale = fw / z.lsW, eps = 1e-6;\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    var g = frames[i], gx1 = g.lsX + g.lsW;\n"
"    if (g.lsY > z.lsY) {\n"
"      if (g.lsX <= x0 + eps && gx1 >= x1 - eps) {\n"
"        g.style.display = \"\";\n"
"        g.setAttribute(\"class\", \"anc\");\n"
"        place(g, xpad, fw);\n"
"      } else {\n"
"        g.style.display = \"none\";\n"
"      }\n"
"    } else if (g.lsX >= x0 - eps && gx1 <= x1 + eps) {\n"
"      g.style.display = \"\";\n"
"      g.removeAttribute(\"class\");\n"
"      place(g, xpad + (g.lsX - x0) * scale, g.lsW * scale);\n"
"    } else {\n"
"      g.style.display = \"none\";\n"
"    }\n"
"  }\n"
"  zoomed = z;\n"
"  unzoomBtn.style.display = \"\";\n"
"}\n"
"function unzoom() {\n"
"  if (!zoomed) return;\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    var g = frames[i];\n"
"    g.style.display = \"\";\n"
"    g.removeAttribute(\"class\");\n"
"    place(g, g.lsX, g.lsW);\n"
"  }\n"
"  zoomed = null;\n"
"  unzoomBtn.style.display = \"none\";\n"
"}\n"
"function frameOf(e) {\n"
"  var n = e.target;\n"
"  while (n && n !== framesEl) {\n"
"    if (n.lsRect) return n;\n"
"    n = n.parentNode;\n"
"  }\n"
"  return null;\n"
"}\n"
"framesEl.addEventListener(\"click\", function (e) {\n"
"  var g = frameOf(e);\n"
"  if (g) zoom(g);\n"
"});\n"
"framesEl.addEventListener(\"mouseover\", function (e) {\n"
"  var g = frameOf(e);\n"
"  if (g) details.textContent = g.lsInfo;\n"
"});\n"
"framesEl.addEventListener(\"mouseout\", function () {\n"
"  details.textContent = \" \";\n"
"});\n"
"unzoomBtn.addEventListener(\"click\", unzoom);\n"
"var searching = false, lastTerm = \"\";\n"
"function clearSearch() {\n"
"  for (var i = 0; i < frames.length; i++)\n"
"    frames[i].lsRect.setAttribute(\"fill\", frames[i].lsFill);\n"
"  matchedEl.textContent = \" \";\n"
"  searchBtn.textContent = \"Search\";\n"
"  searching = false;\n"
"}\n"
"function search(term) {\n"
"  clearSearch();\n"
"  if (!term) return;\n"
"  var re;\n"
"  try { re = new RegExp(term); }\n"
"  catch (err) { re = new RegExp(term.replace(/[.*+?^${}()|[\\]\\\\]/g, \"\\\\$&\")); }\n"
"  var spans = [];\n"
"  for (var i = 0; i < frames.length; i++) {\n"
"    var g = frames[i];\n"
"    if (g.lsLabel === \"all\" && g.lsW >= fw - 1e-6) continue;\n"
"    if (re.test(g.lsLabel)) {\n"
"      g.lsRect.setAttribute(\"fill\", \"rgb(230,0,230)\");\n"
"      spans.push([g.lsX, g.lsX + g.lsW]);\n"
"    }\n"
"  }\n"
"  spans.sort(function (a, b) { return a[0] - b[0]; });\n"
"  var sum = 0, end = -1;\n"
"  for (var j = 0; j < spans.length; j++) {\n"
"    var a = spans[j][0], b = spans[j][1];\n"
"    if (a < end) a = end;\n"
"    if (b > a) { sum += b - a; end = b; }\n"
"  }\n"
"  matchedEl.textContent = \"Matched: \" + (100 * sum / fw).toFixed(1) + \"%\";\n"
"  searchBtn.textContent = \"Reset Search\";\n"
"  searching = true;\n"
"  lastTerm = term;\n"
"}\n"
"function askSearch() {\n"
"  var term = window.prompt(\"Search frames (regular expression)\", lastTerm);\n"
"  if (term !== null) search(term);\n"
"}\n"
"searchBtn.addEventListener(\"click\", function () {\n"
"  if (searching) clearSearch(); else askSearch();\n"
"});\n"
"window.addEventListener(\"keydown\", function (e) {\n"
"  if ((e.ctrlKey || e.metaKey) && (e.key === \"f\" || e.key === \"F\")) {\n"
"    e.preventDefault();\n"
"    askSearch();\n"
"  } else if (e.key === \"Escape\") {\n"
"    if (searching) clearSearch(); else unzoom();\n"
"  }\n"
"});\n"
"})();\n";

static void put_subtitle(FILE *f, const struct profile_meta *m, uint64_t total)
{
	char buf[OUT_LABEL_MAX];
	fprintf(f, "%" PRIu64 " sample%s", total, total == 1 ? "" : "s");
	if (m->errors)
		fprintf(f, ", %" PRIu64 " error%s", m->errors, m->errors == 1 ? "" : "s");
	if (m->rate_hz > 0) {
		fputs(", ", f);
		out_put_fixed(f, m->rate_hz, m->rate_hz == (uint64_t)m->rate_hz ? 0 : 1);
		fputs(" Hz", f);
	}
	if (m->duration_ns) {
		fputs(", ", f);
		out_put_fixed(f, (double)m->duration_ns / 1e9, 1);
		fputs(" s", f);
	}
	if (m->pid)
		fprintf(f, ", pid %d", (int)m->pid);
	if (m->runtime) {
		fputs(", ", f);
		out_put_xml(f, out_clean(m->runtime, buf, sizeof buf, 0));
	}
}

int out_svg_write(const struct profile *p, FILE *f)
{
	const struct profile_meta *m = profile_meta_const(p);
	struct out_order o;
	int r = out_order_init(&o, p, 1, 0);
	if (r < 0)
		return r;
	struct svg s = {
		.p = p, .o = &o, .f = f,
		.total = profile_total(p),
	};
	double fw = SVG_WIDTH - 2 * SVG_XPAD;
	s.px_per_sample = s.total ? fw / (double)s.total : 0;
	s.min_width = SVG_MIN_WIDTH_PX;
	if (s.total && (r = svg_pass(&s)) < 0)
		goto out;
	choose_min_width(&s);
	int frames_h = s.total ? (int)(s.maxdepth + 1) * SVG_FRAME_H : 2 * SVG_FRAME_H;
	s.height = SVG_HEAD_H + frames_h + SVG_FOOT_H;
	s.emit = 1;

	char title[OUT_LABEL_MAX];
	out_clean(m->title, title, sizeof title, 0);
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"data-xpad=\"%d\" data-fw=\"%d\" data-charw=\"",
		SVG_WIDTH, s.height, SVG_WIDTH, s.height, SVG_XPAD, (int)fw);
	out_put_fixed(f, SVG_CHAR_W, 2);
	fputs("\">\n<!-- luaspy flame graph: click a frame to zoom, Ctrl-F to "
	      "search, Escape to reset -->\n", f);
	fprintf(f,
		"<defs><linearGradient id=\"bg\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"1\">"
		"<stop offset=\"5%%\" stop-color=\"#eeeeee\"/>"
		"<stop offset=\"95%%\" stop-color=\"#e8e8d8\"/></linearGradient></defs>\n"
		"<style>\n"
		"text { font-family: \"DejaVu Sans Mono\", Menlo, Consolas, monospace; "
		"font-size: %dpx; fill: #000; white-space: pre; }\n"
		"#title { font-size: 17px; font-weight: bold; }\n"
		"#subtitle { fill: #555; }\n"
		".btn { fill: #1a4c8b; cursor: pointer; text-decoration: underline; }\n"
		"#frames g { cursor: pointer; }\n"
		"#frames g:hover rect { stroke: #000; stroke-width: 0.6; }\n"
		"#frames g.anc rect { opacity: 0.55; }\n"
		"</style>\n"
		"<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"url(#bg)\"/>\n",
		SVG_FONT_PX, SVG_WIDTH, s.height);
	fprintf(f, "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">",
		SVG_WIDTH / 2);
	if (title[0]) {
		/* Long command lines are cut to what fits between the buttons. */
		char full[OUT_LABEL_MAX + 16];
		snprintf(full, sizeof full, "luaspy: %s", title);
		put_fitted(f, full, SVG_WIDTH - 2 * 110, SVG_TITLE_CHAR_W);
	} else {
		fputs("luaspy", f);
	}
	fprintf(f, "</text>\n<text id=\"subtitle\" x=\"%d\" y=\"44\" "
		"text-anchor=\"middle\">", SVG_WIDTH / 2);
	put_subtitle(f, m, s.total);
	if (s.min_width > SVG_MIN_WIDTH_PX) {
		fputs(" (frames under ", f);
		out_put_fixed(f, s.min_width, 1);
		fputs(" px not drawn)", f);
	}
	fputs("</text>\n", f);
	fprintf(f, "<text id=\"unzoom\" class=\"btn\" x=\"%d\" y=\"24\" "
		"style=\"display:none\">Reset Zoom</text>\n", SVG_XPAD);
	fprintf(f, "<text id=\"search\" class=\"btn\" x=\"%d\" y=\"24\" "
		"text-anchor=\"end\">Search</text>\n", SVG_WIDTH - SVG_XPAD);
	fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%d\"> </text>\n",
		SVG_XPAD, s.height - 12);
	fprintf(f, "<text id=\"matched\" x=\"%d\" y=\"%d\" text-anchor=\"end\"> </text>\n",
		SVG_WIDTH - SVG_XPAD, s.height - 12);
	if (!s.total)
		fprintf(f, "<text id=\"empty\" x=\"%d\" y=\"%d\" text-anchor=\"middle\">"
			"0 samples</text>\n", SVG_WIDTH / 2,
			SVG_HEAD_H + SVG_FRAME_H + 4);
	fputs("<g id=\"frames\">\n", f);
	if (s.total && (r = svg_pass(&s)) < 0)
		goto out;
	fputs("</g>\n<script type=\"text/ecmascript\"><![CDATA[\n", f);
	fputs(svg_script, f);
	fputs("]]></script>\n</svg>\n", f);
	r = out_ferror(f);
out:
	out_order_free(&o);
	return r;
}
