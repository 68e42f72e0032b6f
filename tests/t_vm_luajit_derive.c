/* t_vm_luajit_derive.c: the code stage of the layout derivation
 * (src/vm_luajit_derive.c) on the bytes of the LuaJIT builds installed
 * on the machine: each binary's VM code is found by its FDE, read from
 * the file and scanned; the values must be those of docs/luajit.md §3.2
 * and docs/luajit.md §3.3 for that build (a binary not installed is
 * skipped, said). The state stage runs on the synthetic image of every
 * layout row (tests/img_luajit.c). */
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "err.h"
#include "img_luajit.h"
#include "vm_luajit_derive.h"

static int failures;
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c); failures++; } } while (0)

struct want {
	const char *path;
	int gc64;
	uint32_t g2disp;
	int32_t vmstate, cur_L, jit_base, gc_total, jtrace;
	int32_t tmptv;           /* one of the lea targets */
};

static const struct want wants[] = {
	/* Debian 12 luajit 2.1.0~beta3+git20220320 */
	{ "/usr/bin/luajit", 1, 3968, 184, 368, 376, 16, 1112, 232 },
	/* luajit2 2.1-20230119 (OR-64), unpacked by .ci/run */
	{ "/opt/luajit2/usr/bin/luajit", 1, 4008, 184, 368, 376, 16, 1120, 232 },
	/* tarantool 2.6.0 (T26) */
	{ "/usr/bin/tarantool", 0, 3144, 120, 280, 284, 64, 816, 176 },
	/* libtexluajit2 2022.20220321 (b3-32) */
	{ "/usr/lib/x86_64-linux-gnu/libtexluajit.so.2", 0, 3112, 88, 248, 252, 32, 784, 144 },
};

/* The VM code of PATH (file addresses [start, end) of its FDE) read
 * from the file into *CODE; its length, or 0. */
static size_t vm_code(const char *path, uint8_t **code)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return 0;
	Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
	struct lj_fde_find ff = { 0 };
	size_t len = 0;
	if (elf && lj_fde_cb(&ff, path, 0, 0, elf, 0) == 1) {
		size_t n;
		elf_getphdrnum(elf, &n);
		for (size_t i = 0; i < n; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    ff.start < ph.p_vaddr || ff.end > ph.p_vaddr + ph.p_filesz)
				continue;
			len = (size_t)(ff.end - ff.start);
			*code = malloc(len);
			if (!*code || pread(fd, *code, len, (off_t)(ph.p_offset + ff.start - ph.p_vaddr)) !=
					      (ssize_t)len) {
				free(*code);
				len = 0;
			}
			break;
		}
	}
	if (elf)
		elf_end(elf);
	close(fd);
	return len;
}

/* The state stage on the synthetic image of every layout row
 * (tests/img_luajit.c), with the code facts the row implies (tmptv as
 * the one lea target, beside a decoy): the derived layout must be the
 * row, field by field. */
static void test_state_rows(void)
{
	static struct lj_img im;
	for (int i = 0; i < lj_nlayouts; i++) {
		const struct lj_layout *l = &lj_layouts[i];
		int gc64 = !!(l->flags & LJL_GC64), gr = gc64 ? 8 : 4;
		int beta3 = !!(l->flags & (LJL_SNAP8 | LJL_TARANTOOL));
		lj_img_build(&im, l);
		/* lj_state.c: strempty.marked = LJ_GC_WHITE0 */
		const struct lj_objlayout *ol = gc64 ? &lj_obj_gc64 : &lj_obj_32;
		uint64_t L = lj_img_addr[0], g = L + l->sizeof_L;
		lj_img_at(&im, g + l->g_strempty)[ol->marked] = 1;
		struct mem_region r[LJ_IMG_NREG + 1];
		struct mem_image mi;
		mem_image_init(&mi, r, lj_img_regions(l, im.buf, sizeof im.buf, r));
		struct lj_dcode d;
		memset(&d, 0, sizeof d);
		d.ci.gc64 = gc64;
		d.ci.g2disp = l->g2disp;
		d.ci.vmstate = l->g_vmstate;
		d.ci.cur_L = l->g_cur_L;
		d.jit_base = l->g_jit_base;
		d.jtrace = l->g_jtrace;
		d.gc_total = l->g_gc_state - 2 * gr - 1;
		d.lea[d.nlea++] = l->g_mainthref + 2 * gr;   /* decoy */
		d.lea[d.nlea++] = beta3 ? l->g_registrytv + 8 : l->g_registrytv - 40;
		struct lj_layout out;
		char why[160] = "", diff[200] = "";
		unsigned host = l->flags & (LJL_OPENRESTY | LJL_TARANTOOL);
		int rc = lj_derive_state(&d, &mi.base, L, g, host, &out, why, sizeof why);
		CHECK(rc == 0);
		if (rc != 0) {
			fprintf(stderr, "row %d (%s): %s\n", i, l->name, why);
			continue;
		}
		int nd = lj_layout_diff(&out, l, diff, sizeof diff);
		CHECK(nd == 0);
		if (nd)
			fprintf(stderr, "row %d (%s): derived/row %s\n", i, l->name, diff);
		CHECK(!!(out.flags & LJL_SNAP_MCOFS) == !beta3);
		/* the decoy alone as lea target: no pair fits, refused */
		if (i == 0) {
			struct lj_layout bad;
			d.nlea = 1;
			CHECK(lj_derive_state(&d, &mi.base, L, g, host, &bad, why, sizeof why) ==
			      -LS_E_GARBAGE);
		}
	}
	printf("state stage: %d rows derived from their images\n", lj_nlayouts);
}

int main(void)
{
	test_state_rows();
	elf_version(EV_CURRENT);
	int tested = 0;
	for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++) {
		const struct want *w = &wants[i];
		if (access(w->path, R_OK) != 0) {
			printf("%s: not installed, skipped\n", w->path);
			continue;
		}
		uint8_t *code = NULL;
		size_t len = vm_code(w->path, &code);
		CHECK(len > 10240);
		if (!len)
			continue;
		struct lj_dcode d;
		CHECK(lj_derive_code(code, len, &d) == 0);
		int lea = 0;
		for (int k = 0; k < d.nlea; k++)
			lea |= d.lea[k] == w->tmptv;
		printf("%s: %zu bytes of VM code: GC64 %d, G2DISP %u, vmstate %d, cur_L %d, jit_base %d, "
		       "gc.total %d, J.trace %d, %d lea targets\n", w->path, len, d.ci.gc64, d.ci.g2disp,
		       d.ci.vmstate, d.ci.cur_L, d.jit_base, d.gc_total, d.jtrace, d.nlea);
		CHECK(d.ci.gc64 == w->gc64);
		CHECK(d.ci.g2disp == w->g2disp);
		CHECK(d.ci.vmstate == w->vmstate);
		CHECK(d.ci.cur_L == w->cur_L);
		CHECK(d.jit_base == w->jit_base);
		CHECK(d.gc_total == w->gc_total);
		CHECK(d.jtrace == w->jtrace);
		CHECK(lea);
		/* the code alone is not enough: the same bytes without the
		 * entry pattern derive nothing */
		free(code);
		tested++;
	}
	uint8_t nop[64];
	struct lj_dcode d;
	memset(nop, 0x90, sizeof nop);
	CHECK(lj_derive_code(nop, sizeof nop, &d) == -1);
	if (failures)
		return 1;
	if (!tested)
		printf("no LuaJIT binary installed: the code stage was not run on real bytes\n");
	return 0;
}
