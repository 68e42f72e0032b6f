/* profile.h: the aggregate of samples that every output format reads.
 *
 * Frames are interned to small ids; a stack is a list of frame ids,
 * outermost first, counted per (thread id, stack). Outputs read the
 * aggregate, never the target.
 */
#ifndef LUASPY_PROFILE_H
#define LUASPY_PROFILE_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include "frame.h"

struct profile;

/* Run metadata, filled by the sampler, read by outputs. */
struct profile_meta {
	const char *title;        /* e.g. the target's command line */
	pid_t pid;                /* main target pid (0 if unknown) */
	double rate_hz;           /* sampling rate asked for */
	uint64_t duration_ns;     /* wall time of the recording */
	uint64_t start_unix_ns;   /* wall clock at start */
	uint64_t samples;         /* stacks counted (sum of all counts) */
	uint64_t errors;          /* samples lost to errors */
	const char *runtime;      /* "LuaJIT 2.1 GC64", "Lua 5.4.4", or NULL */
};

/* An empty aggregate with zeroed meta, or NULL when out of memory. */
struct profile *profile_new(void);
/* Free P and everything it owns (interned strings are not its). NULL is ok. */
void profile_free(struct profile *p);
/* P's run metadata, for the sampler to fill; lives as long as P. The
 * strings it points to are the caller's and must outlive the outputs. */
struct profile_meta *profile_meta(struct profile *p);
const struct profile_meta *profile_meta_const(const struct profile *p);

/* Count ST (innermost first, as walkers produce it) COUNT times for thread TID.
 * Frames are interned by every field but addr (the first addr seen is
 * kept); strings compare by pointer, so they must be interned. Adds COUNT
 * to profile_total() but leaves meta.samples to the caller. Amortised
 * O(depth). Returns 0, or -1 on allocation failure (nothing counted). */
int profile_add(struct profile *p, pid_t tid, const struct stack *st, uint64_t count);

/* Pass a copy of every frame of every stack through FN, then count the
 * stacks again: frames (and stacks) that FN made equal merge, counts add
 * up. Used to fill in what was deferred while sampling (native lines).
 * Returns 0, or -1 on allocation failure (P unchanged). */
int profile_map_frames(struct profile *p, void (*fn)(struct frame *fr, void *arg), void *arg);

/* Forget all counted stacks (top's reset key); frames stay interned. */
void profile_reset(struct profile *p);

/* Interned frames: ids are 0 .. profile_nframes()-1. */
size_t profile_nframes(const struct profile *p);
const struct frame *profile_frame(const struct profile *p, uint32_t id);

/* Distinct (tid, stack) entries: 0 .. profile_nstacks()-1. IDS points to
 * DEPTH frame ids, outermost first; valid until the next add/reset. */
size_t profile_nstacks(const struct profile *p);
void profile_stack(const struct profile *p, size_t i, pid_t *tid,
		   const uint32_t **ids, size_t *depth, uint64_t *count);

/* Stack I of P as one row: the fields of profile_stack(). */
struct profile_row {
	pid_t tid;
	const uint32_t *ids;        /* DEPTH frame ids, outermost first */
	size_t depth;
	uint64_t count;             /* samples */
};

/* Fill R with stack I of P (valid until the next add/reset). Returns 1
 * when it holds samples and frames, 0 when it is empty (what every
 * writer skips). */
int profile_row(const struct profile *p, size_t i, struct profile_row *r);

/* Sum of all counts. */
uint64_t profile_total(const struct profile *p);

/* One function, one name (docs/naming.md §1).
 * A Lua frame's name comes from its call site, so one prototype may be
 * met as "leaf", "__index" and "function <app.lua:3>". A function is its
 * prototype, keyed by (file, firstline) of its FRAME_LUA frames; its name
 * is chosen from the samples counted per (file, firstline, name): a name
 * it was called or found under, else a metamethod event ("__index"),
 * else the stand-in "function <chunk:line>"; among equals the most
 * samples, then the first in byte order. Names are chosen when a profile
 * is written or a table counted, never while sampling, so a name learned
 * later cannot split a function into two rows. */
struct fn_names;
/* An empty table, or NULL when out of memory. Free with fn_names_free(). */
struct fn_names *fn_names_new(void);
void fn_names_free(struct fn_names *nm);
/* Count P's stacks (each Lua frame by its stack's count) into NM, whose
 * earlier counts are forgotten (the names it met are kept), and choose
 * the names. Returns 1 when a name fn_names_best() gave before changed,
 * 0 when none did, -1 when out of memory (NM keeps what it counted). */
int fn_names_count(struct fn_names *nm, const struct profile *p);
/* The name FR's function shows under: the chosen one for a FRAME_LUA
 * frame with a file that NM counted, else FR->name. NM may be NULL. */
const char *fn_names_best(const struct fn_names *nm, const struct frame *fr);
/* Count P and give every Lua frame its function's name, merging the
 * stacks that become equal (profile_map_frames()). 0, or -1 when out of
 * memory (P unchanged). */
int profile_name_functions(struct profile *p);

#endif
