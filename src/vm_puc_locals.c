/* vm_puc_locals.c: dump --locals for PUC Lua 5.1-5.4 (vm_ops.locals):
 * the active locals, varargs, temporaries and upvalues of each Lua frame
 * of the last walk, by name from the Proto's debug info, with short
 * values (docs/locals.md).
 *
 * Rules: which locals are active at a pc, and their slots, as
 * luaF_getlocalname (lfunc.c); varargs and temporaries as findlocal /
 * findvararg (ldebug.c) label them; upvalues through the LClosure's
 * UpVal pointers. Everything read is bounded and validated: a value that
 * can't be read is shown as "<unreadable>", never guessed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "intern.h"
#include "vm_puc_int.h"

#define PL_MAX_VARS    512     /* variables shown per frame (locals + upvalues) */
#define PL_MAX_TEMPS   16      /* temporaries shown per frame; the rest counted */
#define PL_MAX_NODES   1024    /* hash nodes read to count a table's entries */
#define PL_MAX_ARRAY   4096    /* array slots read to count a table's entries */
#define PL_MT_NODES    256     /* metatable nodes searched for __name */
#define PL_VALUE_BYTES 512     /* bytes of one value's text */

/* What the walker's layout rows (vm_puc_layout.c) do not hold, per minor
 * version: offsets from each release's lobject.h/lstate.h on x86_64, the
 * table of docs/locals.md §2. */
static const struct puc_locals_row {
	int numparams, is_vararg;   /* Proto (u8 each) */
	int lcl_upvals;             /* LClosure.upvals[0] (UpVal *) */
	int upval_v;                /* UpVal.v (TValue *) */
	int udata_mt;               /* Udata.metatable (Table *) */
	int ci_nextraargs;          /* 5.4 CallInfo.u.l.nextraargs (int), else -1 */
	const char *vararg, *temporary; /* debug.getlocal's labels */
} rows[5] = {
	[1] = { 113, 114, 40, 16, 16, -1, "(*vararg)", "(*temporary)" },
	[2] = { 120, 121, 32, 16, 16, -1, "(*vararg)", "(*temporary)" },
	[3] = { 10, 11, 32, 0, 16, -1, "(*vararg)", "(*temporary)" },
	[4] = { 10, 11, 32, 16, 24, 44, "(vararg)", "(temporary)" },
};

struct pl_ctx {
	struct vm *vm;
	struct mem *m;
	const struct puc_layout *lay;
	const struct puc_locals_row *row;
	size_t str_max;
	/* the frame being reported */
	struct vm_var vars[PL_MAX_VARS];
	char *text[PL_MAX_VARS];
	int n;
};

/* __name of metatable MT (a string field), into OUT; 1 when found. */
static int mt_name(struct pl_ctx *c, uint64_t mt, char *out, size_t outlen)
{
	const struct puc_layout *lay = c->lay;
	uint8_t th[64];
	if (!ptr_ok(mt) || mem_read(c->m, mt, th, 64) < 0 || th[8] != lay->gct_table)
		return 0;
	int lsize = th[lay->t_lsizenode];
	uint64_t node = g64(th, lay->t_node);
	if (lsize > 8 || !ptr_ok(node))
		return 0;
	int nn = 1 << lsize;
	size_t bytes = (size_t)nn * (size_t)lay->node_size;
	uint8_t *nb = malloc(bytes);
	int found = 0;
	if (nb && mem_read(c->m, node, nb, bytes) == 0) {
		for (int i = 0; i < nn && i < PL_MT_NODES && !found; i++) {
			const uint8_t *e = nb + (size_t)i * (size_t)lay->node_size;
			unsigned kt = lay->node_key_tt_size == 1 ? e[lay->node_key_tt]
								 : g32(e, lay->node_key_tt);
			if ((kt & 0x0f) != 4 || ((tv_tag(lay, e) & 0x0f) != 4))
				continue;
			char k[8];
			if (read_tstring(lay, c->m, g64(e, lay->node_key_val), k, 7) != 6 ||
			    memcmp(k, "__name", 6) != 0)
				continue;
			char v[80];
			int n = read_tstring(lay, c->m, g64(e, 0), v, sizeof v - 1);
			if (n > 0) {
				char q[160];
				vm_value_string(q, sizeof q, v, (size_t)n, (size_t)n);
				/* unquoted: the name as a word */
				size_t ql = strlen(q);
				if (ql >= 2 && q[0] == '"' && q[ql - 1] == '"')
					snprintf(out, outlen, "%.*s", (int)(ql - 2), q + 1);
				else
					snprintf(out, outlen, "%.*s", (int)(outlen - 1), q);
				found = 1;
			}
		}
	}
	free(nb);
	return found;
}

/* "table: 0x... (array N, hash M, metatable NAME)" */
static void table_text(struct pl_ctx *c, uint64_t t, char *out, size_t outlen)
{
	const struct puc_layout *lay = c->lay;
	uint8_t th[64];
	if (!ptr_ok(t) || mem_read(c->m, t, th, 64) < 0 || th[8] != lay->gct_table) {
		snprintf(out, outlen, "table: 0x%llx <unreadable>", (unsigned long long)t);
		return;
	}
	uint32_t asize = g32(th, lay->t_sizearray);
	/* 5.4: with BITRAS (flags bit 7) set, alimit is not the array's real
	 * size: that is the next power of 2 (ltable.c luaH_realasize) */
	if (lay->minor == 4 && (th[10] & 0x80) && asize && (asize & (asize - 1)) && asize < (1u << 31)) {
		uint32_t p2 = 1;
		while (p2 < asize)
			p2 <<= 1;
		asize = p2;
	}
	uint64_t arr = g64(th, lay->t_array);
	char arrs[48];
	snprintf(arrs, sizeof arrs, "array slots %u", asize);
	if (asize == 0) {
		snprintf(arrs, sizeof arrs, "array 0");
	} else if (asize <= PL_MAX_ARRAY && ptr_ok(arr)) {
		uint8_t *ab = malloc((size_t)asize * 16);
		if (ab && mem_read(c->m, arr, ab, (size_t)asize * 16) == 0) {
			int used = 0;
			for (uint32_t i = 0; i < asize; i++)
				if ((tv_tag(lay, ab + 16 * (size_t)i) & 0x0f) != 0)
					used++;
			snprintf(arrs, sizeof arrs, "array %d", used);
		}
		free(ab);
	}
	int lsize = th[lay->t_lsizenode];
	uint64_t node = g64(th, lay->t_node), mt = g64(th, lay->t_metatable);
	char hash[48] = "hash ?";
	if (lsize <= 10 && ptr_ok(node)) {
		int nn = 1 << lsize, used = 0;
		size_t bytes = (size_t)nn * (size_t)lay->node_size;
		uint8_t *nb = malloc(bytes);
		if (nb && mem_read(c->m, node, nb, bytes) == 0) {
			for (int i = 0; i < nn; i++)
				if ((tv_tag(lay, nb + (size_t)i * (size_t)lay->node_size) & 0x0f) != 0)
					used++;
			snprintf(hash, sizeof hash, "hash %d", used);
		}
		free(nb);
	} else if (lsize < 31) {
		snprintf(hash, sizeof hash, "hash slots %d", 1 << lsize);
	}
	char mts[128] = "";
	if (mt) {
		char nm[96];
		if (mt_name(c, mt, nm, sizeof nm))
			snprintf(mts, sizeof mts, ", metatable %s", nm);
		else
			snprintf(mts, sizeof mts, ", metatable 0x%llx", (unsigned long long)mt);
	}
	snprintf(out, outlen, "table: 0x%llx (%s, %s%s)", (unsigned long long)t, arrs, hash, mts);
}

/* The text of the TValue at A (NAME: the variable holding it, for a
 * function's label) into OUT. */
static void value_text(struct pl_ctx *c, uint64_t a, const char *name, char *out, size_t outlen,
		       uint64_t *fproto)
{
	const struct puc_layout *lay = c->lay;
	int minor = lay->minor;
	uint8_t tv[16];
	if (mem_read(c->m, a, tv, 16) < 0) {
		snprintf(out, outlen, "<unreadable>");
		return;
	}
	unsigned tag = tv_tag(lay, tv);
	uint64_t v = g64(tv, 0);
	double d;
	memcpy(&d, tv, 8);
	switch (tag & 0x0f) {
	case 0:
		snprintf(out, outlen, "nil");
		return;
	case 1:
		if (minor >= 4)
			snprintf(out, outlen, "%s", tag == 0x11 ? "true" : "false");
		else
			snprintf(out, outlen, "%s", g32(tv, 0) ? "true" : "false");
		return;
	case 2:
		snprintf(out, outlen, "userdata: 0x%llx (light)", (unsigned long long)v);
		return;
	case 3:
		if ((minor == 3 && tag == 0x13) || (minor == 4 && tag == 0x03))
			snprintf(out, outlen, "%lld", (long long)v);
		else
			vm_value_number(out, outlen, d, minor >= 3);
		return;
	case 4: {
		uint8_t h[32];
		if (!ptr_ok(v) || mem_read(c->m, v, h, (size_t)lay->ts_data) < 0 ||
		    (h[8] != lay->gct_sstr && h[8] != lay->gct_lstr)) {
			snprintf(out, outlen, "string 0x%llx <unreadable>", (unsigned long long)v);
			return;
		}
		uint64_t len = lay->str_len == PUC_STR_SHRLEN && h[8] == lay->gct_sstr ? h[11]
										  : g64(h, 16);
		size_t n = len < c->str_max ? (size_t)len : c->str_max;
		char *buf = malloc(n + 1);
		if (!buf || (n && mem_read(c->m, v + (uint64_t)lay->ts_data, buf, n) < 0))
			snprintf(out, outlen, "string 0x%llx <unreadable>", (unsigned long long)v);
		else
			vm_value_string(out, outlen, buf, n, len);
		free(buf);
		return;
	}
	case 5:
		table_text(c, v, out, outlen);
		return;
	case 6: {
		if (tag == lay->tag_lcf) {
			const char *cn = puc_cname_find(c->vm, v);
			if (cn)
				snprintf(out, outlen, "function %s", cn);
			else
				snprintf(out, outlen, "function: C 0x%llx", (unsigned long long)v);
			return;
		}
		uint8_t cl[48];
		if (!ptr_ok(v) || mem_read(c->m, v, cl, 48) < 0) {
			snprintf(out, outlen, "function: 0x%llx <unreadable>", (unsigned long long)v);
			return;
		}
		int isC = lay->cl_isC >= 0 ? cl[lay->cl_isC] : tag == lay->tag_ccl;
		if (isC) {
			uint64_t f = g64(cl, lay->ccl_f);
			const char *cn = puc_cname_find(c->vm, f);
			if (cn)
				snprintf(out, outlen, "function %s", cn);
			else
				snprintf(out, outlen, "function: C 0x%llx", (unsigned long long)f);
			return;
		}
		struct puc_proto *p = puc_proto_get(c->vm, c->m, g64(cl, lay->lcl_p));
		if (p)
			*fproto = p->addr;
		if (!p)
			snprintf(out, outlen, "function: 0x%llx", (unsigned long long)v);
		else if (p->linedefined == 0)
			snprintf(out, outlen, "function main chunk (%s)", p->chunk ? p->chunk : "?");
		else
			snprintf(out, outlen, "function %s (%s:%d)", name ? name : "?",
				 p->chunk ? p->chunk : "?", p->linedefined);
		return;
	}
	case 7: {
		char nm[96];
		uint64_t mt = 0;
		if (ptr_ok(v) && rd64(c->m, v + (uint64_t)c->row->udata_mt, &mt) == 0 && mt &&
		    mt_name(c, mt, nm, sizeof nm))
			snprintf(out, outlen, "userdata: 0x%llx (%s)", (unsigned long long)v, nm);
		else
			snprintf(out, outlen, "userdata: 0x%llx", (unsigned long long)v);
		return;
	}
	case 8:
		snprintf(out, outlen, "thread: 0x%llx", (unsigned long long)v);
		return;
	default:
		snprintf(out, outlen, "<tag 0x%x>", tag);
	}
}

/* Append a variable: NAME (interned or static, NULL = no name), the
 * TValue at A. */
static void add_var(struct pl_ctx *c, int up, const char *name, uint64_t a)
{
	if (c->n >= PL_MAX_VARS)
		return;
	char *buf = malloc(PL_VALUE_BYTES);
	if (!buf)
		return;
	uint64_t fp = 0;
	value_text(c, a, name, buf, PL_VALUE_BYTES, &fp);
	c->text[c->n] = buf;
	c->vars[c->n] = (struct vm_var){ .upvalue = up, .name = name, .value = buf, .func_proto = fp };
	c->n++;
}

static void add_note_var(struct pl_ctx *c, const char *name, const char *value)
{
	if (c->n >= PL_MAX_VARS)
		return;
	c->text[c->n] = NULL;
	c->vars[c->n++] = (struct vm_var){ .upvalue = 0, .name = name, .value = value };
}

static void vars_clear(struct pl_ctx *c)
{
	for (int i = 0; i < c->n; i++)
		free(c->text[i]);
	c->n = 0;
}

/* One Lua frame R (vm->raw[k]); INNER: the next inner frame of the same
 * lua_State, or NULL when R is its innermost. */
static int one_frame(struct pl_ctx *c, const struct puc_raw *r, const struct puc_raw *inner,
		     vm_vars_fn *fn, void *arg)
{
	const struct puc_layout *lay = c->lay;
	const char *note = NULL;
	struct puc_proto *p = puc_proto_get(c->vm, c->m, r->proto);
	int32_t line = 0;
	if (!p) {
		fn(arg, r->proto, 0, NULL, 0, "prototype unreadable: no locals");
		return 0;
	}
	uint64_t func = 0, base = 0;
	if (rd64(c->m, r->ci + (uint64_t)lay->ci_func, &func) < 0 || !ptr_ok(func))
		func = 0;
	if (lay->ci_base >= 0) {
		if (rd64(c->m, r->ci + (uint64_t)lay->ci_base, &base) < 0 || !ptr_ok(base))
			base = 0;
	} else if (func) {
		base = func + 16;
	}
	int pc = -1;
	if (r->savedpc >= p->code_addr && !((r->savedpc - p->code_addr) & 3) &&
	    (r->savedpc - p->code_addr) / 4 <= (uint64_t)p->sizecode) {
		uint64_t idx = (r->savedpc - p->code_addr) / 4;
		pc = idx == 0 ? 0 : (int)idx - 1;
		if (p->line && pc < p->sizecode)
			line = p->line[pc];
	}
	int stripped = p->nloc == 0 && !p->line;
	/* the slots in use: up to the inner frame's function, or L->top */
	uint64_t limit = 0;
	if (inner) {
		rd64(c->m, inner->ci + (uint64_t)lay->ci_func, &limit);
	} else {
		rd64(c->m, r->L + (uint64_t)lay->L_top, &limit);
	}
	if (!base || (limit && (limit < base || limit - base > (1u << 20) * 16)))
		limit = 0;
	int nactive = 0;
	if (pc < 0 || !base) {
		note = !base ? "frame base unreadable: locals not shown" : "pc unknown: locals not shown";
	} else if (stripped) {
		note = "stripped: no local names";
	} else {
		for (int i = 0; i < p->nloc && p->loc[i].startpc <= pc; i++) {
			if (pc < p->loc[i].endpc) {
				add_var(c, 0, p->loc[i].name, base + 16u * (uint64_t)nactive);
				nactive++;
			}
		}
	}
	/* varargs (ldebug.c findvararg) */
	uint8_t ph[2];
	if (base && func && pc >= 0 && mem_read(c->m, r->proto + (uint64_t)c->row->numparams, ph, 1) == 0 &&
	    mem_read(c->m, r->proto + (uint64_t)c->row->is_vararg, ph + 1, 1) == 0 && ph[1]) {
		int64_t nva = 0;
		uint64_t first = 0;
		if (c->row->ci_nextraargs >= 0) {
			uint32_t ne = 0;
			if (mem_read_u32(c->m, r->ci + (uint64_t)c->row->ci_nextraargs, &ne) == 0 &&
			    ne < 256 && func >= 16u * ne) {
				nva = ne;
				first = func - 16u * ne;
			}
		} else if (base > func) {
			nva = (int64_t)((base - func) / 16) - 1 - ph[0];
			first = func + 16u * (1u + ph[0]);
		}
		for (int64_t i = 0; i < nva && i < 256; i++)
			add_var(c, 0, c->row->vararg, first + 16u * (uint64_t)i);
	}
	/* temporaries above the named locals */
	if (base && limit && pc >= 0) {
		int64_t slots = (int64_t)((limit - base) / 16);
		int64_t i;
		for (i = nactive; i < slots && i < nactive + PL_MAX_TEMPS; i++)
			add_var(c, 0, c->row->temporary, base + 16u * (uint64_t)i);
		if (i < slots)
			add_note_var(c, c->row->temporary,
				     internf("... %lld more not shown", (long long)(slots - i)));
	}
	/* upvalues: LClosure.upvals[i]->v */
	uint8_t nup = 0;
	if (r->cl && mem_read_u8(c->m, r->cl + (uint64_t)lay->cl_nupvalues, &nup) == 0) {
		for (int i = 0; i < nup; i++) {
			uint64_t uv = 0, v = 0;
			const char *nm = i < p->nup && p->upname ? p->upname[i] : NULL;
			if (rd64(c->m, r->cl + (uint64_t)c->row->lcl_upvals + 8u * (uint64_t)i, &uv) < 0 ||
			    !ptr_ok(uv) || rd64(c->m, uv + (uint64_t)c->row->upval_v, &v) < 0 ||
			    !ptr_ok(v)) {
				if (c->n < PL_MAX_VARS) {
					c->text[c->n] = NULL;
					c->vars[c->n++] = (struct vm_var){ .upvalue = 1, .name = nm,
									   .value = "<unreadable>" };
				}
				continue;
			}
			add_var(c, 1, nm, v);
		}
	}
	if (stripped && !note)
		note = "stripped: no local names";
	fn(arg, r->proto, line, c->vars, c->n, note);
	vars_clear(c);
	return 0;
}

int puc_locals(struct vm *vm, struct target *t, struct thread_snap *ts, size_t str_max,
	       vm_vars_fn *fn, void *arg)
{
	/* TS NULL: puc_coroutines' chain of the coroutine being reported */
	if ((ts ? vm->raw_tid != ts->tid : vm->raw_tid != -1) || vm->lay->minor < 1 ||
	    vm->lay->minor > 4)
		return 0;
	struct pl_ctx *c = calloc(1, sizeof *c);
	if (!c)
		return -LS_E_NOMEM;
	c->vm = vm;
	c->m = ts && ts->mem ? ts->mem : &t->mem.base;
	c->lay = vm->lay;
	c->row = &rows[vm->lay->minor];
	c->str_max = str_max;
	int count = 0;
	for (int k = 0; k < vm->nraw; k++) {
		const struct puc_raw *r = &vm->raw[k];
		if (!r->lua)
			continue;
		const struct puc_raw *inner = !r->first && k > 0 && vm->raw[k - 1].L == r->L
						      ? &vm->raw[k - 1] : NULL;
		one_frame(c, r, inner, fn, arg);
		count++;
	}
	puc_protos_release(vm);
	free(c);
	return count;
}
