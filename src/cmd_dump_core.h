/* cmd_dump_core.h: `luaspy dump --core`: what dump needs of a core file
 * instead of a live pid (cmd_dump.c does the rest, the same way for
 * both). docs/core-files.md. */
#ifndef LUASPY_CMD_DUMP_CORE_H
#define LUASPY_CMD_DUMP_CORE_H

#include <stdio.h>
#include "cli.h"
#include "proc_core.h"
#include "proc_task.h"
#include "target.h"

/* Open O->core (with O->exe) as *T, probing for a Lua VM unless
 * --native-only; set O->pid to the core's pid. Prints one line per
 * problem the core has (cut, overlapping, files missing on disk); an
 * executable missing on disk is said alone, else a Lua runtime not
 * found. Returns 0, or the exit status
 * after printing why the core can't be read (not a core: 8, ...). */
int dump_core_open(struct cli_opts *o, struct target **t, int *vmrc);

/* heap --core: open O->core (with O->exe) as *T with its Lua VM, and
 * set O->pid to the core's pid; the core's problems are said as
 * dump_core_open() says them. Returns 0 with *T holding a VM that has a
 * heap walker, else the exit status after one line saying why (*T then
 * NULL): not a core 8, executable missing on disk 8, not Lua 5,
 * unsupported 6. No thread is stopped: the core does not run. */
int heap_core_open(struct cli_opts *o, struct target **t);

/* The threads of core target T as proc_threads() lists a live process:
 * tid, name (the command name for the main thread: a core does not keep
 * thread names), state (the process's, 'T' when unknown), cpu -1.
 * *TH is malloc'd. 0 or -LS_E_NOMEM. */
int dump_core_threads(const struct target *t, struct proc_thread **th, int *nth);

/* The core's own lines after "Process ...": text "Core: FILE; thread N
 * got signal S (NAME)", or JSON members ,"core":{...}. */
void dump_core_header(FILE *f, const struct cli_opts *o, const struct target *t);

/* Exit status of a dump of core target T that printed its stacks (VMRC
 * what its probe said): 0, or, when no Lua runtime was found (and not
 * --native-only), 8 when the executable was missing on disk (said by
 * dump_core_open()), 6 for a runtime it could not read (unsupported),
 * else 5 (not a Lua process). */
int dump_core_status(const struct cli_opts *o, const struct target *t, int vmrc);

#endif
