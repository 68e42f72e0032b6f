/* cli.h: command line parsing and dispatch for record, top and dump. */
#ifndef LUASPY_CLI_H
#define LUASPY_CLI_H

#include <sys/types.h>

enum cli_cmd { CMD_NONE = 0, CMD_RECORD, CMD_TOP, CMD_DUMP, CMD_PERFMAP, CMD_N };

#define RATE_MAX_HZ 10000.0

struct cli_opts {
	int cmd;
	pid_t pid;                 /* -p; 0 when launching */
	char **argv;               /* command after "--" (NULL-terminated) or NULL */
	const char *output;        /* -o */
	int format;                /* -f, or -1 = from the extension */
	double rate_hz;            /* -r, default 100 */
	double duration_s;         /* -d, 0 = until Ctrl-C or exit */
	double delay_s;            /* top --delay, default 1 */
	double timeout_s;          /* --timeout waiting for a Lua runtime, default 5 */
	int subprocesses;          /* -s */
	int idle;                  /* -i */
	int native;                /* -n (default on) */
	int lua_only;              /* --lua-only */
	int nonblocking;           /* --nonblocking */
	int blocking;              /* --blocking: walk while the thread is stopped */
	int threads;               /* -t */
	int function;              /* -F */
	int vmstate;               /* --vmstate */
	int json;                  /* dump --json */
	int all_coroutines;        /* dump --all-coroutines */
	int native_only;           /* dump --native-only: no VM probing */
	int stats;                 /* --stats: stop-time accounting on stderr */
	int verbose;               /* -v count */
	int perf_map_append;       /* perf-map --perf-map-append */
};

/* Parse ARGC/ARGV into O, by the option table of cli.c (which options
 * each command takes, their values). Prints help, the version or (for
 * the hidden `luaspy --list-options`, read by tests/docs-sync.test) the
 * table itself and returns 1 when the program should exit 0; returns 0
 * to go on; on a usage error prints one line and returns -LS_E_USAGE. */
int cli_parse(int argc, char **argv, struct cli_opts *o);

/* Print the help of CMD (CMD_NONE: general help) to stdout: CMD's
 * options from the table, by group, one text per option. */
void cli_help(int cmd);

/* Run the parsed command. Returns the process exit status. */
int cli_run(struct cli_opts *o);

/* Commands (cmd_dump.c, cmd_record.c, cmd_top.c). Each returns an exit status. */
int cmd_dump(struct cli_opts *o);
int cmd_record(struct cli_opts *o);
int cmd_top(struct cli_opts *o);
/* `luaspy perf-map` (cmd_perfmap.c): /tmp/perf-PID.map for LuaJIT traces. */
int cmd_perfmap(struct cli_opts *o);

#endif
