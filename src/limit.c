/* limit.c: counts of the data cut at fixed limits (limit.h). */
#include "limit.h"
#include "msg.h"

static uint64_t counts[LIMIT__N];

/* Each text names the limit and its value (vm_puc_int.h, frame.h). */
static const char *const texts[LIMIT__N] = {
	[LIMIT_PUC_STATES] = "PUC main states not kept (table full at 4096)",
	[LIMIT_PUC_COROS] = "PUC coroutine lists cut at 65536 coroutines",
	[LIMIT_PUC_GC_VISIT] = "PUC coroutine lists cut after 400000 GC objects",
	[LIMIT_PUC_CNAMES] = "PUC C function names not learned (table full at 20000)",
	[LIMIT_PUC_EXEC] = "PUC luaV_execute ranges not kept (table full at 8)",
	[LIMIT_PUC_NESTED] = "PUC samples with lua_States nested past 200 on a thread",
	[LIMIT_PUC_HEAP_SCAN] = "PUC heap scans that skipped memory past 512 MiB",
};

void limit_hit(enum limit_kind k, uint64_t n)
{
	if ((unsigned)k >= LIMIT__N || !n)
		return;
	if (__atomic_fetch_add(&counts[k], n, __ATOMIC_RELAXED) == 0)
		msg_debug(1, "limit reached: %s; --stats counts them", texts[k]);
}

uint64_t limit_count(enum limit_kind k)
{
	return (unsigned)k < LIMIT__N ? __atomic_load_n(&counts[k], __ATOMIC_RELAXED) : 0;
}

const char *limit_text(enum limit_kind k)
{
	return (unsigned)k < LIMIT__N ? texts[k] : "?";
}
