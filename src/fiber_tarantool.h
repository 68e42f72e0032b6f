/* fiber_tarantool.h: Tarantool's fibers of the main cord (names, ids,
 * states, the Lua coroutine each runs), read from the target for dump
 * --all-coroutines. Layouts as data (fiber_tarantool.c), each row from
 * the DWARF of the binary named; docs/coroutines.md §2. */
#ifndef LUASPY_FIBER_TARANTOOL_H
#define LUASPY_FIBER_TARANTOOL_H

#include <stdint.h>
#include <stdio.h>
#include "proc_mem.h"
#include "target.h"

#define FIBER_NAME_BYTES 64     /* bytes of a fiber name kept (longer: cut, "...") */
#define FIBER_MAX 4096          /* fibers listed at most (more: fiber_list.cut) */

struct fiber_info {
	uint64_t addr;              /* struct fiber in the target */
	uint64_t L;                 /* its Lua coroutine (fiber->storage.lua.stack), 0 none */
	uint32_t fid;               /* fiber id (fiber.id()) */
	const char *state;          /* "running" (the cord's current fiber),
	                             * "ready", "dead" or "suspended" (static) */
	char name[FIBER_NAME_BYTES + 4]; /* fiber.name(), printable ASCII: other
	                             * bytes as '?', cut ones end in "..." */
};

struct fiber_list {
	struct fiber_info *f;       /* calloc'ed, freed by fiber_list_free */
	int n;
	const char *running;        /* the cord's current fiber's name when it
	                             * runs no Lua ("sched": the event loop,
	                             * epoll_wait; a C fiber), else NULL (static
	                             * text or a name in F) */
	const char *cut;            /* static text when a bound cut the list */
	const char *layout;         /* the layout row used (static) */
};

/* Read the fibers of T's main cord (Tarantool's static main_cord: its
 * alive list, then sched) into OUT, while T's threads are held stopped
 * (dump --all-coroutines holds them), reading through T->mem. Every
 * read is bounded and checked: the row is used only when sched (fid 1,
 * named "sched") and the cord's current fiber check out; the list walk
 * stops at FIBER_MAX or a broken link (OUT->cut says so). Returns the
 * fibers listed (>= 0), -LS_E_NOTLUA when T is not Tarantool (no
 * main_cord symbol), -LS_E_UNSUPPORTED when no layout row fits (WHY
 * filled with what was found). */
int fiber_tarantool_list(struct target *t, struct fiber_list *out, char *why, size_t whylen);

/* fiber_tarantool_list's work on the cord at target address CORD, read
 * through M (tests: a synthetic image); same results but -LS_E_NOTLUA.
 * On error OUT holds nothing (fiber_list_free is harmless). */
int fiber_cord_list(struct mem *m, uint64_t cord, struct fiber_list *out, char *why, size_t whylen);

/* Print every layout row to F, one offset a line, for
 * tests/dump-fibers-layout.test: "ROW\tstruct cord\tfiber\t0" (C
 * expression of the field, offset), "ROW\tflag\tFIBER_IS_DEAD\t16". */
void fiber_tarantool_rows(FILE *f);

/* The fiber of OUT whose Lua coroutine is L, or NULL. */
const struct fiber_info *fiber_list_find(const struct fiber_list *fl, uint64_t L);

void fiber_list_free(struct fiber_list *fl);

#endif

/* ---- record --coroutines: a Tarantool fiber's root ---- */

struct fiber_names;     /* a process's cache of its fibers (opaque) */

#define FIBER_NAMES_REFRESH_NS (200 * 1000000ull) /* list read again at most this often */

/* The root frame name of Lua coroutine L of T when L is a Tarantool
 * fiber's, interned: `fiber 104 "alpha"`; NULL when it is not (or T is
 * not Tarantool). *FN is the process's cache: NULL at first, allocated
 * here, freed with fiber_names_free. The cache holds the main cord's
 * fiber list (fiber_tarantool_list), read again when L is not in it, at
 * most every FIBER_NAMES_REFRESH_NS; an entry is used only after two
 * reads show its fiber still holds L with the same id (a fiber, or an
 * address, reused by another gets the other's name). For a running
 * target (the sampled thread released): a list torn by the target's
 * writes is cut, and read again at the next refresh. */
const char *fiber_names_root(struct target *t, struct fiber_names **fn, uint64_t L);
void fiber_names_free(struct fiber_names *fn);
