/* cmd_top.c: `luaspy top`: a live, top-like view of the hottest functions.
 *
 * The sole curses user in luaspy. The session samples as record does;
 * its tick callback (every TOP_TICK_NS, between samples, never while a
 * target thread is stopped) reads keys without blocking and, every
 * --delay seconds or when a key changed something, recomputes own/total
 * counts from the profile and redraws. When stdout is not a terminal no
 * curses is used at all: a plain-text table is printed every interval.
 *
 * Terminal restore: curses is started after session_start (so the
 * session's SIGINT/SIGTERM/SIGHUP handlers are in place and ncurses
 * leaves them alone), input is raw (Ctrl-C and Ctrl-Z are keys, so no
 * signal arrives while a thread is stopped), and top_curses_end() runs on
 * every way out: quit keys, stop signals and target exit (session_run
 * returns, never mid-sample), errors, exit() (atexit) and fatal signals.
 */
#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>
#define NCURSES_WIDECHAR 1 /* mvaddnwstr */
#include <curses.h>
#include "cli.h"
#include "err.h"
#include "htab.h"
#include "intern.h"
#include "msg.h"
#include "pgrep.h"
#include "profile.h"
#include "session.h"
#include "vm.h"
#include "timeutil.h"

#define TOP_TICK_NS (50 * 1000000ull) /* key polling period */
#define TOP_PLAIN_ROWS 20             /* rows per table in plain-text mode */
#define TOP_VMBAR_WIDTH 30            /* columns of the VM state bar */
#define TOP_LABEL_MAX 1024            /* bytes of a row label */
#define TOP_ERRLOG_LINES 10           /* stderr lines replayed after curses */

/* Sort columns, in key order '1'..'4'. */
enum top_sort { SORT_OWN_PCT = 0, SORT_TOTAL_PCT, SORT_OWN_TIME, SORT_TOTAL_TIME, SORT_NCOLS };

/* What a key handler asks the loop to do (like htop's HandlerResult). */
enum {
	TOP_OK = 0,
	TOP_REDRAW = 1 << 0,    /* draw the current snapshot again */
	TOP_RECOUNT = 1 << 1,   /* recount rows from the profile, then draw */
	TOP_CLEAR = 1 << 2,     /* repaint the whole screen (resize) */
	TOP_QUIT = 1 << 3,
};

/* ------------------------------------------------------------ rows */

/* One table row: a frame label and its counts in the current snapshot. */
struct top_row {
	const char *label;   /* interned frame label (with or without line) */
	uint64_t own;        /* samples where it is the innermost frame */
	uint64_t total;      /* samples where it is anywhere on the stack */
	uint64_t stamp;      /* last stack that counted total (recursion) */
};

/* Rows of one aggregation mode (per line or per function). Rows are
 * keyed by label string, so frames that differ only by what the label
 * leaves out (trace number, address, line in per-function mode) share a
 * row. Rows and the frame map only grow; counts are redone each time. */
struct top_agg {
	struct top_row *rows;
	size_t nrows, rows_cap;
	struct htab index;   /* label pointer hash -> row index */
	int32_t *fid_row;    /* profile frame id -> row, -1 = not shown */
	size_t nfid, fid_cap;
};

struct top {
	const struct cli_opts *o;
	struct session *s;
	struct profile *p;
	int tty;                  /* curses display (else plain text) */
	int with_line;            /* 1 per line, 0 per function */
	int sort;                 /* enum top_sort */
	int paused;               /* display frozen, sampling goes on */
	int help;                 /* help screen shown */
	size_t scroll;            /* first row shown */
	uint64_t delay_ns;
	uint64_t next_ns;         /* next refresh (monotonic) */
	uint64_t stamp;
	struct top_agg agg[2];    /* [with_line] */
	struct fn_names *names;   /* one name per Lua function (profile.h) */
	uint32_t *view;           /* rows with samples, sorted */
	size_t nview, view_cap;
	const struct session_stats *live; /* the session's running stats */
	struct session_stats base;        /* stats at the last reset */
	struct session_stats snap;        /* stats of the snapshot, since reset */
	uint64_t snap_total;              /* samples in the snapshot */
	uint64_t printed_ns;              /* plain mode: elapsed of the last table */
	int oom;                          /* a recount ran out of memory */
};

struct row_probe {
	const struct top_agg *a;
	const char *label;
};

static int row_eq(const void *ctx, uint32_t i)
{
	const struct row_probe *k = ctx;
	return k->a->rows[i].label == k->label;
}

/* Row index of LABEL (interned), added when new. -1 on allocation failure. */
static int32_t agg_row(struct top_agg *a, const char *label)
{
	struct row_probe k = { a, label };
	uint64_t h = htab_fnv1a_ptr(HTAB_FNV_INIT, label);
	size_t pos;
	if (htab_reserve(&a->index) < 0)
		return -1;
	int64_t i = htab_find(&a->index, h, row_eq, &k, &pos);
	if (i >= 0)
		return (int32_t)i;
	if (array_grow(&a->rows, &a->rows_cap, a->nrows + 1, sizeof *a->rows) < 0)
		return -1;
	struct top_row *r = &a->rows[a->nrows];
	memset(r, 0, sizeof *r);
	r->label = label;
	htab_insert(&a->index, pos, h, (uint32_t)a->nrows);
	return (int32_t)a->nrows++;
}

/* Map the frames interned since the last call to rows, Lua functions
 * under the name NM chose. 0 or -1 (memory). */
static int agg_sync(struct top_agg *a, const struct profile *p, const struct fn_names *nm,
		    int with_line)
{
	size_t n = profile_nframes(p);
	if (n > a->fid_cap) {
		size_t ncap = a->fid_cap ? a->fid_cap : 256;
		while (ncap < n)
			ncap *= 2;
		int32_t *nf = realloc(a->fid_row, ncap * sizeof *nf);
		if (!nf)
			return -1;
		a->fid_row = nf;
		a->fid_cap = ncap;
	}
	char buf[TOP_LABEL_MAX];
	for (; a->nfid < n; a->nfid++) {
		const struct frame *fr = profile_frame(p, (uint32_t)a->nfid);
		int32_t r = -1;
		if (fr && fr->kind != FRAME_ROOT && fr->kind != FRAME_VMSTATE) {
			struct frame named = *fr;
			named.name = fn_names_best(nm, fr);
			const char *label = intern(frame_label(&named, buf, sizeof buf, with_line));
			if (!label || (r = agg_row(a, label)) < 0)
				return -1;
		}
		a->fid_row[a->nfid] = r;
	}
	return 0;
}

static void agg_free(struct top_agg *a)
{
	free(a->rows);
	htab_free(&a->index);
	free(a->fid_row);
	memset(a, 0, sizeof *a);
}

/* ------------------------------------------------------------ counting */

static uint64_t sort_key(const struct top_row *r, int sort)
{
	return sort == SORT_OWN_PCT || sort == SORT_OWN_TIME ? r->own : r->total;
}

static int cmp_rows(const void *a, const void *b, void *arg)
{
	const struct top *t = arg;
	const struct top_row *rows = t->agg[t->with_line].rows;
	const struct top_row *x = &rows[*(const uint32_t *)a], *y = &rows[*(const uint32_t *)b];
	uint64_t kx = sort_key(x, t->sort), ky = sort_key(y, t->sort);
	if (kx != ky)
		return kx > ky ? -1 : 1;
	/* ties: the other count, then the label */
	kx = x->own + x->total - kx;
	ky = y->own + y->total - ky;
	if (kx != ky)
		return kx > ky ? -1 : 1;
	return strcmp(x->label, y->label);
}

static void top_sort(struct top *t)
{
	if (t->nview > 1)
		qsort_r(t->view, t->nview, sizeof *t->view, cmp_rows, t);
}

/* Session stats minus the baseline taken at the last reset. */
static void stats_since(struct session_stats *d, const struct session_stats *now,
			const struct session_stats *base)
{
	*d = *now;
	d->samples -= base->samples;
	d->errors -= base->errors;
	d->late -= base->late;
	d->ticks -= base->ticks;
	d->elapsed_ns -= base->elapsed_ns;
	for (int i = 0; i < 8; i++)
		d->vmstate[i] -= base->vmstate[i];
	for (int i = 0; i < 32; i++)
		d->err_by_kind[i] -= base->err_by_kind[i];
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

/* Distinct threads in the profile (sampled since the last reset). */
static int count_tids(const struct profile *p)
{
	size_t n = profile_nstacks(p);
	pid_t *tids = malloc((n ? n : 1) * sizeof *tids);
	if (!tids)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const uint32_t *ids;
		size_t depth;
		uint64_t count;
		profile_stack(p, i, &tids[i], &ids, &depth, &count);
	}
	qsort(tids, n, sizeof *tids, cmp_pid);
	int k = 0;
	for (size_t i = 0; i < n; i++)
		if (i == 0 || tids[i] != tids[i - 1])
			k++;
	free(tids);
	return k;
}

/* Take a snapshot: count own/total per row over every profile stack,
 * fill and sort the view. On memory failure keeps the old view. */
static void top_recount(struct top *t)
{
	struct top_agg *a = &t->agg[t->with_line];
	stats_since(&t->snap, t->live, &t->base);
	/* names are chosen over the whole table: when one changed, the
	 * frames are mapped to rows again (rows left empty are not shown) */
	int renamed = t->names ? fn_names_count(t->names, t->p) : -1;
	if (renamed < 0) {
		t->oom = 1;
		return;
	}
	if (renamed)
		t->agg[0].nfid = t->agg[1].nfid = 0;
	if (agg_sync(a, t->p, t->names, t->with_line) < 0) {
		t->oom = 1;
		return;
	}
	if (a->nrows > t->view_cap) {
		uint32_t *nv = realloc(t->view, a->rows_cap * sizeof *nv);
		if (!nv) {
			t->oom = 1;
			return;
		}
		t->view = nv;
		t->view_cap = a->rows_cap;
	}
	t->oom = 0;
	for (size_t i = 0; i < a->nrows; i++)
		a->rows[i].own = a->rows[i].total = 0;
	size_t n = profile_nstacks(t->p);
	for (size_t i = 0; i < n; i++) {
		pid_t tid;
		const uint32_t *ids;
		size_t depth;
		uint64_t count;
		profile_stack(t->p, i, &tid, &ids, &depth, &count);
		int32_t leaf = -1;
		t->stamp++;
		for (size_t d = 0; d < depth; d++) { /* outermost first */
			int32_t r = ids[d] < a->nfid ? a->fid_row[ids[d]] : -1;
			if (r < 0)
				continue;
			leaf = r;
			if (a->rows[r].stamp != t->stamp) {
				a->rows[r].stamp = t->stamp;
				a->rows[r].total += count;
			}
		}
		if (leaf >= 0)
			a->rows[leaf].own += count;
	}
	t->snap_total = profile_total(t->p);
	t->snap.threads = count_tids(t->p);
	t->nview = 0;
	for (size_t i = 0; i < a->nrows; i++)
		if (a->rows[i].total)
			t->view[t->nview++] = (uint32_t)i;
	top_sort(t);
}

/* R: forget the counts; stats restart from here. */
static void top_reset(struct top *t)
{
	profile_reset(t->p);
	t->base = *t->live;
	t->scroll = 0;
	top_recount(t);
}

/* ------------------------------------------------------------ text */

static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Samples per second per thread actually reached in the snapshot: a
 * thread is sampled once per tick, and ticks fall behind -r when the
 * machine is busy, so count / rate is the time a row really ran. */
static double snap_rate_hz(const struct top *t)
{
	if (t->snap.ticks > 0 && t->snap.elapsed_ns > 0)
		return (double)t->snap.ticks * 1e9 / (double)t->snap.elapsed_ns;
	return t->o->rate_hz;
}

static int top_show_vmstate(const struct top *t)
{
	const char *rt = session_runtime(t->s);
	return (rt && !strncmp(rt, "LuaJIT", 6)) || t->snap.vmstate[VMS_INTERP] ||
	       t->snap.vmstate[VMS_TRACE];
}

static const char *const vms_names[VMS_NCLASSES] = { "interp", "JIT", "C", "GC", "other" };
static const char vms_marks[VMS_NCLASSES] = { 'I', 'J', 'C', 'G', '-' };

/* Header line I (0..2) of the snapshot into BUF; 0 when there is no such line. */
static int top_header_line(const struct top *t, int i, char *buf, size_t len)
{
	const struct session_stats *st = &t->snap;
	double el = (double)st->elapsed_ns / 1e9;
	const char *rt = session_runtime(t->s);
	switch (i) {
	case 0:
		snprintf(buf, len, "luaspy top: pid %d \"%s\"  %s", (int)session_pid(t->s),
			 session_cmdline(t->s), rt ? rt : "(no Lua runtime yet)");
		return 1;
	case 1:
		snprintf(buf, len,
			 "Elapsed %.1fs  Samples %llu  Errors %llu (%.1f%%)  Threads %d  Rate %.1f Hz",
			 el, (unsigned long long)st->samples, (unsigned long long)st->errors,
			 pct(st->errors, st->samples + st->errors), st->threads,
			 snap_rate_hz(t));
		return 1;
	case 2: {
		if (!top_show_vmstate(t))
			return 0;
		uint64_t sum = 0;
		for (int k = 0; k < VMS_NCLASSES; k++)
			sum += st->vmstate[k];
		size_t n = (size_t)snprintf(buf, len, "VM [");
		uint64_t cum = 0;
		int col = 0;
		for (int k = 0; k < VMS_NCLASSES && n < len; k++) {
			cum += st->vmstate[k];
			int end = sum ? (int)((cum * TOP_VMBAR_WIDTH + sum / 2) / sum) : 0;
			for (; col < end && n + 1 < len; col++)
				buf[n++] = vms_marks[k];
		}
		for (; col < TOP_VMBAR_WIDTH && n + 1 < len; col++)
			buf[n++] = ' ';
		if (n < len)
			n += (size_t)snprintf(buf + n, len - n, "]");
		for (int k = 0; k < VMS_NCLASSES && n < len; k++)
			n += (size_t)snprintf(buf + n, len - n, "  %s %.1f%%", vms_names[k],
					      pct(st->vmstate[k], sum));
		return 1;
	}
	}
	return 0;
}

static const char *const col_titles[SORT_NCOLS] = { "%Own", "%Total", "OwnTime", "TotalTime" };
static const int col_widths[SORT_NCOLS] = { 8, 8, 10, 11 };

/* Table header; the sort column's title carries a '*'. */
static void top_table_header(const struct top *t, char *buf, size_t len)
{
	size_t n = 0;
	for (int c = 0; c < SORT_NCOLS && n < len; c++) {
		char title[32];
		snprintf(title, sizeof title, "%s%s", col_titles[c], c == t->sort ? "*" : "");
		n += (size_t)snprintf(buf + n, len - n, "%*s", col_widths[c], title);
	}
	if (n < len)
		snprintf(buf + n, len - n, "  %s",
			 t->with_line ? "Function (file:line)" : "Function (file:linedefined)");
}

static void fmt_time(char *buf, size_t len, uint64_t count, double rate_hz)
{
	snprintf(buf, len, "%.2fs", rate_hz > 0 ? (double)count / rate_hz : 0.0);
}


/* Row I of the view into BUF; returns the byte where its label starts. */
static size_t top_row_line(const struct top *t, size_t i, char *buf, size_t len)
{
	const struct top_row *r = &t->agg[t->with_line].rows[t->view[i]];
	char own[32], total[32];
	double hz = snap_rate_hz(t);
	fmt_time(own, sizeof own, r->own, hz);
	fmt_time(total, sizeof total, r->total, hz);
	int n = snprintf(buf, len, "%*.2f%%%*.2f%%%*s%*s  ", col_widths[0] - 1, pct(r->own, t->snap_total),
			 col_widths[1] - 1, pct(r->total, t->snap_total), col_widths[2], own,
			 col_widths[3], total);
	if (n < 0 || (size_t)n >= len)
		return 0;
	snprintf(buf + n, len - (size_t)n, "%s", r->label);
	return (size_t)n;
}

/* Screen columns of wide character C (a character wcwidth() does not know
 * counts as one: it is drawn as something). */
static int wc_cols(wchar_t c)
{
	int w = wcwidth(c);
	return w < 0 ? 1 : w;
}

static int ws_cols(const wchar_t *w, size_t n)
{
	int cols = 0;
	for (size_t i = 0; i < n; i++)
		cols += wc_cols(w[i]);
	return cols;
}

/* Remove W[FROM, TO) of the N characters of W, put "..." in their place;
 * returns the new length. */
static size_t ws_elide(wchar_t *w, size_t n, size_t from, size_t to)
{
	static const wchar_t dots[] = L"...";
	memmove(w + from + 3, w + to, (n - to + 1) * sizeof *w);
	memcpy(w + from, dots, 3 * sizeof *w);
	return n - (to - from) + 3;
}

/* Fit row W (N characters, NUL-terminated; its label "name (file:line)"
 * starts at character LABEL) into COLS screen columns, counted per
 * character (wcwidth), not per byte: first the start of the file goes,
 * shown as "...", so the name and the line number stay; then the end of
 * the name, shown as "...". Whatever is still too wide is cut by the
 * caller at a character, never inside one. Returns the new length. */
static size_t top_fit_row(wchar_t *w, size_t n, size_t label, int cols)
{
	int over = ws_cols(w, n) - cols;
	if (over <= 0 || n < label + 2 || w[n - 1] != L')')
		return n;
	size_t open = n - 1; /* the " (" that opens the file part */
	while (open > label && !(w[open] == L'(' && w[open - 1] == L' '))
		open--;
	if (open <= label)
		return n;
	size_t file = open + 1, end = n - 1; /* end: the ':' before the line, or ')' */
	for (size_t k = n - 1; k > file; k--)
		if (w[k] == L':') {
			end = k;
			break;
		}
	/* the file part: drop columns from its start, "..." included */
	size_t to = file;
	int gone = 0;
	while (to < end && gone < over + 3)
		gone += wc_cols(w[to++]);
	if (to > file + 3 || (to == end && end - file > 3)) {
		n = ws_elide(w, n, file, to);
		over = ws_cols(w, n) - cols;
		open = file - 1;
	}
	if (over <= 0)
		return n;
	/* then the end of the name */
	size_t name_end = open - 1, from = name_end; /* the ' ' before "(" */
	gone = 0;
	while (from > label + 1 && gone < over + 3)
		gone += wc_cols(w[--from]);
	if (name_end > from + 3)
		n = ws_elide(w, n, from, name_end);
	return n;
}

/* Draw table row LINE (UTF-8; its label starts at byte LABEL) at screen
 * row Y, within COLS columns (top_fit_row). A row that is not valid in
 * the locale's encoding is drawn cut at COLS bytes. */
static void top_draw_row(int y, const char *line, size_t label)
{
	wchar_t w[TOP_LABEL_MAX + 128];
	size_t n = mbstowcs(w, line, sizeof w / sizeof w[0] - 1);
	if (n == (size_t)-1 || COLS <= 0) {
		mvaddnstr(y, 0, line, COLS);
		return;
	}
	w[n] = 0;
	size_t lw = mbstowcs(NULL, line + label, 0); /* characters of the label */
	n = top_fit_row(w, n, lw == (size_t)-1 || lw > n ? n : n - lw, COLS);
	size_t k = 0;
	int used = 0;
	while (k < n && used + wc_cols(w[k]) <= COLS)
		used += wc_cols(w[k++]);
	mvaddnwstr(y, 0, w, (int)k);
}

/* Plain text: header lines, table header, up to MAXROWS rows, blank line. */
static void top_print_plain(const struct top *t, FILE *f, size_t maxrows)
{
	char line[TOP_LABEL_MAX + 128];
	for (int i = 0; i < 3; i++)
		if (top_header_line(t, i, line, sizeof line))
			fprintf(f, "%s\n", line);
	top_table_header(t, line, sizeof line);
	fprintf(f, "%s\n", line);
	for (size_t i = 0; i < t->nview && i < maxrows; i++) {
		top_row_line(t, i, line, sizeof line);
		fprintf(f, "%s\n", line);
	}
	if (!t->nview)
		fprintf(f, "%s\n", t->snap.samples ? "(no frames in the samples)" : "(no samples yet)");
	fputc('\n', f);
	fflush(f);
}

/* ------------------------------------------------------------ curses */

/* Curses state is file-static so exit paths and signal handlers reach it. */
static volatile sig_atomic_t curses_on;
static SCREEN *curses_screen;
static FILE *curses_in;          /* /dev/tty when stdin is not the terminal */
static int saved_stderr = -1;    /* real stderr while curses is on */
static FILE *errlog;             /* stderr goes here while curses is on */

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGQUIT };

/* Give the terminal back: leave curses mode, point stderr at the
 * terminal again. Idempotent; safe from atexit and fatal signals. */
static void top_curses_end(void)
{
	if (!curses_on)
		return;
	curses_on = 0;
	endwin();
	if (saved_stderr >= 0) {
		dup2(saved_stderr, 2);
		close(saved_stderr);
		saved_stderr = -1;
	}
}

static void on_fatal(int sig)
{
	top_curses_end();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Replay the last lines written to stderr while curses was on. */
static void errlog_replay(void)
{
	if (!errlog)
		return;
	long n = 0;
	char line[1024];
	rewind(errlog);
	while (fgets(line, sizeof line, errlog))
		n++;
	rewind(errlog);
	long skip = n > TOP_ERRLOG_LINES ? n - TOP_ERRLOG_LINES : 0;
	if (skip)
		fprintf(stderr, "luaspy: (%ld earlier messages left out)\n", skip);
	for (long i = 0; fgets(line, sizeof line, errlog); i++)
		if (i >= skip)
			fputs(line, stderr);
	fclose(errlog);
	errlog = NULL;
}

enum { PAIR_HEAD = 1, PAIR_INTERP, PAIR_TRACE, PAIR_C, PAIR_GC, PAIR_OTHER };

/* Enter curses mode. 0, or -1 when the terminal cannot be used (nothing
 * changed then). */
static int top_curses_begin(void)
{
	curses_in = stdin;
	if (!isatty(0)) {
		curses_in = fopen("/dev/tty", "r");
		if (!curses_in)
			return -1;
	}
	/* ncurses leaves signals alone that are not SIG_DFL: the session's
	 * stop handlers stay; a job-control stop must not catch a target
	 * thread stopped mid-sample, and raw mode makes ^Z a key anyway */
	void (*old_tstp)(int) = signal(SIGTSTP, SIG_IGN);
	curses_screen = newterm(NULL, stdout, curses_in);
	if (!curses_screen) {
		signal(SIGTSTP, old_tstp);
		if (curses_in != stdin)
			fclose(curses_in);
		curses_in = NULL;
		return -1;
	}
	curses_on = 1;
	atexit(top_curses_end);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_fatal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
		sigaction(fatal_signals[i], &sa, NULL);
	raw();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	/* a lone ESC must not hold the sampling loop for ncurses' default 1 s */
	set_escdelay(25);
	curs_set(0);
	if (has_colors()) {
		start_color();
		use_default_colors();
		init_pair(PAIR_HEAD, COLOR_BLACK, COLOR_GREEN);
		init_pair(PAIR_INTERP, COLOR_BLACK, COLOR_YELLOW);
		init_pair(PAIR_TRACE, COLOR_BLACK, COLOR_GREEN);
		init_pair(PAIR_C, COLOR_BLACK, COLOR_CYAN);
		init_pair(PAIR_GC, COLOR_BLACK, COLOR_RED);
		init_pair(PAIR_OTHER, COLOR_BLACK, COLOR_WHITE);
	}
	/* messages on stderr (session's "falling behind", -v) would tear the
	 * screen: keep them and show them after the terminal is restored */
	errlog = tmpfile();
	if (errlog) {
		fflush(stderr);
		saved_stderr = dup(2);
		if (saved_stderr < 0 || dup2(fileno(errlog), 2) < 0) {
			if (saved_stderr >= 0)
				close(saved_stderr);
			saved_stderr = -1;
			fclose(errlog);
			errlog = NULL;
		}
	}
	return 0;
}

/* Lines above the table: header, status line, a blank line. */
static int top_table_top(const struct top *t)
{
	return (top_show_vmstate(t) ? 3 : 2) + 2;
}

/* Rows of the table that fit on the screen. */
static size_t top_page(const struct top *t)
{
	int n = LINES - top_table_top(t) - 1;
	return n > 1 ? (size_t)n : 1;
}

static void top_clamp_scroll(struct top *t)
{
	size_t page = top_page(t);
	size_t max = t->nview > page ? t->nview - page : 0;
	if (t->scroll > max)
		t->scroll = max;
}

static void draw_vmbar(int y, const char *line)
{
	mvaddnstr(y, 0, line, COLS);
	if (!has_colors())
		return;
	/* color the bar: "VM [" is 4 columns */
	for (int c = 0; c < TOP_VMBAR_WIDTH && 4 + c < COLS; c++) {
		char ch = line[4 + c];
		for (int k = 0; k < VMS_NCLASSES; k++)
			if (ch == vms_marks[k])
				mvchgat(y, 4 + c, 1, A_NORMAL, (short)(PAIR_INTERP + k), NULL);
	}
}

static const char *const help_lines[] = {
	"luaspy top keys",
	"",
	"  1  sort by %Own        2  sort by %Total",
	"  3  sort by OwnTime     4  sort by TotalTime",
	"  L  toggle per-line / per-function rows",
	"  R  reset the counts",
	"  P  pause the display (sampling goes on)",
	"  Up/Down PgUp/PgDn Home/End  scroll",
	"  ?  this help           Q, Ctrl-C  quit",
	"",
	"%Own: samples where the function is running (innermost frame);",
	"%Total: samples where it is anywhere on the stack.",
	"",
	"Press any key to go back.",
};

static void draw_help(void)
{
	int n = (int)(sizeof help_lines / sizeof help_lines[0]);
	int w = 0;
	for (int i = 0; i < n; i++) {
		int l = (int)strlen(help_lines[i]);
		if (l > w)
			w = l;
	}
	int y0 = (LINES - n - 2) / 2, x0 = (COLS - w - 4) / 2;
	if (y0 < 0)
		y0 = 0;
	if (x0 < 0)
		x0 = 0;
	for (int i = -1; i <= n; i++) {
		move(y0 + 1 + i, x0);
		for (int c = 0; c < w + 4 && x0 + c < COLS; c++)
			addch(i == -1 || i == n ? '-' : c == 0 || c == w + 3 ? '|' : ' ');
		if (i >= 0 && i < n)
			mvaddnstr(y0 + 1 + i, x0 + 2, help_lines[i], COLS - x0 - 2 > 0 ? COLS - x0 - 2 : 0);
	}
}

static void top_draw(struct top *t)
{
	char line[TOP_LABEL_MAX + 128];
	erase();
	int y = 0;
	for (int i = 0; i < 3; i++) {
		if (!top_header_line(t, i, line, sizeof line))
			continue;
		if (i == 2) {
			draw_vmbar(y++, line);
		} else {
			if (i == 0)
				attron(A_BOLD);
			mvaddnstr(y++, 0, line, COLS);
			if (i == 0)
				attroff(A_BOLD);
		}
	}
	if (t->paused)
		snprintf(line, sizeof line,
			 "PAUSED (sampling goes on: %llu samples)  P resume  ? help  Q quit",
			 (unsigned long long)(t->live->samples - t->base.samples));
	else
		snprintf(line, sizeof line,
			 "Keys: 1-4 sort  L %s  R reset  P pause  ? help  Q quit%s",
			 t->with_line ? "per function" : "per line",
			 t->oom ? "  (out of memory: table not updated)" : "");
	mvaddnstr(y++, 0, line, COLS);
	y = top_table_top(t) - 1;
	top_table_header(t, line, sizeof line);
	size_t l = strlen(line);
	for (; l < (size_t)COLS && l + 1 < sizeof line; l++)
		line[l] = ' ';
	line[l] = 0;
	attron(has_colors() ? COLOR_PAIR(PAIR_HEAD) : A_REVERSE);
	mvaddnstr(y++, 0, line, COLS);
	attroff(has_colors() ? COLOR_PAIR(PAIR_HEAD) : A_REVERSE);
	top_clamp_scroll(t);
	if (!t->nview)
		mvaddnstr(y, 0, t->snap.samples ? "(no frames in the samples)" : "(collecting samples...)",
			  COLS);
	for (size_t i = t->scroll; i < t->nview && y < LINES; i++, y++) {
		size_t label = top_row_line(t, i, line, sizeof line);
		top_draw_row(y, line, label);
	}
	if (t->help)
		draw_help();
	refresh();
}

/* Read every pending key. Returns TOP_* flags. */
static int top_keys(struct top *t)
{
	int fl = 0, ch;
	while ((ch = getch()) != ERR) {
		if (ch == KEY_RESIZE) {
			fl |= TOP_CLEAR;
			continue;
		}
		if (ch == 'q' || ch == 'Q' || ch == 3)
			return fl | TOP_QUIT;
		if (t->help) { /* any other key closes the help */
			t->help = 0;
			fl |= TOP_REDRAW;
			continue;
		}
		switch (ch) {
		case '1': case '2': case '3': case '4':
			t->sort = ch - '1';
			top_sort(t);
			fl |= TOP_REDRAW;
			break;
		case 'l': case 'L':
			t->with_line = !t->with_line;
			t->scroll = 0;
			fl |= TOP_RECOUNT;
			break;
		case 'r': case 'R':
			top_reset(t);
			fl |= TOP_REDRAW;
			break;
		case 'p': case 'P':
			t->paused = !t->paused;
			fl |= t->paused ? TOP_REDRAW : TOP_RECOUNT;
			break;
		case '?': case 'h': case 'H':
			t->help = 1;
			fl |= TOP_REDRAW;
			break;
		case KEY_UP: case 'k':
			if (t->scroll)
				t->scroll--;
			fl |= TOP_REDRAW;
			break;
		case KEY_DOWN: case 'j':
			t->scroll++;
			fl |= TOP_REDRAW;
			break;
		case KEY_PPAGE:
			t->scroll = t->scroll > top_page(t) ? t->scroll - top_page(t) : 0;
			fl |= TOP_REDRAW;
			break;
		case KEY_NPAGE: case ' ':
			t->scroll += top_page(t);
			fl |= TOP_REDRAW;
			break;
		case KEY_HOME: case 'g':
			t->scroll = 0;
			fl |= TOP_REDRAW;
			break;
		case KEY_END: case 'G':
			t->scroll = t->nview;
			fl |= TOP_REDRAW;
			break;
		case 12: /* ^L */
			fl |= TOP_CLEAR;
			break;
		default:
			break;
		}
	}
	return fl;
}

/* ------------------------------------------------------------ loop */

static int top_tick(void *arg, const struct session_stats *st)
{
	struct top *t = arg;
	(void)st;
	int fl = t->tty ? top_keys(t) : 0;
	if (fl & TOP_QUIT)
		return 1;
	uint64_t now = time_now_ns();
	if (now >= t->next_ns) {
		t->next_ns += t->delay_ns;
		if (t->next_ns <= now)
			t->next_ns = now + t->delay_ns;
		if (!t->tty) {
			top_recount(t);
			top_print_plain(t, stdout, TOP_PLAIN_ROWS);
			t->printed_ns = t->live->elapsed_ns;
			return 0;
		}
		fl |= t->paused ? TOP_REDRAW : TOP_RECOUNT;
	}
	if (fl & TOP_RECOUNT)
		top_recount(t);
	if (fl & TOP_CLEAR)
		clearok(curscr, TRUE);
	if (fl)
		top_draw(t);
	return 0;
}

int cmd_top(struct cli_opts *o)
{
	struct session *s;
	int code = pgrep_resolve(o);
	if (code)
		return code;
	code = session_start(o, &s);
	if (code)
		return code;
	struct top t;
	memset(&t, 0, sizeof t);
	t.o = o;
	t.s = s;
	t.p = profile_new();
	t.names = fn_names_new();
	if (!t.p || !t.names) {
		profile_free(t.p);
		fn_names_free(t.names);
		session_finish(s);
		return msg_err_pid(0, -LS_E_NOMEM);
	}
	t.live = session_stats(s);
	t.with_line = !o->function;
	t.sort = SORT_OWN_PCT;
	t.delay_ns = (uint64_t)(o->delay_s * 1e9);
	t.next_ns = time_now_ns() + t.delay_ns;
	t.tty = isatty(1);
	if (t.tty) {
		setlocale(LC_ALL, "");
		if (top_curses_begin() < 0) {
			msg_error("cannot use the terminal (TERM=%s); printing plain text",
				  getenv("TERM") ? getenv("TERM") : "");
			t.tty = 0;
		}
	}
	if (t.tty) {
		top_recount(&t);
		top_draw(&t);
	}
	int why = session_run(s, t.p, TOP_TICK_NS, top_tick, &t);
	int was_tty = t.tty && curses_on;
	top_curses_end();
	errlog_replay();
	if (curses_screen) {
		delscreen(curses_screen);
		curses_screen = NULL;
	}
	if (curses_in && curses_in != stdin)
		fclose(curses_in);
	curses_in = NULL;

	pid_t pid = session_pid(s);
	if (why == END_EXITED)
		msg_error("pid %d exited", (int)pid);
	/* the final table: always in plain mode (unless just printed), and
	 * after the display when the run ended by itself */
	if ((!was_tty && (t.live->elapsed_ns != t.printed_ns || !t.printed_ns)) ||
	    (was_tty && (why == END_EXITED || why == END_DURATION))) {
		top_recount(&t);
		top_print_plain(&t, stdout, TOP_PLAIN_ROWS);
	}
	session_report_lag(s);
	if (o->stats)
		session_print_stats(s, stderr);
	agg_free(&t.agg[0]);
	agg_free(&t.agg[1]);
	free(t.view);
	profile_free(t.p);
	fn_names_free(t.names);
	return session_finish(s);
}
