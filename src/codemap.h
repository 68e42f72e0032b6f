/* codemap.h: a table of named code regions, as perf maps and jitdump
 * files describe JIT code (docs/perf-maps.md): sorted, disjoint, looked
 * up by address. Names come from files the target writes: they are
 * cleaned (code_name_clean) before they are kept. */
#ifndef LUASPY_CODEMAP_H
#define LUASPY_CODEMAP_H

#include <stddef.h>
#include <stdint.h>

#define CODE_NAME_MAX 512           /* bytes of a name kept */
#define CODE_MAX_REGIONS (1 << 20)  /* regions a perf map or jitdump keeps */

/* One code region [start, end), named NAME (NUL-terminated, owned by
 * whoever built the table: see code_table.text). */
struct code_region {
	uint64_t start, end;
	const char *name;
};

/* Regions sorted by start, not overlapping. */
struct code_table {
	struct code_region *e;
	size_t n;
	char *text;                 /* owns the names, or NULL: the caller does */
};

/* Make OUT (replacing what it held) from the N regions V in the order
 * they were written: sorted, a later region winning over an earlier one
 * it overlaps (the loser counted in *OVERLAPPED), empty regions (end <=
 * start) skipped. V is not changed. Names are not copied: they must
 * outlive OUT, whose text stays NULL. Returns the entries kept or
 * -LS_E_NOMEM (OUT empty). */
long code_table_build(struct code_table *out, const struct code_region *v, size_t n,
		      unsigned long *overlapped);

/* Free T's entries and text; T is left empty. */
void code_table_free(struct code_table *t);

/* The entry of T whose region holds ADDR, or NULL. O(log n). */
const struct code_region *code_table_find(const struct code_table *t, uint64_t addr);

/* Make the LEN bytes at S a name as code names are kept: cut to at most
 * CODE_NAME_MAX bytes (never inside a UTF-8 character), control bytes
 * turned into '?'. Returns the length kept (S is not terminated). */
size_t code_name_clean(char *s, size_t len);

#endif
