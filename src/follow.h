/* follow.h: the processes a session samples: the one it attached to or
 * launched and, with --subprocesses, its descendants, each probed for a
 * Lua VM until one shows up. A process that exits is closed and its
 * entry freed, so a forking server can be followed for hours. */
#ifndef LUASPY_FOLLOW_H
#define LUASPY_FOLLOW_H

#include <regex.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "target.h"
#include "threads.h"

/* One process of the session. */
struct fiber_names;

struct tgt {
	pid_t pid;
	unsigned long long start;  /* start time (stat field 22): pid + start is one process */
	struct target *t;          /* NULL while not (yet) Lua */
	uint64_t next_probe_ns;    /* when to probe again (while t is NULL) */
	uint64_t probe_wait_ns;    /* the back-off between probes */
	uint64_t exe_id;           /* /proc/PID/exe's device and inode at the last probe */
	uint64_t modules;          /* digest of its mapped files when a probe said "not Lua", else 0 */
	int dead;                  /* exited or unreadable: skipped, freed at the next scan */
	int ancestor;              /* an ancestor of luaspy: it cannot exit while we wait */
	int perf_refused;          /* perf_event_open refused for its threads (said once) */
	int matched;               /* a --pgrep match (at the start or later), not a descendant */
	const char *root_label;    /* interned "process PID \"cmdline\"" */
	struct thread_list threads;/* its threads (threads.h) */
	struct fiber_names *fibers;/* record --coroutines: its Tarantool fibers (fiber_tarantool.h) */
};

#define FOLLOW_REPROBE_NS (1000 * 1000000ull) /* longest wait between probes of a process without Lua */
#define FOLLOW_GONE 256            /* processes remembered as gone, not to be added again */

struct follow {
	struct tgt *tg;            /* tg[0] is the root, kept until follow_close */
	int n, cap;
	uint64_t next_scan_ns;     /* when follow_scan looks for children again */
	const char *runtime;       /* interned describe() of the first VM found */
	char root_cmd[512];        /* the root's command line, when it was Lua */
	pid_t self;                /* luaspy: never followed */
	pid_t anc[64];             /* luaspy's ancestors, parent first */
	int nanc;
	struct { pid_t pid; unsigned long long start; } gone[FOLLOW_GONE]; /* freed entries, a ring */
	int ngone;
	unsigned long long added, freed; /* processes added and freed so far */
	pid_t *kids;               /* children listed by the last scan (grown) */
	size_t capkids;
	int kids_oom;              /* times listing children ran out of memory */
	int roots_only;            /* follow_scan adds no children (--pgrep without -s) */
	/* --pgrep during the run (follow_watch): later matches */
	regex_t watch_re;          /* the pattern, compiled */
	int watching, watch_full;  /* follow_watch was called; --pgrep-full */
	const char *watch_pat;     /* the pattern, for messages (the caller's) */
	uint64_t next_watch_ns;    /* when /proc is listed again */
	pid_t *watch_pids;         /* the last listing's matches (PGREP_MAX) */
	unsigned long long watch_added;  /* later matches added */
	unsigned long long watch_over;   /* the most matches one listing left out (PGREP_MAX followed) */
	unsigned long long watch_scans;  /* listings of /proc */
	unsigned long long probes;       /* follow_scan's probes for Lua so far */
};

/* Set F up (zeroed by the caller): note luaspy's pid and ancestors. */
void follow_init(struct follow *f);

/* The entry of PID in F, added (zeroed but for pid) when new. NULL for
 * luaspy itself or when out of memory. The pointer is valid until the
 * next follow_add or follow_scan. */
struct tgt *follow_add(struct follow *f, pid_t pid);

/* --pgrep's matches after the first (F->tg[0]): add PIDS[N] as roots of
 * F, probed at the next follow_scan (a match that is not Lua yet is
 * probed again as -s probes a descendant). ROOTS_ONLY: follow_scan adds
 * no children (no -s). Pointers into F->tg are invalid afterwards.
 * Returns 0 or -LS_E_NOMEM. */
int follow_add_roots(struct follow *f, const pid_t *pids, int n, int roots_only);

/* --pgrep PATTERN (FULL: --pgrep-full) for the whole run: from now on
 * follow_scan lists /proc every FOLLOW_WATCH_NS (less often when a
 * listing takes over 2% of a CPU: every 50 times its CPU time, at most
 * FOLLOW_WATCH_MAX_NS) and adds the processes that started matching as
 * roots (pgrep.h: pgrep_match; never luaspy or its ancestors), at most
 * PGREP_MAX matches followed at once (those past it are said once;
 * F->watch_over: the most one listing left out). Each is said with -v, and so is each
 * process that exits. ROOTS_ONLY: no descendants are followed (no -s).
 * The processes already in F are marked as matches. PATTERN
 * must stay valid while F is used. Returns 0, or -LS_E_USAGE (a bad
 * pattern) / -LS_E_NOMEM. docs/pgrep.md §4. */
#define FOLLOW_WATCH_NS (1000 * 1000000ull)
#define FOLLOW_WATCH_MAX_NS (10000 * 1000000ull)
int follow_watch(struct follow *f, const char *pattern, int full, int roots_only);

/* Open TG's process and probe it for Lua (target.h). Returns 0 with
 * TG->t set (and F->runtime when it was the first), -LS_E_NOTLUA or
 * -LS_E_UNSUPPORTED with WHY filled, or another -LS_E_* (the process is
 * gone, not ours to read...). No ptrace. */
int follow_probe(struct follow *f, struct tgt *tg, char *why, size_t whylen);

/* Free the entries marked dead (but the root's): close their targets
 * and thread lists. */
void follow_reap(struct follow *f);

/* --subprocesses or --pgrep, every 10 ms (up to 200 ms when listing the children,
 * a file read per thread, took over 1 ms of CPU): free the dead, add the
 * children of every live process in F (luaspy excluded), then probe
 * those without Lua whose time has come: at once when new or when they
 * exec'ed another program, then after 20 ms doubling up to
 * FOLLOW_REPROBE_NS, and only when the files they map changed since a
 * probe said "not Lua". A process found gone is marked dead. Returns how
 * many probes ran (they open files and read symbol tables: time the
 * sampling did not have). With follow_watch, new --pgrep matches are
 * added first (follow_watch's interval). */
int follow_scan(struct follow *f);

/* Close every process's target and thread list, free the table. */
void follow_close(struct follow *f);

#endif
