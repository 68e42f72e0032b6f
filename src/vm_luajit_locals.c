/* vm_luajit_locals.c: dump --locals for LuaJIT 2.1 (vm_ops.locals): the
 * active locals, varargs, temporaries and upvalues of each Lua frame the
 * last walk emitted, by name from the prototype's debug info, with short
 * values (docs/locals.md).
 *
 * Rules from lj_debug.c: a local is active at pos when startpc <= pos <
 * endpc in varinfo, slots in order of the active ones (debug_varname);
 * varargs sit below a vararg frame (lj_debug_getlocal: "(*vararg)"), other
 * slots are "(*temporary)"; upvalue names are uvinfo's strings in order.
 * Objects as lj_obj.h lays them out for GC64 and 32-bit references: GCfuncL
 * (uvptr[] after pc), GCupval (v after the TValue union), GCtab (metatable
 * before node), GCudata (udtype, metatable). Every read is bounded; what
 * can't be read shows as "<unreadable>", never a guess. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "intern.h"
#include "vm_luajit.h"

#define LL_MAX_VARS    512     /* variables shown per frame */
#define LL_MAX_TEMPS   16      /* temporaries shown per frame; the rest counted */
#define LL_MAX_NODES   1024    /* hash nodes read to count a table's entries */
#define LL_MAX_ARRAY   4096    /* array slots read to count a table's entries */
#define LL_VALUE_BYTES 512     /* bytes of one value's text */
#define LL_INFO_MAX    65536   /* bytes of varinfo/uvinfo read */

/* itype tags (lj_obj.h LJ_T*) */
enum { LT_NIL = ~0, LT_FALSE = ~1, LT_TRUE = ~2, LT_LIGHTUD = ~3, LT_STR = ~4, LT_UPVAL = ~5,
       LT_THREAD = ~6, LT_PROTO = ~7, LT_FUNC = ~8, LT_TRACE = ~9, LT_CDATA = ~10, LT_TAB = ~11,
       LT_UDATA = ~12 };

int lj_lframes_keep(struct vm *vm, pid_t tid, const struct lj_lframe *lf, int n)
{
	struct lj_cache *c = &vm->cache;
	if (!lf) {
		c->nlf = 0;
		c->lf_tid = tid;
		return 0;
	}
	if (n <= 0)
		return 0;
	if ((size_t)c->nlf + (size_t)n > LUA_WALK_MAX_FRAMES)
		return -LS_E_NOMEM;
	if ((size_t)c->nlf + (size_t)n > c->caplf) {
		size_t nc = c->caplf ? c->caplf : 64;
		while (nc < (size_t)c->nlf + (size_t)n)
			nc *= 2;
		struct lj_lframe *q = realloc(c->lf, nc * sizeof *q);
		if (!q)
			return -LS_E_NOMEM;
		c->lf = q;
		c->caplf = nc;
	}
	memcpy(c->lf + c->nlf, lf, (size_t)n * sizeof *lf);
	c->nlf += n;
	return 0;
}

struct ll_ctx {
	struct vm *vm;
	struct mem *m;
	const struct lj_objlayout *ol;
	const struct lj_layout *l;
	int gc64;
	size_t str_max;
	struct vm_var vars[LL_MAX_VARS];
	char *text[LL_MAX_VARS];
	int n;
};

static int rdref(struct ll_ctx *c, uint64_t a, uint64_t *v)
{
	return lj_read_ref(c->ol, c->m, a, v);
}

/* An MRef (a plain pointer: 8 bytes with GC64, else 4) at A. */
static int rdmref(struct ll_ctx *c, uint64_t a, uint64_t *v)
{
	if (c->gc64)
		return mem_read_u64(c->m, a, v);
	uint32_t w;
	int rc = mem_read_u32(c->m, a, &w);
	*v = rc < 0 ? 0 : w;
	return rc;
}

/* Read the TValue at A: *IT its itype (a number: LT_NIL - 13 or below is
 * not returned, *ISNUM is set instead), *GC its object, *D the number. */
static int rd_tv(struct ll_ctx *c, uint64_t a, int32_t *it, uint64_t *gc, double *d, int *isnum)
{
	uint64_t v;
	if (mem_read_u64(c->m, a, &v) < 0)
		return -1;
	memcpy(d, &v, 8);
	uint32_t t = c->gc64 ? (uint32_t)((int64_t)v >> 47) : (uint32_t)(v >> 32);
	*isnum = t < 0xfffffff2u;
	*it = (int32_t)t;
	*gc = c->gc64 ? (v & 0x7fffffffffffull) : (v & 0xffffffffull);
	return 0;
}

/* Contents of GCstr S, up to MAX bytes, into a new buffer; *LEN real length. */
static char *str_read(struct ll_ctx *c, uint64_t s, size_t max, uint32_t *len)
{
	if (!lj_is_gct(c->ol, c->m, s, LJ_GCT_STR) || mem_read_u32(c->m, s + c->l->str_len, len) < 0)
		return NULL;
	size_t n = *len < max ? *len : max;
	char *b = malloc(n + 1);
	if (!b || (n && mem_read(c->m, s + c->l->str_data, b, n) < 0)) {
		free(b);
		return NULL;
	}
	b[n] = 0;
	return b;
}

/* __name of metatable MT (a string field), unquoted, into OUT. */
static int mt_name(struct ll_ctx *c, uint64_t mt, char *out, size_t outlen)
{
	uint32_t hmask;
	uint64_t node;
	if (!mt || !lj_is_gct(c->ol, c->m, mt, LJ_GCT_TAB) ||
	    mem_read_u32(c->m, mt + c->ol->tab_hmask, &hmask) < 0 || hmask >= 256 ||
	    rdmref(c, mt + c->ol->tab_node, &node) < 0 || !node)
		return 0;
	size_t bytes = (size_t)(hmask + 1) * c->ol->node_size;
	uint8_t *nb = malloc(bytes);
	int found = 0;
	if (nb && mem_read(c->m, node, nb, bytes) == 0) {
		for (uint32_t i = 0; i <= hmask && !found; i++) {
			const uint8_t *e = nb + (size_t)i * c->ol->node_size;
			uint64_t kv, vv;
			memcpy(&kv, e + c->ol->node_key, 8);
			memcpy(&vv, e, 8);
			uint32_t kt = c->gc64 ? (uint32_t)((int64_t)kv >> 47) : (uint32_t)(kv >> 32);
			uint32_t vt = c->gc64 ? (uint32_t)((int64_t)vv >> 47) : (uint32_t)(vv >> 32);
			if ((int32_t)kt != LT_STR || (int32_t)vt != LT_STR)
				continue;
			uint64_t ks = c->gc64 ? (kv & 0x7fffffffffffull) : (kv & 0xffffffffull);
			uint64_t vs = c->gc64 ? (vv & 0x7fffffffffffull) : (vv & 0xffffffffull);
			uint32_t kl, vl;
			char *k = str_read(c, ks, 8, &kl);
			if (k && kl == 6 && !memcmp(k, "__name", 6)) {
				char *v = str_read(c, vs, 64, &vl);
				if (v) {
					char q[160];
					vm_value_string(q, sizeof q, v, strlen(v), strlen(v));
					size_t ql = strlen(q);
					snprintf(out, outlen, "%.*s", (int)(ql >= 2 ? ql - 2 : 0), q + 1);
					found = 1;
				}
				free(v);
			}
			free(k);
		}
	}
	free(nb);
	return found;
}

/* How many of the N TValues at A are not nil (N bounded by the caller). */
static int count_used(struct ll_ctx *c, uint64_t a, size_t n, size_t stride)
{
	uint8_t *b = malloc(n * stride);
	int used = -1;
	if (b && mem_read(c->m, a, b, n * stride) == 0) {
		used = 0;
		for (size_t i = 0; i < n; i++) {
			uint64_t v;
			memcpy(&v, b + i * stride, 8);
			uint32_t t = c->gc64 ? (uint32_t)((int64_t)v >> 47) : (uint32_t)(v >> 32);
			if ((int32_t)t != LT_NIL)
				used++;
		}
	}
	free(b);
	return used;
}

static void table_text(struct ll_ctx *c, uint64_t t, char *out, size_t outlen)
{
	uint32_t asize, hmask;
	uint64_t arr, node, mt;
	if (!lj_is_gct(c->ol, c->m, t, LJ_GCT_TAB) ||
	    mem_read_u32(c->m, t + c->ol->tab_asize, &asize) < 0 ||
	    mem_read_u32(c->m, t + c->ol->tab_hmask, &hmask) < 0 ||
	    rdmref(c, t + c->ol->tab_array, &arr) < 0 || rdmref(c, t + c->ol->tab_node, &node) < 0 ||
	    rdref(c, t + c->ol->tab_node - c->ol->gcref, &mt) < 0) {
		snprintf(out, outlen, "table: 0x%llx <unreadable>", (unsigned long long)t);
		return;
	}
	char as[48], hs[48];
	int used = asize == 0 ? 0 : asize <= LL_MAX_ARRAY && arr ? count_used(c, arr, asize, 8) : -1;
	if (used >= 0)
		snprintf(as, sizeof as, "array %d", used);
	else
		snprintf(as, sizeof as, "array slots %u", asize);
	used = hmask < LL_MAX_NODES && node ? count_used(c, node, (size_t)hmask + 1, c->ol->node_size) : -1;
	if (used >= 0)
		snprintf(hs, sizeof hs, "hash %d", used);
	else
		snprintf(hs, sizeof hs, "hash slots %llu", (unsigned long long)hmask + 1);
	char mts[128] = "", nm[96];
	if (mt && mt_name(c, mt, nm, sizeof nm))
		snprintf(mts, sizeof mts, ", metatable %s", nm);
	else if (mt)
		snprintf(mts, sizeof mts, ", metatable 0x%llx", (unsigned long long)mt);
	snprintf(out, outlen, "table: 0x%llx (%s, %s%s)", (unsigned long long)t, as, hs, mts);
}

static void func_text(struct ll_ctx *c, uint64_t fn, const char *name, char *out, size_t outlen,
		      uint64_t *fproto)
{
	uint8_t ffid;
	if (!lj_is_gct(c->ol, c->m, fn, LJ_GCT_FUNC) || mem_read_u8(c->m, fn + c->ol->fn_ffid, &ffid) < 0) {
		snprintf(out, outlen, "function: 0x%llx <unreadable>", (unsigned long long)fn);
		return;
	}
	if (ffid == 0) {
		uint64_t pc, chunk;
		int32_t first = 0;
		if (rdmref(c, fn + c->ol->fn_pc, &pc) < 0 || pc < c->ol->pt_size) {
			snprintf(out, outlen, "function: 0x%llx", (unsigned long long)fn);
			return;
		}
		uint64_t pt = pc - c->ol->pt_size;
		char src[128] = "?";
		*fproto = pt;
		uint32_t cl;
		if (lj_is_gct(c->ol, c->m, pt, LJ_GCT_PROTO) &&
		    rdref(c, pt + c->ol->pt_chunkname, &chunk) == 0 &&
		    mem_read_u32(c->m, pt + c->ol->pt_firstline, (uint32_t *)&first) == 0) {
			char *s = str_read(c, chunk, 512, &cl);
			if (s)
				lj_shortsrc(src, sizeof src, s, strlen(s));
			free(s);
		}
		uint64_t li = 0;
		if (first == 0 && rdmref(c, pt + c->ol->pt_lineinfo, &li) == 0 && !li)
			snprintf(out, outlen, "function <stripped> (%s)", src);
		else if (first == 0)
			snprintf(out, outlen, "function main chunk (%s)", src);
		else
			snprintf(out, outlen, "function %s (%s:%d)", name ? name : "?", src, (int)first);
		return;
	}
	uint64_t f = 0;
	mem_read_u64(c->m, fn + c->ol->fn_f, &f);
	const char *nm = ffid > 1 ? c->vm->found.ffname[ffid] : NULL;
	for (int i = 0; !nm && i < c->vm->found.nnames; i++)
		if (c->vm->found.names[i].fn == fn)
			nm = c->vm->found.names[i].name;
	if (nm)
		snprintf(out, outlen, "function %s", nm);
	else if (ffid > 1)
		snprintf(out, outlen, "function builtin#%d", ffid);
	else
		snprintf(out, outlen, "function: C 0x%llx", (unsigned long long)f);
}

static void value_text(struct ll_ctx *c, uint64_t a, const char *name, char *out, size_t outlen,
		       uint64_t *fproto)
{
	int32_t it;
	uint64_t gc;
	double d;
	int isnum;
	if (rd_tv(c, a, &it, &gc, &d, &isnum) < 0) {
		snprintf(out, outlen, "<unreadable>");
		return;
	}
	if (isnum) {
		vm_value_number(out, outlen, d, 0);
		return;
	}
	switch (it) {
	case LT_NIL: snprintf(out, outlen, "nil"); return;
	case LT_FALSE: snprintf(out, outlen, "false"); return;
	case LT_TRUE: snprintf(out, outlen, "true"); return;
	case LT_LIGHTUD: snprintf(out, outlen, "userdata: 0x%llx (light)", (unsigned long long)gc); return;
	case LT_STR: {
		uint32_t len;
		char *s = str_read(c, gc, c->str_max, &len);
		if (!s)
			snprintf(out, outlen, "string 0x%llx <unreadable>", (unsigned long long)gc);
		else
			vm_value_string(out, outlen, s, len < c->str_max ? len : c->str_max, len);
		free(s);
		return;
	}
	case LT_TAB: table_text(c, gc, out, outlen); return;
	case LT_FUNC: func_text(c, gc, name, out, outlen, fproto); return;
	case LT_THREAD: snprintf(out, outlen, "thread: 0x%llx", (unsigned long long)gc); return;
	case LT_CDATA: snprintf(out, outlen, "cdata: 0x%llx", (unsigned long long)gc); return;
	case LT_UDATA: {
		uint8_t udtype = 0;
		uint64_t mt = 0;
		char nm[96];
		/* GCudata: udtype after gct; metatable after env and len */
		uint64_t mt_off = c->gc64 ? 32 : 16;
		mem_read_u8(c->m, gc + c->ol->gct + 1, &udtype);
		if (udtype == 1) /* UDTYPE_IO_FILE */
			snprintf(out, outlen, "userdata: 0x%llx (FILE*)", (unsigned long long)gc);
		else if (rdref(c, gc + mt_off, &mt) == 0 && mt && mt_name(c, mt, nm, sizeof nm))
			snprintf(out, outlen, "userdata: 0x%llx (%s)", (unsigned long long)gc, nm);
		else
			snprintf(out, outlen, "userdata: 0x%llx", (unsigned long long)gc);
		return;
	}
	default:
		snprintf(out, outlen, "<type %d at 0x%llx>", (int)~it, (unsigned long long)gc);
	}
}

static void add_var(struct ll_ctx *c, int up, const char *name, uint64_t a)
{
	if (c->n >= LL_MAX_VARS)
		return;
	char *buf = malloc(LL_VALUE_BYTES);
	if (!buf)
		return;
	uint64_t fp = 0;
	value_text(c, a, name, buf, LL_VALUE_BYTES, &fp);
	c->text[c->n] = buf;
	c->vars[c->n++] = (struct vm_var){ .upvalue = up, .name = name, .value = buf,
					   .func_proto = fp };
}

static void add_fixed(struct ll_ctx *c, int up, const char *name, const char *value)
{
	if (c->n >= LL_MAX_VARS)
		return;
	c->text[c->n] = NULL;
	c->vars[c->n++] = (struct vm_var){ .upvalue = up, .name = name, .value = value };
}

/* Debug info block [A, END) of proto PT (varinfo, uvinfo run to the end
 * of the proto: sizept), read whole, bounded. *LEN bytes, NUL-ended. */
static uint8_t *info_read(struct ll_ctx *c, uint64_t a, uint64_t pt, uint32_t sizept, size_t *len)
{
	if (!a || a < pt || a >= pt + sizept)
		return NULL;
	size_t n = (size_t)(pt + sizept - a);
	if (n > LL_INFO_MAX)
		n = LL_INFO_MAX;
	uint8_t *b = malloc(n + 1);
	if (!b || mem_read(c->m, a, b, n) < 0) {
		free(b);
		return NULL;
	}
	b[n] = 0;
	*len = n;
	return b;
}

/* A frame on trace TN of prototype PT whose pc the walk did not know:
 * the bytecode position where the trace starts (GCtrace.startpc, when
 * its startpt is PT; for a loop trace the loop, whose locals are those
 * of its body), looked up in state G (TS's) or each state found.
 * Returns the position or -1. */
static int64_t trace_start_pos(struct ll_ctx *c, const struct thread_snap *ts, uint64_t pt, int tn)
{
	const struct lj_snap *s = ts ? (const struct lj_snap *)ts->vm_data : NULL;
	int ng = c->vm->found.ng;
	for (int i = -1; i < ng && i < 64; i++) {
		uint64_t g = i < 0 ? (s && s->have ? s->g : 0) : c->vm->found.g[i];
		uint64_t arr, T, spt, spc;
		uint32_t size, sizebc;
		if (!g || mem_read_u64(c->m, g + c->l->g_jtrace, &arr) < 0 ||
		    mem_read_u32(c->m, g + c->l->g_jtrace + 12, &size) < 0 || tn <= 0 ||
		    (uint32_t)tn >= size || size > 65536 ||
		    rdref(c, arr + (uint64_t)tn * c->ol->gcref, &T) < 0 || !T ||
		    !lj_is_gct(c->ol, c->m, T, LJ_GCT_TRACE) ||
		    rdref(c, T + c->ol->tr_startpt, &spt) < 0 || spt != pt ||
		    rdmref(c, T + c->ol->tr_startpc, &spc) < 0 ||
		    mem_read_u32(c->m, pt + c->ol->pt_sizebc, &sizebc) < 0)
			continue;
		uint64_t bc = pt + c->ol->pt_size;
		if (spc < bc || (spc & 3) || (spc - bc) / 4 >= sizebc)
			continue;
		return (int64_t)((spc - bc) / 4);
	}
	return -1;
}

/* One Lua frame F; INNER: the frame the walk emitted just inside it on
 * the same stack, or NULL. */
static void one_frame(struct ll_ctx *c, const struct thread_snap *ts, const struct lj_lframe *f,
		      const struct lj_lframe *inner, vm_vars_fn *fn, void *arg)
{
	const struct lj_objlayout *ol = c->ol;
	uint64_t pt = f->pt;
	uint8_t numparams = 0, framesize = 0;
	uint32_t sizebc = 0, sizept = 0;
	uint64_t varinfo = 0, uvinfo = 0;
	const char *note = NULL;
	if (!lj_is_gct(ol, c->m, pt, LJ_GCT_PROTO) ||
	    mem_read_u8(c->m, pt + ol->pt_numparams, &numparams) < 0 ||
	    mem_read_u8(c->m, pt + ol->pt_framesize, &framesize) < 0 ||
	    mem_read_u32(c->m, pt + ol->pt_sizebc, &sizebc) < 0 ||
	    mem_read_u32(c->m, pt + ol->pt_sizept, &sizept) < 0 ||
	    rdmref(c, pt + ol->pt_varinfo, &varinfo) < 0 || rdmref(c, pt + ol->pt_uvinfo, &uvinfo) < 0) {
		fn(arg, pt, 0, NULL, 0, "prototype unreadable: no locals");
		return;
	}
	uint64_t base = f->slot + 8, bc = pt + ol->pt_size;
	int64_t pos = -1;
	if (f->pc == bc)
		pos = 0;
	else if (f->pc > bc && !(f->pc & 3) && (f->pc - bc) / 4 <= sizebc)
		pos = (int64_t)((f->pc - bc) / 4) - 1;
	int fr2 = c->gc64;
	int nactive = 0;
	if (pos < 0 && f->trace > 0 && (pos = trace_start_pos(c, ts, pt, f->trace)) >= 0)
		note = "on a JIT trace: pc of the trace's start, values as last written to the Lua stack";
	if (pos < 0) {
		note = "pc unknown: locals not shown";
	} else if (!varinfo) {
		note = "stripped: no local names";
	} else {
		size_t len = 0;
		uint8_t *vi = info_read(c, varinfo, pt, sizept, &len);
		static const char *const vn[] = { "", "(for index)", "(for limit)", "(for step)",
						   "(for generator)", "(for state)", "(for control)" };
		const uint8_t *p = vi, *e = vi ? vi + len : NULL;
		uint32_t lastpc = 0;
		for (int guard = 0; vi && p < e && guard < 100000; guard++) {
			const uint8_t *name = p;
			uint8_t v = *p;
			if (v == 0)
				break;
			if (v >= 7)
				while (p < e && *p)
					p++;
			p++;
			uint32_t startpc = lastpc + (uint32_t)lj_uleb(&p, e);
			lastpc = startpc;
			if (startpc > pos)
				break;
			uint32_t endpc = startpc + (uint32_t)lj_uleb(&p, e);
			if (pos < endpc) {
				size_t room = (size_t)(e - name) < 256 ? (size_t)(e - name) : 256;
				const char *nm = v < 7 ? vn[v]
						       : intern_n((const char *)name,
								  strnlen((const char *)name, room));
				add_var(c, 0, nm, base + 8u * (uint64_t)nactive);
				nactive++;
			}
		}
		free(vi);
	}
	/* varargs: between the real frame's fixed parameters and the vararg
	 * frame (lj_debug_getlocal) */
	if (f->vdelta && f->vdelta < f->slot) {
		uint64_t rbase = f->slot - f->vdelta + 8, top = f->slot - 8u * (uint64_t)fr2;
		uint64_t first = rbase + 8u * numparams;
		for (uint64_t a = first, k = 0; a < top && k < 256; a += 8, k++)
			add_var(c, 0, "(*vararg)", a);
	}
	/* temporaries above the named locals, up to the inner frame, or the
	 * frame's whole register window for the innermost one (as L->top is
	 * while the interpreter runs it) */
	if (pos >= 0) {
		uint64_t limit = base + 8u * framesize;
		if (inner && inner->slot > f->slot) {
			limit = inner->slot - 8u * (uint64_t)fr2;
			if (inner->vdelta && inner->vdelta < inner->slot)
				limit = inner->slot - inner->vdelta - 8u * (uint64_t)fr2;
		}
		if (limit > base + 8u * framesize)
			limit = base + 8u * framesize;
		int64_t slots = limit > base ? (int64_t)((limit - base) / 8) : 0, i;
		for (i = nactive; i < slots && i < nactive + LL_MAX_TEMPS; i++)
			add_var(c, 0, "(*temporary)", base + 8u * (uint64_t)i);
		if (i < slots)
			add_fixed(c, 0, "(*temporary)", internf("... %lld more not shown", (long long)(slots - i)));
	}
	/* upvalues: GCfuncL.uvptr[i] -> GCupval.v -> TValue */
	uint8_t nup = 0;
	if (f->fn && mem_read_u8(c->m, f->fn + ol->fn_ffid + 1, &nup) == 0 && nup) {
		size_t ulen = 0;
		uint8_t *ui = uvinfo ? info_read(c, uvinfo, pt, sizept, &ulen) : NULL;
		size_t up = 0;
		uint64_t v_off = c->gc64 ? 32 : 16;
		for (int i = 0; i < nup; i++) {
			const char *nm = NULL;
			if (ui && up < ulen) {
				nm = intern_n((const char *)ui + up, strnlen((const char *)ui + up, ulen - up));
				up += strnlen((const char *)ui + up, ulen - up) + 1;
			}
			uint64_t uv = 0, v = 0;
			if (rdref(c, f->fn + ol->fn_pc + ol->gcref + (uint64_t)i * ol->gcref, &uv) < 0 ||
			    !lj_is_gct(ol, c->m, uv, LJ_GCT_UPVAL) || rdmref(c, uv + v_off, &v) < 0 || !v) {
				add_fixed(c, 1, nm, "<unreadable>");
				continue;
			}
			add_var(c, 1, nm, v);
		}
		free(ui);
	}
	fn(arg, pt, 0, c->vars, c->n, note);
	for (int i = 0; i < c->n; i++)
		free(c->text[i]);
	c->n = 0;
}

int lj_locals(struct vm *vm, struct target *t, struct thread_snap *ts, size_t str_max,
	      vm_vars_fn *fn, void *arg)
{
	/* TS NULL: the frames lj_coroutines() kept for the coroutine it reports */
	if (vm->cache.lf_tid != (ts ? ts->tid : LJ_LF_CORO))
		return 0;
	struct ll_ctx *c = calloc(1, sizeof *c);
	if (!c)
		return -LS_E_NOMEM;
	c->vm = vm;
	c->m = ts && ts->mem ? ts->mem : &t->mem.base;
	c->ol = vm->ol;
	c->l = vm->lay;
	c->gc64 = !!(vm->lay->flags & LJL_GC64);
	c->str_max = str_max;
	int count = 0;
	for (int k = 0; k < vm->cache.nlf; k++) {
		const struct lj_lframe *f = &vm->cache.lf[k];
		if (!f->pt)
			continue;
		/* the frame just inside: the previous one emitted, when it is
		 * above this one on the same stack (within 1 MiB) */
		const struct lj_lframe *inner = k > 0 && vm->cache.lf[k - 1].slot > f->slot &&
						vm->cache.lf[k - 1].slot - f->slot < (1u << 20)
						? &vm->cache.lf[k - 1] : NULL;
		one_frame(c, ts, f, inner, fn, arg);
		count++;
	}
	free(c);
	return count;
}
