/* tests/targets/twin.c: one C source built twice (twin_a.so, twin_b.so,
 * no debug info) so two modules hold a function of the same name,
 * twin_spin, for out-pprof-modules.test. Lua calls twin_run(ms) of each
 * through LuaJIT's FFI. */
#include <time.h>

volatile unsigned long twin_sink;

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

__attribute__((noinline)) static void twin_spin(double until_ms)
{
	while (now_ms() < until_ms)
		for (int i = 0; i < 10000; i++)
			twin_sink++;
}

void twin_run(double ms)
{
	twin_spin(now_ms() + ms);
	twin_sink++;
}
