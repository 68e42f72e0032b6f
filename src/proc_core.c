/* proc_core.c: reading a process from its ELF core file (proc_core.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <elf.h>
#include <gelf.h>
#include <elfutils/libdwelf.h>
#include "err.h"
#include "intern.h"
#include "proc_core.h"

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

#define PRSTATUS_SIZE 336        /* struct elf_prstatus on x86_64 */
#define PRSTATUS_PID 32          /*   pr_pid */
#define PRSTATUS_CURSIG 12       /*   pr_cursig (short) */
#define PRSTATUS_REGS 112        /*   pr_reg: 27 x 8 bytes, user_regs_struct */
#define PRPSINFO_SIZE 136        /* struct elf_prpsinfo on x86_64 */
#define NOTES_MAX (64u << 20)    /* bytes of notes read, all PT_NOTE together */
#define BUILD_ID_MAX 64

struct core_seg {
	uint64_t vaddr, memsz;
	uint64_t off, filesz;    /* filesz cut at the end of the core file */
	unsigned perms;          /* MAP_* */
};

struct core_fmap {
	uint64_t start, end;
	uint64_t offset;         /* file offset in bytes */
	int file;                /* index into proc_core.files */
};

static void warnf(struct proc_core *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(struct proc_core *c, const char *fmt, ...)
{
	if (c->nwarn >= CORE_MAX_WARN)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->warn[c->nwarn++], sizeof c->warn[0], fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Lookups */

static const struct core_seg *seg_find(const struct proc_core *c, uint64_t a)
{
	int lo = 0, hi = c->nseg - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		const struct core_seg *s = &c->seg[mid];
		if (a < s->vaddr)
			hi = mid - 1;
		else if (a - s->vaddr >= s->memsz)
			lo = mid + 1;
		else
			return s;
	}
	return NULL;
}

/* Start of the first segment above A, or END when none is below END. */
static uint64_t seg_next(const struct proc_core *c, uint64_t a, uint64_t end)
{
	int lo = 0, hi = c->nseg;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (c->seg[mid].vaddr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->nseg && c->seg[lo].vaddr < end ? c->seg[lo].vaddr : end;
}

static const struct core_fmap *fmap_find(const struct proc_core *c, uint64_t a)
{
	int lo = 0, hi = c->nfmap - 1;
	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		const struct core_fmap *f = &c->fmap[mid];
		if (a < f->start)
			hi = mid - 1;
		else if (a >= f->end)
			lo = mid + 1;
		else
			return f;
	}
	return NULL;
}

const struct core_thread *proc_core_thread(const struct proc_core *c, pid_t tid)
{
	for (int i = 0; i < c->nth; i++)
		if (c->th[i].tid == tid)
			return &c->th[i];
	return NULL;
}

const struct core_file *proc_core_file(const struct proc_core *c, const char *path)
{
	for (int i = 0; i < c->nfiles; i++)
		if (c->files[i].path == path || !strcmp(c->files[i].path, path))
			return &c->files[i];
	return NULL;
}

int proc_core_open_file(const struct proc_core *c, const char *path, const char **open_path)
{
	const struct core_file *f = proc_core_file(c, path);
	if (f && f->fd < 0 && f->debug_path) {
		if (open_path)
			*open_path = f->debug_path;
		return open(f->debug_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	}
	if (!f || f->fd < 0)
		return -1;
	if (open_path)
		*open_path = f->open_path;
	return fcntl(f->fd, F_DUPFD_CLOEXEC, 3);
}

uint64_t proc_core_file_bias(const struct proc_core *c, const char *path)
{
	const struct core_file *f = proc_core_file(c, path);
	return f ? f->bias : 0;
}

/* ------------------------------------------------------------------ */
/* The reader */

/* Read from FD at OFF, at most LEN bytes below LIMIT (the file's end). */
static ssize_t pread_upto(int fd, void *buf, size_t len, uint64_t off, uint64_t limit)
{
	if (off >= limit)
		return 0;
	if (len > limit - off)
		len = (size_t)(limit - off);
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* Bytes at A from the file mapped there, when the file on disk is the
 * one that ran; at most LEN and never past the mapping END. */
static ssize_t read_from_file(struct proc_core *c, uint64_t a, void *buf, size_t len, uint64_t end)
{
	const struct core_fmap *fm = fmap_find(c, a);
	if (!fm)
		return 0;
	const struct core_file *f = &c->files[fm->file];
	if (f->fd < 0)
		return 0;
	if (end > fm->end)
		end = fm->end;
	if (len > end - a)
		len = (size_t)(end - a);
	return pread_upto(f->fd, buf, len, fm->offset + (a - fm->start), f->size_bytes);
}

static ssize_t core_read(struct mem *base, uint64_t addr, void *buf, size_t len)
{
	struct proc_core *c = (struct proc_core *)base;
	if (len > MEM_MAX_READ)
		return -LS_E_GARBAGE;
	size_t got = 0;
	while (got < len) {
		uint64_t a = addr + got;
		if (a < addr)
			break; /* wrapped */
		size_t want = len - got;
		const struct core_seg *s = seg_find(c, a);
		ssize_t n;
		if (s) {
			uint64_t in = a - s->vaddr;
			if (in < s->filesz) {
				size_t k = want < s->filesz - in ? want : (size_t)(s->filesz - in);
				n = pread_upto(c->fd, (char *)buf + got, k, s->off + in, c->size_bytes);
				if (n > 0 && (size_t)n < k) {
					got += (size_t)n;
					break;
				}
			} else {
				/* not dumped: the file on disk, when it is the one */
				n = read_from_file(c, a, (char *)buf + got, want, s->vaddr + s->memsz);
			}
		} else {
			/* gcore leaves file-backed text out of the segments */
			const struct core_fmap *fm = fmap_find(c, a);
			/* never past the start of the next segment */
			uint64_t end = seg_next(c, a, fm ? fm->end : a);
			n = fm ? read_from_file(c, a, (char *)buf + got, want, end) : 0;
		}
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	return got ? (ssize_t)got : -LS_E_FAULT;
}

/* ------------------------------------------------------------------ */
/* Notes */

static void parse_prstatus(struct proc_core *c, const uint8_t *d, size_t len)
{
	if (len < PRSTATUS_SIZE)
		return;
	if (c->nth >= CORE_MAX_THREADS) {
		if (c->nth == CORE_MAX_THREADS)
			warnf(c, "more than %d threads: the rest are not shown", CORE_MAX_THREADS);
		c->nth++;
		return;
	}
	struct core_thread *t = &c->th[c->nth++];
	int32_t pid;
	int16_t sig;
	memcpy(&pid, d + PRSTATUS_PID, 4);
	memcpy(&sig, d + PRSTATUS_CURSIG, 2);
	t->tid = pid;
	t->signo = sig;
	memcpy(&t->regs, d + PRSTATUS_REGS, sizeof t->regs);
}

static void parse_prpsinfo(struct proc_core *c, const uint8_t *d, size_t len)
{
	if (len < PRPSINFO_SIZE)
		return;
	int32_t pid;
	c->sname = (char)d[1];
	memcpy(&pid, d + 24, 4);
	c->pid = pid;
	memcpy(c->fname, d + 40, 16);
	c->fname[16] = 0;
	memcpy(c->psargs, d + 56, 80);
	c->psargs[80] = 0;
	/* only printable text: these name the process in the output */
	for (char *p = c->fname; *p; p++)
		if ((unsigned char)*p < 32 || *p == 127)
			*p = '?';
	for (char *p = c->psargs; *p; p++)
		if ((unsigned char)*p < 32 || *p == 127)
			*p = '?';
	size_t n = strlen(c->psargs);
	while (n && c->psargs[n - 1] == ' ')
		c->psargs[--n] = 0;
}

static void parse_auxv(struct proc_core *c, const uint8_t *d, size_t len, uint64_t *entry)
{
	c->auxv_len = len < sizeof c->auxv ? len : sizeof c->auxv;
	memcpy(c->auxv, d, c->auxv_len);
	for (size_t o = 0; o + 16 <= len; o += 16) {
		uint64_t k, v;
		memcpy(&k, d + o, 8);
		memcpy(&v, d + o + 8, 8);
		if (k == AT_NULL)
			break;
		if (k == AT_ENTRY)
			*entry = v;
		else if (k == AT_SYSINFO_EHDR)
			c->vdso_addr = v;
		else if (k == AT_EXECFN)
			c->execfn = v;
	}
}

/* Index of PATH (interned) in C->files, added when new; -1 when out of
 * memory, -2 past CORE_MAX_PATHS distinct paths. */
static int file_index(struct proc_core *c, const char *path)
{
	for (int i = c->nfiles; i-- > 0;)
		if (c->files[i].path == path)
			return i;
	if (c->nfiles >= CORE_MAX_PATHS)
		return -2;
	struct core_file *nf = realloc(c->files, ((size_t)c->nfiles + 1) * sizeof *nf);
	if (!nf)
		return -1;
	c->files = nf;
	memset(&nf[c->nfiles], 0, sizeof nf[0]);
	nf[c->nfiles].path = nf[c->nfiles].open_path = path;
	nf[c->nfiles].fd = -1;
	nf[c->nfiles].state = CORE_FILE_MISSING;
	return c->nfiles++;
}

/* NT_FILE: count, page size, COUNT x (start, end, page offset), then
 * COUNT NUL-terminated names (fs/binfmt_elf.c, fill_files_note). */
static int parse_nt_file(struct proc_core *c, const uint8_t *d, size_t len)
{
	uint64_t count, page;
	if (len < 16 || c->fmap)
		return 0;
	memcpy(&count, d, 8);
	memcpy(&page, d + 8, 8);
	uint64_t fit = (len - 16) / 24;
	if (count > fit) {
		warnf(c, "file note claims %llu mappings, room for %llu: %llu read",
		      (unsigned long long)count, (unsigned long long)fit, (unsigned long long)fit);
		count = fit;
	}
	if (count > CORE_MAX_FILES) {
		warnf(c, "more than %d file mappings: the rest are ignored", CORE_MAX_FILES);
		count = CORE_MAX_FILES;
	}
	if (page == 0 || page > (1u << 30) || (page & (page - 1))) {
		warnf(c, "file note has a page size of %llu: ignored", (unsigned long long)page);
		return 0;
	}
	c->fmap = calloc(count ? count : 1, sizeof *c->fmap);
	if (!c->fmap)
		return -LS_E_NOMEM;
	const char *names = (const char *)d + 16 + count * 24, *end = (const char *)d + len;
	int n = 0, cut = 0;
	for (uint64_t i = 0; i < count && names < end; i++) {
		const char *z = memchr(names, 0, (size_t)(end - names));
		size_t nl = z ? (size_t)(z - names) : (size_t)(end - names);
		uint64_t s, e, pg;
		memcpy(&s, d + 16 + i * 24, 8);
		memcpy(&e, d + 16 + i * 24 + 8, 8);
		memcpy(&pg, d + 16 + i * 24 + 16, 8);
		const char *name = names;
		names += nl + 1;
		if (e <= s || nl == 0 || pg > UINT64_MAX / page)
			continue;
		/* the mappings of one file come one after the other */
		const char *ip = intern_n(name, nl);
		int fi = n && c->files[c->fmap[n - 1].file].path == ip ? c->fmap[n - 1].file : file_index(c, ip);
		if (fi == -2) {
			if (!cut++)
				warnf(c, "more than %d mapped files: the rest are ignored", CORE_MAX_PATHS);
			continue;
		}
		if (fi < 0)
			return -LS_E_NOMEM;
		c->fmap[n++] = (struct core_fmap){ s, e, pg * page, fi };
	}
	c->nfmap = n;
	return 0;
}

static int parse_notes(struct proc_core *c, Elf *elf, const GElf_Phdr *ph, uint64_t *entry)
{
	Elf_Data *data = elf_getdata_rawchunk(elf, (int64_t)ph->p_offset, ph->p_filesz, ELF_T_NHDR);
	if (!data)
		return -LS_E_GARBAGE;
	size_t off = 0, name_off, desc_off;
	GElf_Nhdr nh;
	while (off < data->d_size &&
	       (off = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
		const uint8_t *desc = (const uint8_t *)data->d_buf + desc_off;
		const char *name = (const char *)data->d_buf + name_off;
		int core = nh.n_namesz == 5 && !memcmp(name, "CORE", 5);
		int linux_ = nh.n_namesz == 6 && !memcmp(name, "LINUX", 6);
		if (!core && !linux_)
			continue;
		if (core && nh.n_type == NT_PRSTATUS)
			parse_prstatus(c, desc, nh.n_descsz);
		else if (core && nh.n_type == NT_PRPSINFO)
			parse_prpsinfo(c, desc, nh.n_descsz);
		else if (core && nh.n_type == NT_AUXV)
			parse_auxv(c, desc, nh.n_descsz, entry);
		else if (core && nh.n_type == NT_FILE) {
			int rc = parse_nt_file(c, desc, nh.n_descsz);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Files on disk against the core */

/* The GNU build-id of the ELF mapped at START (its header page, as the
 * core holds it: kernel and gcore dump the first page of every ELF file
 * mapping). Reads the core only (files are not open yet). Returns its
 * length (<= BUILD_ID_MAX) or 0. */
static size_t core_build_id(struct proc_core *c, uint64_t start, uint8_t *id, uint64_t *bias,
			    int *elf)
{
	Elf64_Ehdr eh;
	if (mem_read(&c->base, start, &eh, sizeof eh) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum > 64 || eh.e_phoff > 65536)
		return 0;
	*elf = 1;
	uint64_t low = UINT64_MAX;
	size_t found = 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (mem_read(&c->base, start + eh.e_phoff + (uint64_t)i * sizeof ph, &ph, sizeof ph) < 0)
			return found;
		if (ph.p_type == PT_LOAD && ph.p_vaddr < low) {
			low = ph.p_vaddr;
			/* a shared object or PIE is loaded at START - its lowest
			 * segment's page; an ET_EXEC where it says */
			*bias = eh.e_type == ET_DYN ? start - (low & ~4095ull) : 0;
		}
		if (found)
			continue;
		if (ph.p_type != PT_NOTE || ph.p_filesz > 4096 || ph.p_offset > (1u << 20))
			continue;
		uint8_t nb[4096];
		if (mem_read(&c->base, start + ph.p_offset, nb, (size_t)ph.p_filesz) < 0)
			continue;
		for (size_t o = 0; o + 12 <= ph.p_filesz;) {
			uint32_t nsz, dsz, type;
			memcpy(&nsz, nb + o, 4);
			memcpy(&dsz, nb + o + 4, 4);
			memcpy(&type, nb + o + 8, 4);
			size_t no = o + 12, dof = no + ((nsz + 3u) & ~3u);
			if (nsz > 4096 || dsz > 4096 || dof + dsz > ph.p_filesz)
				break;
			if (type == NT_GNU_BUILD_ID && nsz == 4 && !memcmp(nb + no, "GNU", 4) &&
			    dsz > 0 && dsz <= BUILD_ID_MAX) {
				memcpy(id, nb + dof, dsz);
				found = dsz;
				break;
			}
			o = dof + ((dsz + 3u) & ~3u);
		}
	}
	return found;
}

/* Open PATH and read its build-id into ID; fd (>= 0), *LEN and *SIZE,
 * or -1 with errno. */
static int open_with_build_id(const char *path, uint8_t *id, size_t *len, uint64_t *size)
{
	/* O_NONBLOCK: a path the core names may be a FIFO now */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = ENOENT;
		return -1;
	}
	*size = (uint64_t)st.st_size;
	*len = 0;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (e) {
		const void *p;
		ssize_t n = dwelf_elf_gnu_build_id(e, &p);
		if (n > 0 && n <= BUILD_ID_MAX) {
			memcpy(id, p, (size_t)n);
			*len = (size_t)n;
		}
		elf_end(e);
	}
	return fd;
}

/* The ELF address of the lowest mapping of file FI with offset 0, or 0. */
static uint64_t file_start(const struct proc_core *c, int fi)
{
	for (int i = 0; i < c->nfmap; i++)
		if (c->fmap[i].file == fi && c->fmap[i].offset == 0)
			return c->fmap[i].start;
	return 0;
}

static void hex(char *out, size_t outlen, const uint8_t *id, size_t len)
{
	size_t o = 0;
	out[0] = 0;
	for (size_t i = 0; i < len && o + 3 <= outlen; i++)
		o += (size_t)snprintf(out + o, outlen - o, "%02x", id[i]);
}

/* Check every mapped file against the core; EXE stands in for the
 * executable. Returns 0 or -LS_E_NOEXE (EXE unusable, WHY filled). */
static int check_files(struct proc_core *c, const char *exe, char *why, size_t whylen)
{
	int missing = 0, differ = 0;
	char first[160] = "";
	for (int i = 0; i < c->nfiles; i++) {
		struct core_file *f = &c->files[i];
		uint8_t want[BUILD_ID_MAX], have[BUILD_ID_MAX];
		uint64_t st = file_start(c, i);
		size_t wl = st ? core_build_id(c, st, want, &f->bias, &f->elf) : 0, hl = 0;
		int is_exe = exe && f->path == c->exe;
		size_t pl = strlen(f->path);
		static const char del[] = " (deleted)";
		if (is_exe)
			f->open_path = intern(exe);
		else if (pl > sizeof del - 1 && !strcmp(f->path + pl - (sizeof del - 1), del))
			/* replaced or removed since it was mapped: a file at its
			 * path is used only when its build-id is the one */
			f->open_path = intern_n(f->path, pl - (sizeof del - 1));
		struct stat xst;
		if (is_exe && stat(exe, &xst) == 0 && !S_ISREG(xst.st_mode)) {
			/* open() of a directory succeeds and /dev/null reads as
			 * empty: say what it is, not what reading it then left */
			f->state = CORE_FILE_MISSING;
			snprintf(why, whylen, "%s: %s", exe,
				 S_ISDIR(xst.st_mode) ? "is a directory" : "not a regular file");
			return -LS_E_NOEXE;
		}
		int fd = open_with_build_id(f->open_path, have, &hl, &f->size_bytes);
		if (fd >= 0 && f->open_path != f->path && !is_exe && (!wl || hl != wl || memcmp(want, have, wl))) {
			close(fd); /* unchecked or another build: not the deleted one */
			fd = -1;
			errno = ENOENT;
		}
		if (fd < 0) {
			f->state = CORE_FILE_MISSING;
			if (is_exe) {
				snprintf(why, whylen, "%s: %s", exe, strerror(errno));
				return -LS_E_NOEXE;
			}
		} else if (wl && (hl != wl || memcmp(want, have, wl))) {
			close(fd);
			f->state = CORE_FILE_DIFFERS;
			if (is_exe) {
				char a[2 * BUILD_ID_MAX + 1], b[2 * BUILD_ID_MAX + 1];
				hex(a, sizeof a, want, wl);
				hex(b, sizeof b, have, hl);
				snprintf(why, whylen, "%s is not the executable of the core (build-id %s, the core's %s)",
					 exe, hl ? b : "none", a);
				return -LS_E_NOEXE;
			}
		} else {
			f->fd = fd;
			f->state = wl ? CORE_FILE_OK : CORE_FILE_UNCHECKED;
		}
		/* only ELF files matter: a data file mapped (locale archive) is
		 * never read for code */
		if (f->state >= CORE_FILE_MISSING && wl) {
			/* its symbols may still be here: the separate debug file */
			char dp[256], h[2 * BUILD_ID_MAX + 1];
			hex(h, sizeof h, want, wl);
			snprintf(dp, sizeof dp, "/usr/lib/debug/.build-id/%.2s/%s.debug", h, h + 2);
			if (access(dp, R_OK) == 0)
				f->debug_path = intern(dp);
		}
		/* the executable is said apart (cmd_dump_core.c) */
		if (f->state >= CORE_FILE_MISSING && wl && f->path != c->exe) {
			if (f->state == CORE_FILE_MISSING)
				missing++;
			else
				differ++;
			if (!first[0])
				snprintf(first, sizeof first, "%s (%s)", f->path,
					 f->state == CORE_FILE_MISSING ? "not found" : "another build");
		}
	}
	if (missing + differ)
		warnf(c, "%d mapped file%s not on disk as the core knew %s, e.g. %s: code not in the core "
		      "cannot be read there", missing + differ, missing + differ > 1 ? "s" : "",
		      missing + differ > 1 ? "them" : "it", first);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Mappings: PT_LOAD segments, and NT_FILE ranges the core left out */

static unsigned seg_perms(uint32_t flags)
{
	return ((flags & PF_R) ? MAP_R : 0) | ((flags & PF_W) ? MAP_W : 0) |
	       ((flags & PF_X) ? MAP_X : 0) | MAP_P;
}

/* Permissions of the part at file offset OFF of file F, from the
 * file's own program headers, or its debug file's (the same): gcore
 * does not say them. MAP_R when not known. */
static unsigned file_perms(const struct core_file *f, uint64_t off, uint64_t addr)
{
	unsigned perms = MAP_R | MAP_P;
	int fd = f->fd >= 0 ? f->fd : f->debug_path ? open(f->debug_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) : -1;
	if (fd < 0)
		return perms;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	size_t n;
	if (!e || elf_getphdrnum(e, &n) != 0) {
		elf_end(e);
		if (fd != f->fd)
			close(fd);
		return perms;
	}
	for (size_t i = 0; i < n && i < 256; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* by address when the core gave the bias (a debug file's
		 * offsets are not the original's), else by file offset */
		uint64_t at = f->elf ? addr - f->bias : off;
		uint64_t lo = f->elf ? ph.p_vaddr & ~4095ull : ph.p_offset & ~4095ull;
		uint64_t hi = f->elf ? ph.p_vaddr + ph.p_memsz : ph.p_offset + ph.p_filesz;
		if (at >= lo && at < hi) {
			perms = seg_perms(ph.p_flags);
			break;
		}
	}
	elf_end(e);
	if (fd != f->fd)
		close(fd);
	return perms;
}

static int map_cmp(const void *a, const void *b)
{
	const struct proc_map *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static int maps_add(struct proc_maps *m, int *cap, const struct proc_map *pm)
{
	if (m->n == *cap) {
		int nc = *cap ? *cap * 2 : 64;
		struct proc_map *nm = realloc(m->m, (size_t)nc * sizeof *nm);
		if (!nm)
			return -LS_E_NOMEM;
		m->m = nm;
		*cap = nc;
	}
	m->m[m->n++] = *pm;
	return 0;
}

static const char *base_name(const char *p)
{
	const char *s = strrchr(p, '/');
	return s ? intern(s + 1) : p;
}

static int build_maps(struct proc_core *c)
{
	int cap = 0;
	struct proc_maps *m = &c->maps;
	for (int i = 0; i < c->nseg; i++) {
		const struct core_seg *s = &c->seg[i];
		struct proc_map pm = { .start = s->vaddr, .end = s->vaddr + s->memsz, .perms = s->perms };
		const struct core_fmap *fm = fmap_find(c, s->vaddr);
		if (fm && pm.end <= fm->end) {
			pm.path = c->files[fm->file].path;
			pm.offset = fm->offset + (s->vaddr - fm->start);
			pm.inode = (uint64_t)fm->file + 1;
		} else if (c->vdso_addr && s->vaddr == c->vdso_addr) {
			pm.path = intern("[vdso]");
		} else if (s->vaddr == 0xffffffffff600000ull) {
			pm.path = intern("[vsyscall]");
		} else {
			pm.path = intern("");
		}
		pm.name = base_name(pm.path);
		if (maps_add(m, &cap, &pm) < 0)
			return -LS_E_NOMEM;
	}
	for (int i = 0; i < c->nfmap; i++) {
		const struct core_fmap *fm = &c->fmap[i];
		const struct core_file *f = &c->files[fm->file];
		uint64_t cur = fm->start;
		while (cur < fm->end) {
			const struct core_seg *s = seg_find(c, cur);
			if (s) {
				cur = s->vaddr + s->memsz;
				continue;
			}
			uint64_t end = seg_next(c, cur, fm->end);
			uint64_t off = fm->offset + (cur - fm->start);
			struct proc_map pm = { .start = cur, .end = end, .offset = off,
					       .inode = (uint64_t)fm->file + 1,
					       .perms = file_perms(f, off, cur), .path = f->path };
			pm.name = base_name(pm.path);
			if (maps_add(m, &cap, &pm) < 0)
				return -LS_E_NOMEM;
			cur = end;
		}
	}
	if (m->n)
		qsort(m->m, (size_t)m->n, sizeof *m->m, map_cmp);
	/* NT_FILE ranges that overlap each other (a bogus note): keep the first */
	int k = 0;
	for (int i = 0; i < m->n; i++) {
		if (k && m->m[i].start < m->m[k - 1].end)
			continue;
		m->m[k++] = m->m[i];
	}
	m->n = k;
	return 0;
}

static void find_cmdline(struct proc_core *c);

static int seg_cmp(const void *a, const void *b)
{
	const struct core_seg *x = a, *y = b;
	return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static int fmap_cmp(const void *a, const void *b)
{
	const struct core_fmap *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* ------------------------------------------------------------------ */

/* The ELF header of the core open as ELF: an x86-64 ET_CORE with program
 * headers, their count into *NPH (cut to CORE_MAX_SEGS + 16, said).
 * 0, or -LS_E_NOTCORE / -LS_E_ARCH32 / -LS_E_CORETRUNC with WHY set. */
static int check_header(struct proc_core *c, Elf *elf, size_t *nph, char *why, size_t whylen)
{
	GElf_Ehdr eh;
	/* a cut core, said before libelf fails on it ("no error", "invalid
	 * data"): the header and the program headers must be whole */
	Elf64_Ehdr raw;
	ssize_t rn = pread(c->fd, &raw, sizeof raw, 0);
	if (rn >= SELFMAG && !memcmp(raw.e_ident, ELFMAG, SELFMAG)) {
		if (c->size_bytes < sizeof raw) {
			snprintf(why, whylen, "%llu bytes; its ELF header ends at %zu",
				 (unsigned long long)c->size_bytes, sizeof raw);
			return -LS_E_CORETRUNC;
		}
		if (raw.e_ident[EI_CLASS] == ELFCLASS64 && raw.e_ident[EI_DATA] == ELFDATA2LSB &&
		    raw.e_type == ET_CORE && raw.e_phnum != PN_XNUM && raw.e_phnum &&
		    raw.e_phentsize == sizeof(Elf64_Phdr)) {
			uint64_t end = raw.e_phoff + (uint64_t)raw.e_phnum * sizeof(Elf64_Phdr);
			if (raw.e_phoff > c->size_bytes || end > c->size_bytes) {
				snprintf(why, whylen, "%llu bytes; its program headers end at %llu",
					 (unsigned long long)c->size_bytes,
					 raw.e_phoff > UINT64_MAX - (1u << 22) ? 0ull : (unsigned long long)end);
				return -LS_E_CORETRUNC;
			}
		}
	}
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		/* systemd-coredump and apport keep cores compressed */
		static const struct { const char *magic; size_t len; const char *name; } z[] = {
			{ "\x28\xb5\x2f\xfd", 4, "zstd" }, { "\xfd" "7zXZ", 5, "xz" },
			{ "\x04\x22\x4d\x18", 4, "lz4" }, { "\x1f\x8b", 2, "gzip" },
		};
		uint8_t head[8] = { 0 };
		ssize_t hn = pread(c->fd, head, sizeof head, 0);
		snprintf(why, whylen, "not an ELF file");
		for (size_t i = 0; i < sizeof z / sizeof z[0]; i++)
			if (hn >= (ssize_t)z[i].len && !memcmp(head, z[i].magic, z[i].len))
				snprintf(why, whylen, "a %s-compressed file: decompress it first "
					 "(coredumpctl dump -o FILE, or %s -d)", z[i].name,
					 i == 3 ? "gzip" : z[i].name);
		return -LS_E_NOTCORE;
	}
	if (eh.e_type != ET_CORE) {
		snprintf(why, whylen, "an ELF file of type %u, not a core (type 4)", (unsigned)eh.e_type);
		return -LS_E_NOTCORE;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		snprintf(why, whylen, "a core of a %s machine %u process",
			 eh.e_ident[EI_CLASS] == ELFCLASS64 ? "64-bit" : "32-bit", (unsigned)eh.e_machine);
		return -LS_E_ARCH32;
	}
	if (elf_getphdrnum(elf, nph) != 0 || *nph == 0) {
		snprintf(why, whylen, "no program headers (%s)", elf_errmsg(-1));
		return eh.e_phoff + 56 > c->size_bytes ? -LS_E_CORETRUNC : -LS_E_NOTCORE;
	}
	if (*nph > CORE_MAX_SEGS + 16) {
		warnf(c, "%zu program headers: the first %d read", *nph, CORE_MAX_SEGS + 16);
		*nph = CORE_MAX_SEGS + 16;
	}
	return 0;
}

/* The NPH program headers: PT_NOTE parsed (threads, files, auxv; the
 * entry point into *ENTRY), PT_LOAD into c->seg (cut to what the file
 * holds, said). 0, or -LS_E_NOMEM, or with no thread note
 * -LS_E_CORETRUNC / -LS_E_NOTCORE with WHY set. */
static int read_phdrs(struct proc_core *c, Elf *elf, size_t nph, uint64_t *entry, char *why,
		      size_t whylen)
{
	int notes_cut = 0;
	uint64_t notes_bytes = 0, lost = 0, notes_end = 0;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph))
			continue;
		if (ph.p_type == PT_NOTE) {
			if (ph.p_offset > c->size_bytes || ph.p_filesz > c->size_bytes - ph.p_offset) {
				uint64_t e = ph.p_offset + ph.p_filesz;
				if (e >= ph.p_offset && e > notes_end)
					notes_end = e;
				notes_cut++;
				continue;
			}
			if (notes_bytes + ph.p_filesz > NOTES_MAX) {
				warnf(c, "notes past %u MiB ignored", NOTES_MAX >> 20);
				continue;
			}
			notes_bytes += ph.p_filesz;
			if (parse_notes(c, elf, &ph, entry) == -LS_E_NOMEM)
				return -LS_E_NOMEM;
			continue;
		}
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0 || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
			continue;
		struct core_seg *s = &c->seg[c->nseg];
		s->vaddr = ph.p_vaddr;
		s->memsz = ph.p_memsz;
		s->off = ph.p_offset;
		s->filesz = ph.p_filesz < ph.p_memsz ? ph.p_filesz : ph.p_memsz;
		s->perms = seg_perms(ph.p_flags);
		if (s->off > c->size_bytes || s->filesz > c->size_bytes - s->off) {
			uint64_t keep = s->off > c->size_bytes ? 0 : c->size_bytes - s->off;
			lost += s->filesz - keep;
			s->filesz = keep;
		}
		c->nseg++;
	}
	if (c->nth == 0) {
		if (notes_cut) {
			snprintf(why, whylen, "%llu bytes; its notes (threads, registers, files) end at %llu",
				 (unsigned long long)c->size_bytes, (unsigned long long)notes_end);
			return -LS_E_CORETRUNC;
		}
		snprintf(why, whylen, "no thread (NT_PRSTATUS) note");
		return -LS_E_NOTCORE;
	}
	c->lost_bytes = lost;
	if (lost)
		warnf(c, "core file truncated at %llu bytes: %llu bytes of memory it should hold are missing",
		      (unsigned long long)c->size_bytes, (unsigned long long)lost);
	return 0;
}

/* Segments and NT_FILE ranges sorted by address; one that overlaps an
 * earlier one is dropped (a bogus core), said. */
static void sort_ranges(struct proc_core *c)
{
	qsort(c->seg, (size_t)c->nseg, sizeof *c->seg, seg_cmp);
	int k = 0, dropped = 0;
	for (int i = 0; i < c->nseg; i++) {
		if (k && c->seg[i].vaddr < c->seg[k - 1].vaddr + c->seg[k - 1].memsz) {
			dropped++;
			continue;
		}
		c->seg[k++] = c->seg[i];
	}
	c->nseg = k;
	if (dropped)
		warnf(c, "%d memory segments overlap others: ignored", dropped);
	if (c->nfmap) {
		qsort(c->fmap, (size_t)c->nfmap, sizeof *c->fmap, fmap_cmp);
		int kk = 0;
		for (int i = 0; i < c->nfmap; i++)
			if (!kk || c->fmap[i].start >= c->fmap[kk - 1].end)
				c->fmap[kk++] = c->fmap[i];
		if (kk < c->nfmap)
			warnf(c, "%d file mappings overlap others: ignored", c->nfmap - kk);
		c->nfmap = kk;
	}
}

int proc_core_open(const char *path, const char *exe, struct proc_core **out, char *why,
		   size_t whylen)
{
	why[0] = 0;
	struct proc_core *c = calloc(1, sizeof *c);
	if (!c)
		return -LS_E_NOMEM;
	c->base.read = core_read;
	c->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: no wait */
	if (c->fd < 0) {
		int e = errno;
		snprintf(why, whylen, "cannot open: %s", strerror(e));
		free(c);
		return e == ENOENT ? -LS_E_NOTCORE : err_from_errno(e);
	}
	struct stat st;
	int rc = -LS_E_NOTCORE;
	Elf *elf = NULL;
	size_t nph = 0;
	uint64_t entry = 0;
	if (fstat(c->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "not a regular file");
		goto fail;
	}
	c->size_bytes = (uint64_t)st.st_size;
	elf_version(EV_CURRENT);
	elf = elf_begin(c->fd, ELF_C_READ, NULL);
	rc = check_header(c, elf, &nph, why, whylen);
	if (rc < 0)
		goto fail;
	c->seg = calloc(nph, sizeof *c->seg);
	c->th = calloc(CORE_MAX_THREADS, sizeof *c->th);
	if (!c->seg || !c->th) {
		rc = -LS_E_NOMEM;
		goto fail;
	}
	rc = read_phdrs(c, elf, nph, &entry, why, whylen);
	if (rc < 0)
		goto fail;
	if (c->nth > CORE_MAX_THREADS)
		c->nth = CORE_MAX_THREADS;
	c->signo = c->th[0].signo;
	if (!c->pid)
		c->pid = c->th[0].tid;
	sort_ranges(c);
	const struct core_fmap *xf = entry ? fmap_find(c, entry) : NULL;
	c->exe = xf ? c->files[xf->file].path : NULL;
	if (exe && !c->exe) {
		/* no file note or auxv to say which: the file given is it */
		snprintf(why, whylen, "the core does not say which file is its executable");
		rc = -LS_E_NOEXE;
		goto fail;
	}
	rc = check_files(c, exe, why, whylen);
	if (rc < 0)
		goto fail;
	rc = build_maps(c);
	if (rc < 0)
		goto fail;
	if (c->vdso_addr) {
		const struct proc_map *vm = proc_maps_find(&c->maps, c->vdso_addr);
		size_t vl = vm ? (size_t)(vm->end - vm->start) : 0;
		if (vl && vl <= (256u << 10) && (c->vdso = malloc(vl)) &&
		    mem_read(&c->base, c->vdso_addr, c->vdso, vl) == 0)
			c->vdso_len = vl;
	}
	find_cmdline(c);
	elf_end(elf);
	*out = c;
	return 0;
fail:
	if (elf)
		elf_end(elf);
	proc_core_close(c);
	return rc;
}

/* The process's arguments, from its initial stack: argc, argv[],
 * NULL, envp[], NULL, then the auxiliary vector, whose start the
 * NT_AUXV note holds byte for byte; found in the stack mapping (the one
 * holding AT_EXECFN's string), then walked backwards. */
static void find_cmdline(struct proc_core *c)
{
	const struct proc_map *sm = c->execfn ? proc_maps_find(&c->maps, c->execfn) : NULL;
	if (!sm || c->auxv_len < 32)
		return;
	uint64_t lo = sm->end - sm->start > (8u << 20) ? sm->end - (8u << 20) : sm->start;
	uint64_t found = 0;
	uint8_t *buf = malloc(65536 + 32);
	if (!buf)
		return;
	/* from the top down: the vector is near the top of the stack */
	for (uint64_t a = sm->end; a > lo && !found;) {
		uint64_t from = a - lo > 65536 ? a - 65536 : lo;
		size_t n = (size_t)(a - from) + (a < sm->end ? 32 : 0);
		if (mem_read(&c->base, from, buf, n) < 0)
			break;
		for (size_t o = n >= 32 ? (n - 32) & ~(size_t)7 : 0;; o -= 8) {
			if (n >= 32 && !memcmp(buf + o, c->auxv, 32)) {
				found = from + o;
				break;
			}
			if (o < 8)
				break;
		}
		a = from;
	}
	free(buf);
	if (!found)
		return;
	uint64_t p = found - 8, w;
	if (mem_read_u64(&c->base, p, &w) < 0 || w != 0)
		return;
	int i;
	for (i = 0; i < 65536; i++) { /* envp, back to argv's NULL */
		p -= 8;
		if (mem_read_u64(&c->base, p, &w) < 0)
			return;
		if (w == 0)
			break;
	}
	uint64_t argv_end = p, nargs;
	for (nargs = 0; nargs < 65536; nargs++) {
		p -= 8;
		if (mem_read_u64(&c->base, p, &w) < 0)
			return;
		if (w == nargs)
			break; /* argc */
	}
	if (nargs == 0 || nargs == 65536)
		return;
	size_t o = 0;
	for (uint64_t k = 0; k < nargs && o + 2 < sizeof c->cmdline; k++) {
		char arg[sizeof c->cmdline];
		if (mem_read_u64(&c->base, p + 8 + 8 * k, &w) < 0 || w >= argv_end + 65536 * 64)
			break;
		ssize_t n = mem_read_str(&c->base, w, arg, sizeof arg - 1);
		if (n < 0)
			break;
		o += (size_t)snprintf(c->cmdline + o, sizeof c->cmdline - o, "%s%s", k ? " " : "", arg);
		if (o >= sizeof c->cmdline)
			o = sizeof c->cmdline - 1;
	}
	for (char *q = c->cmdline; *q; q++)
		if ((unsigned char)*q < 32 || *q == 127)
			*q = '?';
}

void proc_core_close(struct proc_core *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nfiles; i++)
		if (c->files[i].fd >= 0)
			close(c->files[i].fd);
	if (c->fd >= 0)
		close(c->fd);
	proc_maps_free(&c->maps);
	free(c->files);
	free(c->fmap);
	free(c->seg);
	free(c->th);
	free(c->vdso);
	free(c);
}
