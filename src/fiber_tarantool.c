/* fiber_tarantool.c: Tarantool's fibers of the main cord, for dump
 * --all-coroutines (fiber_tarantool.h; docs/coroutines.md §2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elf_sym.h"
#include "err.h"
#include "fiber_tarantool.h"
#include "intern.h"
#include "msg.h"
#include "proc_mem.h"
#include "timeutil.h"

/* One layout of struct cord and struct fiber (src/lib/core/fiber.h of
 * the release named), offsets in bytes. */
struct fiber_layout {
	const char *name;
	int cord_fiber;             /* cord.fiber: the fiber running */
	int cord_alive;             /* cord.alive: rlist of live fibers */
	int cord_sched;             /* cord.sched: the scheduler fiber, inline */
	int fiber_fid;              /* fiber.fid (uint32_t) */
	int fiber_flags;            /* fiber.flags (uint32_t) */
	int fiber_link;             /* fiber.link: its node in cord.alive */
	int fiber_lua;              /* fiber.storage.lua.stack (lua_State *) */
	int fiber_name;             /* fiber.name (char *) */
	int fiber_inline_name;      /* fiber.inline_name[] */
	uint32_t flag_ready, flag_dead;
};

/* Rows from the DWARF of the binary named (gdb: ptype /o struct fiber,
 * struct cord; print (int)FIBER_IS_DEAD); tests/dump-fibers-layout.test
 * checks them against it. */
static const struct fiber_layout layouts[] = {
	/* Tarantool 2.6.0 (Debian 12 tarantool 2.6.0-1.1, build-id
	 * 979be6af...): src/lib/core/fiber.h of 2.6.0 */
	{ "Tarantool 2.6", 0, 112, 1016, 100, 104, 144, 288, 328, 336, 1u << 3, 1u << 4 },
};
#define NLAYOUTS (sizeof layouts / sizeof layouts[0])

#define FIBER_ID_SCHED 1

/* Fiber F's name into OUT (printable ASCII, '?' for other bytes, "..."
 * when longer than FIBER_NAME_BYTES); 0 or -LS_E_*. */
static int read_name(struct mem *m, const struct fiber_layout *l, uint64_t f, char *out, size_t outlen)
{
	uint64_t p;
	char buf[FIBER_NAME_BYTES + 2];
	if (mem_read_u64(m, f + (uint64_t)l->fiber_name, &p) < 0 || !p)
		return -LS_E_GARBAGE;
	ssize_t n = mem_read_str(m, p, buf, FIBER_NAME_BYTES + 1);
	if (n < 0)
		return (int)n;
	int cut = n > FIBER_NAME_BYTES;
	if (cut)
		buf[FIBER_NAME_BYTES] = 0;
	for (char *c = buf; *c; c++)
		if ((unsigned char)*c < 32 || (unsigned char)*c > 126 || *c == '"' || *c == '\\')
			*c = '?';
	size_t k = strlen(buf);
	if (k + 4 > outlen)
		k = outlen > 4 ? outlen - 4 : 0;
	memcpy(out, buf, k);
	memcpy(out + k, cut ? "..." : "", cut ? 4 : 1);
	return 0;
}

/* Does row L fit the cord at CORD: its sched fiber inline at
 * cord_sched, id 1, named "sched" from its inline name, and the current
 * fiber a readable pointer? */
static int layout_fits(struct mem *m, const struct fiber_layout *l, uint64_t cord, char *why, size_t whylen)
{
	uint64_t sched = cord + (uint64_t)l->cord_sched, namep = 0, cur = 0;
	uint32_t fid = 0;
	char name[16];
	if (mem_read_u32(m, sched + (uint64_t)l->fiber_fid, &fid) < 0 ||
	    mem_read_u64(m, sched + (uint64_t)l->fiber_name, &namep) < 0 ||
	    mem_read_u64(m, cord + (uint64_t)l->cord_fiber, &cur) < 0) {
		snprintf(why, whylen, "main_cord at 0x%llx unreadable", (unsigned long long)cord);
		return 0;
	}
	if (fid != FIBER_ID_SCHED || namep != sched + (uint64_t)l->fiber_inline_name ||
	    mem_read_str(m, namep, name, 6) != 5 || strcmp(name, "sched") != 0 || !cur) {
		snprintf(why, whylen, "main_cord at 0x%llx: no sched fiber where %s keeps it (fid %u)",
			 (unsigned long long)cord, l->name, fid);
		return 0;
	}
	return 1;
}

int fiber_tarantool_list(struct target *t, struct fiber_list *out, char *why, size_t whylen)
{
	memset(out, 0, sizeof *out);
	if (!t->sym)
		return -LS_E_NOTLUA;
	uint64_t cord = symtab_find(t->sym, "main_cord", NULL, NULL);
	if (!cord || !symtab_find(t->sym, "fiber_self", NULL, NULL))
		return -LS_E_NOTLUA;
	return fiber_cord_list(&t->mem.base, cord, out, why, whylen);
}

int fiber_cord_list(struct mem *m, uint64_t cord, struct fiber_list *out, char *why, size_t whylen)
{
	memset(out, 0, sizeof *out);
	const struct fiber_layout *l = NULL;
	for (size_t k = 0; k < NLAYOUTS && !l; k++)
		if (layout_fits(m, &layouts[k], cord, why, whylen))
			l = &layouts[k];
	if (!l)
		return -LS_E_UNSUPPORTED;
	out->layout = l->name;
	uint64_t cur = 0, head = cord + (uint64_t)l->cord_alive, node = 0;
	mem_read_u64(m, cord + (uint64_t)l->cord_fiber, &cur);
	if (cur == cord + (uint64_t)l->cord_sched)
		out->running = "sched";
	out->f = calloc(FIBER_MAX, sizeof *out->f);
	if (!out->f)
		return -LS_E_NOMEM;
	/* the alive list, head->next on; each node is a fiber's link */
	if (mem_read_u64(m, head + 8, &node) < 0) {
		fiber_list_free(out);
		return -LS_E_FAULT;
	}
	int steps;
	for (steps = 0; node != head && steps <= FIBER_MAX; steps++) {
		if (steps == FIBER_MAX) {
			out->cut = "more than 4096 fibers";
			break;
		}
		uint64_t f = node - (uint64_t)l->fiber_link, back = 0, next = 0;
		struct fiber_info *fi = &out->f[out->n];
		uint32_t flags = 0;
		if (!node || (node & 7) || mem_read_u64(m, node, &back) < 0 || mem_read_u64(m, node + 8, &next) < 0 ||
		    mem_read_u32(m, f + (uint64_t)l->fiber_fid, &fi->fid) < 0 ||
		    mem_read_u32(m, f + (uint64_t)l->fiber_flags, &flags) < 0 ||
		    mem_read_u64(m, f + (uint64_t)l->fiber_lua, &fi->L) < 0 ||
		    read_name(m, l, f, fi->name, sizeof fi->name) < 0) {
			out->cut = "a broken link in the fiber list (changed while read?)";
			break;
		}
		fi->addr = f;
		if (f == cur)
			fi->state = "running";
		else if (flags & l->flag_dead)
			fi->state = "dead";
		else if (flags & l->flag_ready)
			fi->state = "ready";
		else
			fi->state = "suspended";
		if (f == cur)
			out->running = NULL;
		out->n++;
		node = next;
	}
	if (out->running == NULL) {
		/* the current fiber runs no Lua (a C fiber): no coroutine runs */
		const struct fiber_info *c = NULL;
		for (int i = 0; i < out->n && !c; i++)
			if (out->f[i].addr == cur)
				c = &out->f[i];
		if (!c)
			out->running = "a fiber not in the alive list";
		else if (!c->L)
			out->running = c->name;
	}
	msg_debug(1, "tarantool: %s fibers of cord 0x%llx: %d listed%s%s", l->name,
		  (unsigned long long)cord, out->n, out->cut ? ", cut: " : "", out->cut ? out->cut : "");
	return out->n;
}

void fiber_tarantool_rows(FILE *f)
{
	for (size_t k = 0; k < NLAYOUTS; k++) {
		const struct fiber_layout *l = &layouts[k];
		const struct { const char *st, *fld; int off; } r[] = {
			{ "cord", "fiber", l->cord_fiber }, { "cord", "alive", l->cord_alive },
			{ "cord", "sched", l->cord_sched }, { "fiber", "fid", l->fiber_fid },
			{ "fiber", "flags", l->fiber_flags }, { "fiber", "link", l->fiber_link },
			{ "fiber", "storage.lua.stack", l->fiber_lua }, { "fiber", "name", l->fiber_name },
			{ "fiber", "inline_name", l->fiber_inline_name },
		};
		for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
			fprintf(f, "%s\tstruct %s\t%s\t%d\n", l->name, r[i].st, r[i].fld, r[i].off);
		fprintf(f, "%s\tflag\tFIBER_IS_READY\t%u\n", l->name, l->flag_ready);
		fprintf(f, "%s\tflag\tFIBER_IS_DEAD\t%u\n", l->name, l->flag_dead);
	}
}

const struct fiber_info *fiber_list_find(const struct fiber_list *fl, uint64_t L)
{
	for (int i = 0; L && i < fl->n; i++)
		if (fl->f[i].L == L)
			return &fl->f[i];
	return NULL;
}

void fiber_list_free(struct fiber_list *fl)
{
	free(fl->f);
	memset(fl, 0, sizeof *fl);
}

/* ---- record --coroutines ---- */

struct fiber_names {
	int none;                   /* not Tarantool, or no layout fits: never again */
	uint64_t next_ns;           /* no refresh before this */
	struct fiber_list fl;
	const struct fiber_layout *l;
};

const char *fiber_names_root(struct target *t, struct fiber_names **fnp, uint64_t L)
{
	struct fiber_names *fn = *fnp;
	if (!fn && !(fn = *fnp = calloc(1, sizeof *fn)))
		return NULL;
	if (fn->none || !L)
		return NULL;
	const struct fiber_info *fi = fiber_list_find(&fn->fl, L);
	uint64_t now = time_now_ns();
	if (!fi && now >= fn->next_ns) {
		char why[256] = "";
		fiber_list_free(&fn->fl);
		int rc = fiber_tarantool_list(t, &fn->fl, why, sizeof why);
		fn->next_ns = now + FIBER_NAMES_REFRESH_NS;
		if (rc == -LS_E_NOTLUA || rc == -LS_E_UNSUPPORTED) {
			msg_debug(1, "record --coroutines: no Tarantool fibers%s%s", why[0] ? ": " : "", why);
			fn->none = 1;
			return NULL;
		}
		fn->l = NULL;
		for (size_t k = 0; k < NLAYOUTS; k++)
			if (fn->fl.layout == layouts[k].name)
				fn->l = &layouts[k];
		fi = fiber_list_find(&fn->fl, L);
	}
	if (!fi || !fn->l)
		return NULL;
	uint32_t fid = 0;
	uint64_t nowL = 0;
	struct mem *m = &t->mem.base;
	if (mem_read_u32(m, fi->addr + (uint64_t)fn->l->fiber_fid, &fid) < 0 ||
	    mem_read_u64(m, fi->addr + (uint64_t)fn->l->fiber_lua, &nowL) < 0 || fid != fi->fid || nowL != L) {
		fn->next_ns = 0; /* stale: read the list again at the next sample */
		return NULL;
	}
	return internf("fiber %u \"%s\"", fi->fid, fi->name);
}

void fiber_names_free(struct fiber_names *fn)
{
	if (!fn)
		return;
	fiber_list_free(&fn->fl);
	free(fn);
}
