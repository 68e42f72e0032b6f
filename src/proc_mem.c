/* proc_mem.c: memory readers (live process, overlay, synthetic image). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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

static ssize_t overlay_read(struct mem *base, uint64_t addr, void *buf, size_t len)
{
	struct mem_overlay *o = (struct mem_overlay *)base;
	size_t got = 0;
	while (got < len) {
		uint64_t a = addr + got;
		int k, hit = -1;
		uint64_t next = UINT64_MAX; /* start of the next region above a */
		for (k = 0; k < o->n; k++) {
			if (a >= o->r[k].addr && a - o->r[k].addr < o->r[k].len) {
				hit = k;
				break;
			}
			if (o->r[k].addr > a && o->r[k].addr < next)
				next = o->r[k].addr;
		}
		if (hit >= 0) {
			size_t off = (size_t)(a - o->r[hit].addr);
			size_t n = o->r[hit].len - off;
			if (n > len - got)
				n = len - got;
			memcpy((char *)buf + got, o->r[hit].data + off, n);
			got += n;
			continue;
		}
		size_t n = len - got;
		if (next != UINT64_MAX && next - a < n)
			n = (size_t)(next - a);
		ssize_t r = o->under->read(o->under, a, (char *)buf + got, n);
		if (r < 0)
			return got ? (ssize_t)got : r;
		got += (size_t)r;
		if ((size_t)r < n)
			break;
	}
	return (ssize_t)got;
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

static ssize_t cache_read(struct mem *base, uint64_t addr, void *buf, size_t len)
{
	struct mem_cache *c = (struct mem_cache *)base;
	if (len > c->cap / 2)
		return c->under->read(c->under, addr, buf, len);
	if (!(c->len && addr >= c->addr && addr - c->addr < c->len)) {
		/* a walk going down (a list of ever older objects) gets the
		 * block that ends at ADDR, a walk going up the one that starts
		 * there; below the mapping's start the downward read fails */
		uint64_t start = addr & ~4095ull, top = (addr + len + 4095) & ~4095ull;
		ssize_t r = -1;
		if (c->len && addr < c->addr && top > c->cap) {
			r = c->under->read(c->under, top - c->cap, c->buf, c->cap);
			if (r == (ssize_t)c->cap)
				start = top - c->cap;
		}
		if (start == (addr & ~4095ull))
			r = c->under->read(c->under, start, c->buf, c->cap);
		c->addr = start;
		c->len = r > 0 ? (size_t)r : 0;
		if (addr - start >= c->len) /* unmapped there: let UNDER say how */
			return c->under->read(c->under, addr, buf, len);
	}
	size_t off = (size_t)(addr - c->addr), n = c->len - off;
	if (n >= len) {
		memcpy(buf, c->buf + off, len);
		return (ssize_t)len;
	}
	/* straddles the end of the block: read it whole from UNDER */
	return c->under->read(c->under, addr, buf, len);
}

void mem_cache_init(struct mem_cache *c, struct mem *under, uint8_t *buf, size_t block_bytes)
{
	memset(c, 0, sizeof *c);
	c->base.read = cache_read;
	c->under = under;
	c->buf = buf;
	c->cap = block_bytes;
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
