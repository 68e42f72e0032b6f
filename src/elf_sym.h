/* elf_sym.h: ELF modules of a target and symbolization, on libdwfl.
 *
 * One struct symtab per target process holds a Dwfl with every mapped
 * ELF module (executable, libraries, the vDSO read from memory). Files
 * are opened through /proc/PID/root so targets in containers work.
 * Symbol names come from .symtab, .dynsym, MiniDebugInfo
 * (.gnu_debugdata) and separate debug files found by build-id or
 * .gnu_debuglink under /usr/lib/debug; never from the network. A name is
 * only given when the symbol's size covers the address. Lookups are
 * cached by address. */
#ifndef LUASPY_ELF_SYM_H
#define LUASPY_ELF_SYM_H

#include <stdint.h>
#include <sys/types.h>
#include <elfutils/libdwfl.h>
#include "frame.h"
#include "proc_maps.h"

struct symtab;

struct sym_info {
	const char *name;     /* interned symbol name, or NULL */
	const char *module;   /* interned module basename, or NULL (no module) */
	const char *file;     /* interned source file (DWARF), or NULL */
	int line;             /* source line (DWARF), or 0; a token < 0 while
	                       * lines are deferred (symtab_set_lines) */
	uint64_t func_start;  /* symbol start address; without a symbol, the start of
	                       * the CFI entry (FDE) covering the pc; 0 = unknown */
	uint64_t func_end;    /* end of the same range, or 0 */
	uint64_t bias;        /* the module's load bias: target address - bias
	                       * = ELF virtual address, the same in every process */
};

/* Open the modules of PID (reads /proc/PID/maps). Returns 0 and *OUT or
 * -LS_E_*. */
int symtab_open(pid_t pid, struct symtab **out);
void symtab_close(struct symtab *s);

/* A process that is not running (a core file, proc_core.h): its
 * mappings and how to open its files, instead of /proc. */
struct symtab_source {
	pid_t pid;
	const struct proc_maps *maps;   /* copied by symtab_open_source() */
	const char *exe_path;           /* interned executable path as in MAPS, or NULL */
	const char *exe_name;           /* interned name it ran as, or NULL (basename) */
	/* A new descriptor on the file mapped from PATH (consumed by
	 * libdwfl), *OPEN_PATH the name it was opened by; -1 when the file
	 * is not usable (missing, another build): the module then has no
	 * ELF, no symbols, no CFI. */
	int (*open_file)(void *arg, const char *path, const char **open_path);
	void *arg;
	/* The load bias of the file mapped from PATH when it has no ELF
	 * (missing): module offsets stay ELF addresses. */
	uint64_t (*bias_of)(void *arg, const char *path);
	const uint8_t *vdso;            /* the vDSO image, or NULL; must outlive the symtab */
	size_t vdso_len;
};

/* Open the modules SRC describes (SRC must outlive *OUT). 0 and *OUT,
 * or -LS_E_*. symtab_refresh() reports them again. */
int symtab_open_source(const struct symtab_source *src, struct symtab **out);

/* Re-read the module list when the maps changed (dlopen). Rate-limited by
 * the caller. Returns 0 or -LS_E_*. */
int symtab_refresh(struct symtab *s);

/* The libdwfl session (for the libdw unwinder). */
Dwfl *symtab_dwfl(struct symtab *s);
/* The maps read at open/refresh time. */
const struct proc_maps *symtab_maps(const struct symtab *s);
pid_t symtab_pid(const struct symtab *s);
/* 1 when S describes a process that is not running (symtab_open_source:
 * a core file), whose modules may be missing; 0 for a live process. */
int symtab_is_core(const struct symtab *s);

/* Symbolize target address PC. RETADDR != 0 means PC is a return address
 * (looked up at PC-1, the call instruction). Always fills OUT (fields
 * NULL/0 when unknown). Returns 0 when a symbol was found, -1 otherwise. */
int symtab_lookup(struct symtab *s, uint64_t pc, int retaddr, struct sym_info *out);

/* Name of code at target address AT in the module SI describes (SI
 * from symtab_lookup of an address in the same module): the interned
 * "MODULE+0xOFF", OFF the ELF address of AT (target address - load
 * bias), the same in every process; NULL when SI has no module. For code
 * with no symbol; never an absolute address. */
const char *symtab_offset_name(const struct sym_info *si, uint64_t at);

/* C++ names (docs/naming.md §5): with ON set (the default), symbol
 * names symtab_lookup() gives that are Itanium-mangled ("_Z...") come
 * demangled, as perf and eu-stack -C show them: "ns::Class::method(int)"
 * for "_ZN2ns5Class6methodEi", clones kept ("f() [clone .cold]"). Off
 * (--no-demangle): names as the ELF file spells them. Names longer than
 * SYM_DEMANGLE_MAX_BYTES, and those the demangler refuses, stay
 * mangled. Global (all symtabs); set it before the first lookup (names
 * are cached per address). */
void symtab_demangle(int on);
#define SYM_DEMANGLE_MAX_BYTES 4096

/* Was luaspy built with a demangler (configure found libstdc++'s
 * __cxa_demangle)? 1 or 0; without one, names stay mangled. */
int symtab_can_demangle(void);

/* NAME (interned, or NULL) as shown: its demangled form (interned;
 * one demangling per distinct name, cached) when demangling is on and
 * NAME is a mangled C++ name the demangler accepts; else NAME itself.
 * Thread-safe. */
const char *symtab_demangled(const char *name);

/* How symtab_lookup gives native source lines. Global (all symtabs).
 * SYMTAB_LINES_NOW (the default: dump, top) reads DWARF at once.
 * SYMTAB_LINES_LATER (record) reads none (loading a module's line tables
 * costs 65+ ms of CPU on the first lookup, which held up the first
 * sample); it gives LINE = -token, a stand-in unique to the address, and
 * FILE NULL, and symtab_resolve_line() turns the token into the real file
 * and line before the profile is written. SYMTAB_LINES_NONE (record
 * --period) gives none at all: a period's lines would be read on the
 * sampling thread, and the first read of a big debug file (libc6-dbg)
 * stopped sampling for over a second (docs/report.md). */
enum symtab_lines { SYMTAB_LINES_NOW, SYMTAB_LINES_LATER, SYMTAB_LINES_NONE };
void symtab_set_lines(enum symtab_lines mode);

/* Fill FR's file and line from the token symtab_lookup left in a native
 * frame (line < 0) while lines were deferred; other frames stay as they
 * are. Loads the module's DWARF on first use. An unknown token, or one
 * of a symtab already closed, gives line 0 and file NULL. */
void symtab_resolve_line(struct frame *fr);

/* Address of the first symbol named NAME in any module (.symtab or
 * .dynsym, functions and objects); 0 when not found. If SIZE is not NULL
 * it receives the symbol size. If MODULE is not NULL it receives the
 * module's interned basename. */
uint64_t symtab_find(struct symtab *s, const char *name, uint64_t *size, const char **module);

/* Module containing target address ADDR, with its ELF and load bias
 * (file address + bias = target address). NULL when none. */
Dwfl_Module *symtab_module_at(struct symtab *s, uint64_t addr, Elf **elf, uint64_t *bias);

/* Call FN for every module: NAME (full path or "[vdso]"), [START, END)
 * target range, ELF (may be NULL) and load BIAS. FN returns non-zero to
 * stop. Returns FN's last result. */
int symtab_each_module(struct symtab *s,
		       int (*fn)(void *arg, const char *name, uint64_t start, uint64_t end,
				 Elf *elf, uint64_t bias),
		       void *arg);

/* [*START, *END) of the FDE covering file address ADDR of ELF, by a
 * binary search of its .eh_frame_hdr (PT_GNU_EH_FRAME) table, checked
 * against the FDE's own pc range. 0 or -1 (no table, or no FDE covers
 * ADDR). Reads only ELF (bounded by its segments). The Elf-level half of
 * symtab_fde_start(); exported for fuzz/fuzz_elf.c (garbage ELF). */
int elf_sym_fde_range(Elf *elf, uint64_t addr, uint64_t *start, uint64_t *end);

/* The one .eh_frame_hdr search: start of the function whose CFI entry
 * (FDE) covers target address ADDR, from the table of the module mapped
 * there (elf_sym_fde_range() on its ELF, load bias applied). *END (END
 * may be NULL) gets the end of that range. Returns the start, or 0 (and
 * *END = 0) when ADDR is in no module or no FDE covers it. For code with
 * no sized symbol (stripped static functions); symtab_lookup() already
 * falls back to it in sym_info.func_start. Reads no target memory. */
uint64_t symtab_fde_start(struct symtab *s, uint64_t addr, uint64_t *end);

/* Name of the code at target address ADDR in the target's perf map
 * (/tmp/perf-PID.map, written by JIT runtimes for perf) or jitdump file
 * (jit-PID.dump, mapped by the target; not for a core file's maps), or
 * NULL; *MODULE is then "[perf-map]" or "[jitdump]" (perfmap_lookup()).
 * For code in anonymous executable memory; the files are read on first
 * use and again when they changed. */
const char *symtab_perfmap_name(struct symtab *s, uint64_t addr, const char **module);

#endif
