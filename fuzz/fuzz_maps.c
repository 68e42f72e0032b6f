/* fuzz/fuzz_maps.c: libFuzzer target for /proc/PID/maps parsing and
 * lookups: any bytes must parse or be refused, never crash or over-read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "proc_maps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proc_maps m = { 0 };
	if (proc_maps_parse((const char *)data, size, &m) == 0) {
		for (int i = 0; i < m.n; i++) {
			const struct proc_map *x = proc_maps_find(&m, m.m[i].start);
			if (!x || x->start > m.m[i].start || x->end <= m.m[i].start)
				abort();
			proc_maps_find(&m, m.m[i].end);
			proc_map_is_file(&m.m[i]);
		}
		proc_maps_module_base(&m, m.m[0].path);
	}
	proc_maps_free(&m);
	return 0;
}
