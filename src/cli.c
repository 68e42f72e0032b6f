/* cli.c: option parsing shared by record, top and dump (flags follow
 * py-spy where the meaning is the same), help text and dispatch, all
 * driven by one option table (options[]). The help groups are the
 * OPTIONS subsections of man/luaspy.1. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "config.h"
#include "elf_sym.h"
#include "err.h"
#include "msg.h"
#include "out.h"
#include "upload.h"

enum {
	OPT_LUA_ONLY = 256, OPT_NONBLOCKING, OPT_VMSTATE, OPT_JSON, OPT_ALL_COROUTINES,
	OPT_DELAY, OPT_TIMEOUT, OPT_STATS, OPT_VERSION, OPT_NATIVE_ONLY, OPT_BLOCKING,
	OPT_SAMPLER, OPT_CORE, OPT_EXE, OPT_DIFF, OPT_LOCALS, OPT_LOCALS_LENGTH,
	OPT_FOCUS, OPT_IGNORE, OPT_NOLINENO, OPT_TID, OPT_PERIOD,
	OPT_UPLOAD, OPT_APP, OPT_TAG, OPT_UPLOAD_HEADER,
	OPT_PERF_MAP_APPEND,
	OPT_PERF_MAP,
	OPT_PGREP, OPT_PGREP_FULL,
	OPT_HEAP_INTERVAL, OPT_HEAP_COUNT,
	OPT_NO_DEMANGLE,
	OPT_COROUTINES,
	OPT_HEAP_MAX_MEMORY,
	OPT_UPLOAD_QUEUE, OPT_UPLOAD_QUEUE_MAX, OPT_UPLOAD_QUEUE_MIB,
	OPT_GC
};

/* Commands as bits of cli_option.cmds. */
#define R (1u << CMD_RECORD)
#define T (1u << CMD_TOP)
#define D (1u << CMD_DUMP)
#define H (1u << CMD_HEAP)
#define P (1u << CMD_REPORT)
#define M (1u << CMD_PERFMAP)

/* Help groups: the OPTIONS subsections of man/luaspy.1, in their order. */
enum { GRP_TARGET, GRP_SAMPLING, GRP_OUTPUT, GRP_GENERAL, GRP_HIDDEN, GRP_N };
static const char *const group_names[GRP_N] = { "Target", "Sampling", "Output", "General", "-" };

/* How an option's value lands in struct cli_opts (cli_option.kind):
 * V_CODE (the row ends in CODE) by apply_option's own case; the others
 * by the row alone. */
enum { V_CODE = 0, V_FLAG, V_COUNT, V_STR, V_DOUBLE, V_INT, V_SIZE };
#define OFF_(f) offsetof(struct cli_opts, f)
#define CODE V_CODE, 0, 0, 0, 0, NULL, NULL
#define FLAG(f) V_FLAG, OFF_(f), 0, 0, 0, NULL, NULL
#define COUNT(f) V_COUNT, OFF_(f), 0, 0, 0, NULL, NULL
#define STR(f) V_STR, OFF_(f), 0, 0, 0, NULL, NULL
#define DBL(f, lo, hi, what, want) V_DOUBLE, OFF_(f), lo, hi, 0, what, want
#define DBL_POS(f, hi, what, want) V_DOUBLE, OFF_(f), 0, hi, 1, what, want
#define INT(f, lo, hi, what, want) V_INT, OFF_(f), lo, hi, 0, what, want
#define SIZE(f, lo, hi, what, want) V_SIZE, OFF_(f), lo, hi, 0, what, want
_Static_assert(sizeof(pid_t) == sizeof(int), "pid_t fields are set as int");

/* Every option of every command, once: getopt's tables, each command's
 * option set, `luaspy help CMD` and `luaspy --list-options` (which
 * tests/docs-sync.test checks man/luaspy.1 and completions/ against)
 * are made from it. Help lists options by group, in table order; a
 * help text may hold '\n' (continuation lines are indented). */
static const struct cli_option {
	const char *name;   /* long name, without "--" */
	int letter;         /* short option, or 0 */
	int id;             /* getopt's value: LETTER, or OPT_* */
	const char *arg;    /* value name in help, or NULL: no value */
	unsigned cmds;      /* commands that accept it (R, T, D bits) */
	int group;          /* GRP_*; GRP_HIDDEN: accepted, not in help */
	const char *help;
	/* the value, where it is data (V_CODE: apply_option's case) */
	int kind;           /* V_* */
	size_t off;         /* offsetof(struct cli_opts, the field) */
	double lo, hi;      /* V_DOUBLE, V_INT, V_SIZE: the range */
	int lo_open;        /* V_DOUBLE: lo itself refused */
	const char *what;   /* the usage error: "WHAT 'VALUE': WANT" */
	const char *want;   /* or NULL: "WHAT 'VALUE'" */
} options[] = {
	{ "pid", 'p', 'p', "PID", R | T | D | H | M, GRP_TARGET,
	  "attach to the running process PID",
	  INT(pid, 1, INT_MAX, "invalid pid", NULL) },
	{ "subprocesses", 's', 's', NULL, R | T | D, GRP_TARGET,
	  "also child processes: a root frame each (record, top),\n"
	  "a block each (dump)",
	  FLAG(subprocesses) },
	{ "timeout", 0, OPT_TIMEOUT, "SECS", R | T | D | H, GRP_TARGET,
	  "wait this long for a Lua runtime (and for a --pgrep\n"
	  "match) to appear (default 5)",
	  DBL(timeout_s, 0, 86400, "invalid timeout", "expected seconds from 0 to 86400") },
	{ "rate", 'r', 'r', "HZ", R | T, GRP_SAMPLING,
	  "samples per second per thread (default 100, max 10000)",
	  DBL(rate_hz, 1, RATE_MAX_HZ, "invalid rate", "expected a number of Hz from 1 to 10000") },
	{ "duration", 'd', 'd', "SECS", R | T | M | H, GRP_SAMPLING,
	  "stop after SECS seconds (default: Ctrl-C or target exit;\n"
	  "heap -- COMMAND: the snapshot then, if none came first)",
	  DBL_POS(duration_s, 31536000, "invalid duration", "expected a positive number of seconds") },
	{ "idle", 'i', 'i', NULL, R | T | D, GRP_SAMPLING,
	  "include threads that are sleeping or not in Lua\n"
	  "(dump always shows every thread)",
	  FLAG(idle) },
	{ "native", 'n', 'n', NULL, R | T | D, GRP_SAMPLING,
	  "include native frames (default; kept for py-spy users)",
	  FLAG(native) },
	{ "lua-only", 0, OPT_LUA_ONLY, NULL, R | T | D, GRP_SAMPLING,
	  "Lua frames only, no native unwinding",
	  CODE },
	{ "nonblocking", 0, OPT_NONBLOCKING, NULL, R | T | H, GRP_SAMPLING,
	  "never stop the target (record, top: needs --lua-only;\n"
	  "heap: walk it running, count what was skipped or changed)",
	  FLAG(nonblocking) },
	{ "blocking", 0, OPT_BLOCKING, NULL, R | T, GRP_SAMPLING,
	  "keep each thread stopped until its stack is walked:\n"
	  "no torn samples, longer stops",
	  FLAG(blocking) },
	{ "output", 'o', 'o', "FILE", R | H | P, GRP_OUTPUT,
	  "output file (record: default luaspy-PID.svg; heap: stdout;\n"
	  "report: stdout)",
	  STR(output) },
	{ "format", 'f', 'f', "FORMAT", R | H | P, GRP_OUTPUT,
	  "record, report: flamegraph, folded, speedscope, pprof or\n"
	  "callgrind (report also: top, a text table to stdout)\n"
	  "(default: from the extension of FILE, else flamegraph);\n"
	  "heap: text, heapsnapshot, paths or pprof (default:\n"
	  "from a FILE ending in .heapsnapshot, .paths, .pb.gz\n"
	  "or .pprof, else text)",
	  CODE },
	{ "threads", 't', 't', NULL, R, GRP_OUTPUT,
	  "add a root frame per thread",
	  FLAG(threads) },
	{ "function", 'F', 'F', NULL, R | T | P, GRP_OUTPUT,
	  "aggregate by function instead of by line",
	  FLAG(function) },
	{ "vmstate", 0, OPT_VMSTATE, NULL, R, GRP_OUTPUT,
	  "add the VM state as a leaf frame ([GC], [JIT trace 12])",
	  FLAG(vmstate) },
	{ "stats", 0, OPT_STATS, NULL, R | T, GRP_OUTPUT,
	  "print stop-time statistics at the end",
	  FLAG(stats) },
	{ "json", 0, OPT_JSON, NULL, D, GRP_OUTPUT,
	  "one JSON object instead of text",
	  FLAG(json) },
	{ "all-coroutines", 0, OPT_ALL_COROUTINES, NULL, D, GRP_OUTPUT,
	  "also list every coroutine with its status and stack",
	  FLAG(all_coroutines) },
	{ "native-only", 0, OPT_NATIVE_ONLY, NULL, D, GRP_OUTPUT,
	  "native frames only, as eu-stack shows them (no VM lookup)",
	  FLAG(native_only) },
	{ "delay", 0, OPT_DELAY, "SECS", T, GRP_OUTPUT,
	  "seconds between refreshes (default 1)",
	  DBL(delay_s, 0.05, 3600, "invalid delay", "expected seconds from 0.05 to 3600") },
	{ "verbose", 'v', 'v', NULL, R | T | D | H | P | M, GRP_GENERAL,
	  "say how the VM was found (repeat for more)",
	  COUNT(verbose) },
	{ "help", 'h', 'h', NULL, R | T | D | H | P | M, GRP_GENERAL,
	  "show this help",
	  CODE },
	{ "version", 0, OPT_VERSION, NULL, R | T | D | H | P | M, GRP_HIDDEN,
	  "show the version",
	  CODE },
	{ "sampler", 0, OPT_SAMPLER, "KIND", R | T, GRP_SAMPLING,
	  "ptrace (default): stop each thread for its sample;\n"
	  "perf: the kernel copies registers and stack (perf events,\n"
	  "no stop); auto: perf where allowed, else ptrace",
	  CODE },
	{ "core", 0, OPT_CORE, "FILE", D | H, GRP_TARGET,
	  "read the process from the core file FILE (kernel or gcore)\n"
	  "instead of --pid",
	  STR(core) },
	{ "exe", 0, OPT_EXE, "FILE", D | H, GRP_TARGET,
	  "with --core: the executable that ran (default: the path\n"
	  "the core names, used when its build-id matches)",
	  STR(exe) },
	/* heap, report (cmd_heap.c, cmd_report.c) */
	{ "diff", 0, OPT_DIFF, "OLD", H | P, GRP_OUTPUT,
	  "heap: what grew since OLD, an earlier heap -f paths\n"
	  "file, bytes and objects by path; report: compare OLD\n"
	  "(the base) with the one profile given: a differential\n"
	  "flame graph (red grew, blue shrank), folded\n"
	  "\"stack BASE NEW\" or a top table of changes",
	  STR(diff) },
	/* report, record --period (cmd_report.c, cmd_record.c) */
	{ "focus", 0, OPT_FOCUS, "REGEX", P, GRP_OUTPUT,
	  "keep only stacks with a frame matching REGEX (POSIX ERE)",
	  STR(focus) },
	{ "ignore", 0, OPT_IGNORE, "REGEX", P, GRP_OUTPUT,
	  "drop stacks with a frame matching REGEX",
	  STR(ignore) },
	{ "tid", 0, OPT_TID, "TID", P, GRP_OUTPUT,
	  "keep only the samples of thread TID",
	  INT(tid, 1, INT_MAX, "invalid thread id", NULL) },
	{ "nolineno", 0, OPT_NOLINENO, NULL, P, GRP_OUTPUT,
	  "drop line numbers (one frame per function and file)",
	  FLAG(nolineno) },
	{ "period", 0, OPT_PERIOD, "SECS", R, GRP_OUTPUT,
	  "write one profile per SECS seconds; -o may hold\n"
	  "%p (pid), %t (UTC start of the period), %n (counter)",
	  DBL(period_s, 1, 86400, "invalid period", "expected seconds from 1 to 86400") },
	{ "upload", 0, OPT_UPLOAD, "URL", R, GRP_OUTPUT,
	  "push each period's profile to Grafana Pyroscope at URL\n"
	  "(POST URL/ingest, pprof; --period default 10)",
	  STR(upload) },
	{ "app", 0, OPT_APP, "NAME", R, GRP_OUTPUT,
	  "application name for --upload (default: the command)",
	  CODE },
	{ "tag", 0, OPT_TAG, "KEY=VALUE", R, GRP_OUTPUT,
	  "a label for --upload (repeat for more)",
	  CODE },
	{ "upload-header", 0, OPT_UPLOAD_HEADER, "HEADER", R, GRP_OUTPUT,
	  "an HTTP header for --upload, 'Name: value' (repeat)",
	  CODE },
	{ "locals", 0, OPT_LOCALS, NULL, D, GRP_OUTPUT,
	  "show each Lua frame's local variables and upvalues",
	  FLAG(locals) },
	{ "locals-length", 0, OPT_LOCALS_LENGTH, "BYTES", D, GRP_OUTPUT,
	  "bytes of a string value --locals shows (default 80, max 65536)",
	  SIZE(locals_length, 1, 65536, "invalid length", "expected bytes from 1 to 65536") },
	{ "perf-map-append", 0, OPT_PERF_MAP_APPEND, NULL, M | R, GRP_OUTPUT,
	  "add to an existing /tmp/perf-PID.map instead of refusing",
	  FLAG(perf_map_append) },
	{ "perf-map", 0, OPT_PERF_MAP, NULL, R, GRP_OUTPUT,
	  "keep /tmp/perf-PID.map updated with the LuaJIT target's\n"
	  "traces while recording, as luaspy perf-map does",
	  FLAG(perf_map) },
	/* --pgrep (pgrep.c, docs/pgrep.md) */
	{ "pgrep", 0, OPT_PGREP, "PATTERN", R | T | D, GRP_TARGET,
	  "processes whose name matches PATTERN (POSIX ERE, as\n"
	  "pgrep(1)), never luaspy or its ancestors; waits up to\n"
	  "--timeout for one; a root frame each, later matches\n"
	  "added (record, top); a block each (dump)",
	  CODE },
	{ "pgrep-full", 0, OPT_PGREP_FULL, "PATTERN", R | T | D, GRP_TARGET,
	  "as --pgrep, matching the whole command line (pgrep -f)",
	  CODE },
	/* heap --interval, --count (cmd_heap.c) */
	{ "interval", 0, OPT_HEAP_INTERVAL, "SECS", H, GRP_OUTPUT,
	  "take --count snapshots SECS seconds apart and print what\n"
	  "grew between each two, by type and by path",
	  DBL(heap_interval_s, 0.1, 86400, "invalid interval", "expected seconds from 0.1 to 86400") },
	{ "count", 0, OPT_HEAP_COUNT, "K", H, GRP_OUTPUT,
	  "snapshots --interval takes (default 2, at most 1000)",
	  INT(heap_count, 2, 1000, "invalid count", "expected 2 to 1000 snapshots") },
	/* C++ names (elf_sym.c, docs/naming.md §5) */
	{ "no-demangle", 0, OPT_NO_DEMANGLE, NULL, R | T | D, GRP_OUTPUT,
	  "show C++ symbol names mangled, as the ELF file spells\n"
	  "them (default: demangled, as perf shows them)",
	  FLAG(no_demangle) },
	/* record --coroutines (merge_coroutine_root, docs/coroutines.md) */
	{ "coroutines", 0, OPT_COROUTINES, NULL, R, GRP_OUTPUT,
	  "add a root frame per Lua coroutine: main, or coroutine\n"
	  "0x... and its body function (inside -t's thread root)",
	  FLAG(coroutines) },
	/* heap --max-memory (cmd_heap.c, docs/heap.md) */
	{ "max-memory", 0, OPT_HEAP_MAX_MEMORY, "MIB", H, GRP_OUTPUT,
	  "memory luaspy's object graph may take (default: half\n"
	  "of MemAvailable; 0: no bound); past it the counts stay\n"
	  "whole, paths and retained sizes are left out, and said",
	  CODE },
	/* record --upload-queue (upload.c, docs/upload-queue.md) */
	{ "upload-queue", 0, OPT_UPLOAD_QUEUE, "DIR", R, GRP_OUTPUT,
	  "keep the profiles --upload could not send yet in DIR\n"
	  "(a file each), for this run and the next",
	  CODE },
	{ "upload-queue-max", 0, OPT_UPLOAD_QUEUE_MAX, "N", R, GRP_OUTPUT,
	  "profiles the upload queue holds; when full the oldest\n"
	  "is dropped (default 64, with --upload-queue 1000)",
	  INT(upload_queue_max, 1, 1000000, "invalid --upload-queue-max", "expected 1 to 1000000 profiles") },
	{ "upload-queue-mib", 0, OPT_UPLOAD_QUEUE_MIB, "MIB", R, GRP_OUTPUT,
	  "MiB the upload queue holds (default 64, with\n"
	  "--upload-queue 256)",
	  INT(upload_queue_mib, 1, 1048576, "invalid --upload-queue-mib", "expected 1 to 1048576 MiB") },
	/* record --gc (gc_filter.c, docs/gc.md) */
	{ "gc", 0, OPT_GC, NULL, R, GRP_OUTPUT,
	  "keep only the samples taken while the VM collects\n"
	  "garbage, under the Lua code whose allocation ran the\n"
	  "step; the others are counted, left out",
	  FLAG(gc) },
};
#define NOPTIONS (sizeof options / sizeof options[0])

static const char *const cmd_names[] = { "", "record", "top", "dump", "heap", "report", "perf-map" };

/* What each command's help says around its options. */
static const struct {
	const char *head;
	const char *tail;
} cmd_help[] = {
	[CMD_RECORD] = {
		"Usage: luaspy record [OPTIONS] --pid PID\n"
		"       luaspy record [OPTIONS] -- COMMAND [ARG...]\n"
		"Sample a Lua process and write a profile (flame graph SVG by default).\n",
		"" },
	[CMD_TOP] = {
		"Usage: luaspy top [OPTIONS] --pid PID\n"
		"       luaspy top [OPTIONS] -- COMMAND [ARG...]\n"
		"Show a live, top-like view of the hottest functions.\n",
		"Keys: 1-4 sort by column, L lines/functions, R reset, P pause, ? help, Q quit.\n" },
	[CMD_DUMP] = {
		"Usage: luaspy dump [OPTIONS] --pid PID\n"
		"       luaspy dump [OPTIONS] --core CORE [--exe EXE]\n"
		"Print the current stack of every thread once.\n",
		"" },
	[CMD_HEAP] = {
		"Usage: luaspy heap [OPTIONS] --pid PID\n"
		"       luaspy heap [OPTIONS] --core CORE [--exe EXE]\n"
		"       luaspy heap [OPTIONS] -- COMMAND [ARG...]\n"
		"Stop the process, walk every Lua object and print what the heap holds:\n"
		"bytes by type beside the VM's own count, the largest retainers (by\n"
		"retained size) and tables with their paths from the roots, tables by\n"
		"metatable, functions by prototype, the largest strings. See docs/heap.md.\n",
		"With -- COMMAND: the snapshot is taken when the command calls lua_close\n"
		"(or exits without it), on Ctrl-C, or after --duration.\n" },
	[CMD_REPORT] = {
		"Usage: luaspy report [OPTIONS] PROFILE...\n"
		"       luaspy report [OPTIONS] --diff BASE NEW\n"
		"Read profiles luaspy wrote (pprof, folded), merge them and write any format\n"
		"(a top table on stdout without -o).\n",
		"" },
	[CMD_PERFMAP] = {
		"Usage: luaspy perf-map [OPTIONS] --pid PID\n"
		"Write /tmp/perf-PID.map for a LuaJIT process's traces, so that perf names them.\n",
		"Lines are appended as traces are made, until -d, Ctrl-C or the target's exit.\n" },
};

/* The option column is 25 wide: "  -p, --pid PID" padded with spaces. */
#define HELP_COL 25

static void help_option(FILE *f, const struct cli_option *op)
{
	char left[64];
	int n = snprintf(left, sizeof left, "  %c%c%c --%s%s%s", op->letter ? '-' : ' ',
			 op->letter ? op->letter : ' ', op->letter ? ',' : ' ', op->name,
			 op->arg ? " " : "", op->arg ? op->arg : "");
	fputs(left, f);
	for (const char *h = op->help; *h;) {
		const char *nl = strchr(h, '\n');
		size_t len = nl ? (size_t)(nl - h) : strlen(h);
		fprintf(f, "%*s%.*s\n", n < HELP_COL ? HELP_COL - n : 1, "", (int)len, h);
		n = 0;
		h += len + (nl != NULL);
	}
}

void cli_help(int cmd)
{
	if (cmd < CMD_RECORD || cmd >= CMD_N) {
		fputs("Usage: luaspy COMMAND [OPTIONS]\n"
		      "A sampling profiler for Lua (LuaJIT 2.1, PUC Lua 5.1-5.4) with native frames.\n\n"
		      "Commands:\n"
		      "  record    sample a process and write a flame graph, folded stacks,\n"
		      "            speedscope JSON or pprof\n"
		      "  top       live view of the hottest functions\n"
		      "  dump      print the stack of every thread once\n"
		      "  heap      what the Lua heap holds: bytes by type, largest tables\n"
		      "  report    merge, filter, compare and convert saved profiles\n"
		      "  perf-map  write /tmp/perf-PID.map naming LuaJIT traces for perf\n"
		      "  help CMD  help for one command\n\n"
		      "Examples:\n"
		      "  luaspy record --pid 1234 -o profile.svg\n"
		      "  luaspy record -o profile.svg -- luajit app.lua\n"
		      "  luaspy top --pid 1234\n"
		      "  luaspy dump --pid 1234\n"
		      "  luaspy heap --pid 1234\n\n"
		      "Options: --help, --version. See luaspy(1) and 'luaspy help COMMAND'.\n", stdout);
		return;
	}
	printf("%s\n", cmd_help[cmd].head);
	for (int g = 0; g < GRP_HIDDEN; g++) {
		int shown = 0;
		for (size_t i = 0; i < NOPTIONS; i++) {
			if (options[i].group != g || !(options[i].cmds & (1u << cmd)))
				continue;
			if (!shown++)
				printf("%s:\n", group_names[g]);
			help_option(stdout, &options[i]);
		}
	}
	fputs(cmd_help[cmd].tail, stdout);
}

/* `luaspy --list-options` (not in help): the table, one option a line,
 * "--LONG<TAB>-S<TAB>ARG<TAB>GROUP<TAB>CMD,CMD", '-' for none. */
static void list_options(void)
{
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct cli_option *op = &options[i];
		printf("--%s\t", op->name);
		if (op->letter)
			printf("-%c\t", op->letter);
		else
			fputs("-\t", stdout);
		printf("%s\t%s\t", op->arg ? op->arg : "-", group_names[op->group]);
		const char *sep = "";
		for (int c = CMD_RECORD; c < CMD_N; c++)
			if (op->cmds & (1u << c)) {
				printf("%s%s", sep, cmd_names[c]);
				sep = ",";
			}
		putchar('\n');
	}
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	msg_error("%s (see 'luaspy --help')", buf);
	return -LS_E_USAGE;
}

static int parse_double(const char *s, double *v)
{
	char *end;
	errno = 0;
	double d = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(d))
		return -1;
	*v = d;
	return 0;
}

/* getopt_long's tables from options[]: LONG_OPTS has NOPTIONS + 1
 * entries, SHORT_OPTS room for 3 + 2 * NOPTIONS + 1 bytes. */
static void getopt_tables(struct option *long_opts, char *short_opts)
{
	char *s = short_opts;
	*s++ = '+';   /* stop at the first non-option (the command) */
	*s++ = ':';   /* a missing value returns ':' */
	for (size_t i = 0; i < NOPTIONS; i++) {
		const struct cli_option *op = &options[i];
		long_opts[i] = (struct option){ op->name, op->arg ? required_argument : no_argument,
						NULL, op->id };
		if (op->letter) {
			*s++ = (char)op->letter;
			if (op->arg)
				*s++ = ':';
		}
	}
	long_opts[NOPTIONS] = (struct option){ NULL, 0, NULL, 0 };
	*s = 0;
}

/* The row of the option getopt returned as ID, or NULL. */
static const struct cli_option *option_row(int id)
{
	for (size_t i = 0; i < NOPTIONS; i++)
		if (options[i].id == id)
			return &options[i];
	return NULL;
}

/* Commands accepting the option getopt returned as ID. */
static unsigned option_cmds(int id)
{
	const struct cli_option *op = option_row(id);
	return op ? op->cmds : 0;
}

/* Set OP's field of O from ARG by the row alone (OP->kind is not
 * V_CODE). 0, or -LS_E_USAGE saying OP->what and OP->want. */
static int apply_value(struct cli_opts *o, const struct cli_option *op, const char *arg)
{
	char *field = (char *)o + op->off;
	double v;
	long n;
	char *end;
	switch (op->kind) {
	case V_FLAG: *(int *)field = 1; return 0;
	case V_COUNT: ++*(int *)field; return 0;
	case V_STR: *(const char **)field = arg; return 0;
	case V_DOUBLE:
		if (parse_double(arg, &v) || v < op->lo || (op->lo_open && v == op->lo) || v > op->hi)
			break;
		*(double *)field = v;
		return 0;
	case V_INT:
	case V_SIZE:
		errno = 0;
		n = strtol(arg, &end, 10);
		if (errno || end == arg || *end || n < op->lo || n > op->hi)
			break;
		if (op->kind == V_INT)
			*(int *)field = (int)n;
		else
			*(size_t *)field = (size_t)n;
		return 0;
	default:
		return 0;
	}
	return usage_error("%s '%s'%s%s", op->what, arg, op->want ? ": " : "", op->want ? op->want : "");
}

/* Apply option ID (from getopt) with value ARG to O: by its row where
 * the value is data, else by its case below. Returns 0 to go on, 1 when
 * help or the version was printed, or -LS_E_USAGE. */
static int apply_option(struct cli_opts *o, int id, const char *arg)
{
	const struct cli_option *op = option_row(id);
	if (op && op->kind != V_CODE)
		return apply_value(o, op, arg);
	switch (id) {
	case 'f':
		if (o->cmd == CMD_HEAP) {
			if (!strcmp(arg, "text"))
				o->heap_format = HEAP_FMT_TEXT;
			else if (!strcmp(arg, "heapsnapshot"))
				o->heap_format = HEAP_FMT_HEAPSNAPSHOT;
			else if (!strcmp(arg, "paths"))
				o->heap_format = HEAP_FMT_PATHS;
			else if (!strcmp(arg, "pprof"))
				o->heap_format = HEAP_FMT_PPROF;
			else
				return usage_error("unknown heap format '%s': expected text, heapsnapshot, paths or pprof", arg);
			o->format = 0;
			break;
		}
		o->format = o->cmd == CMD_REPORT && !strcmp(arg, "top") ? CLI_FORMAT_TOP
									: out_format_parse(arg);
		if (o->format < 0)
			return usage_error("unknown format '%s': expected flamegraph, folded, speedscope, pprof or callgrind%s",
					   arg, o->cmd == CMD_REPORT ? " (or top)" : "");
		break;
	case OPT_LUA_ONLY: o->lua_only = 1; o->native = 0; break;
	case OPT_SAMPLER:
		if (!strcmp(arg, "ptrace"))
			o->sampler = SAMPLER_PTRACE;
		else if (!strcmp(arg, "perf"))
			o->sampler = SAMPLER_PERF;
		else if (!strcmp(arg, "auto"))
			o->sampler = SAMPLER_AUTO;
		else
			return usage_error("unknown sampler '%s': expected ptrace, perf or auto", arg);
		break;
	case OPT_PGREP:
	case OPT_PGREP_FULL:
		if (o->pgrep)
			return usage_error("%s", "give one --pgrep or --pgrep-full");
		o->pgrep = arg;
		o->pgrep_full = id == OPT_PGREP_FULL;
		break;
	case OPT_HEAP_MAX_MEMORY: {
		double v;
		if (parse_double(arg, &v) || v != (double)(int64_t)v || v < 0 || v > 16777215)
			return usage_error("invalid memory bound '%s': expected MiB from 0 (none) to 16777215", arg);
		o->heap_max_mib = (int64_t)v;
		o->heap_max_mib_given = 1;
		break;
	}
	case OPT_UPLOAD_QUEUE:
		if (!*arg)
			return usage_error("%s", "--upload-queue: give a directory");
		o->upload_queue = arg;
		break;
	case OPT_APP:
		if (!upload_name_ok(arg))
			return usage_error("invalid app name '%s': expected letters, digits, '_', '.', '-'", arg);
		o->app = arg;
		break;
	case OPT_TAG: {
		const char *eq = strchr(arg, '=');
		char key[128];
		if (!eq || (size_t)(eq - arg) >= sizeof key)
			return usage_error("invalid tag '%s': expected KEY=VALUE", arg);
		memcpy(key, arg, (size_t)(eq - arg));
		key[eq - arg] = 0;
		if (!upload_name_ok(key) || !eq[1])
			return usage_error("invalid tag '%s': expected KEY=VALUE, KEY of letters, digits, '_', '.', '-'", arg);
		if (o->ntags >= UPLOAD_MAX_TAGS)
			return usage_error("too many --tag: at most %d", UPLOAD_MAX_TAGS);
		o->tags[o->ntags++] = arg;
		break;
	}
	case OPT_UPLOAD_HEADER: {
		const char *colon = strchr(arg, ':');
		if (!colon || colon == arg || strpbrk(arg, "\r\n"))
			return usage_error("invalid header '%s': expected 'Name: value'", arg);
		if (o->nupload_headers >= UPLOAD_MAX_HEADERS)
			return usage_error("too many --upload-header: at most %d", UPLOAD_MAX_HEADERS);
		o->upload_headers[o->nupload_headers++] = arg;
		break;
	}
	case 'h': cli_help(o->cmd); return 1;
	case OPT_VERSION: printf("luaspy %s\n", PACKAGE_VERSION); return 1;
	}
	return 0;
}

/* report: the profiles after the options (getopt left them at optind). */
static int report_check(struct cli_opts *o, int argc, char **argv)
{
	if (optind >= argc && !o->diff)
		return usage_error("%s", "no profile to read: give one or more files");
	o->inputs = &argv[optind];
	if (o->diff) {
		/* --diff BASE NEW: BASE is --diff's value, NEW the one file */
		if (argc - optind != 1)
			return usage_error("%s", "--diff needs two profiles: BASE NEW");
		o->diff_inputs[0] = (char *)o->diff;
		o->diff_inputs[1] = argv[optind];
		o->diff_inputs[2] = NULL;
		o->inputs = o->diff_inputs;
	}
	if (o->output && o->format < 0) {
		o->format = out_format_from_path(o->output);
		if (o->format < 0)
			return usage_error("cannot tell the format of '%s' from its extension: use .svg, .txt, .json, .pb.gz or .callgrind, or -f", o->output);
	}
	if (o->format < 0)
		o->format = o->output ? OUT_FLAMEGRAPH : CLI_FORMAT_TOP;
	if (o->format == CLI_FORMAT_TOP && o->output && strcmp(o->output, "-"))
		return usage_error("%s", "-f top prints to stdout: leave out -o");
	if (o->diff && o->format != CLI_FORMAT_TOP && o->format != OUT_FLAMEGRAPH &&
	    o->format != OUT_FOLDED)
		return usage_error("%s", "--diff writes a flame graph, folded stacks or top");
	return 0;
}

static int check_options(struct cli_opts *o);
static int settle_options(struct cli_opts *o);

/* The command word ARGV[1] into O->cmd, or what stands in for one
 * (--help, --version, --list-options, help CMD). 0 to go on, 1 when
 * something was printed, or -LS_E_USAGE. */
static int parse_command(int argc, char **argv, struct cli_opts *o)
{
	if (argc < 2) {
		cli_help(CMD_NONE);
		return usage_error("%s", "missing command");
	}
	const char *c = argv[1];
	if (!strcmp(c, "--help") || !strcmp(c, "-h")) {
		cli_help(CMD_NONE);
		return 1;
	}
	if (!strcmp(c, "--version") || !strcmp(c, "-V")) {
		printf("luaspy %s\n", PACKAGE_VERSION);
		return 1;
	}
	if (!strcmp(c, "--list-options")) {
		list_options();
		return 1;
	}
	if (!strcmp(c, "help")) {
		int cmd = CMD_NONE;
		if (argc > 2) {
			for (int i = 1; i < CMD_N; i++)
				if (!strcmp(argv[2], cmd_names[i]))
					cmd = i;
			if (cmd == CMD_NONE)
				return usage_error("unknown command '%s'", argv[2]);
		}
		cli_help(cmd);
		return 1;
	}
	for (int i = 1; i < CMD_N; i++)
		if (!strcmp(c, cmd_names[i]))
			o->cmd = i;
	if (o->cmd == CMD_NONE)
		return usage_error("unknown command '%s'", c);
	return 0;
}

int cli_parse(int argc, char **argv, struct cli_opts *o)
{
	memset(o, 0, sizeof *o);
	o->format = -1;
	o->rate_hz = 100;
	o->delay_s = 1;
	o->timeout_s = 5;
	o->native = 1;
	o->locals_length = 80;
	int rc = parse_command(argc, argv, o);
	if (rc != 0)
		return rc;

	struct option long_opts[NOPTIONS + 1];
	char short_opts[3 + 2 * NOPTIONS + 1];
	getopt_tables(long_opts, short_opts);
	optind = 2;
	opterr = 0;
	int ch;
	/* report takes options after its files too (getopt permutes them) */
	const char *sopts = o->cmd == CMD_REPORT ? short_opts + 1 : short_opts;
	while ((ch = getopt_long(argc, argv, sopts, long_opts, NULL)) != -1) {
		if (ch == '?') {
			const char *w = argv[optind - 1];
			if (strncmp(w, "--", 2) == 0) {
				/* a long option: getopt's optopt is then its value
				 * code, not a letter to print */
				size_t n = strcspn(w + 2, "=");
				for (int i = 0; w[2 + n] == '=' && long_opts[i].name; i++)
					if (strlen(long_opts[i].name) == n && !strncmp(long_opts[i].name, w + 2, n) &&
					    long_opts[i].has_arg == no_argument)
						return usage_error("option '--%s' takes no value", long_opts[i].name);
				return usage_error("unknown option '%.*s'", (int)(n + 2), w);
			}
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", w);
		}
		if (ch == ':')
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		if (!(option_cmds(ch) & (1u << o->cmd))) {
			/* the option word: one back, or two when its value was a separate word */
			int back = optarg && optarg == argv[optind - 1] ? 2 : 1;
			return usage_error("option '%s' does not apply to '%s'", argv[optind - back],
					   cmd_names[o->cmd]);
		}
		rc = apply_option(o, ch, optarg);
		if (rc != 0)
			return rc;
	}
	if (o->cmd == CMD_REPORT)
		return report_check(o, argc, argv);
	if (optind < argc) /* after "--", or "luaspy record luajit x.lua" as py-spy takes it */
		o->argv = &argv[optind];
	return check_options(o);
}

/* The combinations of options that cannot be (a usage line each), then
 * what follows from the rest. 0 or -LS_E_USAGE. */
static int check_options(struct cli_opts *o)
{
	if (o->pgrep && (o->pid || o->argv || o->core))
		return usage_error("give either --pgrep%s or %s, not both", o->pgrep_full ? "-full" : "",
				   o->pid ? "--pid" : o->core ? "--core" : "a command after '--'");
	if (o->core && (o->pid || o->argv))
		return usage_error("%s", "give either --core or --pid, not both");
	if (o->exe && !o->core)
		return usage_error("%s", "--exe needs --core");
	if (o->core && o->subprocesses)
		return usage_error("%s", "--core reads one process: no -s");
	if (o->pid && o->argv)
		return usage_error("%s", "give either --pid or a command after '--', not both");
	if (!o->pid && !o->argv && !o->core && !o->pgrep)
		return usage_error("%s", "no target: give --pid PID or a command after '--'");
	if (o->cmd == CMD_DUMP && o->argv)
		return usage_error("%s", "dump needs --pid; it does not launch commands");
	if (o->cmd == CMD_PERFMAP && o->argv)
		return usage_error("%s", "perf-map needs --pid; it does not launch commands");
	if (o->native_only && o->lua_only)
		return usage_error("%s", "--native-only and --lua-only exclude each other");
	if (o->nonblocking && o->blocking)
		return usage_error("%s", "--blocking and --nonblocking exclude each other");
	if (o->cmd == CMD_HEAP && o->nonblocking && o->argv)
		return usage_error("%s", "heap --nonblocking takes --pid: a command is held at lua_close anyway");
	if (o->nonblocking && !o->lua_only && o->cmd != CMD_HEAP)
		return usage_error("%s", "--nonblocking needs --lua-only (native unwinding must stop the thread)");
	if (o->sampler == SAMPLER_PERF && (o->blocking || o->nonblocking || o->idle || o->lua_only))
		return usage_error("--sampler perf samples running threads with their native stack: "
				   "not with %s", o->blocking ? "--blocking" : o->nonblocking ? "--nonblocking" :
				   o->idle ? "--idle" : "--lua-only");
	return settle_options(o);
}

/* What follows from the options given: heap's format from -o and its
 * --interval rules, the upload period, record's format from -o's
 * extension. 0 or -LS_E_USAGE. */
static int settle_options(struct cli_opts *o)
{
	if (o->cmd == CMD_HEAP && o->format < 0 && o->output) {
		size_t ol = strlen(o->output);
		if (ol >= 13 && !strcmp(o->output + ol - 13, ".heapsnapshot"))
			o->heap_format = HEAP_FMT_HEAPSNAPSHOT;
		else if (ol >= 6 && !strcmp(o->output + ol - 6, ".paths"))
			o->heap_format = HEAP_FMT_PATHS;
		else if ((ol >= 6 && !strcmp(o->output + ol - 6, ".pb.gz")) ||
			 (ol >= 6 && !strcmp(o->output + ol - 6, ".pprof")))
			o->heap_format = HEAP_FMT_PPROF;
	}
	if (o->cmd == CMD_HEAP && o->diff && o->heap_format != HEAP_FMT_TEXT)
		return usage_error("%s", "--diff writes text: it takes no -f heapsnapshot or paths");
	if (o->cmd == CMD_HEAP && o->heap_count && !o->heap_interval_s)
		return usage_error("%s", "--count needs --interval");
	if (o->cmd == CMD_HEAP && o->heap_interval_s && (o->diff || o->heap_format != HEAP_FMT_TEXT))
		return usage_error("%s", "--interval writes text: it takes no --diff and no -f heapsnapshot, paths or pprof");
	if (o->cmd == CMD_HEAP && o->core && o->heap_interval_s)
		return usage_error("%s", "--core is one moment: no --interval");
	if (o->cmd == CMD_HEAP && o->heap_interval_s && !o->heap_count)
		o->heap_count = 2;
	if ((o->app || o->ntags || o->nupload_headers) && !o->upload)
		return usage_error("%s", "--app, --tag and --upload-header need --upload");
	if ((o->upload_queue || o->upload_queue_max || o->upload_queue_mib) && !o->upload)
		return usage_error("%s", "--upload-queue, --upload-queue-max and --upload-queue-mib need --upload");
	if (o->upload && !o->period_s)
		o->period_s = o->duration_s > 0 && o->duration_s < 10 ? o->duration_s : 10;
	if (o->period_s > 0 && o->duration_s > 0 && o->duration_s < o->period_s)
		return usage_error("%s", "--duration is shorter than --period");
	if (o->output && o->cmd == CMD_RECORD && o->format < 0) {
		o->format = out_format_from_path(o->output);
		if (o->format < 0)
			return usage_error("cannot tell the format of '%s' from its extension: use .svg, .txt, .json or .pb.gz, or -f", o->output);
	}
	if (o->format < 0)
		o->format = OUT_FLAMEGRAPH;
	return 0;
}

int cli_run(struct cli_opts *o)
{
	msg_verbose = o->verbose;
	symtab_demangle(!o->no_demangle);
	if (!o->no_demangle && !symtab_can_demangle() &&
	    (o->cmd == CMD_RECORD || o->cmd == CMD_TOP || o->cmd == CMD_DUMP))
		msg_debug(1, "C++ names stay mangled: built without a demangler (libstdc++'s __cxa_demangle)");
	switch (o->cmd) {
	case CMD_DUMP: return cmd_dump(o);
	case CMD_RECORD: return cmd_record(o);
	case CMD_TOP: return cmd_top(o);
	case CMD_HEAP: return cmd_heap(o);
	case CMD_REPORT: return cmd_report(o);
	case CMD_PERFMAP: return cmd_perfmap(o);
	}
	return err_exit_code(LS_E_USAGE);
}
