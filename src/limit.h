/* limit.h: fixed limits that cut data, counted where they cut.
 *
 * No limit drops data silently. A stack too deep to keep is cut in its
 * middle with a "<elided N frames>" frame (merge.h); a table that is
 * full either grows (within the bound its header documents) or, past
 * that bound, calls limit_hit() where the item is dropped: the first hit
 * of each kind says so in one -v line, and --stats prints every count
 * (session_print_stats). Counters are process-wide (one session per
 * run) and atomic (capture runs on the stopper thread). */
#ifndef LUASPY_LIMIT_H
#define LUASPY_LIMIT_H

#include <stdint.h>

enum limit_kind {
	LIMIT_PUC_STATES = 0, /* PUC main states not kept: MAX_STATES known (vm_puc_int.h) */
	LIMIT_PUC_COROS,      /* PUC coroutine lists cut: MAX_COROS listed */
	LIMIT_PUC_GC_VISIT,   /* PUC coroutine lists cut: MAX_GC_VISIT objects visited */
	LIMIT_PUC_CNAMES,     /* PUC C function names not learned: MAX_CNAMES known */
	LIMIT_PUC_EXEC,       /* PUC luaV_execute ranges not kept: MAX_EXEC known */
	LIMIT_PUC_NESTED,     /* PUC samples with lua_States nested past MAX_THREADS_L
	                       * on one OS thread (resume chains), not walked */
	LIMIT_PUC_HEAP_SCAN,  /* PUC heap scans that skipped memory past HEAP_SCAN_MAX */
	LIMIT__N
};

/* Count N items dropped at limit K. The first call for K prints one -v
 * line (msg_debug level 1) naming the limit. */
void limit_hit(enum limit_kind k, uint64_t n);
/* Items dropped at limit K so far. */
uint64_t limit_count(enum limit_kind k);
/* What limit K drops, for --stats: "PUC main states not kept (4096 kept)". */
const char *limit_text(enum limit_kind k);

#endif
