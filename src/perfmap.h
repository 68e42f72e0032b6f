/* perfmap.h: reading a target's perf map (/tmp/perf-PID.map), the names
 * JIT runtimes give their code for perf (docs/perf-maps.md).
 *
 * A perf map has one line per code region: "START SIZE NAME", START and
 * SIZE in hex (an optional 0x), NAME the rest of the line (the format of
 * the Linux kernel's tools/perf/Documentation/jit-interface.txt). The
 * file is written by the target, so it is untrusted input: lines are at
 * most PERFMAP_MAX_LINE bytes, a map holds at most PERFMAP_MAX_ENTRIES
 * entries read from at most PERFMAP_MAX_BYTES bytes; what is past a limit
 * or malformed is skipped and counted (struct perfmap_stats), never
 * guessed. Names keep at most CODE_NAME_MAX bytes, control bytes
 * become '?'. */
#ifndef LUASPY_PERFMAP_H
#define LUASPY_PERFMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "codemap.h"

struct proc_maps;

#define PERFMAP_MAX_LINE    4096        /* bytes of a line, newline excluded */
#define PERFMAP_MAX_ENTRIES CODE_MAX_REGIONS /* entries kept per map */
#define PERFMAP_MAX_BYTES   (64u << 20) /* bytes of the file read */
#define PERFMAP_RECHECK_NS  200000000ull /* the file is stat()ed at most every 0.2 s */

/* What a parse skipped, by reason. */
struct perfmap_stats {
	unsigned long lines;        /* lines seen (entries kept + skipped) */
	unsigned long malformed;    /* no START, SIZE or NAME; SIZE 0; START+SIZE overflows */
	unsigned long too_long;     /* longer than PERFMAP_MAX_LINE */
	unsigned long over_count;   /* past PERFMAP_MAX_ENTRIES */
	unsigned long overlapped;   /* dropped for overlapping a line written later */
	int cut_bytes;              /* the file was longer than PERFMAP_MAX_BYTES */
};

/* Parse the LEN bytes of TEXT (a perf map's contents; need not end in a
 * newline or a NUL) into OUT, replacing what it held. TEXT is copied.
 * Malformed, too long and surplus lines are skipped and counted in ST
 * (zeroed first). Where regions overlap, the line written later (further
 * down the file) wins and the other is dropped. Returns the entries kept
 * (>= 0) or -LS_E_NOMEM. */
long perfmap_parse(const char *text, size_t len, struct code_table *out,
		   struct perfmap_stats *st);

struct perfmap;

/* PID's pid in its own pid namespace (the last field of NSpid in
 * /proc/PID/status), which names its perf map there; PID when unknown. */
pid_t perfmap_ns_pid(pid_t pid);

/* The perf map of process PID, read lazily from
 * /proc/PID/root/tmp/perf-NSPID.map (the target's own /tmp and pid,
 * containers included). Returns NULL only when memory is exhausted. */
struct perfmap *perfmap_open(pid_t pid);
void perfmap_close(struct perfmap *pm);

/* Name of the code at target address ADDR, interned, or NULL; *MODULE
 * is then "[perf-map]" or "[jitdump]" (interned), which names it.
 * The perf map is looked up first, then the jitdump file (jitdump.h)
 * that MAPS (the target's current maps, or NULL: no jitdump) shows
 * mapped.
 * The perf map is checked at most every PERFMAP_RECHECK_NS: when it only
 * grew (same inode, the last bytes read unchanged) it is read on from
 * the end of its last whole line, else read anew (bounded); a last line
 * without its newline is read once the newline is there. The jitdump
 * grows too and is read on from where the last read stopped. A file is used only
 * when it is a regular file (no symlink as the last component of a
 * path), owned by root or by the target's user, as perf itself
 * requires; else nothing is read from it. The first time a read skips
 * lines or records or is cut, one line says so on stderr ("luaspy: pid
 * N: perf map ...: ..." or "luaspy: pid N: jitdump ...: ..."). PM may
 * be NULL (NULL returned). */
const char *perfmap_lookup(struct perfmap *pm, uint64_t addr, const struct proc_maps *maps,
			   const char **module);

/* Stats of PM's last read (zero before any), for -v and tests. */
const struct perfmap_stats *perfmap_last_stats(const struct perfmap *pm);

/* record --perf-map (cmd_perfmap.c): with PID's map opened for writing
 * as `luaspy perf-map` opens it (refused when it exists, unless APPEND),
 * start a child process that writes it for PID's LuaJIT traces every
 * 0.2 s, ended (SIGTERM, reaped) at luaspy's exit (atexit) or by its
 * death, or when PID exits. RUNTIME is the session's ("LuaJIT ..."; else
 * refused, exit 6). Returns 0, or an exit status (the line said). Call
 * once, between samples (no thread stopped). */
int perfmap_record_start(pid_t pid, const char *runtime, int append);

#endif
