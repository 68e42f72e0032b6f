/* fuzz_core.c: libFuzzer target for the core file reader (src/proc_core.c,
 * docs/core-files.md): the input is a whole core file, written to a memfd
 * and opened by path; then the reader is asked for each thread's stack
 * top, each mapping's first bytes and a read across two mappings. A core
 * is untrusted input: nothing may crash, hang or leak. Paths the core
 * names are opened read-only (non-blocking) and only read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include "proc_core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("fuzz_core", 0);
		if (fd < 0)
			abort();
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	struct proc_core *c;
	char why[256];
	if (proc_core_open(path, NULL, &c, why, sizeof why) < 0)
		return 0;
	uint8_t buf[512];
	for (int i = 0; i < c->nth && i < 8; i++)
		c->base.read(&c->base, c->th[i].regs.rsp, buf, sizeof buf);
	for (int i = 0; i < c->maps.n && i < 32; i++) {
		c->base.read(&c->base, c->maps.m[i].start, buf, 64);
		if (c->maps.m[i].end > 256)
			c->base.read(&c->base, c->maps.m[i].end - 256, buf, sizeof buf);
	}
	proc_core_close(c);
	return 0;
}
