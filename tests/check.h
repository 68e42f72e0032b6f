/* tests/check.h: the one CHECK macro and summary of luaspy's C unit tests.
 *
 *   CHECK(cond);                      prints file:line and the condition
 *   CHECK(cond, "fmt", args...);      ... and a formatted detail
 *   return check_summary("t_proc");   prints "t_proc: N checks, all passed"
 *                                     or "t_proc: K of N checks FAILED";
 *                                     returns the exit status (0 or 1)
 *
 * A test with no check at all fails too: it tested nothing. Failures go to
 * stderr, one line each; the summary to stdout. Header-only: each test
 * program includes it once. */
#ifndef LUASPY_TESTS_CHECK_H
#define LUASPY_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static unsigned check_run, check_failed;

/* Print the optional detail of a failed CHECK (a format and its args). */
static inline void check_detail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
static inline void check_detail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

#define CHECK(cond, ...) do {                                              \
	check_run++;                                                       \
	if (!(cond)) {                                                     \
		check_failed++;                                            \
		fprintf(stderr, "FAIL %s:%d: %s", __FILE__, __LINE__, #cond); \
		__VA_OPT__(fputs(": ", stderr); check_detail(__VA_ARGS__);) \
		fputc('\n', stderr);                                       \
	}                                                                  \
} while (0)

/* Print the summary line for test program NAME; return its exit status:
 * 0 when every check passed and at least one ran, else 1. */
static inline int check_summary(const char *name)
{
	if (check_run == 0) {
		printf("%s: no checks ran\n", name);
		return 1;
	}
	if (check_failed) {
		printf("%s: %u of %u checks FAILED\n", name, check_failed, check_run);
		return 1;
	}
	printf("%s: %u checks, all passed\n", name, check_run);
	return 0;
}

#endif
