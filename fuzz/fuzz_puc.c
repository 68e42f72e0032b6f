/* fuzz/fuzz_puc.c: libFuzzer target for the PUC Lua 5.1-5.4 walker over
 * synthetic memory images (puc_walk_image): corrupted pointers, CallInfo
 * cycles, huge sizes and wrong tags must give an error or frames, never
 * a crash, a hang or a read outside the image.
 *
 * Input: byte 0 picks the layout row (mod puc_nlayouts); the rest is cut
 * into NREG regions of REGLEN bytes mapped at A[i] (the last ones short
 * or absent when the input is). Region roles, as the seeds lay them out:
 *   0 lua_State (5.2+: base_ci inside)  1 Lua stack   2 CallInfos
 *   3 closures (Lua at 0, C at 128)     4 Proto       5 code, lines, upvalue names
 *   6 strings (64 bytes apart)          7 constants
 * The walk starts at the lua_State at A[0].
 *
 * Built with -DFUZZ_PUC_SEEDS instead of libFuzzer, main() writes one
 * valid image per layout row into the directory given (the seeds in
 * fuzz/seeds/fuzz_puc/: a Lua function at pc 1 calling a C function),
 * and for 5.2+ rows one with a third frame whose Proto shares the
 * walker's Proto cache slot with its callee's ("-slot"), both built by
 * tests/img_puc.c as tests/t_vm_puc.c uses them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "frame.h"
#include "img_puc.h"
#include "proc_mem.h"
#include "vm_puc.h"

#define NREG IMG_PUC_NREG
#define REGLEN IMG_PUC_REGLEN
#define A img_puc_addr

#ifndef FUZZ_PUC_SEEDS

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const struct puc_layout *lay = &puc_layouts[data[0] % puc_nlayouts];
	struct mem_region r[NREG];
	int n = 0;
	for (size_t off = 1; off < size && n < NREG; off += REGLEN, n++) {
		size_t len = size - off < REGLEN ? size - off : REGLEN;
		r[n] = (struct mem_region){ A[n], data + off, len };
	}
	struct mem_image im;
	mem_image_init(&im, r, n);
	struct stack st = { 0 };
	int rc = puc_walk_image(lay, &im.base, A[0], &st);
	if (rc > 0 || st.n < 0 || st.n > STACK_MAX_FRAMES)
		abort();
	/* every frame's strings must be valid (ASan checks the reads) */
	size_t sum = 0;
	for (int i = 0; i < st.n; i++) {
		if (!st.f[i].name)
			abort();
		sum += strlen(st.f[i].name);
		if (st.f[i].file)
			sum += strlen(st.f[i].file);
	}
	stack_free(&st);
	return sum == (size_t)-1;
}

#else /* seed writer */

static uint8_t img[NREG][REGLEN];

/* Write IMG as seed NAME of row I into DIR and print what it walks to. */
static int write_seed(const char *dir, int i, const char *name)
{
	const struct puc_layout *l = &puc_layouts[i];
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	uint8_t row = (uint8_t)i;
	if (!f || fwrite(&row, 1, 1, f) != 1 || fwrite(img, 1, sizeof img, f) != sizeof img ||
	    fclose(f) != 0) {
		perror(path);
		return -1;
	}
	struct mem_region r[NREG];
	for (int k = 0; k < NREG; k++)
		r[k] = (struct mem_region){ A[k], img[k], REGLEN };
	struct mem_image im;
	mem_image_init(&im, r, NREG);
	struct stack st = { 0 };
	int rc = puc_walk_image(l, &im.base, A[0], &st);
	printf("%s: rc %d, %d frames:", name, rc, st.n);
	for (int k = 0; k < st.n; k++)
		printf(" [%s %s:%d]", st.f[k].name, st.f[k].file ? st.f[k].file : "", st.f[k].line);
	printf("\n");
	stack_free(&st);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < puc_nlayouts; i++) {
		const struct puc_layout *l = &puc_layouts[i];
		char name[256];
		/* two frames, named */
		img_puc_build(l, img);
		snprintf(name, sizeof name, "row%02d-%s", i, l->name);
		if (write_seed(argv[1], i, name) < 0)
			return 1;
		/* three, two Protos in one cache slot (5.2+) */
		if (img_puc_build_shared_slot(l, img) < 0)
			continue;
		snprintf(name, sizeof name, "row%02d-%s-slot", i, l->name);
		if (write_seed(argv[1], i, name) < 0)
			return 1;
	}
	return 0;
}
#endif
