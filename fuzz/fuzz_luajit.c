/* fuzz/fuzz_luajit.c: libFuzzer target for the LuaJIT 2.1 walker over
 * synthetic memory images (lj_walk_image: global_State validation,
 * registry/_LOADED name learning, one thread's frames with names and
 * lines; the search for resumers from its cframes). Corrupted pointers,
 * link cycles, huge sizes and wrong tags
 * must give an error or frames, never a crash, a hang or a read outside
 * the image.
 *
 * Input: byte 0 picks the layout row (mod lj_nlayouts); byte 1: bit 0
 * walks g's cur_L instead of the main thread, bit 1 skips the
 * global_State (walks the main thread alone). The rest: the regions of
 * tests/img_luajit.h (short or absent when the input is); the 16 bytes
 * around the dispatch table (g + G2DISP - 8) read as zeros.
 *
 * Built with -DFUZZ_LUAJIT_SEEDS instead of libFuzzer, main() writes one
 * valid image per layout row into the directory given (the seeds in
 * fuzz/seeds/fuzz_luajit/): lj_img_build()'s main chunk calling Lua
 * function f calling the builtin string.format, with upvalue and local
 * names (tests/img_luajit.c, which tests/t_vm_luajit.c walks too). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frame.h"
#include "proc_mem.h"
#include "vm_luajit.h"
#include "img_luajit.h"

#define NREG LJ_IMG_NREG
#define MAXF 64
static const uint64_t *const A = lj_img_addr;

#ifndef FUZZ_LUAJIT_SEEDS

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	const struct lj_layout *lay = &lj_layouts[data[0] % lj_nlayouts];
	struct mem_region r[NREG + 1];
	int n = lj_img_regions(lay, data + 2, size - 2, r);
	struct mem_image im;
	mem_image_init(&im, r, n);
	uint64_t L = A[0], g = A[0] + lay->sizeof_L;
	if (data[1] & 1)
		L = 0;
	if (data[1] & 2)
		g = 0, L = A[0];
	struct frame fr[MAXF];
	int k = lj_walk_image(lay, &im.base, g, L, fr, MAXF);
	if (k > MAXF)
		abort();
	/* the threads below the main lua_State's cframes (capture's search
	 * for resumers), main thread unknown */
	uint64_t res[4];
	int nr = lj_resumers_image(lay, &im.base, A[0], 0, res, 4);
	if (nr > 4)
		abort();
	size_t sum = 0;
	for (int i = 0; i < k; i++) {
		if (!fr[i].name)
			abort();
		sum += strlen(fr[i].name);
		if (fr[i].file)
			sum += strlen(fr[i].file);
	}
	return sum == (size_t)-1;
}

#else /* seed writer */

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	static struct lj_img im;
	for (int i = 0; i < lj_nlayouts; i++) {
		const struct lj_layout *l = &lj_layouts[i];
		lj_img_build(&im, l);
		char path[4096];
		snprintf(path, sizeof path, "%s/row%02d", argv[1], i);
		FILE *f = fopen(path, "wb");
		uint8_t hdr[2] = { (uint8_t)i, 0 };
		if (!f || fwrite(hdr, 1, 2, f) != 2 || fwrite(im.buf, 1, sizeof im.buf, f) != sizeof im.buf ||
		    fclose(f) != 0) {
			perror(path);
			return 1;
		}
		struct mem_region r[NREG + 1];
		int n = lj_img_regions(l, im.buf, sizeof im.buf, r);
		struct mem_image im;
		mem_image_init(&im, r, n);
		struct frame fr[MAXF];
		int k = lj_walk_image(l, &im.base, A[0] + l->sizeof_L, A[0], fr, MAXF);
		printf("%s: %d frames:", l->name, k);
		for (int j = 0; j < k; j++)
			printf(" [%s %s:%d]", fr[j].name, fr[j].file ? fr[j].file : "", fr[j].line);
		printf("\n");
	}
	return 0;
}
#endif
