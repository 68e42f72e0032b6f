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

/* A copy of target memory [addr, addr + len) held at DATA. */
struct mem_region {
	uint64_t addr;
	const uint8_t *data;
	size_t len;
};

/* Read LEN bytes at ADDR into BUF: each byte from the first of the N
 * regions R that holds it, the bytes between regions from UNDER (read up
 * to the next region). Returns the bytes read (short at the first
 * failing or short read of UNDER), or UNDER's -LS_E_* when none was. */
ssize_t mem_regions_read(const struct mem_region *r, int n, struct mem *under, uint64_t addr,
			 void *buf, size_t len);

/* Overlay: reads inside one of its regions come from the copy taken
 * while the thread was stopped (the top of the C stack, Lua stack slots,
 * VM state), everything else from UNDER. Regions do not overlap. */
#define MEM_OVERLAY_REGIONS 20
struct mem_overlay {
	struct mem base;
	struct mem *under;
	struct mem_region r[MEM_OVERLAY_REGIONS];
	int n;
};
/* Start an overlay over UNDER with one region [ADDR, ADDR+LEN) backed by
 * DATA (LEN may be 0: no region). */
void mem_overlay_init(struct mem_overlay *o, struct mem *under, uint64_t addr,
		      const uint8_t *data, size_t len);
/* Add a region; -1 when all MEM_OVERLAY_REGIONS are used or it overlaps one. */
int mem_overlay_add(struct mem_overlay *o, uint64_t addr, const uint8_t *data, size_t len);

/* Block cache over UNDER: reads of at most one block come from whole,
 * aligned blocks of BLOCK_BYTES (4 KiB or a power-of-two multiple), each
 * read from UNDER once, at most NBLOCKS (<= MEM_CACHE_MAX_BLOCKS) held;
 * the first miss allocates them (NBLOCKS * BLOCK_BYTES), mem_cache_free()
 * frees them. Walkers read the target in many small pieces close to each
 * other, and a syscall costs about as much for a page as for 8 bytes.
 * - A block read that comes up short keeps what it got if that covers the
 *   read (the rest is unmapped); one that fails is tried again as the one
 *   4 KiB page holding the address; a read that neither covers goes to
 *   UNDER, so UNDER says how it failed.
 * - Reads larger than a block, or wrapping around, go to UNDER.
 * - With every block in use, a miss replaces the oldest block.
 * The copy ages while the target runs: use one for one walk, or empty it
 * (mem_cache_reset) when a sample starts. The sampler holds one per thread_snap:
 * emptied at each sample start, so the pages read while the thread is
 * stopped are a consistent snapshot for the walk after it; never used in
 * --nonblocking mode, where pages read at different moments would make
 * torn samples look consistent. */
#define MEM_CACHE_MAX_BLOCKS 64
struct mem_cache {
	struct mem base;
	struct mem *under;
	size_t block_bytes;  /* bytes per block, a power of two >= 4096 */
	int nblocks;         /* capacity, <= MEM_CACHE_MAX_BLOCKS */
	int n;               /* blocks held */
	int oldest;          /* the block a miss replaces once all are held */
	int last;            /* the block the last read hit: looked at first */
	uint8_t *buf;        /* nblocks * block_bytes, NULL until the first miss */
	uint64_t addr[MEM_CACHE_MAX_BLOCKS]; /* target address of block i */
	size_t len[MEM_CACHE_MAX_BLOCKS];    /* bytes of block i read */
};
/* Set up C over UNDER, empty; allocates nothing. NBLOCKS is clamped to
 * 1..MEM_CACHE_MAX_BLOCKS and BLOCK_BYTES rounded up to a power of two
 * >= 4096. */
void mem_cache_init(struct mem_cache *c, struct mem *under, size_t block_bytes, int nblocks);
/* Forget every block (keeps the memory for the next fill); misses read
 * UNDER from now on. */
void mem_cache_reset(struct mem_cache *c, struct mem *under);
/* Free the blocks' memory; C is empty and may be used again. */
void mem_cache_free(struct mem_cache *c);

/* Synthetic image: a list of regions (unit tests, fuzzers). Addresses
 * outside every region read as unmapped (short read / -LS_E_FAULT). */
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
