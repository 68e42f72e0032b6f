/* out.h: profile output formats. One file per format (out_svg.c,
 * out_folded.c, out_speedscope.c, out_pprof.c); out.c picks by name or
 * file extension and writes atomically (temporary name, then rename). */
#ifndef LUASPY_OUT_H
#define LUASPY_OUT_H

#include <stdio.h>
#include "profile.h"

enum out_format { OUT_FLAMEGRAPH = 0, OUT_FOLDED, OUT_SPEEDSCOPE, OUT_PPROF, OUT_CALLGRIND,
		  OUT_NFORMATS };

/* Format from its name ("flamegraph", "folded", "speedscope", "pprof",
 * "callgrind");
 * -1 when unknown. */
int out_format_parse(const char *name);
/* Format implied by PATH's extension (.svg, .folded/.txt, .json,
 * .pb.gz/.pprof/.pb, .callgrind or a name callgrind.out.*); OUT_FLAMEGRAPH when PATH's file name has no
 * extension; -1 when its extension names no format (out.png). */
int out_format_from_path(const char *path);
/* Name of FMT as out_format_parse takes it; "unknown" when out of range. */
const char *out_format_name(int fmt);
/* Human noun for the summary line: "flame graph", "folded stacks", ... */
const char *out_format_noun(int fmt);

/* Write P in FMT to PATH through PATH.tmp.XXXXXX + rename, so a half
 * written file never exists. The file gets mode 0666 & ~umask and is
 * fsync'd before the rename. PATH "-" writes to stdout instead. Prints
 * nothing. Returns 0 or -errno: -ENOENT (directory missing), -EACCES
 * (not writable), -ENOSPC, -EISDIR (PATH is a directory), -EINVAL (bad
 * FMT or empty PATH)...; on error no temporary file is left behind. */
int out_write_file(const struct profile *p, int fmt, const char *path);

/* The writers. Each writes the whole document to F (never closes it),
 * prints nothing, and returns 0 or -errno (-ENOMEM, or F's write error).
 *   svg: interactive flame graph, root at the bottom, frames merged by
 *        id along stacks from all threads; frames under 0.1 px of
 *        1180 are dropped (threshold raised past 150 000 frames)
 *   folded: "outer;...;inner COUNT" per distinct stack, threads merged
 *   speedscope: shared frames, one sampled profile per thread id
 *   pprof: gzipped protobuf, sample types samples/count and, when
 *        meta.rate_hz > 0, cpu/nanoseconds (count * 1e9 / rate_hz) */
int out_svg_write(const struct profile *p, FILE *f);
int out_folded_write(const struct profile *p, FILE *f);
int out_speedscope_write(const struct profile *p, FILE *f);
int out_pprof_write(const struct profile *p, FILE *f);
/*   callgrind: callgrind format 1 (valgrind's docs/cl-format), one
 *        event "Samples"; per stack, each frame's call to the next with
 *        the stack's count, the leaf's self cost at its line; for
 *        KCachegrind and callgrind_annotate (out_callgrind.c) */
int out_callgrind_write(const struct profile *p, FILE *f);

/* --- Helpers shared by the writers (out.c). Target text (names, files,
 * modules) is untrusted: it may hold any bytes. Writers pass it through
 * out_clean/out_label first, then escape for their syntax. */

/* Copy the NUL-terminated S into BUF (LEN >= 4 bytes including the NUL)
 * as valid UTF-8 with no control characters: each invalid byte, C0/C1
 * control, DEL, surrogate or U+FFFE/U+FFFF becomes U+FFFD. With
 * OUT_CLEAN_FOLDED, ';' also becomes ':' (the folded frame separator).
 * Truncates at a character boundary. S NULL gives "". Returns BUF. */
#define OUT_CLEAN_FOLDED 1
char *out_clean(const char *s, char *buf, size_t len, int flags);

/* frame_label(FR, WITH_LINE) cleaned by out_clean(FLAGS) into BUF. */
char *out_label(const struct frame *fr, char *buf, size_t len, int with_line,
		int flags);

/* Write clean S to F with the five XML escapes (& < > " '). */
void out_put_xml(FILE *f, const char *s);

/* The one JSON string writer (every JSON output uses it). Write the N
 * bytes at S, untrusted (any bytes, NULs included), as a quoted JSON
 * string into DST, which has room for 6 * N + 2 bytes. Well-formed UTF-8
 * is copied; '"' and '\\' are backslash-escaped; control characters (C0,
 * DEL, C1) become \u00XX; every byte that does not begin a well-formed
 * sequence (stray continuation, truncated or overlong sequence,
 * surrogate, above U+10FFFF, 0xf5..0xff) becomes \ufffd, so the output
 * is always valid JSON in valid UTF-8. Returns the bytes written (no NUL). */
size_t out_json_string(char *dst, const char *s, size_t n);

/* Write the NUL-terminated S (NULL = "") to F as out_json_string does. */
void out_put_json(FILE *f, const char *s);

/* Write V in decimal to BUF (room for 20 digits, no NUL added).
 * Returns the number of digits. */
size_t out_fmt_u64(char *buf, uint64_t v);

/* 0 when F has no error, else -errno (-EIO when errno says nothing). */
int out_ferror(FILE *f);

/* Write V to F with DECIMALS (0..6) fraction digits, independent of the
 * locale (LC_NUMERIC may use ','). */
void out_put_fixed(FILE *f, double v, int decimals);

/* Stacks in a stable order for merging and display: frames ranked by
 * their cleaned label (then id), stacks sorted by their sequence of
 * ranks, outermost first. Equal id sequences from different threads
 * end up next to each other. */
struct out_order {
	char **label;     /* per frame id: out_label(WITH_LINE, FLAGS), into text */
	uint32_t *label_len; /* per frame id: strlen(label[id]) */
	uint32_t *rank;   /* per frame id: position in label order */
	size_t nframes;
	size_t *stack;    /* profile stack indices, sorted */
	size_t nstacks;
	char *text;       /* the labels, NUL-terminated, back to back; owned */
};

/* Fill O for P. Returns 0 or -ENOMEM. Free with out_order_free. */
int out_order_init(struct out_order *o, const struct profile *p, int with_line,
		   int flags);
void out_order_free(struct out_order *o);

/* Frames some counted stack uses (after profile_reset, interned frames
 * may be unused). Returns a malloc'd array over frame ids: 0 = unused,
 * else 1 + the frame's rank among used frames in id order; *NUSED gets
 * their number. NULL when out of memory. */
uint32_t *out_used_frames(const struct profile *p, size_t *nused);

/* Size of label buffers the writers use (longer labels are truncated). */
#define OUT_LABEL_MAX 1024

#endif
