/* sampler_perf.c: per-thread perf events and their ring buffers
 * (sampler_perf.h). Record layouts: include/uapi/linux/perf_event.h of
 * the kernel (PERF_RECORD_SAMPLE with the sample_type bits below, in bit
 * order; PERF_RECORD_LOST; PERF_RECORD_THROTTLE). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <asm/perf_regs.h>
#include <linux/perf_event.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "err.h"
#include "proc_mem.h"
#include "sampler_perf.h"

#define RING_PAGES 32u              /* data pages per thread (a power of two) */
#define RING_PAGES_BATCH 128u       /* the same when samples are read in batches */
#define RING_PAGES_MIN 16u          /* what we go down to when mlock limits refuse:
                                     * 64 KiB, one record of the largest stack */
#define STACK_MAX (60u * 1024)      /* a record's size is a u16: stack + the rest < 64 KiB */

/* The registers asked for, in bit order (asm/perf_regs.h): every
 * general-purpose register, ip, flags, cs, ss; not ds/es/fs/gs (the
 * kernel refuses them on x86_64). */
static const int reg_bits[] = {
	PERF_REG_X86_AX, PERF_REG_X86_BX, PERF_REG_X86_CX, PERF_REG_X86_DX,
	PERF_REG_X86_SI, PERF_REG_X86_DI, PERF_REG_X86_BP, PERF_REG_X86_SP,
	PERF_REG_X86_IP, PERF_REG_X86_FLAGS, PERF_REG_X86_CS, PERF_REG_X86_SS,
	PERF_REG_X86_R8, PERF_REG_X86_R9, PERF_REG_X86_R10, PERF_REG_X86_R11,
	PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14, PERF_REG_X86_R15,
};
#define NREGS (sizeof reg_bits / sizeof reg_bits[0])

struct perf_thread {
	pid_t tid;
	int fd;
	uint8_t *ring;                  /* metadata page + data pages */
	size_t data_len;                /* bytes of data pages */
	int listed;                     /* seen in the last sync */
};

struct perf_proc {
	pid_t pid;
	int epfd;
	uint64_t period_ns;
	size_t stack_bytes;
	int exclude_kernel;             /* learned at the first open */
	unsigned ring_pages;
	int batch;                      /* perf_proc_open's BATCH */
	int bpf_fd;                     /* eBPF program attached to new events, -1 */
	struct perf_counts *c;
	struct perf_thread *th;
	int n, cap;
	int next;                       /* the ring perf_proc_next looks at first */
	uint8_t *rec;                   /* one record, copied out of its ring */
	size_t rec_cap;
	uint8_t *stack;                 /* the stack of the last sample returned */
};

static uint64_t reg_mask(void)
{
	uint64_t m = 0;
	for (size_t i = 0; i < NREGS; i++)
		m |= 1ull << reg_bits[i];
	return m;
}

/* How many samples of STACK_BYTES make the reader wake (wakeup_events)
 * on a ring of RING_PAGES data pages: 1, or with BATCH a quarter of what
 * the ring holds: the reader, woken late or slow to walk a batch, has
 * three more batches of room before records are lost (measured: 0.9 %
 * lost at 10 kHz with a quarter, 2.9 % with half; docs/sampling.md §9). */
static unsigned wake_every(int batch, unsigned ring_pages, size_t stack_bytes)
{
	size_t rec = stack_bytes + 512;        /* header, registers, sizes */
	size_t fit = (size_t)ring_pages * 4096 / rec;
	return batch && fit >= 8 ? (unsigned)(fit / 4) : 1;
}

static int perf_open(pid_t tid, uint64_t period_ns, size_t stack_bytes, int exclude_kernel,
		     unsigned wakeup)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.size = sizeof a;
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = period_ns;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
			PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = reg_mask();
	a.sample_stack_user = (uint32_t)stack_bytes;
	a.wakeup_events = wakeup;       /* wake the reader every WAKEUP samples */
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;    /* comparable with time_now_ns() */
	a.exclude_kernel = (unsigned)exclude_kernel;
	a.exclude_hv = 1;
	a.exclude_idle = 1;
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

int perf_sampler_check(pid_t tid, char *why, size_t whylen)
{
	int fd = perf_open(tid, 10000000ull, 4096, 0, 1);
	if (fd < 0 && (errno == EACCES || errno == EPERM))
		fd = perf_open(tid, 10000000ull, 4096, 1, 1);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	int e = errno;
	if (e == EACCES || e == EPERM) {
		int lvl = -1;
		FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
		if (f) {
			if (fscanf(f, "%d", &lvl) != 1)
				lvl = -1;
			fclose(f);
		}
		if (lvl >= 0)
			snprintf(why, whylen, "perf_event_open: %s (kernel.perf_event_paranoid is %d; "
				 "needs root, CAP_PERFMON or a lower level; or a seccomp filter refused it)",
				 strerror(e), lvl);
		else
			snprintf(why, whylen, "perf_event_open: %s (no /proc/sys/kernel/perf_event_paranoid: "
				 "perf events are not available here)", strerror(e));
	} else {
		snprintf(why, whylen, "perf_event_open: %s", strerror(e));
	}
	return e;
}

int perf_proc_open(pid_t pid, int epfd, double rate_hz, size_t stack_bytes, int batch,
		   struct perf_counts *c, struct perf_proc **out)
{
	struct perf_proc *p = calloc(1, sizeof *p);
	if (!p)
		return -LS_E_NOMEM;
	p->pid = pid;
	p->epfd = epfd;
	p->period_ns = (uint64_t)(1e9 / rate_hz);
	if (p->period_ns < 1000)
		p->period_ns = 1000;
	stack_bytes &= ~(size_t)7;
	p->stack_bytes = stack_bytes > STACK_MAX ? STACK_MAX : stack_bytes < 512 ? 512 : stack_bytes;
	p->batch = batch;
	p->ring_pages = batch ? RING_PAGES_BATCH : RING_PAGES;
	p->exclude_kernel = -1;
	p->bpf_fd = -1;
	p->c = c;
	p->rec_cap = 65536;
	p->rec = malloc(p->rec_cap);
	p->stack = malloc(p->stack_bytes);
	if (!p->rec || !p->stack) {
		perf_proc_close(p);
		return -LS_E_NOMEM;
	}
	*out = p;
	return 0;
}

static void thread_close(struct perf_proc *p, struct perf_thread *th)
{
	if (th->ring)
		munmap(th->ring, th->data_len + (size_t)sysconf(_SC_PAGESIZE));
	if (th->fd >= 0) {
		epoll_ctl(p->epfd, EPOLL_CTL_DEL, th->fd, NULL);
		close(th->fd);
	}
	th->ring = NULL;
	th->fd = -1;
}

void perf_proc_close(struct perf_proc *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->n; i++)
		thread_close(p, &p->th[i]);
	free(p->th);
	free(p->rec);
	free(p->stack);
	free(p);
}

void perf_proc_set_bpf(struct perf_proc *p, int prog_fd)
{
	if (p->bpf_fd == prog_fd)
		return;
	p->bpf_fd = prog_fd;
	/* the events opened before (the state was found by a walk) */
	for (int i = 0; prog_fd >= 0 && i < p->n; i++)
		if (p->th[i].fd >= 0 && ioctl(p->th[i].fd, PERF_EVENT_IOC_SET_BPF, prog_fd) < 0)
			p->c->bpf_failed++;
}

void perf_hup(int epfd, int fd)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* Open thread TID's event, waking the reader every WAKEUP samples. An
 * fd, or -1 with errno. */
static int event_open(struct perf_proc *p, pid_t tid, unsigned wakeup)
{
	int fd = -1;
	if (p->exclude_kernel <= 0) {
		fd = perf_open(tid, p->period_ns, p->stack_bytes, 0, wakeup);
		if (fd >= 0)
			p->exclude_kernel = 0;
	}
	if (fd < 0 && (p->exclude_kernel == 1 || errno == EACCES || errno == EPERM)) {
		fd = perf_open(tid, p->period_ns, p->stack_bytes, 1, wakeup);
		if (fd >= 0) {
			p->exclude_kernel = 1;
			p->c->user_only = 1;
		}
	}
	return fd;
}

/* Open thread TID's event and ring into TH. 0, or -errno. */
static int thread_open(struct perf_proc *p, pid_t tid, struct perf_thread *th)
{
	th->tid = tid;
	th->fd = -1;
	th->ring = NULL;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *ring = MAP_FAILED;
	int fd = -1;
	/* mlock limits (perf_event_mlock_kb, RLIMIT_MEMLOCK) may refuse a
	 * large ring: halve it down to RING_PAGES_MIN (4 KiB pages assumed:
	 * RING_PAGES_MIN of them hold the largest record). The event is
	 * opened again for each size: its wakeup count follows the ring's. */
	for (;;) {
		unsigned wake = wake_every(p->batch, p->ring_pages, p->stack_bytes);
		fd = event_open(p, tid, wake);
		if (fd < 0)
			return -errno;
		ring = mmap(NULL, (1 + p->ring_pages) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (ring != MAP_FAILED || errno != EPERM || p->ring_pages / 2 < RING_PAGES_MIN)
			break;
		close(fd);
		p->ring_pages /= 2;
	}
	if (ring == MAP_FAILED) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (p->bpf_fd >= 0 && ioctl(fd, PERF_EVENT_IOC_SET_BPF, p->bpf_fd) < 0)
		p->c->bpf_failed++;
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int e = errno;
		munmap(ring, (1 + p->ring_pages) * page);
		close(fd);
		return -e;
	}
	th->fd = fd;
	th->ring = ring;
	th->data_len = p->ring_pages * page;
	return 0;
}

static int ring_empty(const struct perf_thread *th)
{
	const struct perf_event_mmap_page *m = (const void *)th->ring;
	return __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE) == m->data_tail;
}

int perf_proc_sync(struct perf_proc *p, const struct proc_thread *tl, int n)
{
	for (int i = 0; i < p->n; i++)
		p->th[i].listed = 0;
	int perm = 0, open = 0;
	for (int k = 0; k < n; k++) {
		int i;
		for (i = 0; i < p->n && p->th[i].tid != tl[k].tid; i++)
			;
		if (i < p->n) {
			p->th[i].listed = 1;
			continue;
		}
		if (tl[k].state == 'Z' || tl[k].state == 'X')
			continue;
		if (p->n == p->cap) {
			int cap = p->cap ? p->cap * 2 : 8;
			struct perf_thread *nt = realloc(p->th, (size_t)cap * sizeof *nt);
			if (!nt)
				return -LS_E_NOMEM;
			p->th = nt;
			p->cap = cap;
		}
		int rc = thread_open(p, tl[k].tid, &p->th[p->n]);
		if (rc < 0) {
			p->c->open_failed++;
			perm += rc == -EACCES || rc == -EPERM;
			continue;
		}
		p->c->opened++;
		p->th[p->n].listed = 1;
		p->n++;
	}
	/* threads gone: closed once nothing is left in their ring */
	int j = 0;
	for (int i = 0; i < p->n; i++) {
		if (!p->th[i].listed && ring_empty(&p->th[i])) {
			thread_close(p, &p->th[i]);
			continue;
		}
		p->th[j++] = p->th[i];
	}
	p->n = j;
	p->next = 0;
	for (int i = 0; i < p->n; i++)
		open += p->th[i].fd >= 0;
	if (!open && perm)
		return -LS_E_PERM;
	return open;
}

/* Copy LEN bytes at ring offset OFF (wrapping) into DST. */
static void ring_copy(const struct perf_thread *th, uint64_t off, void *dst, size_t len)
{
	const uint8_t *data = th->ring + (size_t)sysconf(_SC_PAGESIZE);
	size_t o = (size_t)(off & (th->data_len - 1));
	size_t first = th->data_len - o < len ? th->data_len - o : len;
	memcpy(dst, data + o, first);
	if (first < len)
		memcpy((uint8_t *)dst + first, data, len - first);
}

/* Parse the sample record REC (LEN bytes, header included) into S.
 * 1 when it holds registers and a stack, 0 when not (kernel thread
 * context, a record cut short). */
static int parse_sample(struct perf_proc *p, const uint8_t *rec, size_t len, struct perf_sample *s)
{
	size_t off = sizeof(struct perf_event_header);
	uint64_t v[NREGS];
	uint32_t ids[2];
	uint64_t time, abi, size, dyn;
#define TAKE(dst, n) do { if (off + (n) > len) return 0; memcpy((dst), rec + off, (n)); off += (n); } while (0)
	TAKE(ids, sizeof ids);
	TAKE(&time, sizeof time);
	TAKE(&abi, sizeof abi);
	if (abi == PERF_SAMPLE_REGS_ABI_NONE)
		return 0;
	TAKE(v, sizeof v);
	TAKE(&size, sizeof size);
	if (size == 0 || size > p->stack_bytes || off + size + 8 > len)
		return 0;
	const uint8_t *stack = rec + off;
	off += size;
	TAKE(&dyn, sizeof dyn);
#undef TAKE
	if (dyn > size)
		return 0;
	memset(s, 0, sizeof *s);
	s->tid = (pid_t)ids[1];
	s->time_ns = time;
	struct user_regs_struct *r = &s->regs;
	unsigned long long *dst[NREGS] = {
		&r->rax, &r->rbx, &r->rcx, &r->rdx, &r->rsi, &r->rdi, &r->rbp, &r->rsp,
		&r->rip, &r->eflags, &r->cs, &r->ss,
		&r->r8, &r->r9, &r->r10, &r->r11, &r->r12, &r->r13, &r->r14, &r->r15,
	};
	for (size_t i = 0; i < NREGS; i++)
		*dst[i] = v[i];
	memcpy(p->stack, stack, (size_t)dyn);
	s->stack = p->stack;
	s->stack_len = (size_t)dyn;
	return 1;
}

int perf_proc_next(struct perf_proc *p, struct perf_sample *s)
{
	for (int k = 0; k < p->n; k++) {
		int i = (p->next + k) % p->n;
		struct perf_thread *th = &p->th[i];
		if (!th->ring)
			continue;
		struct perf_event_mmap_page *m = (void *)th->ring;
		uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
		uint64_t tail = m->data_tail;
		while (tail != head) {
			struct perf_event_header h;
			if (head - tail < sizeof h)
				break;
			ring_copy(th, tail, &h, sizeof h);
			if (h.size < sizeof h || h.size > head - tail || h.size > th->data_len) {
				tail = head; /* not a record: drop what is there */
				break;
			}
			if (h.size > p->rec_cap) { /* cannot be: a size is a u16 */
				tail += h.size;
				continue;
			}
			ring_copy(th, tail, p->rec, h.size);
			tail += h.size;
			if (h.type == PERF_RECORD_LOST) {
				uint64_t lost;
				if (h.size >= sizeof h + 16) {
					memcpy(&lost, p->rec + sizeof h + 8, sizeof lost);
					p->c->lost += lost;
				}
				continue;
			}
			if (h.type == PERF_RECORD_THROTTLE) {
				p->c->throttled++;
				continue;
			}
			if (h.type != PERF_RECORD_SAMPLE)
				continue;
			if (!parse_sample(p, p->rec, h.size, s)) {
				p->c->no_regs++;
				continue;
			}
			__atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
			p->c->records++;
			p->next = (i + 1) % p->n; /* threads take turns */
			return 1;
		}
		__atomic_store_n(&m->data_tail, tail, __ATOMIC_RELEASE);
	}
	return 0;
}

/* The register numbered R (x86_64 encoding: rax 0 ... rdi 7, r8 8 ...). */
static unsigned long long *gpr(struct user_regs_struct *r, int n)
{
	unsigned long long *t[16] = {
		&r->rax, &r->rcx, &r->rdx, &r->rbx, &r->rsp, &r->rbp, &r->rsi, &r->rdi,
		&r->r8, &r->r9, &r->r10, &r->r11, &r->r12, &r->r13, &r->r14, &r->r15,
	};
	return t[n & 15];
}

/* See sampler_perf.h. Instruction encodings: Intel SDM vol. 2 (POP 58+r
 * with REX.B 41 for r8-r15; ADD r/m64, imm8 48 83 /0 and imm32 48 81 /0
 * with ModRM c4 = rsp; LEAVE c9; RET c3, REP RET f3 c3). */
int perf_leaf_epilogue(struct mem *code, struct mem *m, const struct user_regs_struct *regs,
		       struct user_regs_struct *caller)
{
	struct user_regs_struct r = *regs;
	uint8_t b[64];
	if (mem_read(code, r.rip, b, sizeof b) < 0)
		return 0;
	size_t at = 0;
	for (int k = 0; k < 8 && at + 7 <= sizeof b; k++) {
		uint64_t v;
		if (b[at] == 0xc3 || (b[at] == 0xf3 && b[at + 1] == 0xc3)) {
			if (mem_read_u64(m, r.rsp, &v) < 0 || !v)
				return 0;
			r.rip = v;
			r.rsp += 8;
			*caller = r;
			return 1;
		}
		int reg = -1, len = 0;
		if (b[at] >= 0x58 && b[at] <= 0x5f) {
			reg = b[at] - 0x58;
			len = 1;
		} else if (b[at] == 0x41 && b[at + 1] >= 0x58 && b[at + 1] <= 0x5f) {
			reg = 8 + b[at + 1] - 0x58;
			len = 2;
		}
		if (reg == 4)
			return 0;               /* pop rsp: no epilogue */
		if (reg >= 0) {
			if (mem_read_u64(m, r.rsp, &v) < 0)
				return 0;
			*gpr(&r, reg) = v;
			r.rsp += 8;
			at += (size_t)len;
			continue;
		}
		if (b[at] == 0x48 && (b[at + 1] == 0x83 || b[at + 1] == 0x81) && b[at + 2] == 0xc4) {
			int32_t imm;
			if (b[at + 1] == 0x83) {
				imm = (int8_t)b[at + 3];
				len = 4;
			} else {
				memcpy(&imm, b + at + 3, 4);
				len = 7;
			}
			if (imm < 0 || imm > 65536)
				return 0;
			r.rsp += (uint64_t)imm;
			at += (size_t)len;
			continue;
		}
		if (b[at] == 0xc9) {            /* leave: mov rsp, rbp; pop rbp */
			r.rsp = r.rbp;
			if (mem_read_u64(m, r.rsp, &v) < 0)
				return 0;
			r.rbp = v;
			r.rsp += 8;
			at += 1;
			continue;
		}
		return 0;
	}
	return 0;
}
