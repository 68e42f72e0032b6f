/* tests/t_sampler_perf.c: the perf sampler's records on this process
 * itself (src/sampler_perf.c, a real perf_event_open): a thread spins in
 * spin() with a marker in its frame; its samples must carry its tid, a
 * CLOCK_MONOTONIC time, an rsp on its stack just below the marker, an rip
 * in this program, and a stack copy from rsp that holds the marker.
 * Skipped (77) when perf events are not allowed here. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include "check.h"
#include "sampler_perf.h"
#include "timeutil.h"

#define MARK 0x6c75617370793138ull /* "luaspy18" */

static volatile int stop;
static volatile uint64_t frame_addr; /* where spin()'s marker lives */
static pid_t spin_tid;

/* not instrumented by ASan: with detect_stack_use_after_return (CI's
 * sanitizer build) its locals would live on ASan's heap-allocated fake
 * stack, far from rsp, and the marker would never be in the copy */
static __attribute__((noinline, no_sanitize("address"))) void spin(void)
{
	volatile uint64_t mark[4] = { MARK, MARK, MARK, MARK };
	frame_addr = (uint64_t)(uintptr_t)mark;
	spin_tid = (pid_t)syscall(SYS_gettid);
	uint64_t x = 0;
	while (!stop)
		x += mark[x & 3] & 1;
	mark[0] = x;
}

static void *run(void *arg)
{
	(void)arg;
	spin();
	return NULL;
}

int main(void)
{
	char why[256];
	if (perf_sampler_check(getpid(), why, sizeof why) != 0) {
		printf("SKIP: %s\n", why);
		return 77;
	}
	pthread_t th;
	pthread_create(&th, NULL, run, NULL);
	while (!spin_tid)
		usleep(1000);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct perf_counts c = { 0 };
	struct perf_proc *p = NULL;
	CHECK(perf_proc_open(getpid(), ep, 1000, 4096, 0, &c, &p) == 0);
	struct proc_thread tl = { .tid = spin_tid, .state = 'R', .cpu = -1 };
	CHECK(perf_proc_sync(p, &tl, 1) == 1, "events open");
	uint64_t t0 = time_now_ns();
	int n = 0, marked = 0, inframe = 0, intext = 0;
	struct perf_sample s;
	while (n < 20 && time_now_ns() - t0 < 5000000000ull) {
		struct epoll_event ev;
		epoll_wait(ep, &ev, 1, 100);
		while (n < 20 && perf_proc_next(p, &s) == 1) {
			n++;
			CHECK(s.tid == spin_tid, "tid %d, spinning %d", (int)s.tid, (int)spin_tid);
			CHECK(s.time_ns >= t0 && s.time_ns <= time_now_ns(), "time %llu", (unsigned long long)s.time_ns);
			CHECK(s.stack_len > 0 && s.stack_len <= 4096, "stack %zu bytes", s.stack_len);
			/* rsp is in spin()'s frame, just below its marker */
			inframe += s.regs.rsp <= frame_addr && frame_addr - s.regs.rsp < 256;
			intext += s.regs.rip >= (uint64_t)(uintptr_t)spin &&
				  s.regs.rip < (uint64_t)(uintptr_t)spin + 512;
			uint64_t off = frame_addr - s.regs.rsp;
			if (s.regs.rsp <= frame_addr && off + 32 <= s.stack_len) {
				uint64_t m[4];
				memcpy(m, s.stack + off, sizeof m);
				marked += m[0] == MARK && m[3] == MARK;
			}
		}
	}
	stop = 1;
	pthread_join(th, NULL);
	CHECK(n == 20, "%d samples in 5 s", n);
	/* a tick may land in the kernel (user registers at entry) or in the
	 * loop's first instructions: most, not all */
	CHECK(inframe * 10 >= n * 8, "rsp in spin()'s frame in %d of %d", inframe, n);
	CHECK(intext * 10 >= n * 8, "rip in spin() in %d of %d", intext, n);
	CHECK(marked * 10 >= n * 8, "marker in the stack copy in %d of %d", marked, n);
	CHECK(c.records >= (uint64_t)n && c.opened == 1);
	perf_proc_close(p);
	close(ep);
	return check_summary("t_sampler_perf");
}
