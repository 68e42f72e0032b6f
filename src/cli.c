/* cli.c: option parsing shared by record, top and dump (flags follow
 * py-spy where the meaning is the same), help text and dispatch. The
 * help groups are the OPTIONS subsections of man/luaspy.1. */
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
	OPT_DELAY, OPT_TIMEOUT, OPT_STATS, OPT_VERSION, OPT_NATIVE_ONLY, OPT_BLOCKING
};

static const struct option long_opts[] = {
	{ "pid", required_argument, NULL, 'p' },
	{ "output", required_argument, NULL, 'o' },
	{ "format", required_argument, NULL, 'f' },
	{ "rate", required_argument, NULL, 'r' },
	{ "duration", required_argument, NULL, 'd' },
	{ "subprocesses", no_argument, NULL, 's' },
	{ "idle", no_argument, NULL, 'i' },
	{ "native", no_argument, NULL, 'n' },
	{ "lua-only", no_argument, NULL, OPT_LUA_ONLY },
	{ "nonblocking", no_argument, NULL, OPT_NONBLOCKING },
	{ "blocking", no_argument, NULL, OPT_BLOCKING },
	{ "threads", no_argument, NULL, 't' },
	{ "function", no_argument, NULL, 'F' },
	{ "vmstate", no_argument, NULL, OPT_VMSTATE },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "all-coroutines", no_argument, NULL, OPT_ALL_COROUTINES },
	{ "native-only", no_argument, NULL, OPT_NATIVE_ONLY },
	{ "delay", required_argument, NULL, OPT_DELAY },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "stats", no_argument, NULL, OPT_STATS },
	{ "verbose", no_argument, NULL, 'v' },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 }
};

/* Which commands accept each option (bit per command). */
#define R (1 << CMD_RECORD)
#define T (1 << CMD_TOP)
#define D (1 << CMD_DUMP)
static int allowed(int c)
{
	switch (c) {
	case 'p': case 'n': case OPT_LUA_ONLY: case 'v': case 'h': case OPT_TIMEOUT: case 'i':
		return R | T | D;
	case 'o': case 'f': case 't': case OPT_VMSTATE:
		return R;
	case 'r': case 'd': case 's': case OPT_NONBLOCKING: case 'F': case OPT_STATS: case OPT_BLOCKING:
		return R | T;
	case OPT_DELAY:
		return T;
	case OPT_JSON: case OPT_ALL_COROUTINES: case OPT_NATIVE_ONLY:
		return D;
	default:
		return R | T | D;
	}
}

static const char *const cmd_names[] = { "", "record", "top", "dump" };

void cli_help(int cmd)
{
	switch (cmd) {
	case CMD_RECORD:
		fputs("Usage: luaspy record [OPTIONS] --pid PID\n"
		      "       luaspy record [OPTIONS] -- COMMAND [ARG...]\n"
		      "Sample a Lua process and write a profile (flame graph SVG by default).\n\n"
		      "Target:\n"
		      "  -p, --pid PID          profile the running process PID\n"
		      "  -s, --subprocesses     also profile child processes (one root frame each)\n"
		      "      --timeout SECS     wait this long for a Lua runtime to appear (default 5)\n"
		      "Sampling:\n"
		      "  -r, --rate HZ          samples per second per thread (default 100, max 10000)\n"
		      "  -d, --duration SECS    stop after SECS seconds (default: Ctrl-C or target exit)\n"
		      "  -i, --idle             include threads that are sleeping or not in Lua\n"
		      "  -n, --native           include native frames (default; kept for py-spy users)\n"
		      "      --lua-only         Lua frames only, no native unwinding\n"
		      "      --nonblocking      never stop the target (needs --lua-only)\n"
		      "      --blocking         keep each thread stopped until its stack is walked:\n"
		      "                         no torn samples, longer stops\n"
		      "Output:\n"
		      "  -o, --output FILE      output file (default luaspy-PID.svg)\n"
		      "  -f, --format FORMAT    flamegraph, folded, speedscope or pprof\n"
		      "                         (default: from the extension of FILE, else flamegraph)\n"
		      "  -t, --threads          add a root frame per thread\n"
		      "  -F, --function         aggregate by function instead of by line\n"
		      "      --vmstate          add the VM state as a leaf frame ([GC], [JIT trace 12])\n"
		      "      --stats            print stop-time statistics at the end\n"
		      "General:\n"
		      "  -v, --verbose          say how the VM was found (repeat for more)\n"
		      "  -h, --help             show this help\n", stdout);
		break;
	case CMD_TOP:
		fputs("Usage: luaspy top [OPTIONS] --pid PID\n"
		      "       luaspy top [OPTIONS] -- COMMAND [ARG...]\n"
		      "Show a live, top-like view of the hottest functions.\n\n"
		      "Target:\n"
		      "  -p, --pid PID          profile the running process PID\n"
		      "  -s, --subprocesses     also profile child processes\n"
		      "      --timeout SECS     wait this long for a Lua runtime to appear (default 5)\n"
		      "Sampling:\n"
		      "  -r, --rate HZ          samples per second per thread (default 100, max 10000)\n"
		      "  -d, --duration SECS    stop after SECS seconds\n"
		      "  -i, --idle             include threads that are sleeping or not in Lua\n"
		      "  -n, --native           include native frames (default)\n"
		      "      --lua-only         Lua frames only, no native unwinding\n"
		      "      --nonblocking      never stop the target (needs --lua-only)\n"
		      "      --blocking         keep each thread stopped until its stack is walked\n"
		      "Display:\n"
		      "      --delay SECS       seconds between refreshes (default 1)\n"
		      "  -F, --function         aggregate by function instead of by line\n"
		      "General:\n"
		      "  -v, --verbose          say how the VM was found\n"
		      "  -h, --help             show this help\n"
		      "Keys: 1-4 sort by column, L lines/functions, R reset, P pause, ? help, Q quit.\n",
		      stdout);
		break;
	case CMD_DUMP:
		fputs("Usage: luaspy dump [OPTIONS] --pid PID\n"
		      "Print the current stack of every thread once.\n\n"
		      "Target:\n"
		      "  -p, --pid PID          the process to inspect\n"
		      "      --timeout SECS     wait this long for a Lua runtime to appear (default 5)\n"
		      "Stacks:\n"
		      "  -i, --idle             kept for py-spy users (dump shows every thread)\n"
		      "  -n, --native           include native frames (default)\n"
		      "      --lua-only         Lua frames only\n"
		      "      --all-coroutines   also list every coroutine with its status and stack\n"
		      "      --native-only      native frames only, as eu-stack shows them (no VM lookup)\n"
		      "Output:\n"
		      "      --json             one JSON object instead of text\n"
		      "General:\n"
		      "  -v, --verbose          say how the VM was found\n"
		      "  -h, --help             show this help\n", stdout);
		break;
	default:
		fputs("Usage: luaspy COMMAND [OPTIONS]\n"
		      "A sampling profiler for Lua (LuaJIT 2.1, PUC Lua 5.1-5.4) with native frames.\n\n"
		      "Commands:\n"
		      "  record    sample a process and write a flame graph, folded stacks,\n"
		      "            speedscope JSON or pprof\n"
		      "  top       live view of the hottest functions\n"
		      "  dump      print the stack of every thread once\n"
		      "  help CMD  help for one command\n\n"
		      "Examples:\n"
		      "  luaspy record --pid 1234 -o profile.svg\n"
		      "  luaspy record -o profile.svg -- luajit app.lua\n"
		      "  luaspy top --pid 1234\n"
		      "  luaspy dump --pid 1234\n\n"
		      "Options: --help, --version. See luaspy(1) and 'luaspy help COMMAND'.\n", stdout);
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
	if (!strcmp(c, "help")) {
		int cmd = CMD_NONE;
		if (argc > 2) {
			for (int i = 1; i <= 3; i++)
				if (!strcmp(argv[2], cmd_names[i]))
					cmd = i;
			if (cmd == CMD_NONE)
				return usage_error("unknown command '%s'", argv[2]);
		}
		cli_help(cmd);
		return 1;
	}
	for (int i = 1; i <= 3; i++)
		if (!strcmp(c, cmd_names[i]))
			o->cmd = i;
	if (o->cmd == CMD_NONE)
		return usage_error("unknown command '%s'", c);

	optind = 2;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, "+:p:o:f:r:d:sintFvh", long_opts, NULL)) != -1) {
		if (ch == '?') {
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
		if (ch == ':')
			return usage_error("option '%s' needs a value", argv[optind - 1]);
		if (!(allowed(ch) & (1 << o->cmd))) {
			/* the option word: one back, or two when its value was a separate word */
			int back = optarg && optarg == argv[optind - 1] ? 2 : 1;
			return usage_error("option '%s' does not apply to '%s'", argv[optind - back],
					   cmd_names[o->cmd]);
		}
		double v;
		switch (ch) {
		case 'p': {
			char *end;
			errno = 0;
			long p = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || p <= 0 || p > INT_MAX)
				return usage_error("invalid pid '%s'", optarg);
			o->pid = (pid_t)p;
			break;
		}
		case 'o': o->output = optarg; break;
		case 'f':
			o->format = out_format_parse(optarg);
			if (o->format < 0)
				return usage_error("unknown format '%s': expected flamegraph, folded, speedscope or pprof", optarg);
			break;
		case 'r':
			if (parse_double(optarg, &v) || v <= 0 || v > RATE_MAX_HZ)
				return usage_error("invalid rate '%s': expected a number of Hz from 1 to 10000", optarg);
			if (v < 1)
				return usage_error("invalid rate '%s': expected a number of Hz from 1 to 10000", optarg);
			o->rate_hz = v;
			break;
		case 'd':
			if (parse_double(optarg, &v) || v <= 0 || v > 31536000)
				return usage_error("invalid duration '%s': expected a positive number of seconds", optarg);
			o->duration_s = v;
			break;
		case OPT_DELAY:
			if (parse_double(optarg, &v) || v < 0.05 || v > 3600)
				return usage_error("invalid delay '%s': expected seconds from 0.05 to 3600", optarg);
			o->delay_s = v;
			break;
		case OPT_TIMEOUT:
			if (parse_double(optarg, &v) || v < 0 || v > 86400)
				return usage_error("invalid timeout '%s': expected seconds from 0 to 86400", optarg);
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
		case 'v': o->verbose++; break;
		case 'h': cli_help(o->cmd); return 1;
		case OPT_VERSION: printf("luaspy %s\n", PACKAGE_VERSION); return 1;
		}
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
	}
	return err_exit_code(LS_E_USAGE);
}
