/* proc_maps.h: the target's memory map (/proc/PID/maps). */
#ifndef LUASPY_PROC_MAPS_H
#define LUASPY_PROC_MAPS_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#define MAP_R 1
#define MAP_W 2
#define MAP_X 4
#define MAP_P 8   /* private (copy-on-write) */

struct proc_map {
	uint64_t start, end;   /* [start, end) */
	uint64_t offset;       /* file offset of start */
	uint64_t inode;
	unsigned perms;        /* MAP_R | MAP_W | MAP_X | MAP_P */
	int deleted;           /* path ended in " (deleted)" */
	const char *path;      /* interned: file path ("" for anonymous,
	                        * "[heap]", "[stack]", "[vdso]", ...) */
	const char *name;      /* interned basename of path */
};

struct proc_maps {
	struct proc_map *m;    /* sorted by start */
	int n;
};

/* Parse maps TEXT of LEN bytes into OUT (replacing its contents). Paths
 * may contain spaces; " (deleted)" is stripped and flagged. Returns 0 or
 * -LS_E_NOMEM / -LS_E_GARBAGE (no line parsed). */
int proc_maps_parse(const char *text, size_t len, struct proc_maps *out);
/* Read and parse /proc/PID/maps. Returns 0 or -LS_E_GONE/-LS_E_PERM/... */
int proc_maps_read(pid_t pid, struct proc_maps *out);
void proc_maps_free(struct proc_maps *maps);
/* The mapping containing ADDR, or NULL. O(log n). */
const struct proc_map *proc_maps_find(const struct proc_maps *maps, uint64_t addr);
/* True when the mapping is file-backed (a real path, not [special] or anon). */
int proc_map_is_file(const struct proc_map *m);
/* Load base of the ELF module mapped from PATH (start of its lowest
 * mapping with offset 0), or 0 when not mapped. */
uint64_t proc_maps_module_base(const struct proc_maps *maps, const char *path);

#endif
