/* proc_mem.c: memory readers (live process, overlay, synthetic image). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "err.h"
#include "proc_mem.h"

static ssize_t proc_read(struct mem *base, uint64_t addr, void *buf, size_t len)
{
	struct proc_mem *m = (struct proc_mem *)base;
	if (len == 0)
		return 0;
	if (len > MEM_MAX_READ)
		return -LS_E_GARBAGE;
	if (!m->use_fd) {
		struct iovec l = { buf, len }, r = { (void *)(uintptr_t)addr, len };
		ssize_t n = process_vm_readv(m->pid, &l, 1, &r, 1, 0);
		if (n >= 0)
			return n;
		if (errno == EFAULT || errno == EIO)
			return -LS_E_FAULT;
		if (errno == ESRCH)
			return -LS_E_GONE;
		if (errno != ENOSYS && errno != EPERM)
			return err_from_errno(errno);
		m->use_fd = 1;
	}
	if (m->memfd < 0) {
		char path[64];
		snprintf(path, sizeof path, "/proc/%d/mem", (int)m->pid);
		m->memfd = open(path, O_RDONLY | O_CLOEXEC);
		if (m->memfd < 0)
			return err_from_errno(errno);
	}
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(m->memfd, (char *)buf + got, len - got, (off_t)(addr + got));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (got)
				break;
			return (errno == EIO || errno == EFAULT) ? -LS_E_FAULT : err_from_errno(errno);
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

void proc_mem_init(struct proc_mem *m, pid_t pid)
{
	memset(m, 0, sizeof *m);
	m->base.read = proc_read;
	m->pid = pid;
	m->memfd = -1;
}

void proc_mem_close(struct proc_mem *m)
{
	if (m->memfd >= 0)
		close(m->memfd);
	m->memfd = -1;
}

ssize_t mem_regions_read(const struct mem_region *r, int n, struct mem *under, uint64_t addr,
			 void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		uint64_t a = addr + got;
		int hit = -1;
		uint64_t next = UINT64_MAX; /* start of the next region above a */
		for (int k = 0; k < n && hit < 0; k++) {
			if (a >= r[k].addr && a - r[k].addr < r[k].len)
				hit = k;
			else if (r[k].addr > a && r[k].addr < next)
				next = r[k].addr;
		}
		if (hit >= 0) {
			size_t off = (size_t)(a - r[hit].addr);
			size_t m = r[hit].len - off;
			if (m > len - got)
				m = len - got;
			memcpy((char *)buf + got, r[hit].data + off, m);
			got += m;
			continue;
		}
		size_t m = len - got;
		if (next != UINT64_MAX && next - a < m)
			m = (size_t)(next - a);
		ssize_t rd = under->read(under, a, (char *)buf + got, m);
		if (rd < 0)
			return got ? (ssize_t)got : rd;
		got += (size_t)rd;
		if ((size_t)rd < m)
			break;
	}
	return (ssize_t)got;
}

static ssize_t overlay_read(struct mem *base, uint64_t addr, void *buf, size_t len)
{
	struct mem_overlay *o = (struct mem_overlay *)base;
	return mem_regions_read(o->r, o->n, o->under, addr, buf, len);
}

void mem_overlay_init(struct mem_overlay *o, struct mem *under, uint64_t addr,
		      const uint8_t *data, size_t len)
{
	memset(o, 0, sizeof *o);
	o->base.read = overlay_read;
	o->under = under;
	if (len)
		mem_overlay_add(o, addr, data, len);
}

int mem_overlay_add(struct mem_overlay *o, uint64_t addr, const uint8_t *data, size_t len)
{
	if (o->n == MEM_OVERLAY_REGIONS || len == 0 || addr + len < addr)
		return -1;
	for (int k = 0; k < o->n; k++)
		if (addr < o->r[k].addr + o->r[k].len && o->r[k].addr < addr + len)
			return -1;
	o->r[o->n].addr = addr;
	o->r[o->n].data = data;
	o->r[o->n].len = len;
	o->n++;
	return 0;
}

/* The block holding ADDR, filled from UNDER when missing, or NULL when
 * neither the block nor ADDR's page could be read up to ADDR + NEED. */
static const uint8_t *cache_block(struct mem_cache *c, uint64_t addr, size_t need,
				  uint64_t *baddr, size_t *blen)
{
	/* a walk reads its way along a stack: mostly the block of the last
	 * read, then the others */
	int l = c->last;
	if (l < c->n && addr >= c->addr[l] && addr - c->addr[l] < c->len[l]) {
		*baddr = c->addr[l];
		*blen = c->len[l];
		return c->buf + (size_t)l * c->block_bytes;
	}
	for (int i = 0; i < c->n; i++)
		if (addr >= c->addr[i] && addr - c->addr[i] < c->len[i]) {
			c->last = i;
			*baddr = c->addr[i];
			*blen = c->len[i];
			return c->buf + (size_t)i * c->block_bytes;
		}
	if (!c->buf && !(c->buf = malloc((size_t)c->nblocks * c->block_bytes)))
		return NULL;
	int slot = c->n < c->nblocks ? c->n : c->oldest;
	uint8_t *d = c->buf + (size_t)slot * c->block_bytes;
	uint64_t start = addr & ~(uint64_t)(c->block_bytes - 1);
	ssize_t r = c->under->read(c->under, start, d, c->block_bytes);
	if (r < 0 && c->block_bytes > 4096) {
		/* the block reaches below the mapping: its page alone */
		start = addr & ~4095ull;
		r = c->under->read(c->under, start, d, 4096);
	}
	if (r <= 0 || (uint64_t)r < addr - start + need) {
		c->len[slot] = 0; /* a replaced block's copy is gone */
		return NULL;
	}
	c->addr[slot] = start;
	c->len[slot] = (size_t)r;
	c->last = slot;
	if (c->n < c->nblocks)
		c->n++;
	else
		c->oldest = (c->oldest + 1) % c->nblocks;
	*baddr = start;
	*blen = (size_t)r;
	return d;
}

static ssize_t cache_read(struct mem *base, uint64_t addr, void *buf, size_t len)
{
	struct mem_cache *c = (struct mem_cache *)base;
	if (len > c->block_bytes || addr + len < addr)
		return c->under->read(c->under, addr, buf, len);
	size_t done = 0;
	while (done < len) {
		uint64_t a = addr + done, baddr;
		size_t blen;
		/* the part of the read inside A's block */
		size_t room = c->block_bytes - (size_t)(a & (c->block_bytes - 1));
		size_t want = len - done < room ? len - done : room;
		const uint8_t *d = cache_block(c, a, want, &baddr, &blen);
		if (!d) {
			ssize_t r = c->under->read(c->under, a, (uint8_t *)buf + done, len - done);
			if (r < 0)
				return done ? (ssize_t)done : r;
			return (ssize_t)(done + (size_t)r);
		}
		size_t off = (size_t)(a - baddr), n = blen - off;
		if (n > len - done)
			n = len - done;
		memcpy((uint8_t *)buf + done, d + off, n);
		done += n;
	}
	return (ssize_t)done;
}

void mem_cache_init(struct mem_cache *c, struct mem *under, size_t block_bytes, int nblocks)
{
	memset(c, 0, sizeof *c);
	c->base.read = cache_read;
	c->under = under;
	c->block_bytes = 4096;
	while (c->block_bytes < block_bytes && c->block_bytes < MEM_MAX_READ)
		c->block_bytes <<= 1;
	c->nblocks = nblocks < 1 ? 1 : nblocks > MEM_CACHE_MAX_BLOCKS ? MEM_CACHE_MAX_BLOCKS : nblocks;
}

void mem_cache_reset(struct mem_cache *c, struct mem *under)
{
	c->under = under;
	c->n = 0;
	c->oldest = 0;
	c->last = 0;
}

void mem_cache_free(struct mem_cache *c)
{
	free(c->buf);
	c->buf = NULL;
	c->n = 0;
	c->oldest = 0;
}

static ssize_t image_read(struct mem *base, uint64_t addr, void *buf, size_t len)
{
	struct mem_image *im = (struct mem_image *)base;
	size_t got = 0;
	while (got < len) {
		uint64_t a = addr + got;
		int found = 0;
		for (int i = 0; i < im->n; i++) {
			const struct mem_region *r = &im->r[i];
			if (a >= r->addr && a - r->addr < r->len) {
				size_t off = (size_t)(a - r->addr);
				size_t n = r->len - off;
				if (n > len - got)
					n = len - got;
				memcpy((char *)buf + got, r->data + off, n);
				got += n;
				found = 1;
				break;
			}
		}
		if (!found)
			break;
	}
	return got ? (ssize_t)got : -LS_E_FAULT;
}

void mem_image_init(struct mem_image *im, const struct mem_region *r, int n)
{
	memset(im, 0, sizeof *im);
	im->base.read = image_read;
	im->r = r;
	im->n = n;
}

int mem_read(struct mem *m, uint64_t addr, void *buf, size_t len)
{
	m->nreads++;
	m->nbytes += len;
	if (addr == 0 || addr + len < addr)
		return -LS_E_FAULT;
	ssize_t r = m->read(m, addr, buf, len);
	if (r < 0)
		return (int)r;
	return (size_t)r == len ? 0 : -LS_E_FAULT;
}

int mem_read_u8(struct mem *m, uint64_t addr, uint8_t *v) { return mem_read(m, addr, v, 1); }
int mem_read_u16(struct mem *m, uint64_t addr, uint16_t *v) { return mem_read(m, addr, v, 2); }
int mem_read_u32(struct mem *m, uint64_t addr, uint32_t *v) { return mem_read(m, addr, v, 4); }
int mem_read_u64(struct mem *m, uint64_t addr, uint64_t *v) { return mem_read(m, addr, v, 8); }

ssize_t mem_read_str(struct mem *m, uint64_t addr, char *buf, size_t maxlen)
{
	buf[0] = 0;
	if (addr == 0)
		return -LS_E_FAULT;
	m->nreads++;
	ssize_t r = m->read(m, addr, buf, maxlen);
	if (r < 0)
		return r;
	size_t n = (size_t)r;
	char *z = memchr(buf, 0, n);
	if (z)
		n = (size_t)(z - buf);
	buf[n] = 0;
	return (ssize_t)n;
}
