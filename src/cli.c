/* cli.c: option parsing shared by record, top and dump (flags follow
 * py-spy where the meaning is the same), help text and dispatch, all
 * driven by one option table (options[]). The help groups are the
 * OPTIONS subsections of man/luaspy.1. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "config.h"
#include "err.h"
#include "msg.h"
#include "out.h"

enum {
	OPT_LUA_ONLY = 256, OPT_NONBLOCKING, OPT_VMSTATE, OPT_JSON, OPT_ALL_COROUTINES,
	OPT_DELAY, OPT_TIMEOUT, OPT_STATS, OPT_VERSION, OPT_NATIVE_ONLY, OPT_BLOCKING,
	OPT_PERF_MAP_APPEND
};

/* Commands as bits of cli_option.cmds. */
#define R (1u << CMD_RECORD)
#define T (1u << CMD_TOP)
#define D (1u << CMD_DUMP)
#define M (1u << CMD_PERFMAP)

/* Help groups: the OPTIONS subsections of man/luaspy.1, in their order. */
enum { GRP_TARGET, GRP_SAMPLING, GRP_OUTPUT, GRP_GENERAL, GRP_HIDDEN, GRP_N };
static const char *const group_names[GRP_N] = { "Target", "Sampling", "Output", "General", "-" };

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
} options[] = {
	{ "pid", 'p', 'p', "PID", R | T | D | M, GRP_TARGET,
	  "attach to the running process PID" },
	{ "subprocesses", 's', 's', NULL, R | T, GRP_TARGET,
	  "also profile child processes (one root frame each)" },
	{ "timeout", 0, OPT_TIMEOUT, "SECS", R | T | D, GRP_TARGET,
	  "wait this long for a Lua runtime to appear (default 5)" },
	{ "rate", 'r', 'r', "HZ", R | T, GRP_SAMPLING,
	  "samples per second per thread (default 100, max 10000)" },
	{ "duration", 'd', 'd', "SECS", R | T | M, GRP_SAMPLING,
	  "stop after SECS seconds (default: Ctrl-C or target exit)" },
	{ "idle", 'i', 'i', NULL, R | T | D, GRP_SAMPLING,
	  "include threads that are sleeping or not in Lua\n"
	  "(dump always shows every thread)" },
	{ "native", 'n', 'n', NULL, R | T | D, GRP_SAMPLING,
	  "include native frames (default; kept for py-spy users)" },
	{ "lua-only", 0, OPT_LUA_ONLY, NULL, R | T | D, GRP_SAMPLING,
	  "Lua frames only, no native unwinding" },
	{ "nonblocking", 0, OPT_NONBLOCKING, NULL, R | T, GRP_SAMPLING,
	  "never stop the target (needs --lua-only)" },
	{ "blocking", 0, OPT_BLOCKING, NULL, R | T, GRP_SAMPLING,
	  "keep each thread stopped until its stack is walked:\n"
	  "no torn samples, longer stops" },
	{ "output", 'o', 'o', "FILE", R, GRP_OUTPUT,
	  "output file (default luaspy-PID.svg)" },
	{ "format", 'f', 'f', "FORMAT", R, GRP_OUTPUT,
	  "flamegraph, folded, speedscope or pprof\n"
	  "(default: from the extension of FILE, else flamegraph)" },
	{ "threads", 't', 't', NULL, R, GRP_OUTPUT,
	  "add a root frame per thread" },
	{ "function", 'F', 'F', NULL, R | T, GRP_OUTPUT,
	  "aggregate by function instead of by line" },
	{ "vmstate", 0, OPT_VMSTATE, NULL, R, GRP_OUTPUT,
	  "add the VM state as a leaf frame ([GC], [JIT trace 12])" },
	{ "stats", 0, OPT_STATS, NULL, R | T, GRP_OUTPUT,
	  "print stop-time statistics at the end" },
	{ "json", 0, OPT_JSON, NULL, D, GRP_OUTPUT,
	  "one JSON object instead of text" },
	{ "all-coroutines", 0, OPT_ALL_COROUTINES, NULL, D, GRP_OUTPUT,
	  "also list every coroutine with its status and stack" },
	{ "native-only", 0, OPT_NATIVE_ONLY, NULL, D, GRP_OUTPUT,
	  "native frames only, as eu-stack shows them (no VM lookup)" },
	{ "delay", 0, OPT_DELAY, "SECS", T, GRP_OUTPUT,
	  "seconds between refreshes (default 1)" },
	{ "verbose", 'v', 'v', NULL, R | T | D | M, GRP_GENERAL,
	  "say how the VM was found (repeat for more)" },
	{ "help", 'h', 'h', NULL, R | T | D | M, GRP_GENERAL,
	  "show this help" },
	{ "version", 0, OPT_VERSION, NULL, R | T | D | M, GRP_HIDDEN,
	  "show the version" },
	{ "perf-map-append", 0, OPT_PERF_MAP_APPEND, NULL, M, GRP_OUTPUT,
	  "add to an existing /tmp/perf-PID.map instead of refusing" },
};
#define NOPTIONS (sizeof options / sizeof options[0])

static const char *const cmd_names[] = { "", "record", "top", "dump", "perf-map" };

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
		"Print the current stack of every thread once.\n",
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
		      "  perf-map  write /tmp/perf-PID.map naming LuaJIT traces for perf\n"
		      "  help CMD  help for one command\n\n"
		      "Examples:\n"
		      "  luaspy record --pid 1234 -o profile.svg\n"
		      "  luaspy record -o profile.svg -- luajit app.lua\n"
		      "  luaspy top --pid 1234\n"
		      "  luaspy dump --pid 1234\n\n"
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

/* Commands accepting the option getopt returned as ID. */
static unsigned option_cmds(int id)
{
	for (size_t i = 0; i < NOPTIONS; i++)
		if (options[i].id == id)
			return options[i].cmds;
	return 0;
}

/* Apply option ID (from getopt) with value ARG to O. Returns 0 to go
 * on, 1 when help or the version was printed, or -LS_E_USAGE. */
static int apply_option(struct cli_opts *o, int id, const char *arg)
{
	double v;
	switch (id) {
	case 'p': {
		char *end;
		errno = 0;
		long p = strtol(arg, &end, 10);
		if (errno || end == arg || *end || p <= 0 || p > INT_MAX)
			return usage_error("invalid pid '%s'", arg);
		o->pid = (pid_t)p;
		break;
	}
	case 'o': o->output = arg; break;
	case 'f':
		o->format = out_format_parse(arg);
		if (o->format < 0)
			return usage_error("unknown format '%s': expected flamegraph, folded, speedscope or pprof", arg);
		break;
	case 'r':
		if (parse_double(arg, &v) || v <= 0 || v > RATE_MAX_HZ)
			return usage_error("invalid rate '%s': expected a number of Hz from 1 to 10000", arg);
		if (v < 1)
			return usage_error("invalid rate '%s': expected a number of Hz from 1 to 10000", arg);
		o->rate_hz = v;
		break;
	case 'd':
		if (parse_double(arg, &v) || v <= 0 || v > 31536000)
			return usage_error("invalid duration '%s': expected a positive number of seconds", arg);
		o->duration_s = v;
		break;
	case OPT_DELAY:
		if (parse_double(arg, &v) || v < 0.05 || v > 3600)
			return usage_error("invalid delay '%s': expected seconds from 0.05 to 3600", arg);
		o->delay_s = v;
		break;
	case OPT_TIMEOUT:
		if (parse_double(arg, &v) || v < 0 || v > 86400)
			return usage_error("invalid timeout '%s': expected seconds from 0 to 86400", arg);
		o->timeout_s = v;
		break;
	case 's': o->subprocesses = 1; break;
	case 'i': o->idle = 1; break;
	case 'n': o->native = 1; break;
	case OPT_LUA_ONLY: o->lua_only = 1; o->native = 0; break;
	case OPT_NONBLOCKING: o->nonblocking = 1; break;
	case OPT_BLOCKING: o->blocking = 1; break;
	case 't': o->threads = 1; break;
	case 'F': o->function = 1; break;
	case OPT_VMSTATE: o->vmstate = 1; break;
	case OPT_JSON: o->json = 1; break;
	case OPT_ALL_COROUTINES: o->all_coroutines = 1; break;
	case OPT_NATIVE_ONLY: o->native_only = 1; break;
	case OPT_STATS: o->stats = 1; break;
	case OPT_PERF_MAP_APPEND: o->perf_map_append = 1; break;
	case 'v': o->verbose++; break;
	case 'h': cli_help(o->cmd); return 1;
	case OPT_VERSION: printf("luaspy %s\n", PACKAGE_VERSION); return 1;
	}
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

	struct option long_opts[NOPTIONS + 1];
	char short_opts[3 + 2 * NOPTIONS + 1];
	getopt_tables(long_opts, short_opts);
	optind = 2;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, short_opts, long_opts, NULL)) != -1) {
		if (ch == '?') {
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
		if (ch == ':')
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		if (!(option_cmds(ch) & (1u << o->cmd))) {
			/* the option word: one back, or two when its value was a separate word */
			int back = optarg && optarg == argv[optind - 1] ? 2 : 1;
			return usage_error("option '%s' does not apply to '%s'", argv[optind - back],
					   cmd_names[o->cmd]);
		}
		int rc = apply_option(o, ch, optarg);
		if (rc != 0)
			return rc;
	}
	if (optind < argc) {
		if (strcmp(argv[optind - 1], "--") != 0 && optind < argc && argv[optind][0] != '-') {
			/* "luaspy record luajit x.lua" without "--": accept like py-spy */
		}
		o->argv = &argv[optind];
	}
	if (o->pid && o->argv)
		return usage_error("%s", "give either --pid or a command after '--', not both");
	if (!o->pid && !o->argv)
		return usage_error("%s", "no target: give --pid PID or a command after '--'");
	if (o->cmd == CMD_DUMP && o->argv)
		return usage_error("%s", "dump needs --pid; it does not launch commands");
	if (o->cmd == CMD_PERFMAP && o->argv)
		return usage_error("%s", "perf-map needs --pid; it does not launch commands");
	if (o->native_only && o->lua_only)
		return usage_error("%s", "--native-only and --lua-only exclude each other");
	if (o->nonblocking && o->blocking)
		return usage_error("%s", "--blocking and --nonblocking exclude each other");
	if (o->nonblocking && !o->lua_only)
		return usage_error("%s", "--nonblocking needs --lua-only (native unwinding must stop the thread)");
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
	switch (o->cmd) {
	case CMD_DUMP: return cmd_dump(o);
	case CMD_RECORD: return cmd_record(o);
	case CMD_TOP: return cmd_top(o);
	case CMD_PERFMAP: return cmd_perfmap(o);
	}
	return err_exit_code(LS_E_USAGE);
}
