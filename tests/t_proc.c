/* tests/t_proc.c: unit tests for /proc/PID/maps parsing and the memory
 * readers (overlay over a synthetic image). */
#include <stdio.h>
#include <string.h>
#include "err.h"
#include "proc_maps.h"
#include "proc_mem.h"
#include "check.h"

static void test_maps(void)
{
	const char text[] =
		"55d0c0000000-55d0c0001000 r--p 00000000 fe:01 1234    /usr/bin/lua5.4\n"
		"55d0c0001000-55d0c0020000 r-xp 00001000 fe:01 1234    /usr/bin/lua5.4\n"
		"55d0c1000000-55d0c1100000 rw-p 00000000 00:00 0       [heap]\n"
		"7f0000000000-7f0000010000 r-xp 00000000 00:00 0 \n"
		"7f0000010000-7f0000011000 r-xp 00000000 fe:01 99      /tmp/my lib.so (deleted)\n"
		"garbage line\n"
		"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0       [stack]\n"
		"7ffd00100000-7ffd00102000 r-xp 00000000 00:00 0       [vdso]\n";
	struct proc_maps m = { 0 };
	CHECK(proc_maps_parse(text, sizeof text - 1, &m) == 0);
	CHECK(m.n == 7);
	const struct proc_map *x = proc_maps_find(&m, 0x55d0c0001234);
	CHECK(x && (x->perms & MAP_X) && !strcmp(x->name, "lua5.4") && x->offset == 0x1000);
	x = proc_maps_find(&m, 0x7f0000010800);
	CHECK(x && x->deleted && !strcmp(x->path, "/tmp/my lib.so") && !strcmp(x->name, "my lib.so"));
	x = proc_maps_find(&m, 0x7f0000000010);
	CHECK(x && x->path[0] == 0 && !proc_map_is_file(x));
	CHECK(proc_maps_find(&m, 0x1000) == NULL);
	CHECK(proc_maps_find(&m, 0x55d0c0020000) == NULL); /* end is exclusive */
	x = proc_maps_find(&m, 0x7ffd00100000);
	CHECK(x && !strcmp(x->path, "[vdso]"));
	CHECK(proc_maps_parse("", 0, &m) == -LS_E_GARBAGE);
	proc_maps_free(&m);
}

static void test_overlay(void)
{
	uint8_t a[64], b[32], copy[16];
	for (int i = 0; i < 64; i++)
		a[i] = (uint8_t)i;
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)(100 + i);
	memset(copy, 0xee, sizeof copy);
	struct mem_region r[2] = { { 0x1000, a, sizeof a }, { 0x2000, b, sizeof b } };
	struct mem_image im;
	mem_image_init(&im, r, 2);
	struct mem_overlay o;
	mem_overlay_init(&o, &im.base, 0x1010, copy, sizeof copy);
	uint8_t buf[64];
	/* a read spanning image, copy, image */
	CHECK(mem_read(&o.base, 0x1008, buf, 32) == 0);
	CHECK(buf[0] == 8 && buf[7] == 15 && buf[8] == 0xee && buf[23] == 0xee && buf[24] == 32);
	CHECK(mem_overlay_add(&o, 0x1018, copy, 4) == -1); /* overlaps */
	CHECK(mem_overlay_add(&o, 0x2000, copy, 4) == 0);
	uint32_t v;
	CHECK(mem_read_u32(&o.base, 0x2000, &v) == 0 && v == 0xeeeeeeee);
	CHECK(mem_read_u32(&o.base, 0x2004, &v) == 0 && v == (uint32_t)(104 | 105 << 8 | 106 << 16 | 107u << 24));
	/* unmapped and short reads */
	CHECK(mem_read(&o.base, 0x3000, buf, 4) == -LS_E_FAULT);
	CHECK(mem_read(&o.base, 0x1030, buf, 32) == -LS_E_FAULT);
	CHECK(mem_read(&o.base, 0, buf, 4) == -LS_E_FAULT);
	char s[8];
	CHECK(mem_read_str(&o.base, 0x2001, s, 4) == 4 && (uint8_t)s[0] == 0xee);
}

int main(void)
{
	test_maps();
	test_overlay();
	return check_summary("t_proc");
}
