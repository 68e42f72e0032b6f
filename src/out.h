/* out.h: profile output formats. One file per format (out_svg.c,
 * out_folded.c, out_speedscope.c, out_pprof.c); out.c picks by name or
 * file extension and writes atomically (temporary name, then rename). */
#ifndef LUASPY_OUT_H
#define LUASPY_OUT_H

#include <stdio.h>
#include "profile.h"

enum out_format { OUT_FLAMEGRAPH = 0, OUT_FOLDED, OUT_SPEEDSCOPE, OUT_PPROF, OUT_NFORMATS };

/* Format from its name ("flamegraph", "folded", "speedscope", "pprof");
 * -1 when unknown. */
int out_format_parse(const char *name);
/* Format implied by PATH's extension (.svg, .folded/.txt, .json,
 * .pb.gz/.pprof/.pb); OUT_FLAMEGRAPH when nothing matches. */
int out_format_from_path(const char *path);
const char *out_format_name(int fmt);
/* Human noun for the summary line: "flame graph", "folded stacks", ... */
const char *out_format_noun(int fmt);

/* Write P in FMT to PATH through PATH.tmp.XXXXXX + rename, so a half
 * written file never exists. Returns 0 or -errno. */
int out_write_file(const struct profile *p, int fmt, const char *path);

/* The writers. Each returns 0 or -errno (write errors from F). */
int out_svg_write(const struct profile *p, FILE *f);
int out_folded_write(const struct profile *p, FILE *f);
int out_speedscope_write(const struct profile *p, FILE *f);
int out_pprof_write(const struct profile *p, FILE *f);

#endif
