/* pgrep.h: --pgrep: pick processes by name or command line as pgrep(1)
 * does (POSIX extended regular expressions, unanchored), never luaspy
 * itself or its ancestors. docs/pgrep.md. */
#ifndef LUASPY_PGREP_H
#define LUASPY_PGREP_H

#include <regex.h>
#include <stddef.h>
#include <sys/types.h>

#define PGREP_MAX 256              /* processes one --pgrep selects (cli_opts.pids); past it, it says so */
#define PGREP_CMDLINE_BYTES 4096   /* bytes of a command line --pgrep-full matches */
#define PGREP_POLL_NS (100 * 1000000ull) /* /proc is listed this often while nothing matches */

/* The processes of /proc whose name (FULL 0: comm, at most 15 bytes as
 * the kernel keeps it) or command line (FULL 1: arguments joined by
 * spaces, its first PGREP_CMDLINE_BYTES bytes) matches RE (compiled
 * with REG_EXTENDED | REG_NOSUB). Left out: luaspy itself, its
 * ancestors, kernel threads and zombies (no command line). Pids into
 * OUT (at most MAX, ascending). Returns how many matched (may exceed
 * MAX: the rest are not in OUT), or -LS_E_NOMEM / -LS_E_IO when /proc
 * cannot be listed. Reads /proc only; no ptrace. */
int pgrep_match(const regex_t *re, int full, pid_t *out, int max);

struct cli_opts;

/* For record, top and dump: when O->pgrep is set, compile it and wait
 * up to O->timeout_s (polling every PGREP_POLL_NS) for a process to
 * match; then O->pid is the first match (the lowest pid) and
 * O->pids/O->npids all of them (at most PGREP_MAX). Returns 0,
 * or an exit status after one "luaspy: " line: 2 (a bad regex), 3
 * (nothing matched within --timeout), 1 (out of memory). Says with -v
 * what matched. */
int pgrep_resolve(struct cli_opts *o);

#endif
