/* proc_core.h: a process as an ELF core file holds it (docs/core-files.md).
 *
 * The same things a live target gives through /proc and ptrace, read
 * from a core written by the kernel (a crash, `ulimit -c`) or by gcore:
 *   memory    a struct mem over the PT_LOAD segments; a mapping the core
 *             did not dump (file-backed text) is read from the file on
 *             disk when its GNU build-id equals the one in the core,
 *             else the read fails (the module is listed as missing)
 *   mappings  PT_LOAD segments and the NT_FILE note, as a struct
 *             proc_maps (what /proc/PID/maps would have said)
 *   threads   one NT_PRSTATUS note each: tid, signal, registers
 *             (x86_64 user_regs_struct)
 *   process   NT_PRPSINFO (pid, name, arguments), NT_AUXV (entry point,
 *             vDSO), the executable from NT_FILE or the one given.
 * The core is untrusted input: every count, offset and size is checked
 * against the file, bounded, and what was cut or dropped is said in
 * proc_core.warn[]. Layouts: linux/elfcore.h (elf_prstatus,
 * elf_prpsinfo), fs/binfmt_elf.c (fill_files_note) in the Linux sources. */
#ifndef LUASPY_PROC_CORE_H
#define LUASPY_PROC_CORE_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/user.h>
#include "proc_maps.h"
#include "proc_mem.h"

#define CORE_MAX_SEGS 65536      /* PT_LOAD segments kept */
#define CORE_MAX_FILES 65536     /* NT_FILE entries kept */
#define CORE_MAX_PATHS 4096      /* distinct files among them */
#define CORE_MAX_THREADS 4096    /* NT_PRSTATUS notes kept */
#define CORE_MAX_WARN 8          /* problems kept for the user */

/* A thread as the core holds it. */
struct core_thread {
	pid_t tid;
	int signo;                        /* pr_cursig: the signal it was stopped by, 0 */
	struct user_regs_struct regs;
};

/* A file mapped by the process (one per path), and whether its
 * contents on disk can stand in for what the core did not dump. */
enum core_file_state {
	CORE_FILE_OK = 0,                 /* on disk, build-id equal to the core's */
	CORE_FILE_UNCHECKED,              /* on disk; the core holds no build-id for it */
	CORE_FILE_MISSING,                /* not found on disk */
	CORE_FILE_DIFFERS,                /* on disk, but another build (build-id differs) */
};
struct core_file {
	const char *path;                 /* interned, as the core names it */
	const char *open_path;            /* interned: the file read (--exe for the executable) */
	int fd;                           /* open on OPEN_PATH when OK/UNCHECKED, else -1 */
	uint64_t size_bytes;              /* size of that file */
	enum core_file_state state;
	const char *debug_path;           /* interned: its separate debug file by build-id
	                                   * (/usr/lib/debug/.build-id), when the file
	                                   * is MISSING or DIFFERS: symbols, no code */
	int elf;                          /* the core holds an ELF header for it: code, a
	                                   * library (a data file, /dev/zero, is not) */
	uint64_t bias;                    /* load bias from the ELF header the core holds
	                                   * (target address - ELF address), 0 */
};

struct core_seg;
struct core_fmap;

struct proc_core {
	struct mem base;                  /* the reader: reads are bounded by the segments */
	int fd;
	uint64_t size_bytes;              /* size of the core file */
	uint64_t lost_bytes;              /* memory bytes its segments should hold past the file's end (a cut core) */
	pid_t pid;
	char sname;                       /* pr_sname: state letter of the process */
	char fname[17];                   /* pr_fname: the command name */
	char psargs[81];                  /* pr_psargs: the start of its arguments */
	char cmdline[512];                /* its arguments from its stack, as
	                                   * /proc/PID/cmdline shows them (spaces
	                                   * between), or "" when not found */
	int signo;                        /* signal that made the core (first thread), 0 */
	struct core_thread *th;           /* in note order: the crashing thread first */
	int nth;
	struct core_file *files;
	int nfiles;
	const char *exe;                  /* interned path of the executable as in the core, or NULL */
	struct proc_maps maps;            /* mappings, sorted; paths interned */
	uint64_t vdso_addr;               /* AT_SYSINFO_EHDR, 0 */
	uint64_t execfn;                  /* AT_EXECFN, 0 */
	uint8_t auxv[64];                 /* the start of NT_AUXV */
	size_t auxv_len;
	uint8_t *vdso;                    /* copy of the vDSO image (elf_sym reads it), or NULL */
	size_t vdso_len;
	struct core_seg *seg;             /* PT_LOAD, sorted, not overlapping */
	int nseg;
	struct core_fmap *fmap;           /* NT_FILE, sorted */
	int nfmap;
	char warn[CORE_MAX_WARN][200];    /* what was cut, dropped or missing */
	int nwarn;
};

/* Open the core file PATH. EXE, when not NULL, is the executable that
 * ran (--exe): it stands in for the core's own executable path. Returns
 * 0 and *OUT (free with proc_core_close), or -LS_E_NOTCORE (not an ELF
 * core, or no thread note), -LS_E_ARCH32 (not x86_64),
 * -LS_E_CORETRUNC (cut before its notes), -LS_E_NOEXE (EXE cannot be
 * opened, or its build-id is not the core's), -LS_E_NOMEM, -LS_E_IO,
 * with WHY (one line, at most WHYLEN bytes) saying what was seen. */
int proc_core_open(const char *path, const char *exe, struct proc_core **out, char *why,
		   size_t whylen);
void proc_core_close(struct proc_core *c);

/* The thread TID of C, or NULL. */
const struct core_thread *proc_core_thread(const struct proc_core *c, pid_t tid);

/* The file C maps from PATH (interned or not), or NULL. */
const struct core_file *proc_core_file(const struct proc_core *c, const char *path);

/* A new descriptor on the file the core maps from PATH (for libdwfl),
 * when it is on disk and is the build that ran (CORE_FILE_OK or
 * UNCHECKED), else on its separate debug file (debug_path: symbols
 * only; memory is never read from it); -1 when neither. *OPEN_PATH
 * gets the path opened. */
int proc_core_open_file(const struct proc_core *c, const char *path, const char **open_path);

/* The load bias of the ELF file the core maps from PATH, from the ELF
 * header the core holds (for module offsets when the file itself is
 * missing); 0 when not known. */
uint64_t proc_core_file_bias(const struct proc_core *c, const char *path);

#endif
