/* bench_writer: one writer in its own process, so that its peak memory
 * is its own (bench_out runs all writers in one process, where peak RSS
 * only grows). Builds the same synthetic profile as bench_out
 * (tests/out_fixture.h fixture_big), then writes FORMAT once.
 *   usage: bench_writer FORMAT [NSTACKS [DEPTH [DIR]]]   (-, 100000, 50, /tmp)
 * Prints "FORMAT write S s  base RSS K KiB  peak RSS K KiB  N bytes": base is
 * the RSS after building the profile, peak the process's peak after writing. */
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
	int fmt = argc > 1 ? out_format_parse(argv[1]) : -1;
	int nstacks = argc > 2 ? atoi(argv[2]) : 100000;
	int depth = argc > 3 ? atoi(argv[3]) : 50;
	const char *dir = argc > 4 ? argv[4] : "/tmp";
	if (fmt < 0 || nstacks <= 0 || depth <= 0 || depth > STACK_MAX_FRAMES) {
		fprintf(stderr, "usage: bench_writer flamegraph|folded|speedscope|pprof [NSTACKS [DEPTH [DIR]]]\n");
		return 2;
	}
	struct profile *p = profile_new();
	if (!p || fixture_big(p, nstacks, depth) < 0) {
		fprintf(stderr, "bench_writer: out of memory building the profile\n");
		return 1;
	}
	long base = peak_rss_kib();
	char path[4096];
	snprintf(path, sizeof path, "%s/bench_writer.%d.out", dir, (int)getpid());
	double t = now_s();
	int r = out_write_file(p, fmt, path);
	double dt = now_s() - t;
	struct stat st;
	if (r < 0 || stat(path, &st) < 0) {
		fprintf(stderr, "bench_writer: %s: %s\n", path, strerror(r < 0 ? -r : errno));
		unlink(path);
		return 1;
	}
	printf("%s write %.3f s  base RSS %ld KiB  peak RSS %ld KiB  %lld bytes\n",
	       out_format_name(fmt), dt, base, peak_rss_kib(), (long long)st.st_size);
	unlink(path);
	profile_free(p);
	return 0;
}
