/* out_writer: write a synthetic profile in one format, for the shell
 * tests (tests/out-*.test).
 *   usage: out_writer hostile|demo|empty|big|random FORMAT PATH
 * FORMAT is a name out_format_parse knows, or "auto" (from PATH).
 * Exits 0 on success, 1 when writing fails (errno text on stderr), 2 on
 * usage errors, 99 when the fixture cannot be built. */
#include <stdio.h>
#include <string.h>
#include "out.h"
#include "out_fixture.h"

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: out_writer hostile|demo|empty|big|random FORMAT PATH\n");
		return 2;
	}
	int fmt = strcmp(argv[2], "auto") == 0 ? out_format_from_path(argv[3])
					       : out_format_parse(argv[2]);
	if (fmt < 0) {
		fprintf(stderr, "out_writer: unknown format '%s'\n", argv[2]);
		return 2;
	}
	struct profile *p = profile_new();
	if (!p)
		return 99;
	int r = 0;
	if (strcmp(argv[1], "hostile") == 0)
		r = fixture_hostile(p);
	else if (strcmp(argv[1], "demo") == 0)
		r = fixture_demo(p);
	else if (strcmp(argv[1], "big") == 0)
		r = fixture_big(p, 20000, 40);
	else if (strcmp(argv[1], "random") == 0)
		r = fixture_random(p, 12345);
	else if (strcmp(argv[1], "empty") == 0)
		profile_meta(p)->title = "lua empty.lua";
	else {
		fprintf(stderr, "out_writer: unknown profile '%s'\n", argv[1]);
		return 2;
	}
	if (r) {
		fprintf(stderr, "out_writer: cannot build profile\n");
		return 99;
	}
	r = out_write_file(p, fmt, argv[3]);
	profile_free(p);
	if (r < 0) {
		fprintf(stderr, "out_writer: %s: %s\n", argv[3], strerror(-r));
		return 1;
	}
	return 0;
}
