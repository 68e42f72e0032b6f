/* snap.c: copies a walker's capture() makes while the thread is stopped,
 * laid over the thread's memory reader (vm.h). */
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "vm.h"

/* Room for LEN more bytes in TS's copy buffer, or NULL (budget, regions or
 * memory spent). */
static uint8_t *snap_room(struct thread_snap *ts, size_t len)
{
	if (ts->xlen + len > SNAP_COPY_MAX || ts->ov.n >= MEM_OVERLAY_REGIONS)
		return NULL;
	if (!ts->xbuf && !(ts->xbuf = malloc(SNAP_COPY_MAX)))
		return NULL;
	return ts->xbuf + ts->xlen;
}

ssize_t snap_copy(struct target *t, struct thread_snap *ts, uint64_t addr, size_t len)
{
	if (len == 0)
		return 0;
	uint8_t *dst = snap_room(ts, len);
	if (!dst)
		return -LS_E_NOMEM;
	ssize_t n = t->mem.base.read(&t->mem.base, addr, dst, len);
	if (n <= 0)
		return n < 0 ? n : -LS_E_FAULT;
	if (mem_overlay_add(&ts->ov, addr, dst, (size_t)n) < 0)
		return (ssize_t)n; /* overlaps a region copied already: reads still work */
	ts->xlen += (size_t)n;
	return n;
}

int snap_keep(struct thread_snap *ts, uint64_t addr, const void *data, size_t len)
{
	if (len == 0)
		return 0;
	uint8_t *dst = snap_room(ts, len);
	if (!dst)
		return -LS_E_NOMEM;
	memcpy(dst, data, len);
	if (mem_overlay_add(&ts->ov, addr, dst, len) == 0)
		ts->xlen += len;
	return 0;
}
