/* jitdump.h: reading a target's jitdump file (jit-PID.dump), the binary
 * log JIT runtimes write for `perf inject --jit` (docs/perf-maps.md §3).
 *
 * The format is the Linux kernel's
 * tools/perf/Documentation/jitdump-specification.txt, in the writer's
 * byte order (only the reader's own is read):
 *
 *   header   u32 magic 0x4A695444 ("JiTD"), u32 version (1),
 *            u32 total_size (of the header), u32 elf_mach, u32 pad1,
 *            u32 pid, u64 timestamp, u64 flags          (40 bytes)
 *   record   u32 id, u32 total_size (of the record, this prefix
 *            included), u64 timestamp                   (16 bytes)
 *     id 0 JIT_CODE_LOAD  u32 pid, u32 tid, u64 vma, u64 code_addr,
 *                         u64 code_size, u64 code_index,
 *                         name (NUL-terminated), code_size bytes of code
 *     id 1 JIT_CODE_MOVE  u32 pid, u32 tid, u64 vma, u64 old_code_addr,
 *                         u64 new_code_addr, u64 code_size,
 *                         u64 code_index
 *     id 3 JIT_CODE_CLOSE (nothing follows)
 *     other ids (2 DEBUG_INFO, 4 UNWINDING_INFO, ...) are skipped.
 *
 * A load names [code_addr, code_addr + code_size) (the address perf
 * itself uses); a move gives the latest load of its code_index's name to
 * [new_code_addr, + code_size) and drops the region at old_code_addr.
 * Where regions overlap the record written later wins.
 *
 * The file is written by the target, so it is untrusted input: the
 * header is at most JITDUMP_MAX_HEADER bytes, a record at most
 * JITDUMP_MAX_RECORD bytes (one past it, or under its own prefix, ends
 * the read: nothing after it can be found), names are scanned over at
 * most JITDUMP_MAX_NAME_SCAN bytes and kept as perf map names are
 * (code_name_clean()), at most CODE_MAX_REGIONS regions and
 * JITDUMP_MAX_TEXT bytes of names are kept, at most JITDUMP_MAX_BYTES of
 * the file are read. A last record not yet whole (the writer is still
 * at it) is left for the next read. Code bytes are never read. What is
 * skipped is counted (struct jitdump_stats). */
#ifndef LUASPY_JITDUMP_H
#define LUASPY_JITDUMP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "codemap.h"

#define JITDUMP_MAGIC         0x4A695444u
#define JITDUMP_MAX_HEADER    4096             /* bytes of the header */
#define JITDUMP_MAX_RECORD    (64u << 20)      /* bytes of one record */
#define JITDUMP_MAX_NAME_SCAN 4096             /* bytes searched for a name's NUL */
#define JITDUMP_MAX_TEXT      (64u << 20)      /* bytes of names kept */
#define JITDUMP_MAX_BYTES     (1ull << 30)     /* bytes of the file read */

/* What the reads of one file found and skipped. */
struct jitdump_stats {
	unsigned long loads;        /* JIT_CODE_LOAD records used */
	unsigned long moves;        /* JIT_CODE_MOVE records used */
	unsigned long other;        /* records of other kinds, skipped */
	unsigned long malformed;    /* loads/moves skipped: short, no name, size 0,
	                             * region wraps, code past the record, a move
	                             * of an unknown code_index */
	unsigned long over_count;   /* loads/moves past CODE_MAX_REGIONS or
	                             * JITDUMP_MAX_TEXT */
	unsigned long overlapped;   /* regions dropped for overlapping a later one */
	const char *bad_header;     /* why the header was refused, or NULL */
	const char *broken;         /* why reading stopped for good at a record,
	                             * or NULL */
	uint64_t broken_at;         /* its offset */
	int closed;                 /* JIT_CODE_CLOSE read: nothing more is read */
	int cut_bytes;              /* JITDUMP_MAX_BYTES reached */
};

struct jitdump;

/* A reader with nothing read yet. NULL when memory is exhausted. */
struct jitdump *jitdump_new(void);
void jitdump_free(struct jitdump *jd);

/* Read on from where JD stopped in the file contents DATA of LEN bytes
 * (the whole file as it is now, grown). A file whose header is no longer
 * the one read (rewritten from its start) is read anew: what JD held is
 * forgotten. Returns the regions known (>= 0) or -LS_E_NOMEM. */
long jitdump_feed(struct jitdump *jd, const void *data, size_t len);

/* The same from the open file FD of SIZE bytes (pread, in windows of at
 * most 1 MiB). Returns the regions known or -LS_E_NOMEM / -LS_E_IO. */
long jitdump_feed_fd(struct jitdump *jd, int fd, uint64_t size);

/* The offset up to which JD has read (whole records). */
uint64_t jitdump_offset(const struct jitdump *jd);

/* The regions known, sorted and disjoint (built again after a feed that
 * found new ones; names owned by JD). NULL when memory is exhausted. */
const struct code_table *jitdump_table(struct jitdump *jd);

/* Counts so far (zero before any read). */
const struct jitdump_stats *jitdump_stats(const struct jitdump *jd);

#endif
