/* tests/t_mem_cache.c: unit tests for the block cache of proc_mem.h
 * (struct mem_cache) over a synthetic image, with a reader in between
 * that counts the reads reaching the image. */
#include <stdio.h>
#include <string.h>
#include "err.h"
#include "proc_mem.h"
#include "check.h"

struct counting {
	struct mem base;
	struct mem *under;
	int calls;
};

static ssize_t counting_read(struct mem *m, uint64_t addr, void *buf, size_t len)
{
	struct counting *c = (struct counting *)m;
	c->calls++;
	return c->under->read(c->under, addr, buf, len);
}

static uint8_t img[3 * 4096 + 100];

/* Pages: each read once; a straddling read uses two; the oldest page goes
 * when all are held; a short last page is kept as far as it is mapped;
 * large reads and unmapped addresses go through; reset empties. */
static void test_pages(void)
{
	struct mem_region r = { 0x10000, img, sizeof img };
	struct mem_image im;
	mem_image_init(&im, &r, 1);
	struct counting cnt = { { counting_read, 0, 0 }, &im.base, 0 };
	struct mem_cache mc;
	uint8_t b[9000];
	mem_cache_init(&mc, &cnt.base, 4096, 2);
	CHECK(mem_read(&mc.base, 0x10010, b, 8) == 0 && !memcmp(b, img + 0x10, 8));
	CHECK(mem_read(&mc.base, 0x10100, b, 100) == 0 && !memcmp(b, img + 0x100, 100));
	CHECK(cnt.calls == 1);
	CHECK(mem_read(&mc.base, 0x10ff0, b, 32) == 0 && !memcmp(b, img + 0xff0, 32));
	CHECK(cnt.calls == 2);
	CHECK(mem_read(&mc.base, 0x12000, b, 16) == 0 && !memcmp(b, img + 0x2000, 16));
	CHECK(cnt.calls == 3); /* replaced page 0x10000 */
	CHECK(mem_read(&mc.base, 0x11000, b, 16) == 0 && !memcmp(b, img + 0x1000, 16));
	CHECK(cnt.calls == 3);
	CHECK(mem_read(&mc.base, 0x10000, b, 16) == 0 && !memcmp(b, img, 16));
	CHECK(cnt.calls == 4);
	/* held: 0x12000 (oldest), 0x10000; a miss replaces 0x12000 */
	CHECK(mem_read(&mc.base, 0x11000, b, 16) == 0 && !memcmp(b, img + 0x1000, 16));
	CHECK(mem_read(&mc.base, 0x10000, b, 16) == 0 && !memcmp(b, img, 16));
	CHECK(cnt.calls == 5);
	/* 100 bytes of the last page are mapped */
	CHECK(mem_read(&mc.base, 0x13010, b, 16) == 0 && !memcmp(b, img + 0x3010, 16));
	CHECK(mc.base.read(&mc.base, 0x13060, b, 16) == 4 && !memcmp(b, img + 0x3060, 4));
	CHECK(mem_read(&mc.base, 0x13060, b, 16) == -LS_E_FAULT);
	CHECK(mem_read(&mc.base, 0x20000, b, 8) < 0);
	int before = cnt.calls;
	CHECK(mem_read(&mc.base, 0x10000, b, 9000) == 0 && !memcmp(b, img, 9000));
	CHECK(cnt.calls == before + 1);
	mem_cache_reset(&mc, &cnt.base);
	before = cnt.calls;
	CHECK(mem_read(&mc.base, 0x13010, b, 8) == 0 && cnt.calls == before + 1);
	mem_cache_free(&mc);
	CHECK(mc.buf == NULL && mc.n == 0);
}

/* All blocks held: a miss whose short read does not cover the request
 * overwrote the oldest block; that block must not still claim its old
 * address. */
static void test_failed_miss(void)
{
	struct mem_region r = { 0x10000, img, sizeof img };
	struct mem_image im;
	mem_image_init(&im, &r, 1);
	struct mem_cache mc;
	uint8_t b[16];
	mem_cache_init(&mc, &im.base, 4096, 2);
	CHECK(mem_read(&mc.base, 0x10000, b, 16) == 0);
	CHECK(mem_read(&mc.base, 0x11000, b, 16) == 0);
	CHECK(mem_read(&mc.base, 0x13060, b, 16) == -LS_E_FAULT);
	CHECK(mem_read(&mc.base, 0x10010, b, 16) == 0 && !memcmp(b, img + 0x10, 16));
	CHECK(mem_read(&mc.base, 0x11000, b, 16) == 0 && !memcmp(b, img + 0x1000, 16));
	mem_cache_free(&mc);
}

/* A 64 KiB block whose aligned start lies below the mapping: the block
 * read fails, the page holding the address is cached instead. */
static void test_block_below_mapping(void)
{
	struct mem_region r = { 0x31000, img, sizeof img };
	struct mem_image im;
	mem_image_init(&im, &r, 1);
	struct counting cnt = { { counting_read, 0, 0 }, &im.base, 0 };
	struct mem_cache mc;
	uint8_t b[16];
	mem_cache_init(&mc, &cnt.base, 64 << 10, 1);
	CHECK(mc.block_bytes == 64 << 10 && mc.nblocks == 1);
	CHECK(mem_read(&mc.base, 0x31010, b, 16) == 0 && !memcmp(b, img + 0x10, 16));
	CHECK(mem_read(&mc.base, 0x31020, b, 16) == 0 && !memcmp(b, img + 0x20, 16));
	CHECK(cnt.calls == 2); /* the failed block, then the page */
	mem_cache_free(&mc);
}

int main(void)
{
	for (size_t i = 0; i < sizeof img; i++)
		img[i] = (uint8_t)(i * 7 + (i >> 8));
	test_pages();
	test_failed_miss();
	test_block_below_mapping();
	return check_summary("t_mem_cache");
}
