/* follow.h: the processes a session samples: the one it attached to or
 * launched and, with --subprocesses, its descendants, each probed for a
 * Lua VM until one shows up. */
#ifndef LUASPY_FOLLOW_H
#define LUASPY_FOLLOW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "target.h"
#include "threads.h"

/* One process of the session. */
struct tgt {
	pid_t pid;
	struct target *t;          /* NULL while not (yet) Lua */
	uint64_t next_probe_ns;    /* when to probe again (while t is NULL) */
	int dead;                  /* exited or unreadable: skipped from now on */
	const char *root_label;    /* interned "process PID \"cmdline\"" */
	struct thread_list threads;/* its threads (threads.h) */
};

#define FOLLOW_MAX 256             /* processes per session, dead ones included */
#define FOLLOW_REPROBE_NS (1000 * 1000000ull) /* between probes of a process without Lua */

struct follow {
	struct tgt tg[FOLLOW_MAX];
	int n;
	uint64_t next_scan_ns;     /* when follow_scan looks for children again */
	const char *runtime;       /* interned describe() of the first VM found */
};

/* The entry of PID in F, added (zeroed but for pid) when new. NULL when
 * F is full. */
struct tgt *follow_add(struct follow *f, pid_t pid);

/* Open TG's process and probe it for Lua (target.h). Returns 0 with
 * TG->t set (and F->runtime when it was the first), -LS_E_NOTLUA or
 * -LS_E_UNSUPPORTED with WHY filled, or another -LS_E_* (the process is
 * gone, not ours to read...). No ptrace. */
int follow_probe(struct follow *f, struct tgt *tg, char *why, size_t whylen);

/* --subprocesses, at most every 200 ms: add the children of every live
 * process in F, then probe those without Lua whose time has come (at
 * once when new, every second after); a process found gone is marked
 * dead. */
void follow_scan(struct follow *f);

/* Close every process's target and thread list. */
void follow_close(struct follow *f);

#endif
