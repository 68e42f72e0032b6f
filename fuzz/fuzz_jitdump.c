/* fuzz/fuzz_jitdump.c: libFuzzer target for the jitdump reader
 * (src/jitdump.h). Byte 0 picks how the rest, a jitdump file, is fed:
 * whole (0), or as a file that grows (a prefix of (byte 0 * length / 256)
 * bytes first, then the whole), as the target writes it. The regions made
 * must be sorted, disjoint and non-empty, their names NUL-terminated and
 * at most CODE_NAME_MAX bytes with no control byte, every lookup must
 * give the region that holds the address, and the offset read must
 * never pass the file's length. Seeds: fuzz/seeds/fuzz_jitdump (a file
 * of loads, a move, skipped kinds and CLOSE; one torn; one with a record
 * of 4 GiB). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "jitdump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned mode = data[0];
	data++;
	size--;
	struct jitdump *jd = jitdump_new();
	if (!jd)
		return 0;
	if (mode) {
		size_t part = (size_t)((uint64_t)size * mode / 256);
		jitdump_feed(jd, data, part);
		if (jitdump_offset(jd) > part)
			abort();
	}
	jitdump_feed(jd, data, size);
	if (jitdump_offset(jd) > size)
		abort();
	const struct code_table *t = jitdump_table(jd);
	if (t) {
		for (size_t i = 0; i < t->n; i++) {
			const struct code_region *e = &t->e[i];
			if (e->end <= e->start || (i > 0 && t->e[i - 1].end > e->start))
				abort();
			size_t len = strlen(e->name);
			if (len == 0 || len > CODE_NAME_MAX)
				abort();
			for (size_t k = 0; k < len; k++)
				if ((unsigned char)e->name[k] < 0x20 || e->name[k] == 0x7f)
					abort();
			if (code_table_find(t, e->start) != e || code_table_find(t, e->end - 1) != e)
				abort();
		}
	}
	jitdump_stats(jd);
	jitdump_free(jd);
	return 0;
}
