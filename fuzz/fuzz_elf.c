/* fuzz/fuzz_elf.c: libFuzzer target for what luaspy reads from ELF
 * files: any bytes, opened with libelf, through the .eh_frame_hdr FDE
 * lookups (elf_sym_fde_range), the LuaJIT VM FDE
 * finder (lj_fde_cb: section table, libdw CFI), the LuaJIT VM code
 * scanner (lj_code_derive) over executable sections, and PUC's
 * lua_ident parser (puc_ident_parse) over every section. The raw bytes
 * also go to the two byte parsers directly. Never a crash, a hang or a
 * read outside the input.
 *
 * Seeds (fuzz/seeds/fuzz_elf/): small real ELF files (a shared object
 * and an executable, stripped and not), a lua_ident text and a
 * LuaJIT VM entry sequence. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <gelf.h>
#include "elf_sym.h"
#include "vm_luajit.h"
#include "vm_puc.h"

static void addrs_of(Elf *e, const uint8_t *data, size_t size)
{
	uint64_t a[10];
	int n = 0;
	a[n++] = 0;
	if (size >= 8)
		memcpy(&a[n++], data + size - 8, 8);
	size_t nph = 0;
	if (elf_getphdrnum(e, &nph) == 0)
		for (size_t i = 0; i < nph && n < 10; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
				a[n++] = ph.p_vaddr + ph.p_memsz / 2;
				if (n < 10)
					a[n++] = ph.p_vaddr;
			}
		}
	for (int i = 0; i < n; i++) {
		uint64_t s, end;
		if (elf_sym_fde_range(e, a[i], &s, &end) == 0 && (s > a[i] || end <= a[i]))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int init;
	if (!init) {
		elf_version(EV_CURRENT);
		init = 1;
	}
	struct lj_codeinfo ci;
	int minor, patch;
	(void)lj_code_derive(data, size, &ci);
	(void)puc_ident_parse((const char *)data, size, &minor, &patch);
	/* libelf may keep pointers into the image: a private copy */
	char *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	Elf *e = elf_memory(buf, size);
	if (e) {
		addrs_of(e, data, size);
		struct lj_fde_find ff = { 0 };
		if (lj_fde_cb(&ff, "/fuzz/libluajit.so", 0x1000, 0x2000, e, 0x1000) == 1 &&
		    (ff.end <= ff.start || !ff.module))
			abort();
		Elf_Scn *scn = NULL;
		for (int k = 0; k < 256 && (scn = elf_nextscn(e, scn)) != NULL; k++) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
				continue;
			Elf_Data *d = elf_getdata(scn, NULL);
			if (!d || !d->d_buf)
				continue;
			if (sh.sh_flags & SHF_EXECINSTR)
				(void)lj_code_derive(d->d_buf, d->d_size, &ci);
			(void)puc_ident_parse(d->d_buf, d->d_size, &minor, &patch);
		}
		elf_end(e);
	}
	free(buf);
	return 0;
}
