/* timeutil.h: monotonic time in ns. */
#ifndef LUASPY_TIMEUTIL_H
#define LUASPY_TIMEUTIL_H
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, in ns. */
static inline uint64_t time_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
/* CLOCK_REALTIME now, in ns since the epoch. */
static inline uint64_t time_unix_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
#endif
