/* cli.h: command line parsing and dispatch for record, top and dump. */
#ifndef LUASPY_CLI_H
#define LUASPY_CLI_H

#include <sys/types.h>

enum cli_cmd { CMD_NONE = 0, CMD_RECORD, CMD_TOP, CMD_DUMP, CMD_HEAP, CMD_REPORT, CMD_PERFMAP, CMD_N };
#define CMD_LAST CMD_PERFMAP

/* cli_opts.format of report's text table (not a file format of out.h) */
#define CLI_FORMAT_TOP 100

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
	int sampler;               /* --sampler: SAMPLER_* (default SAMPLER_PTRACE) */
	const char *core;          /* dump --core FILE: a core file instead of a pid */
	const char *exe;           /* dump --exe FILE: the executable the core ran */
	int heap_format;           /* heap -f: HEAP_FMT_* */
	const char *diff;          /* heap --diff OLD (a paths file); report --diff BASE */
	/* report and record --period (cmd_report.c, docs/report.md) */
	char **inputs;             /* report: profiles to read (NULL-terminated) */
	const char *focus;         /* report --focus REGEX */
	const char *ignore;        /* report --ignore REGEX */
	char *diff_inputs[3];      /* report --diff: BASE (o->diff), NEW, NULL */
	int nolineno;              /* report --nolineno */
	pid_t tid;                 /* report --tid: one thread only, 0 = all */
	double period_s;           /* record --period: one profile per SECS, 0 = off */
	const char *upload;        /* record --upload URL (Pyroscope), or NULL */
	const char *app;           /* --app NAME */
	const char *tags[32];      /* --tag KEY=VALUE, UPLOAD_MAX_TAGS */
	int ntags;
	const char *upload_headers[16]; /* --upload-header 'Name: value', UPLOAD_MAX_HEADERS */
	int nupload_headers;
	int locals;                /* dump --locals */
	size_t locals_length;      /* dump --locals-length: bytes of a string shown (default 80) */
	int perf_map_append;       /* perf-map, record --perf-map-append */
	int perf_map;              /* record --perf-map */
	/* --pgrep (pgrep.c, docs/pgrep.md) */
	const char *pgrep;         /* --pgrep or --pgrep-full PATTERN (POSIX ERE), or NULL */
	int pgrep_full;            /* --pgrep-full: match the command line, not the name */
	pid_t pids[256];           /* pgrep_resolve: the matches, ascending (PGREP_MAX) */
	int npids;                 /* how many; 0 without --pgrep; pids[0] == pid */
	double heap_interval_s;    /* heap --interval SECS: 0 = one snapshot */
	int heap_count;            /* heap --count K: snapshots with --interval (2..1000) */
	int no_demangle;           /* --no-demangle: C++ names as mangled (elf_sym.h) */
	int coroutines;            /* record --coroutines: a root frame per Lua coroutine */
	int64_t heap_max_mib;      /* heap --max-memory MIB (0: no bound) */
	int heap_max_mib_given;    /* else half of MemAvailable (cmd_heap.c) */
	/* record --upload-queue (upload.c, docs/upload-queue.md) */
	const char *upload_queue;  /* --upload-queue DIR, or NULL: in memory */
	unsigned upload_queue_max; /* --upload-queue-max N profiles, 0: the default */
	unsigned upload_queue_mib; /* --upload-queue-mib MIB, 0: the default */
	int gc;                    /* record --gc: GC samples only (gc_filter.h) */
};

/* --sampler: how record and top take samples (dump always stops). */
enum { SAMPLER_PTRACE = 0, SAMPLER_PERF, SAMPLER_AUTO };

enum { HEAP_FMT_TEXT = 0, HEAP_FMT_HEAPSNAPSHOT, HEAP_FMT_PATHS, HEAP_FMT_PPROF };

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
/* cmd_heap.c: luaspy heap (docs/heap.md). */
int cmd_heap(struct cli_opts *o);
int cmd_report(struct cli_opts *o);
/* `luaspy perf-map` (cmd_perfmap.c): /tmp/perf-PID.map for LuaJIT traces. */
int cmd_perfmap(struct cli_opts *o);

#endif
