/* vm_puc_proto.c: PUC Lua function prototypes read from the target
 * (code, lines, local and upvalue names; cached by address, validated by
 * header) and the call-site names the name decoder (vm_puc_names.c)
 * computes over them. Owner of the cache: the walker (VM->pcache). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "intern.h"
#include "vm_puc_int.h"

/* luaO_chunkid, without its 60-byte limit on file names */
static const char *chunkid(const char *src)
{
	if (!src)
		return intern("?");
	if (src[0] == '=' || src[0] == '@')
		return intern(src + 1);
	char buf[80];
	const char *nl = strchr(src, '\n');
	size_t n = nl ? (size_t)(nl - src) : strlen(src);
	if (n > 45 || nl)
		snprintf(buf, sizeof buf, "[string \"%.*s...\"]", (int)(n > 45 ? 45 : n), src);
	else
		snprintf(buf, sizeof buf, "[string \"%.*s\"]", (int)n, src);
	return intern(buf);
}

/* ---- Protos (cached by address, validated by header) ---------------------- */

static void proto_free(struct puc_proto *p)
{
	if (!p)
		return;
	free(p->code);
	free(p->line);
	free(p->loc);
	free(p->upname);
	free(p->cs_name);
	free(p->cs_what);
	free(p);
}

void puc_protos_release(struct vm *vm)
{
	for (int i = 0; i < vm->nretired; i++)
		proto_free(vm->retired[i]);
	vm->nretired = 0;
}

void puc_protos_free(struct vm *vm)
{
	puc_protos_release(vm);
	for (int i = 0; i < PROTO_CACHE; i++) {
		proto_free(vm->pcache[i]);
		vm->pcache[i] = NULL;
	}
}

/* Bytes of a Proto header to read: up to its last field read (a Proto
 * may end its mapping). */
static int proto_header_len(const struct puc_layout *lay)
{
	int hl = lay->p_source + 8;
	const int ends[] = { lay->p_k, lay->p_code, lay->p_p, lay->p_upvalues, lay->p_lineinfo,
			     lay->p_abslineinfo, lay->p_locvars };
	for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++)
		if (ends[i] + 8 > hl)
			hl = ends[i] + 8;
	if (lay->p_nups + 1 > hl)
		hl = lay->p_nups + 1;
	if (lay->p_lastlinedefined + 4 > hl)
		hl = lay->p_lastlinedefined + 4;
	return hl;
}

/* P->line (one line per pc) from the Proto header H: 5.1-5.3 int
 * lineinfo, 5.4 relative bytes + absolute pairs. Stripped (no lineinfo):
 * P->line stays NULL. 0, or -1 when the tables can't be read. */
static int proto_read_lines(struct puc_proto *p, const struct puc_layout *lay, struct mem *m,
			    const uint8_t *h)
{
	int sizecode = p->sizecode;
	int sizeli = (int)g32(h, lay->p_sizelineinfo);
	uint64_t li = g64(h, lay->p_lineinfo);
	if (sizeli <= 0 || !ptr_ok(li) || sizeli > MAX_SIZECODE)
		return 0;
	p->line = malloc((size_t)sizecode * sizeof *p->line);
	if (!p->line)
		return -1;
	if (lay->p_abslineinfo < 0) {
		int32_t *tmp = malloc((size_t)sizeli * 4);
		if (!tmp || mem_read(m, li, tmp, (size_t)sizeli * 4) < 0) {
			free(tmp);
			return -1;
		}
		for (int i = 0; i < sizecode; i++)
			p->line[i] = i < sizeli ? tmp[i] : 0;
		free(tmp);
		return 0;
	}
	int nabs = (int)g32(h, lay->p_sizeabslineinfo);
	uint64_t abs = g64(h, lay->p_abslineinfo);
	if (nabs < 0 || nabs > MAX_SIZECODE)
		return -1;
	int8_t *rel = malloc((size_t)sizeli);
	int32_t *ab = malloc((size_t)(nabs ? nabs : 1) * 8);
	int rc = 0;
	if (!rel || !ab || mem_read(m, li, rel, (size_t)sizeli) < 0 ||
	    (nabs && mem_read(m, abs, ab, (size_t)nabs * 8) < 0)) {
		rc = -1;
	} else {
		for (int i = 0; i < sizecode; i++) {
			int l = puc_line54(rel, sizeli, ab, nabs, p->linedefined, i);
			p->line[i] = l < 0 ? 0 : l;
		}
	}
	free(rel);
	free(ab);
	return rc;
}

/* Local variable names and pc ranges (P->loc), upvalue names (P->upname)
 * from header H; what can't be read is left out (no names, not an error). */
static void proto_read_names(struct puc_proto *p, const struct puc_layout *lay, struct mem *m,
			     const uint8_t *h)
{
	p->nloc = (int)g32(h, lay->p_sizelocvars);
	uint64_t lv = g64(h, lay->p_locvars);
	if (p->nloc < 0 || p->nloc > 65536 || (p->nloc && !ptr_ok(lv)))
		p->nloc = 0;
	if (p->nloc) {
		uint8_t *tmp = malloc((size_t)p->nloc * 16);
		p->loc = calloc((size_t)p->nloc, sizeof *p->loc);
		if (tmp && p->loc && mem_read(m, lv, tmp, (size_t)p->nloc * 16) == 0) {
			for (int i = 0; i < p->nloc; i++) {
				p->loc[i].name = intern_tstring(lay, m, g64(tmp, 16 * i));
				p->loc[i].startpc = (int)g32(tmp, 16 * i + 8);
				p->loc[i].endpc = (int)g32(tmp, 16 * i + 12);
			}
		} else {
			p->nloc = 0;
		}
		free(tmp);
	}
	p->nup = (int)g32(h, lay->p_sizeupvalues);
	uint64_t uv = g64(h, lay->p_upvalues);
	if (p->nup < 0 || p->nup > 256 || (p->nup && !ptr_ok(uv)))
		p->nup = 0;
	if (p->nup) {
		uint8_t tmp[256 * 16];
		p->upname = calloc((size_t)p->nup, sizeof *p->upname);
		if (p->upname && mem_read(m, uv, tmp, (size_t)p->nup * (size_t)lay->upval_stride) == 0) {
			for (int i = 0; i < p->nup; i++) {
				uint64_t sa = g64(tmp, i * lay->upval_stride);
				p->upname[i] = sa ? intern_tstring(lay, m, sa) : NULL;
			}
		} else {
			p->nup = 0;
		}
	}
}

/* A new Proto copy from header H at A: code, chunk name, lines, names,
 * where constants and children are (read lazily for names). NULL when
 * it can't be read. */
static struct puc_proto *proto_read(const struct puc_layout *lay, struct mem *m, uint64_t a,
				    const uint8_t *h)
{
	uint64_t code = g64(h, lay->p_code), src = g64(h, lay->p_source);
	int sizecode = (int)g32(h, lay->p_sizecode);
	int linedef = (int)g32(h, lay->p_linedefined);
	if (!ptr_ok(code) || sizecode <= 0 || sizecode > MAX_SIZECODE || linedef < 0)
		return NULL;
	struct puc_proto *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->addr = a;
	p->code_addr = code;
	p->source_addr = src;
	p->sizecode = sizecode;
	p->linedefined = linedef;
	p->lastlinedefined = (int)g32(h, lay->p_lastlinedefined);
	p->code = malloc((size_t)sizecode * 4);
	if (!p->code || mem_read(m, code, p->code, (size_t)sizecode * 4) < 0)
		goto bad;
	const char *s = src ? intern_tstring(lay, m, src) : NULL;
	p->chunk = src ? (s ? chunkid(s) : NULL) : intern("=?");
	if (!p->chunk || proto_read_lines(p, lay, m, h) < 0)
		goto bad;
	proto_read_names(p, lay, m, h);
	p->nk = (int)g32(h, lay->p_sizek);
	p->k_addr = g64(h, lay->p_k);
	if (p->nk < 0 || p->nk > (1 << 26))
		p->nk = 0;
	p->np = (int)g32(h, lay->p_sizep);
	p->p_addr = g64(h, lay->p_p);
	if (p->np < 0 || p->np > (1 << 20))
		p->np = 0;
	return p;
bad:
	proto_free(p);
	return NULL;
}

struct puc_proto *puc_proto_get(struct vm *vm, struct mem *m, uint64_t a)
{
	const struct puc_layout *lay = vm->lay;
	uint8_t h[136];
	int hl = proto_header_len(lay);
	if (!ptr_ok(a) || hl > 128 || mem_read(m, a, h, (size_t)hl) < 0 || h[8] != lay->p_tt_value)
		return NULL;
	uint64_t code = g64(h, lay->p_code), src = g64(h, lay->p_source);
	int sizecode = (int)g32(h, lay->p_sizecode);
	int linedef = (int)g32(h, lay->p_linedefined);
	unsigned slot = (unsigned)((a >> 4) * 0x9E3779B1u) % PROTO_CACHE;
	struct puc_proto *p = vm->pcache[slot];
	if (p && p->addr == a && p->code_addr == code && p->sizecode == sizecode &&
	    p->linedefined == linedef && p->source_addr == src)
		return p;
	if (p && array_grow(&vm->retired, &vm->capretired, (size_t)vm->nretired + 1,
			    sizeof *vm->retired) < 0)
		return NULL;   /* no memory: the walk fails (torn) */
	p = proto_read(lay, m, a, h);
	if (!p)
		return NULL;
	/* the walk may hold the one evicted: freed when it ends */
	if (vm->pcache[slot])
		vm->retired[vm->nretired++] = vm->pcache[slot];
	vm->pcache[slot] = p;
	return p;
}

/* ---- call-site names -------------------------------------------------------- */

struct name_arg {
	struct vm *vm;
	struct mem *m;
	struct puc_proto *p;
};

static const char *na_local(void *arg, int n, int pc)
{
	struct puc_proto *p = ((struct name_arg *)arg)->p;
	for (int i = 0; i < p->nloc && p->loc[i].startpc <= pc; i++) {
		if (pc < p->loc[i].endpc) {
			n--;
			if (n == 0)
				return p->loc[i].name;
		}
	}
	return NULL;
}

static const char *na_upval(void *arg, int idx)
{
	struct puc_proto *p = ((struct name_arg *)arg)->p;
	return idx >= 0 && idx < p->nup ? p->upname[idx] : NULL;
}

static const char *na_kstr(void *arg, int k)
{
	struct name_arg *na = arg;
	const struct puc_layout *lay = na->vm->lay;
	uint8_t tv[16];
	if (k < 0 || k >= na->p->nk || !ptr_ok(na->p->k_addr) ||
	    mem_read(na->m, na->p->k_addr + 16ull * (uint64_t)k, tv, 16) < 0)
		return NULL;
	unsigned tag = tv_tag(lay, tv);
	if (tag != lay->tag_sstr && tag != lay->tag_lstr)
		return NULL;
	return intern_tstring(lay, na->m, g64(tv, 0));
}

static int na_child_nups(void *arg, int idx)
{
	struct name_arg *na = arg;
	uint64_t cp;
	uint8_t nups;
	if (idx < 0 || idx >= na->p->np || na->vm->lay->p_nups < 0 ||
	    rd64(na->m, na->p->p_addr + 8ull * (uint64_t)idx, &cp) < 0 ||
	    rd8(na->m, cp + (uint64_t)na->vm->lay->p_nups, &nups) < 0)
		return -1;
	return nups;
}

/* Name of the function called by instruction PC of caller Proto P
 * (cached per Proto and pc). */
const char *puc_callsite_name(struct vm *vm, struct mem *m, struct puc_proto *p, int pc,
			      const char **what)
{
	*what = NULL;
	if (pc < 0 || pc >= p->sizecode)
		return NULL;
	if (!p->cs_name) {
		p->cs_name = calloc((size_t)p->sizecode, sizeof *p->cs_name);
		p->cs_what = calloc((size_t)p->sizecode, sizeof *p->cs_what);
	}
	if (p->cs_name && p->cs_what && p->cs_name[pc]) {
		*what = p->cs_what[pc];
		return *what ? p->cs_name[pc] : NULL;
	}
	struct name_arg na = { vm, m, p };
	struct puc_nameinfo ni = { vm->lay, p->code, p->sizecode, &na, na_local, na_upval,
				   na_kstr, na_child_nups };
	const char *name = NULL;
	*what = puc_funcname(&ni, pc, &name);
	if (*what && name)
		name = intern(name);   /* "?" and literals from the decoder too */
	if (p->cs_name && p->cs_what) {
		p->cs_name[pc] = *what && name ? name : "";
		p->cs_what[pc] = *what && name ? *what : NULL;
	}
	return *what ? name : NULL;
}

