/* elf_sym.c: modules and symbolization with libdwfl. */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <gelf.h>
#include <elfutils/libdw.h>
#include "elf_sym.h"
#include "perfmap.h"
#include "err.h"
#include "htab.h"
#include "intern.h"
#include "msg.h"

#define CACHE_BITS 14

static void line_toks_forget(struct symtab *s);
static void names_forget(struct symtab *s);

struct cache_ent {
	uint64_t key;          /* pc | retaddr bit 63 ... 0 = empty */
	struct sym_info info;
	int found;
};

struct symtab {
	pid_t pid;
	Dwfl *dwfl;
	Dwfl_Callbacks cb;
	char *debuginfo_path;
	struct proc_maps maps;
	struct cache_ent *cache;
	const char *exe_path;  /* interned /proc/PID/exe target (as in the maps), or NULL */
	const char *exe_name;  /* interned name the executable runs as, or NULL */
	/* symtab_find's index of every defined symbol name of every module
	 * (the first one of a name wins, in module order), built on the
	 * first symtab_find and dropped by symtab_refresh: one pass over
	 * the symbols instead of one per name looked for */
	struct name_ent *names;
	size_t nnames, capnames;
	struct htab names_ix;
	int names_built;
	const struct symtab_source *src; /* a process not running (core file), or NULL */
	struct perfmap *perfmap; /* its perf map, opened on first use (perfmap.h) */
};


/* Open module files through /proc/PID/root (containers, chroots), then
 * through /proc/PID/map_files (a binary deleted or replaced on disk while
 * it runs), then fall back to libdwfl's own search (also the vDSO). */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
		    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct symtab *s = *userdata; /* set by report(); libdwfl opens files lazily */
	if (s && s->src) {
		/* a core: only the files that are the builds that ran, the
		 * vDSO from the core's copy */
		const char *op = NULL;
		*elfp = NULL;
		if (modname && !strcmp(modname, "[vdso]") && s->src->vdso) {
			*elfp = elf_memory((char *)s->src->vdso, s->src->vdso_len);
			return -1;
		}
		int fd = modname ? s->src->open_file(s->src->arg, modname, &op) : -1;
		if (fd >= 0)
			*file_name = strdup(op ? op : modname);
		return fd;
	}
	if (modname && modname[0] == '/' && s) {
		char path[4096];
		snprintf(path, sizeof path, "/proc/%d/root%s", (int)s->pid, modname);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			*file_name = strdup(path);
			*elfp = NULL;
			return fd;
		}
		size_t ml = strlen(modname);
		static const char del[] = " (deleted)";
		if (ml > sizeof del - 1 && !strcmp(modname + ml - (sizeof del - 1), del))
			ml -= sizeof del - 1;
		for (int i = 0; i < s->maps.n; i++) {
			const struct proc_map *m = &s->maps.m[i];
			if (m->offset != 0 || strncmp(m->path, modname, ml) != 0 ||
			    (m->path[ml] != 0 && strcmp(m->path + ml, " (deleted)") != 0))
				continue;
			snprintf(path, sizeof path, "/proc/%d/map_files/%llx-%llx", (int)s->pid,
				 (unsigned long long)m->start, (unsigned long long)m->end);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				*file_name = strdup(path);
				*elfp = NULL;
				return fd;
			}
		}
	}
	void *none = NULL;
	return dwfl_linux_proc_find_elf(mod, &none, modname, base, file_name, elfp);
}

static int set_userdata(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr start,
			void *arg)
{
	*userdata = arg;
	return DWARF_CB_OK;
}

static const char *basename_of(const char *p);

/* Read /proc/PID/NAME into BUF (at most LEN-1 bytes), NUL-terminated.
 * Returns the length or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return n;
}

/* Is DIR/BASE (BASE a plain name; DIR absolute, seen from the target's
 * root, or else relative to its working directory) the file EXE? (a
 * symlink to it counts) */
static int is_exe(pid_t pid, const struct stat *exe, const char *dir, size_t dirlen,
		  const char *base, size_t baselen)
{
	const char *from = dir[0] == '/' ? "root" : "cwd/";
	char path[4096];
	struct stat st;
	if (baselen == 0 || memchr(base, '/', baselen) || (base[0] == '.' && baselen <= 2))
		return 0;
	int n = snprintf(path, sizeof path, "/proc/%d/%s%.*s/%.*s", (int)pid, from, (int)dirlen,
			 dir, (int)baselen, base);
	if (n < 0 || (size_t)n >= sizeof path || stat(path, &st) < 0)
		return 0;
	return st.st_dev == exe->st_dev && st.st_ino == exe->st_ino;
}

/* The name the main executable runs as. The kernel shows the file it
 * resolved (/usr/bin/redis-check-rdb) where the process was started as a
 * symlink to it (redis-server): take the name of argv[0] (up to a
 * space: servers rewrite their title) or /proc/PID/comm when that name,
 * next to the executable or where argv[0] points, is the same file. */
static void exe_name_find(struct symtab *s)
{
	char exe[4096], buf[4096], path[64];
	struct stat st;
	s->exe_path = s->exe_name = NULL;
	snprintf(path, sizeof path, "/proc/%d/exe", (int)s->pid);
	ssize_t n = readlink(path, exe, sizeof exe - 1);
	if (n <= 0 || exe[0] != '/' || stat(path, &st) < 0)
		return;
	exe[n] = 0;
	s->exe_path = intern(exe);
	const char *sl = strrchr(exe, '/');
	size_t dirlen = (size_t)(sl - exe);
	const char *ebase = sl + 1;
	size_t elen = strlen(ebase);
	static const char del[] = " (deleted)";
	if (elen > sizeof del - 1 && !strcmp(ebase + elen - (sizeof del - 1), del))
		elen -= sizeof del - 1;
	for (int k = 0; k < 3; k++) {
		const char *c;
		size_t clen;
		if (k < 2) { /* argv[0] as is, then up to its first space */
			if (read_proc(s->pid, "cmdline", buf, sizeof buf) <= 0)
				continue;
			if (k == 1) {
				char *sp = strchr(buf, ' ');
				if (!sp)
					continue;
				*sp = 0;
			}
			c = basename_of(buf);
			clen = strlen(c);
		} else {
			if (read_proc(s->pid, "comm", buf, sizeof buf) <= 0)
				continue;
			c = buf;
			clen = strcspn(buf, "\n");
		}
		if (clen == elen && !memcmp(c, ebase, clen))
			return; /* runs under its own name */
		if (is_exe(s->pid, &st, exe, dirlen, c, clen) ||
		    (k < 2 && c != buf && is_exe(s->pid, &st, buf, (size_t)(c - 1 - buf), c, clen))) {
			s->exe_name = intern_n(c, clen);
			return;
		}
	}
}

/* Module name shown for the module file MNAME: its basename, or the name
 * the main executable runs as. */
static const char *module_name(const struct symtab *s, const char *mname)
{
	if (strncmp(mname, "[vdso", 5) == 0)
		return intern("[vdso]");
	if (s->exe_name && s->exe_path && !strcmp(mname, s->exe_path))
		return s->exe_name;
	const char *b = basename_of(mname);
	const char *d = strstr(b, " (deleted)");
	return d ? intern_n(b, (size_t)(d - b)) : intern(b);
}

/* A core's modules: one per run of mappings of one file, the vDSO. */
static int report_source(struct symtab *s)
{
	const struct proc_maps *m = s->src->maps;
	struct proc_map *copy = malloc(((size_t)m->n + 1) * sizeof *copy);
	if (!copy)
		return -LS_E_NOMEM;
	if (m->n)
		memcpy(copy, m->m, (size_t)m->n * sizeof *copy);
	proc_maps_free(&s->maps);
	s->maps.m = copy;
	s->maps.n = m->n;
	dwfl_report_begin(s->dwfl);
	for (int i = 0; i < m->n;) {
		const struct proc_map *pm = &m->m[i];
		int j = i + 1;
		uint64_t end = pm->end;
		if (proc_map_is_file(pm))
			while (j < m->n && m->m[j].path == pm->path && m->m[j].start >= end) {
				end = m->m[j].end;
				j++;
			}
		if ((proc_map_is_file(pm) && pm->offset == 0) || !strcmp(pm->path, "[vdso]"))
			dwfl_report_module(s->dwfl, pm->path, pm->start, end);
		i = j;
	}
	int erc = dwfl_report_end(s->dwfl, NULL, NULL);
	dwfl_getmodules(s->dwfl, set_userdata, s, 0);
	if (erc != 0)
		return -LS_E_IO;
	s->exe_path = s->src->exe_path;
	s->exe_name = s->src->exe_name;
	memset(s->cache, 0, sizeof(struct cache_ent) << CACHE_BITS);
	return 0;
}

static int report(struct symtab *s)
{
	if (s->src)
		return report_source(s);
	int mrc = proc_maps_read(s->pid, &s->maps);
	if (mrc < 0)
		return mrc;
	dwfl_report_begin(s->dwfl);
	int rc = dwfl_linux_proc_report(s->dwfl, s->pid);
	int erc = dwfl_report_end(s->dwfl, NULL, NULL);
	dwfl_getmodules(s->dwfl, set_userdata, s, 0);
	if (erc != 0 || rc != 0)
		return rc > 0 ? err_from_errno(rc) : -LS_E_IO;
	exe_name_find(s);
	memset(s->cache, 0, sizeof(struct cache_ent) << CACHE_BITS);
	return 0;
}

static int symtab_open_any(pid_t pid, const struct symtab_source *src, struct symtab **out);

int symtab_open(pid_t pid, struct symtab **out)
{
	return symtab_open_any(pid, NULL, out);
}

int symtab_open_source(const struct symtab_source *src, struct symtab **out)
{
	return symtab_open_any(src->pid, src, out);
}

static int symtab_open_any(pid_t pid, const struct symtab_source *src, struct symtab **out)
{
	struct symtab *s = calloc(1, sizeof *s);
	if (!s)
		return -LS_E_NOMEM;
	s->cache = calloc((size_t)1 << CACHE_BITS, sizeof(struct cache_ent));
	s->debuginfo_path = strdup(":.debug:/usr/lib/debug");
	if (!s->cache || !s->debuginfo_path) {
		symtab_close(s);
		return -LS_E_NOMEM;
	}
	s->pid = pid;
	s->src = src;
	s->cb.find_elf = find_elf;
	s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	s->cb.debuginfo_path = &s->debuginfo_path;
	s->dwfl = dwfl_begin(&s->cb);
	if (!s->dwfl) {
		symtab_close(s);
		return -LS_E_NOMEM;
	}
	int rc = report(s);
	if (rc < 0) {
		symtab_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void symtab_close(struct symtab *s)
{
	if (!s)
		return;
	line_toks_forget(s);
	perfmap_close(s->perfmap);
	if (s->dwfl)
		dwfl_end(s->dwfl);
	proc_maps_free(&s->maps);
	names_forget(s);
	free(s->cache);
	free(s->debuginfo_path);
	free(s);
}

int symtab_refresh(struct symtab *s)
{
	names_forget(s); /* its names point into modules report() may drop */
	return report(s);
}

Dwfl *symtab_dwfl(struct symtab *s) { return s->dwfl; }
const struct proc_maps *symtab_maps(const struct symtab *s) { return &s->maps; }
pid_t symtab_pid(const struct symtab *s) { return s->pid; }
int symtab_is_core(const struct symtab *s) { return s->src != NULL; }

static const char *basename_of(const char *p)
{
	const char *sl = strrchr(p, '/');
	return sl ? sl + 1 : p;
}

/* dwfl_addrmodule, but only when ADDR lies inside the module's range:
 * libdwfl answers with the highest module for addresses above it (e.g.
 * LuaJIT mcode mapped after ld.so), which must read as "no module". */
static Dwfl_Module *addrmodule(Dwfl *dwfl, uint64_t addr)
{
	Dwfl_Module *mod = dwfl_addrmodule(dwfl, addr);
	if (!mod)
		return NULL;
	Dwarf_Addr lo = 0, hi = 0;
	dwfl_module_info(mod, NULL, &lo, &hi, NULL, NULL, NULL, NULL);
	return addr >= lo && addr < hi ? mod : NULL;
}

/* See elf_sym.h. GCC/clang on x86_64 encode the .eh_frame_hdr table
 * datarel|sdata4 and FDE ranges as 4 bytes. */
int elf_sym_fde_range(Elf *elf, uint64_t addr, uint64_t *start, uint64_t *end)
{
	size_t nph = 0;
	if (elf_getphdrnum(elf, &nph) != 0)
		return -1;
	GElf_Phdr hdr = { 0 }, ph;
	int have = 0;
	for (size_t i = 0; i < nph; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME) {
			hdr = ph;
			have = 1;
		}
	if (!have || hdr.p_filesz < 12)
		return -1;
	Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)hdr.p_offset, hdr.p_filesz, ELF_T_BYTE);
	if (!d || !d->d_buf)
		return -1;
	const uint8_t *h = d->d_buf;
	if (h[0] != 1 || h[2] != 0x03 || h[3] != 0x3b)
		return -1;
	uint32_t count;
	memcpy(&count, h + 8, 4);
	if (count == 0 || 12 + 8ull * count > hdr.p_filesz)
		return -1;
	int64_t key = (int64_t)(addr - hdr.p_vaddr);   /* wraps, no overflow */
	uint32_t lo = 0, hi = count - 1;
	int32_t e[2];
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;
		memcpy(e, h + 12 + 8ull * mid, 8);
		if (e[0] <= key)
			lo = mid;
		else
			hi = mid - 1;
	}
	memcpy(e, h + 12 + 8ull * lo, 8);
	if (e[0] > key)
		return -1;
	uint64_t fstart = hdr.p_vaddr + (uint64_t)(int64_t)e[0];
	uint64_t fde = hdr.p_vaddr + (uint64_t)(int64_t)e[1];
	/* the FDE's pc_range (4 bytes at +12), through the segment holding it */
	for (size_t i = 0; i < nph; i++) {
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    fde < ph.p_vaddr || fde + 16 > ph.p_vaddr + ph.p_filesz)
			continue;
		Elf_Data *fd = elf_getdata_rawchunk(elf, (int64_t)(ph.p_offset + (fde - ph.p_vaddr)), 16,
						    ELF_T_BYTE);
		if (!fd || !fd->d_buf)
			return -1;
		uint32_t range;
		memcpy(&range, (const uint8_t *)fd->d_buf + 12, 4);
		if (addr < fstart || addr >= fstart + range)
			return -1;
		*start = fstart;
		*end = fstart + range;
		return 0;
	}
	return -1;
}

/* ---- source lines, one DWARF reader per binary ----
 *
 * The first line looked up in a module loads (and inflates) its debug
 * sections: about 65 ms of CPU and 10 MB for libc6-dbg's libc. Each
 * target has a Dwfl of its own, so --pgrep or -s following 60 processes
 * of one program held 60 copies of the same DWARF. Lines are therefore
 * read from one offline Dwfl shared by every target, holding each binary
 * once, keyed by its build-id; a module without a build-id or a file on
 * disk (the vDSO, a core's module that is not on this machine) is read
 * through its target's own Dwfl as before. The shared modules also give
 * the lines of a target that has exited (deferred lines). */

#define SHARED_LINES_MAX 256   /* binaries (open files); past it, each
                                * target's own Dwfl, said once with -v */

struct shared_mod {
	unsigned char id[64];  /* build-id */
	int idlen;
	Dwfl_Module *mod;      /* in lines_dwfl, NULL: the file on disk is another build */
};

/* Guards the shared Dwfl and its table (libdwfl is not thread-safe;
 * lookups run on the sampler's and the stop window's threads). */
static pthread_mutex_t lines_lock = PTHREAD_MUTEX_INITIALIZER;
static Dwfl *lines_dwfl;
static char *lines_debuginfo_path;
static Dwfl_Callbacks lines_cb;
static struct shared_mod *smods;
static size_t nsmods, capsmods;

/* MOD's binary in the shared Dwfl and A (an address of MOD's target)
 * as an address there: 0, or -1 when MOD has no build-id or file, or
 * the file is no longer that build. Call with lines_lock held. */
static int shared_where(Dwfl_Module *mod, uint64_t a, Dwfl_Module **smod, uint64_t *sa)
{
	const unsigned char *id;
	GElf_Addr idva, bias = 0;
	int idlen = dwfl_module_build_id(mod, &id, &idva);
	const char *file = NULL;
	dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &file, NULL);
	if (idlen <= 0 || idlen > (int)sizeof smods->id || !file || !dwfl_module_getelf(mod, &bias))
		return -1;
	struct shared_mod *m = NULL;
	for (size_t i = 0; i < nsmods && !m; i++)
		if (smods[i].idlen == idlen && !memcmp(smods[i].id, id, (size_t)idlen))
			m = &smods[i];
	if (!m) {
		if (nsmods >= SHARED_LINES_MAX) {
			static int said;
			if (!said++)
				msg_debug(1, "source lines: %d binaries read once for all targets; "
					  "the others through each target's own reader", SHARED_LINES_MAX);
			return -1;
		}
		if (array_grow(&smods, &capsmods, nsmods + 1, sizeof *smods) < 0)
			return -1;
		if (!lines_dwfl) {
			lines_debuginfo_path = strdup(":.debug:/usr/lib/debug");
			lines_cb.find_elf = dwfl_build_id_find_elf;
			lines_cb.find_debuginfo = dwfl_standard_find_debuginfo;
			lines_cb.section_address = dwfl_offline_section_address;
			lines_cb.debuginfo_path = &lines_debuginfo_path;
			if (!lines_debuginfo_path || !(lines_dwfl = dwfl_begin(&lines_cb)))
				return -1;
		}
		m = &smods[nsmods++];
		memcpy(m->id, id, (size_t)idlen);
		m->idlen = idlen;
		dwfl_report_begin_add(lines_dwfl);
		m->mod = dwfl_report_offline(lines_dwfl, basename_of(file), file, -1);
		dwfl_report_end(lines_dwfl, NULL, NULL);
		const unsigned char *id2;
		GElf_Addr va2;
		if (m->mod && (dwfl_module_build_id(m->mod, &id2, &va2) != idlen ||
			       memcmp(id2, id, (size_t)idlen)))
			m->mod = NULL; /* replaced on disk since the target mapped it */
	}
	GElf_Addr sbias = 0;
	if (!m->mod || !dwfl_module_getelf(m->mod, &sbias))
		return -1;
	*smod = m->mod;
	*sa = a - bias + sbias;
	return 0;
}

/* Source file and line of address A of module MOD (in the shared Dwfl
 * or a target's) from its DWARF. */
static void line_in(Dwfl_Module *mod, uint64_t a, struct sym_info *out)
{
	Dwfl_Line *ln = dwfl_module_getsrc(mod, a);
	if (!ln)
		return;
	int lineno = 0;
	const char *src = dwfl_lineinfo(ln, NULL, &lineno, NULL, NULL, NULL);
	if (src && lineno > 0) {
		out->file = intern(src);
		out->line = lineno;
	}
}

/* Source file and line of address A of target module MOD: through the
 * shared Dwfl when it holds MOD's binary, else MOD's own. */
static void line_of(Dwfl_Module *mod, uint64_t a, struct sym_info *out)
{
	Dwfl_Module *smod;
	uint64_t sa;
	pthread_mutex_lock(&lines_lock);
	int shared = shared_where(mod, a, &smod, &sa) == 0;
	if (shared)
		line_in(smod, sa, out);
	pthread_mutex_unlock(&lines_lock);
	if (!shared)
		line_in(mod, a, out);
}

/* ---- deferred lines (symtab_set_lines) ---- */

struct line_tok {
	struct symtab *s;   /* NULL once closed */
	uint64_t a;         /* address looked up (pc - 1 for return addresses) */
	Dwfl_Module *smod;  /* the binary in the shared Dwfl (taken while the
	                     * target runs: its files may go with it), or NULL */
	uint64_t sa;        /* and A there */
};

static enum symtab_lines lines_mode;
static struct line_tok *toks;
static size_t ntoks, toks_cap;
/* (symtab, address) -> token - 1: the same address gets the same token
 * again after the symbol cache dropped it (a slot collision, a maps
 * refresh), so its frames stay one frame */
static struct htab tok_index;

void symtab_set_lines(enum symtab_lines mode)
{
	lines_mode = mode;
}

static int tok_eq(const void *ctx, uint32_t i)
{
	const struct line_tok *k = ctx;
	return toks[i].s == k->s && toks[i].a == k->a;
}

/* The token (1..) naming address A of S's module MOD, or 0 when out of
 * memory. */
static int line_tok_new(struct symtab *s, Dwfl_Module *mod, uint64_t a)
{
	struct line_tok k = { s, a, NULL, 0 };
	uint64_t h = htab_fnv1a_word(htab_fnv1a_ptr(HTAB_FNV_INIT, s), a);
	size_t pos;
	if (htab_reserve(&tok_index) < 0)
		return 0;
	int64_t i = htab_find(&tok_index, h, tok_eq, &k, &pos);
	if (i >= 0)
		return (int)i + 1;
	if (ntoks >= INT32_MAX - 1 ||
	    array_grow(&toks, &toks_cap, ntoks + 1, sizeof *toks) < 0)
		return 0;
	pthread_mutex_lock(&lines_lock);
	if (shared_where(mod, a, &k.smod, &k.sa) < 0)
		k.smod = NULL;
	pthread_mutex_unlock(&lines_lock);
	toks[ntoks] = k;
	htab_insert(&tok_index, pos, h, (uint32_t)ntoks);
	return (int)++ntoks;
}

/* S closes: its tokens with a binary in the shared Dwfl keep their
 * lines (a target that exited), the others lose them. */
static void line_toks_forget(struct symtab *s)
{
	for (size_t i = 0; i < ntoks; i++)
		if (toks[i].s == s)
			toks[i].s = NULL;
}

void symtab_resolve_line(struct frame *fr)
{
	if (fr->kind != FRAME_NATIVE || fr->line >= 0)
		return;
	size_t tk = (size_t)-(int64_t)fr->line;
	fr->line = 0;
	fr->file = NULL;
	if (tk > ntoks)
		return;
	struct line_tok *t = &toks[tk - 1];
	struct sym_info si = { 0 };
	if (t->smod) {
		pthread_mutex_lock(&lines_lock);
		line_in(t->smod, t->sa, &si);
		pthread_mutex_unlock(&lines_lock);
	} else if (t->s) {
		Dwfl_Module *mod = addrmodule(t->s->dwfl, t->a);
		if (!mod)
			return;
		line_in(mod, t->a, &si);
	} else {
		return;
	}
	fr->file = si.file;
	fr->line = si.line;
}

/* ---- C++ names (symtab_demangle) ---- */

#ifdef HAVE_CXA_DEMANGLE
/* libstdc++'s demangler (the Itanium C++ ABI's C entry point, as
 * elfutils' eu-stack uses it): a malloc'd string, or NULL and *STATUS
 * < 0 for a name it does not accept. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);
#endif

static int demangle_on = 1;

void symtab_demangle(int on)
{
	demangle_on = on;
}

int symtab_can_demangle(void)
{
#ifdef HAVE_CXA_DEMANGLE
	return 1;
#else
	return 0;
#endif
}

/* Mangled name -> the name shown, both interned: one demangling per
 * distinct symbol name (a symbol met at many addresses, in many
 * symtabs, is demangled once). Guarded by dm_lock: lookups run on the
 * sampler's and the stop window's threads. */
struct dm_ent {
	const char *mangled, *shown;
};
static struct dm_ent *dm;
static size_t ndm, dm_cap;
static struct htab dm_ix;
static pthread_mutex_t dm_lock = PTHREAD_MUTEX_INITIALIZER;

static int dm_eq(const void *ctx, uint32_t i)
{
	return dm[i].mangled == (const char *)ctx;
}

/* Is NAME an Itanium C++ ABI mangled name ("_Z", as perf and libiberty
 * test it)? Other names are not given to the demangler: it reads a bare
 * "i" or "f" (C symbols) as a type and would call them int and float. */
static int is_mangled(const char *name)
{
	return name[0] == '_' && name[1] == 'Z';
}

/* The demangled form of the mangled name NAME (SYM_DEMANGLE_MAX_BYTES at
 * most), interned, or NAME when the demangler refuses it. */
static const char *demangle_one(const char *name)
{
#ifdef HAVE_CXA_DEMANGLE
	int status = -1;
	char *d = __cxa_demangle(name, NULL, NULL, &status);
	const char *r = name;
	if (d && status == 0 && d[0])
		r = intern(d);
	free(d);
	return r;
#else
	return name;
#endif
}

const char *symtab_demangled(const char *name)
{
	if (!name || !demangle_on || !symtab_can_demangle() || !is_mangled(name))
		return name;
	/* bounded before the demangler reads it: names come from the
	 * target's files (untrusted); a longer one stays mangled */
	if (strnlen(name, SYM_DEMANGLE_MAX_BYTES + 1) > SYM_DEMANGLE_MAX_BYTES)
		return name;
	uint64_t h = htab_fnv1a_ptr(HTAB_FNV_INIT, name);
	size_t pos;
	const char *r = name;
	pthread_mutex_lock(&dm_lock);
	int64_t i = htab_reserve(&dm_ix) < 0 ? -2 : htab_find(&dm_ix, h, dm_eq, name, &pos);
	if (i >= 0) {
		r = dm[i].shown;
	} else {
		r = demangle_one(name);
		/* out of memory: demangled again next time, still right */
		if (i == -1 && array_grow(&dm, &dm_cap, ndm + 1, sizeof *dm) == 0) {
			dm[ndm] = (struct dm_ent){ name, r };
			htab_insert(&dm_ix, pos, h, (uint32_t)ndm);
			ndm++;
		}
	}
	pthread_mutex_unlock(&dm_lock);
	return r;
}

static void lookup_uncached(struct symtab *s, uint64_t pc, int retaddr, struct sym_info *out,
			    int *found)
{
	memset(out, 0, sizeof *out);
	*found = 0;
	uint64_t a = retaddr && pc ? pc - 1 : pc;
	Dwfl_Module *mod = addrmodule(s->dwfl, a);
	if (!mod)
		return;
	const char *mname = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
	if (mname)
		out->module = module_name(s, mname);
	GElf_Addr mbias = 0;
	if (dwfl_module_getelf(mod, &mbias))
		out->bias = mbias;
	else if (s->src && s->src->bias_of && mname)
		out->bias = s->src->bias_of(s->src->arg, mname); /* a core's file not on disk */
	GElf_Off off = 0;
	GElf_Sym sym;
	const char *name = dwfl_module_addrinfo(mod, a, &off, &sym, NULL, NULL, NULL);
	if (name && (sym.st_size == 0 ? off == 0 : off < sym.st_size)) {
		const char *at = strchr(name, '@'); /* drop symbol versions: memcpy@GLIBC_2.14 */
		out->name = symtab_demangled(at && at != name ? intern_n(name, (size_t)(at - name))
							      : intern(name));
		out->func_start = a - off;
		out->func_end = out->func_start + sym.st_size;
		*found = 1;
	}
	if (!out->func_start) {
		/* no sized symbol (stripped static function): the CFI entry
		 * (FDE) that covers the address still tells where the function
		 * starts. Not dwarf_frame_info(): its range is one row of the
		 * CFA table, which starts anywhere inside the function. */
		GElf_Addr ebias = 0;
		Elf *elf = dwfl_module_getelf(mod, &ebias);
		uint64_t st, en;
		if (elf && elf_sym_fde_range(elf, a - ebias, &st, &en) == 0) {
			out->func_start = st + ebias;
			out->func_end = en + ebias;
		}
	}
	if (lines_mode == SYMTAB_LINES_LATER) {
		int tk = line_tok_new(s, mod, a);
		out->line = tk > 0 ? -tk : 0;
	} else if (lines_mode == SYMTAB_LINES_NOW) {
		line_of(mod, a, out);
	}
}

int symtab_lookup(struct symtab *s, uint64_t pc, int retaddr, struct sym_info *out)
{
	uint64_t key = (pc & ~(1ull << 63)) | ((uint64_t)(retaddr != 0) << 63);
	if (key == 0) {
		memset(out, 0, sizeof *out);
		return -1;
	}
	size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> (64 - CACHE_BITS));
	struct cache_ent *e = &s->cache[h];
	if (e->key != key) {
		e->key = key;
		lookup_uncached(s, pc, retaddr, &e->info, &e->found);
	}
	*out = e->info;
	return e->found ? 0 : -1;
}

const char *symtab_offset_name(const struct sym_info *si, uint64_t at)
{
	if (!si->module)
		return NULL;
	return internf("%s+0x%llx", si->module, (unsigned long long)(at - si->bias));
}

/* One defined symbol in symtab_find's index. NAME points into the
 * module's string table (valid until its module is dropped). */
struct name_ent {
	const char *name;
	uint64_t addr, size;
	const char *module;    /* interned basename */
};

struct names_key {
	const struct symtab *s;
	const char *name;
};

static int names_eq(const void *ctx, uint32_t i)
{
	const struct names_key *k = ctx;
	return !strcmp(k->s->names[i].name, k->name);
}

static uint64_t names_hash(const char *name)
{
	return htab_fnv1a(HTAB_FNV_INIT, name, strlen(name));
}

static void names_forget(struct symtab *s)
{
	free(s->names);
	s->names = NULL;
	s->nnames = s->capnames = 0;
	htab_free(&s->names_ix);
	s->names_built = 0;
}

/* Add symbol NM (ADDR, SIZE) of MODULE to the index unless the name is
 * there already. 0, or -1 when out of memory. */
static int index_add(struct symtab *s, const char *nm, uint64_t addr, uint64_t size, const char *module)
{
	uint64_t h = names_hash(nm);
	struct names_key k = { s, nm };
	size_t pos;
	if (htab_reserve(&s->names_ix) < 0)
		return -1;
	if (htab_find(&s->names_ix, h, names_eq, &k, &pos) >= 0)
		return 0;
	if (array_grow(&s->names, &s->capnames, s->nnames + 1, sizeof *s->names) < 0)
		return -1;
	s->names[s->nnames] = (struct name_ent){ nm, addr, size, module };
	htab_insert(&s->names_ix, pos, h, (uint32_t)s->nnames);
	s->nnames++;
	return 0;
}

/* The fast path of index_module: the .symtab of ELF itself (the main
 * file has one: what libdwfl would use), read as the array it is, each
 * name bounded by its string table. 1 when done, 0 when ELF has no
 * usable .symtab (the caller goes through libdwfl), -1 out of memory. */
static int index_elf_symtab(struct symtab *s, Elf *elf, uint64_t bias, const char *module)
{
	GElf_Ehdr eh;
	if (!gelf_getehdr(elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type == ET_REL)
		return 0;
	Elf_Scn *scn = NULL;
	GElf_Shdr sh;
	while ((scn = elf_nextscn(elf, scn)))
		if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_SYMTAB)
			break;
	if (!scn || sh.sh_entsize != sizeof(Elf64_Sym))
		return 0;
	Elf_Scn *strs = elf_getscn(elf, sh.sh_link);
	Elf_Data *d = elf_getdata(scn, NULL), *sd = strs ? elf_getdata(strs, NULL) : NULL;
	if (!d || !d->d_buf || !sd || !sd->d_buf || d->d_type != ELF_T_SYM)
		return 0;
	const Elf64_Sym *sym = d->d_buf;
	const char *str = sd->d_buf;
	size_t n = d->d_size / sizeof *sym, strsz = sd->d_size;
	for (size_t i = 1; i < n; i++) {
		uint32_t at = sym[i].st_name;
		if (sym[i].st_shndx == SHN_UNDEF || at == 0 || at >= strsz ||
		    !memchr(str + at, 0, strsz - at))
			continue; /* undefined, unnamed, or a name running off the table */
		uint64_t addr = sym[i].st_shndx == SHN_ABS ? sym[i].st_value : sym[i].st_value + bias;
		if (index_add(s, str + at, addr, sym[i].st_size, module) < 0)
			return -1;
	}
	return 1;
}

/* Add MOD's defined symbols to the index; a name already there (from an
 * earlier module, or earlier in this one) keeps its first entry. */
static int index_module(Dwfl_Module *mod, void **ud, const char *mname, Dwarf_Addr start, void *arg)
{
	struct symtab *s = arg;
	const char *module = module_name(s, mname);
	GElf_Addr bias = 0;
	Elf *elf = dwfl_module_getelf(mod, &bias);
	int rc = elf ? index_elf_symtab(s, elf, bias, module) : 0;
	if (rc)
		return rc < 0 ? DWARF_CB_ABORT : DWARF_CB_OK;
	/* no .symtab of its own: libdwfl's choice (.dynsym, MiniDebugInfo,
	 * a separate debug file's .symtab), one symbol at a time */
	int n = dwfl_module_getsymtab(mod);
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		const char *nm = dwfl_module_getsym_info(mod, i, &sym, &addr, NULL, NULL, NULL);
		if (!nm || !nm[0] || sym.st_shndx == SHN_UNDEF)
			continue;
		if (index_add(s, nm, addr, sym.st_size, module) < 0)
			return DWARF_CB_ABORT;
	}
	return DWARF_CB_OK;
}

uint64_t symtab_find(struct symtab *s, const char *name, uint64_t *size, const char **module)
{
	if (size)
		*size = 0;
	if (module)
		*module = NULL;
	if (!s->names_built) {
		s->names_built = 1;
		/* out of memory: the index holds what it could; a name not in
		 * it reads as not found */
		dwfl_getmodules(s->dwfl, index_module, s, 0);
	}
	struct names_key k = { s, name };
	int64_t i = htab_find(&s->names_ix, names_hash(name), names_eq, &k, NULL);
	if (i < 0)
		return 0;
	const struct name_ent *e = &s->names[i];
	if (size)
		*size = e->size;
	if (module)
		*module = e->module;
	return e->addr;
}

Dwfl_Module *symtab_module_at(struct symtab *s, uint64_t addr, Elf **elf, uint64_t *bias)
{
	Dwfl_Module *mod = addrmodule(s->dwfl, addr);
	if (!mod)
		return NULL;
	GElf_Addr b = 0;
	Elf *e = dwfl_module_getelf(mod, &b);
	if (elf)
		*elf = e;
	if (bias)
		*bias = b;
	return mod;
}

uint64_t symtab_fde_start(struct symtab *s, uint64_t addr, uint64_t *end)
{
	Elf *elf = NULL;
	uint64_t bias = 0, st = 0, en = 0;
	if (end)
		*end = 0;
	if (!s || !symtab_module_at(s, addr, &elf, &bias) || !elf ||
	    elf_sym_fde_range(elf, addr - bias, &st, &en) != 0)
		return 0;
	if (end)
		*end = en + bias;
	return st + bias;
}

struct each_arg {
	int (*fn)(void *, const char *, uint64_t, uint64_t, Elf *, uint64_t);
	void *arg;
	int rc;
};

static int each_cb(Dwfl_Module *mod, void **ud, const char *mname, Dwarf_Addr start, void *arg)
{
	struct each_arg *ea = arg;
	Dwarf_Addr lo = 0, hi = 0;
	dwfl_module_info(mod, NULL, &lo, &hi, NULL, NULL, NULL, NULL);
	GElf_Addr bias = 0;
	Elf *e = dwfl_module_getelf(mod, &bias);
	ea->rc = ea->fn(ea->arg, mname, lo, hi, e, bias);
	return ea->rc ? DWARF_CB_ABORT : DWARF_CB_OK;
}

int symtab_each_module(struct symtab *s,
		       int (*fn)(void *arg, const char *name, uint64_t start, uint64_t end,
				 Elf *elf, uint64_t bias),
		       void *arg)
{
	struct each_arg ea = { fn, arg, 0 };
	dwfl_getmodules(s->dwfl, each_cb, &ea, 0);
	return ea.rc;
}

const char *symtab_perfmap_name(struct symtab *s, uint64_t addr, const char **module)
{
	if (!s->perfmap && !(s->perfmap = perfmap_open(s->pid)))
		return NULL;
	/* a core file's maps name no file the live pid maps: no jitdump */
	return perfmap_lookup(s->perfmap, addr, s->src ? NULL : &s->maps, module);
}
