/* fuzz/fuzz_names_luajit.c: libFuzzer target for the LuaJIT 2.1 call-site
 * name finder (vm_luajit.c: lj_callee_name, i.e. callee_name, slotname,
 * varname, uvname, kgc_str over rd_proto), driven directly rather than
 * through a walk: any caller function, return pc, bytecode, constants,
 * upvalue and local name info (strings without NUL, garbage lengths and
 * pointers) must give a bounded name or none; never a crash, a hang or a
 * read outside the image.
 *
 * Input: byte 0 picks the layout row (mod lj_nlayouts: GC64 and 32-bit
 * refs); byte 1: bits 0-1 the caller, function 0-2 of the image
 * (lj_img_addr[2] + 128 * i) or, 3, the address in bytes 4-11; bit 2:
 * the pc is bytes 4-11 as they are, else the caller's bytecode start
 * (its pc field as read from the image) + 4 * bytes 2-3 (int16,
 * little-endian). Bytes 12 on: the regions of tests/img_luajit.h (short
 * or absent when the input is). Named at that pc, then at each of the
 * caller's first 8 return pcs (cached names included).
 *
 * Built with -DFUZZ_NAMES_LUAJIT_SEEDS instead of libFuzzer, main()
 * writes seeds into the directory given: the image of lj_img_build()
 * with f's call site naming a global (every layout row) and, on rows 0
 * (GC64) and 9 (32-bit refs), a field, an upvalue, a local, a for-loop
 * variable, a move chain, an iterator and two metamethods (f's bytecode
 * and debug info patched); it prints the name each gives. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "img_luajit.h"
#include "proc_mem.h"
#include "vm_luajit.h"
#include "vm_luajit_obj.h"

#define NREG LJ_IMG_NREG
#define HDR 12
#define NAME_PCS 8    /* return pcs named after the one given */
static const uint64_t *const A = lj_img_addr;

static struct vm vm;   /* caches emptied each run: a run is one image */

static void check(const char *name)
{
	if (name && strlen(name) > 255)   /* callee_name's buffer: 256 bytes */
		abort();
}

/* Name the call site the header of D picks (and the caller's first
 * NAME_PCS return pcs) in the image after it; VERBOSE prints the first. */
static void run(const uint8_t *data, size_t size, int verbose)
{
	const struct lj_layout *lay = &lj_layouts[data[0] % lj_nlayouts];
	memset(&vm.cache.pt, 0, sizeof vm.cache.pt);
	memset(&vm.cache.nc, 0, sizeof vm.cache.nc);
	vm.lay = lay;
	vm.ol = (lay->flags & LJL_GC64) ? &lj_obj_gc64 : &lj_obj_32;
	struct mem_region r[NREG + 1];
	int n = lj_img_regions(lay, data + HDR, size - HDR, r);
	struct mem_image im;
	mem_image_init(&im, r, n);
	uint64_t raw;
	memcpy(&raw, data + 4, 8);
	int sel = data[1] & 3;
	uint64_t fn = sel == 3 ? raw : A[2] + 128u * (unsigned)sel, bc = 0;
	if (lj_read_ref(vm.ol, &im.base, fn + vm.ol->fn_pc, &bc) < 0)
		bc = 0;
	int16_t idx = (int16_t)(uint16_t)(data[2] | data[3] << 8);
	uint64_t pc = (data[1] & 4) ? raw : bc + 4 * (uint64_t)(int64_t)idx;
	const char *name = lj_callee_name(&vm, &im.base, fn, pc);
	check(name);
	if (verbose)
		printf("%s\n", name ? name : "-");
	for (int i = 1; bc && i <= NAME_PCS; i++)
		check(lj_callee_name(&vm, &im.base, fn, bc + 4u * (unsigned)i));
}

#ifndef FUZZ_NAMES_LUAJIT_SEEDS

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < HDR)
		return 0;
	run(data, size, 0);
	return 0;
}

#else /* seed writer */

static uint32_t ins(int op, int a, int b, int c)
{
	return (uint32_t)op | (uint32_t)a << 8 | (uint32_t)c << 16 | (uint32_t)b << 24;
}
static uint32_t insd(int op, int a, int d)
{
	return (uint32_t)op | (uint32_t)a << 8 | (uint32_t)d << 16;
}

/* opcodes (lj_bc.h, 2.1) */
enum { FUNCF = 89, MOV = 18, ADDVV = 32, CAT = 38, GGET = 54, TGETS = 57, UGET = 45,
       CALL = 66, ITERC = 69, RET0 = 75 };

/* f's 4 instructions, the call site's return index (pc = bc + 4 * IDX),
 * and its local info (12 bytes, lj_img's layout: name, start, length) */
struct kind {
	const char *name;
	uint32_t code[4];
	int idx;
	uint8_t var[12];
};

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	/* the default locals: "x" in slot 0 for pcs [0, 1), then a (for index);
	 * none where the call is at pc 3 (the (for index) would name it) */
	const struct kind kinds[] = {
		{ "global", { FUNCF, insd(GGET, 0, 0), ins(CALL, 0, 1, 1), RET0 }, 3,
		  { 'x', 0, 0, 1, 1, 3, 1, 0 } },
		{ "field", { FUNCF, insd(GGET, 1, 0), ins(TGETS, 0, 1, 0), ins(CALL, 0, 1, 1) }, 4,
		  { 0 } },
		{ "upvalue", { FUNCF, insd(UGET, 0, 0), ins(CALL, 0, 1, 1), RET0 }, 3,
		  { 'x', 0, 0, 1, 1, 3, 1, 0 } },
		{ "local", { FUNCF, insd(GGET, 0, 0), ins(CALL, 0, 1, 1), RET0 }, 3,
		  { 'x', 'y', 0, 0, 4, 0 } },
		{ "forvar", { FUNCF, insd(GGET, 0, 0), ins(CALL, 0, 1, 1), RET0 }, 3,
		  { 4, 0, 4, 0 } },
		{ "move", { FUNCF, insd(GGET, 1, 0), ins(MOV, 0, 0, 0) | 1u << 16, ins(CALL, 0, 1, 1) },
		  4, { 0 } },
		{ "iterator", { FUNCF, insd(GGET, 0, 0), ins(ITERC, 3, 2, 1), RET0 }, 3,
		  { 'x', 0, 0, 1, 1, 3, 1, 0 } },
		{ "metamethod", { FUNCF, insd(GGET, 0, 0), ins(ADDVV, 0, 0, 0), RET0 }, 3,
		  { 'x', 0, 0, 1, 1, 3, 1, 0 } },
		{ "concat", { FUNCF, insd(GGET, 0, 0), ins(CAT, 0, 0, 1), RET0 }, 3,
		  { 'x', 0, 0, 1, 1, 3, 1, 0 } },
	};
	static struct lj_img im;
	static uint8_t seed[HDR + sizeof im.buf];
	for (int i = 0; i < lj_nlayouts; i++) {
		const struct lj_layout *l = &lj_layouts[i];
		/* every kind on rows 0 (GC64) and 9 (32-bit refs), the global
		 * on every row (4.4 KiB each) */
		for (size_t k = 0; k < (i == 0 || i == 9 ? sizeof kinds / sizeof kinds[0] : 1); k++) {
			const struct kind *kd = &kinds[k];
			lj_img_build(&im, l);
			uint64_t pt = A[3] + 256, bc = pt + im.ol->pt_size, li = bc + 16 + im.ol->gcref;
			memcpy(lj_img_at(&im, bc), kd->code, sizeof kd->code);
			memcpy(lj_img_at(&im, li + 8), kd->var, sizeof kd->var);
			memset(seed, 0, HDR);
			seed[0] = (uint8_t)i;
			seed[1] = 1;   /* f */
			seed[2] = (uint8_t)kd->idx;
			memcpy(seed + HDR, im.buf, sizeof im.buf);
			char path[4096];
			snprintf(path, sizeof path, "%s/row%02d-%s", argv[1], i, kd->name);
			FILE *f = fopen(path, "wb");
			if (!f || fwrite(seed, 1, sizeof seed, f) != sizeof seed || fclose(f) != 0) {
				perror(path);
				return 1;
			}
			printf("row%02d-%s: ", i, kd->name);
			run(seed, sizeof seed, 1);
		}
	}
	return 0;
}
#endif
