/* proc_mem.h: reading target memory. Every read of the target goes
 * through struct mem, so walkers can run over a live process, a stack
 * copy overlaid on it, or a synthetic image (unit tests, fuzzing).
 * Target memory is untrusted: callers bound every length they pass. */
#ifndef LUASPY_PROC_MEM_H
#define LUASPY_PROC_MEM_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#define MEM_MAX_READ (16u << 20)  /* one read is refused above 16 MiB */

struct mem;
/* Copy up to LEN bytes at target ADDR into BUF. Returns bytes copied
 * (may be short: the rest is unmapped) or -LS_E_* (GONE, PERM, FAULT). */
typedef ssize_t (*mem_read_fn)(struct mem *m, uint64_t addr, void *buf, size_t len);

struct mem {
	mem_read_fn read;
	uint64_t nreads;     /* statistics: calls */
	uint64_t nbytes;     /*             bytes asked */
};

/* Live process reader: process_vm_readv, falling back to /proc/PID/mem
 * when the syscall is unavailable or refused. Safe on a running target. */
struct proc_mem {
	struct mem base;
	pid_t pid;
	int memfd;           /* /proc/PID/mem, opened lazily; -1 */
	int use_fd;          /* process_vm_readv failed with ENOSYS/EPERM */
};

/* Initialise M for PID. Never fails; errors come from reads. */
void proc_mem_init(struct proc_mem *m, pid_t pid);
void proc_mem_close(struct proc_mem *m);

/* Overlay: reads inside one of its regions come from the copy taken
 * while the thread was stopped (the top of the C stack, Lua stack slots,
 * VM state), everything else from UNDER. Regions do not overlap. */
#define MEM_OVERLAY_REGIONS 20
struct mem_overlay {
	struct mem base;
	struct mem *under;
	struct {
		uint64_t addr;
		const uint8_t *data;
		size_t len;
	} r[MEM_OVERLAY_REGIONS];
	int n;
};
/* Start an overlay over UNDER with one region [ADDR, ADDR+LEN) backed by
 * DATA (LEN may be 0: no region). */
void mem_overlay_init(struct mem_overlay *o, struct mem *under, uint64_t addr,
		      const uint8_t *data, size_t len);
/* Add a region; -1 when all MEM_OVERLAY_REGIONS are used or it overlaps one. */
int mem_overlay_add(struct mem_overlay *o, uint64_t addr, const uint8_t *data, size_t len);

/* Block cache: small reads inside one block of BLOCK_BYTES read ahead
 * from UNDER (page aligned), for walks that follow a linked list through
 * neighbouring objects (a GC list: one syscall per block instead of one
 * per object). Reads larger than half the block, or starting where the
 * block read came up short (unmapped), go to UNDER. The copy ages: use
 * one cache for one walk only. BUF (BLOCK_BYTES bytes) is the caller's. */
struct mem_cache {
	struct mem base;
	struct mem *under;
	uint8_t *buf;
	size_t cap;          /* BLOCK_BYTES */
	uint64_t addr;       /* target address of buf[0] */
	size_t len;          /* valid bytes in buf; 0 = empty */
};
void mem_cache_init(struct mem_cache *c, struct mem *under, uint8_t *buf, size_t block_bytes);

/* Synthetic image: a list of regions (unit tests, fuzzers). Addresses
 * outside every region read as unmapped (short read / -LS_E_FAULT). */
struct mem_region {
	uint64_t addr;
	const uint8_t *data;
	size_t len;
};
struct mem_image {
	struct mem base;
	const struct mem_region *r;
	int n;
};
void mem_image_init(struct mem_image *im, const struct mem_region *r, int n);

/* Read exactly LEN bytes; 0 or -LS_E_* (a short read is -LS_E_FAULT). */
int mem_read(struct mem *m, uint64_t addr, void *buf, size_t len);
/* Typed helpers: 0 or -LS_E_*. */
int mem_read_u8(struct mem *m, uint64_t addr, uint8_t *v);
int mem_read_u16(struct mem *m, uint64_t addr, uint16_t *v);
int mem_read_u32(struct mem *m, uint64_t addr, uint32_t *v);
int mem_read_u64(struct mem *m, uint64_t addr, uint64_t *v);
/* Read a string of at most MAXLEN bytes at ADDR into BUF (size >= MAXLEN+1),
 * stopping at NUL; always NUL-terminates. Returns the length or -LS_E_*. */
ssize_t mem_read_str(struct mem *m, uint64_t addr, char *buf, size_t maxlen);

#endif
