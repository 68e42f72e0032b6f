/* profile_read.h: profiles luaspy wrote, read back into the aggregate
 * (luaspy report, docs/report.md), and one profile's stacks added to
 * another (report's merge, record --period's hand-over).
 *
 * Files are untrusted input: sizes, counts and indexes are bounded and
 * checked; a file that breaks a limit is refused with the limit named.
 */
#ifndef LUASPY_PROFILE_READ_H
#define LUASPY_PROFILE_READ_H

#include <regex.h>
#include <stddef.h>
#include "profile.h"

/* Limits on one input file (docs/report.md §3). */
#define PREAD_MAX_FILE_BYTES (256u << 20)     /* compressed or raw file */
#define PREAD_MAX_PB_BYTES (1024u << 20)      /* pprof protobuf once gunzipped */
#define PREAD_MAX_LINE_BYTES (1u << 20)       /* one folded line */
#define PREAD_MAX_DEPTH 65536                 /* locations (frames) of one sample */

/* The formats report reads. */
enum pread_format { PREAD_PPROF = 0, PREAD_FOLDED };

/* Add every sample of the luaspy profile at PATH (gzipped or raw pprof,
 * told by the gzip magic or a .pb/.pprof name; folded stacks
 * "outer;...;inner COUNT" otherwise) to P, and add its sample count,
 * duration and start to P's meta (the earliest start, the latest end;
 * rate_hz from the pprof period, 0 when inputs disagree). Frames are
 * rebuilt so they label as the writer labelled them (frame_label): from
 * pprof by Function.system_name, filename, start_line, Line.line and the
 * Mapping's file (the module); kinds follow from that (a module: native,
 * a file: Lua, outermost "process N"/"thread N": root, an innermost
 * "[...]" VM state: vmstate); folded frames keep their whole label as
 * the name. Counts are pprof's "samples" value (else the first). The
 * strings of meta (title, runtime) are interned. Returns 0, or -1 with
 * WHY (WHYLEN bytes) saying what is wrong with the file; P may then hold
 * part of the file. *FORMAT (may be NULL) gets the enum pread_format
 * read. */
int profile_read_file(struct profile *p, const char *path, int *format, char *why,
		      size_t whylen);

/* As profile_read_file() on the LEN bytes at BUF, read as FORMAT (enum
 * pread_format; a pprof may be gzipped or raw). For tests and fuzz/. */
int profile_read_mem(struct profile *p, const unsigned char *buf, size_t len, int format,
		     char *why, size_t whylen);

/* Which samples profile_add_filtered() keeps and how it shapes them. */
struct pread_filter {
	const regex_t *focus;   /* keep stacks with a frame whose label matches; NULL: all */
	const regex_t *ignore;  /* drop stacks with a frame whose label matches; NULL: none */
	int function;           /* Lua frames at their function's first line (-F) */
	int nolineno;           /* no line numbers at all (Lua and native) */
	pid_t tid;              /* keep only this thread id; 0: all */
	int flatten;            /* frames become their label (after the above):
	                         * merges pprof and folded input, whose frames
	                         * carry the same labels but not the same fields */
};

/* Add every stack of SRC to DST (counts add up, thread ids kept),
 * shaped and filtered by F (NULL: none). Labels are matched with their
 * line (frame_label). DST's meta is left alone. Returns the samples
 * added, or -1 when out of memory. */
int64_t profile_add_filtered(struct profile *dst, const struct profile *src,
			     const struct pread_filter *f);

#endif
