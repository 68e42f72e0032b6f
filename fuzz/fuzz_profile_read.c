/* fuzz_profile_read.c: libFuzzer target for src/profile_read.c, the
 * reader of `luaspy report` (docs/report.md §3): the first byte picks
 * pprof (even) or folded (odd), the rest is the file. A profile read is
 * then merged, filtered and flattened as report does. Seeds: fuzz/seeds/
 * profile_read (a pprof and a folded file luaspy wrote). */
#include <regex.h>
#include <stdint.h>
#include <stdlib.h>
#include "profile.h"
#include "profile_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static regex_t focus;
	static int init;
	if (!init) {
		regcomp(&focus, "a|\\[", REG_EXTENDED | REG_NOSUB);
		init = 1;
	}
	if (size < 1)
		return 0;
	struct profile *p = profile_new(), *q = profile_new();
	char why[300];
	if (p && q &&
	    profile_read_mem(p, data + 1, size - 1, data[0] & 1 ? PREAD_FOLDED : PREAD_PPROF, why,
			     sizeof why) == 0) {
		struct pread_filter f = { .focus = &focus, .function = 1, .flatten = data[0] & 2 };
		profile_add_filtered(q, p, &f);
	}
	profile_free(p);
	profile_free(q);
	return 0;
}
