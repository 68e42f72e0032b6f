/* t_fiber_tarantool.c: src/fiber_tarantool.c over synthetic cords (a
 * mem_image laid out as the Tarantool 2.6 row says): fibers, names,
 * states, and the bounds on untrusted lists (a cycle, a broken link, a
 * sched that does not check out). With --rows: prints the layout rows for
 * tests/dump-fibers-layout.test, which checks them against the DWARF of
 * Debian's tarantool. */
#include <stdint.h>
#include <string.h>
#include "check.h"
#include "err.h"
#include "fiber_tarantool.h"

#define BASE 0x10000ull
#define CORD BASE
#define SCHED (CORD + 1016)
#define FA (BASE + 0x1000)
#define FB (BASE + 0x2000)
#define LONGNAME (BASE + 0x3000)
static uint8_t img[0x4000];

static void put64(uint64_t addr, uint64_t v) { memcpy(img + (addr - BASE), &v, 8); }
static void put32(uint64_t addr, uint32_t v) { memcpy(img + (addr - BASE), &v, 4); }

/* alive: head <-> A <-> B <-> head; A running, B dead with a long name */
static void build(void)
{
	memset(img, 0, sizeof img);
	put32(SCHED + 100, 1);
	put64(SCHED + 328, SCHED + 336);
	memcpy(img + (SCHED + 336 - BASE), "sched", 6);
	put64(CORD + 0, FA);
	uint64_t head = CORD + 112, la = FA + 144, lb = FB + 144;
	put64(head, lb); put64(head + 8, la);
	put64(la, head); put64(la + 8, lb);
	put64(lb, la); put64(lb + 8, head);
	put32(FA + 100, 101);
	put64(FA + 288, 0x40001000);
	put64(FA + 328, FA + 336);
	memcpy(img + (FA + 336 - BASE), "alpha", 6);
	put32(FB + 100, 102);
	put32(FB + 104, 1u << 4);
	put64(FB + 328, LONGNAME);
	memset(img + (LONGNAME - BASE), 'x', 100);
	img[LONGNAME - BASE + 1] = '"';
	img[LONGNAME - BASE + 2] = 7;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--rows")) {
		fiber_tarantool_rows(stdout);
		return ferror(stdout) ? 1 : 0;
	}
	struct mem_region r = { BASE, img, sizeof img };
	struct mem_image im;
	mem_image_init(&im, &r, 1);
	struct fiber_list fl;
	char why[256];

	build();
	int n = fiber_cord_list(&im.base, CORD, &fl, why, sizeof why);
	CHECK(n == 2, "%d", n);
	CHECK(!fl.cut && !fl.running);
	if (n == 2) {
		CHECK(fl.f[0].fid == 101 && !strcmp(fl.f[0].name, "alpha") && !strcmp(fl.f[0].state, "running"));
		CHECK(fl.f[0].L == 0x40001000 && fiber_list_find(&fl, 0x40001000) == &fl.f[0]);
		CHECK(fl.f[1].fid == 102 && !strcmp(fl.f[1].state, "dead") && fl.f[1].L == 0);
		CHECK(strlen(fl.f[1].name) == FIBER_NAME_BYTES + 3 && !strncmp(fl.f[1].name, "x??x", 4) &&
		      !strcmp(fl.f[1].name + FIBER_NAME_BYTES, "..."), "%s", fl.f[1].name);
	}
	CHECK(fiber_list_find(&fl, 0) == NULL && fiber_list_find(&fl, 0x1234) == NULL);
	fiber_list_free(&fl);

	/* the thread in the event loop: sched runs, no fiber does */
	put64(CORD + 0, SCHED);
	n = fiber_cord_list(&im.base, CORD, &fl, why, sizeof why);
	CHECK(n == 2 && fl.running && !strcmp(fl.running, "sched"));
	CHECK(n == 2 && !strcmp(fl.f[0].state, "suspended"));
	fiber_list_free(&fl);

	/* a cycle that never comes back to the head: cut at FIBER_MAX */
	build();
	put64(FB + 144 + 8, FA + 144);
	n = fiber_cord_list(&im.base, CORD, &fl, why, sizeof why);
	CHECK(n == FIBER_MAX && fl.cut && strstr(fl.cut, "more than 4096"), "%d", n);
	fiber_list_free(&fl);

	/* a link into unmapped memory: the fibers before it, and the cut said */
	build();
	put64(FA + 144 + 8, 0x99999000);
	n = fiber_cord_list(&im.base, CORD, &fl, why, sizeof why);
	CHECK(n == 1 && fl.cut && strstr(fl.cut, "broken link"), "%d", n);
	fiber_list_free(&fl);

	/* a misaligned link: cut, not read */
	build();
	put64(FA + 144 + 8, FB + 144 + 3);
	n = fiber_cord_list(&im.base, CORD, &fl, why, sizeof why);
	CHECK(n == 1 && fl.cut, "%d", n);
	fiber_list_free(&fl);

	/* no sched where the row keeps it: not this layout */
	build();
	put32(SCHED + 100, 2);
	n = fiber_cord_list(&im.base, CORD, &fl, why, sizeof why);
	CHECK(n == -LS_E_UNSUPPORTED && strstr(why, "no sched fiber"), "%d %s", n, why);
	fiber_list_free(&fl);
	build();
	memcpy(img + (SCHED + 336 - BASE), "sched!", 7);
	n = fiber_cord_list(&im.base, CORD, &fl, why, sizeof why);
	CHECK(n == -LS_E_UNSUPPORTED, "%d", n);
	fiber_list_free(&fl);
	/* a cord outside the image */
	n = fiber_cord_list(&im.base, 0x99999000, &fl, why, sizeof why);
	CHECK(n == -LS_E_UNSUPPORTED && strstr(why, "unreadable"), "%d %s", n, why);
	fiber_list_free(&fl);
	return check_summary("t_fiber_tarantool");
}
