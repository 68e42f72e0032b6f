/* bench_out: time the profile aggregate and the writers on a large
 * synthetic profile (tests/out_fixture.h fixture_big).
 *   usage: bench_out [NSTACKS [DEPTH [DIR]]]   (100000, 50, /tmp)
 * Prints, per step: wall time, peak RSS so far (getrusage) and output
 * size. Numbers only; nothing is asserted. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "out.h"
#include "out_fixture.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long peak_rss_kib(void)
{
	struct rusage ru;
	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

int main(int argc, char **argv)
{
	int nstacks = argc > 1 ? atoi(argv[1]) : 100000;
	int depth = argc > 2 ? atoi(argv[2]) : 50;
	const char *dir = argc > 3 ? argv[3] : "/tmp";
	if (nstacks <= 0 || depth <= 0 || depth > STACK_MAX_FRAMES) {
		fprintf(stderr, "usage: bench_out [NSTACKS [DEPTH [DIR]]]\n");
		return 2;
	}
	struct profile *p = profile_new();
	if (!p)
		return 1;
	double t0 = now_s();
	if (fixture_big(p, nstacks, depth) < 0) {
		fprintf(stderr, "bench_out: out of memory building the profile\n");
		return 1;
	}
	printf("%-11s %8.3f s  peak RSS %7ld KiB  %zu stacks x %d, %zu frames, %llu samples\n",
	       "aggregate", now_s() - t0, peak_rss_kib(), profile_nstacks(p), depth,
	       profile_nframes(p), (unsigned long long)profile_total(p));

	static const char *const ext[OUT_NFORMATS] = {
		[OUT_FLAMEGRAPH] = "svg", [OUT_FOLDED] = "folded",
		[OUT_SPEEDSCOPE] = "json", [OUT_PPROF] = "pb.gz",
	};
	int rc = 0;
	for (int fmt = 0; fmt < OUT_NFORMATS; fmt++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/bench_out.%d.%s", dir, (int)getpid(), ext[fmt]);
		double t = now_s();
		int r = out_write_file(p, fmt, path);
		double dt = now_s() - t;
		struct stat st;
		if (r < 0 || stat(path, &st) < 0) {
			fprintf(stderr, "bench_out: %s: %s\n", path, strerror(r < 0 ? -r : errno));
			rc = 1;
			continue;
		}
		printf("%-11s %8.3f s  peak RSS %7ld KiB  %10lld bytes\n", out_format_name(fmt),
		       dt, peak_rss_kib(), (long long)st.st_size);
		unlink(path);
	}
	profile_free(p);
	return rc;
}
