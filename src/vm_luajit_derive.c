/* vm_luajit_derive.c: a LuaJIT 2.1 layout derived from the VM code and
 * its first state, for the builds no row of vm_luajit_layout.c names.
 *
 * The instruction patterns and why they are stable: docs/luajit-derive.md.
 * The layouts they reproduce: docs/luajit.md §3.2-§3.7. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include "err.h"
#include "proc_maps.h"
#include "vm_luajit_derive.h"

#define FIND_MAX_BYTES (256u << 20) /* lj_derive_find_state's scan budget */
#define FIND_CHUNK (1u << 20)
#define SIZEOF_L_MIN 48u            /* sizeof(lua_State): 64|96, OpenResty 80|112 */
#define SIZEOF_L_MAX 256u

/* An instruction OP with a [r14+disp32] operand at CODE[I]: REX prefix
 * with B set (r14), opcode OP, ModRM mod 10 rm 110. Returns the
 * global_State offset (G2DISP + disp) or -1; *REG gets the other
 * operand's register number (REX.R included), *W REX.W. */
static int64_t r14_op(const uint8_t *code, size_t len, size_t i, uint8_t op, uint32_t g2,
		      int *reg, int *w)
{
	if (i + 7 > len || (code[i] & 0xf1) != 0x41 || code[i + 1] != op ||
	    (code[i + 2] & 0xc7) != 0x86)
		return -1;
	int64_t o = (int64_t)g2 + lj_rd32(code + i + 3);
	if (o < 0 || o >= (int64_t)g2)
		return -1;
	*reg = ((code[i] >> 2) & 1) << 3 | ((code[i + 2] >> 3) & 7);
	*w = !!(code[i] & 8);
	return o;
}

int lj_derive_code(const uint8_t *code, size_t len, struct lj_dcode *d)
{
	memset(d, 0, sizeof *d);
	d->jit_base = d->gc_total = d->jtrace = -1;
	if (lj_code_derive(code, len, &d->ci) < 0 || d->ci.vmstate < 0 || d->ci.cur_L < 0)
		return -1;
	uint32_t g2 = d->ci.g2disp;
	int gc64 = d->ci.gc64, gr = gc64 ? 8 : 4;
	int32_t tot[32], jt[32];
	int ntot = 0, njt = 0;
	for (size_t i = 0; i + 7 <= len; i++) {
		int reg, w, reg2, w2;
		int64_t o;
		/* mov [DISPATCH+GL(jit_base)], 0: vm_exit_interp, lj_vm_exit_handler */
		if ((code[i] & 0xf1) == 0x41 && code[i + 1] == 0xc7 && code[i + 2] == 0x86 &&
		    i + 11 <= len && lj_rd32(code + i + 7) == 0) {
			o = (int64_t)g2 + lj_rd32(code + i + 3);
			if (o == (int64_t)d->ci.cur_L + gr)
				d->jit_base = (int32_t)o;
			continue;
		}
		/* lea reg, [DISPATCH+GL(x)]: tmpbuf, tmptv (vmeta_*), g, J */
		if ((o = r14_op(code, len, i, 0x8d, g2, &reg, &w)) > 0 && o < d->ci.cur_L) {
			int k;
			for (k = 0; k < d->nlea && d->lea[k] != (int32_t)o; k++)
				;
			if (k == d->nlea && d->nlea < LJD_LEA_MAX)
				d->lea[d->nlea++] = (int32_t)o;
			continue;
		}
		if ((o = r14_op(code, len, i, 0x8b, g2, &reg, &w)) < 0 || w != gc64)
			continue;
		/* the GC check of the VM (vm_x64.dasc |.macro checkgc ... ):
		 * mov RB, [GL(gc.total)]; cmp RB, [GL(gc.threshold)] */
		int64_t o2 = r14_op(code, len, i + 7, 0x3b, g2, &reg2, &w2);
		if (o2 == o + gr && reg2 == reg && w2 == w && ntot < 32 && o < d->ci.vmstate) {
			tot[ntot++] = (int32_t)o;
			continue;
		}
		/* BC_JLOOP, lj_vm_exit_handler: mov RA, [J(trace)]; (one more
		 * instruction); mov TRACE:RD, [RA+RD*ref] */
		if (o > d->ci.cur_L && njt < 32) {
			for (size_t j = i + 7; j < i + 7 + 8 && j + 3 <= len; j++) {
				if (code[j] != 0x8b || (code[j + 1] & 0xc7) != 0x04)
					continue;
				uint8_t sib = code[j + 2];
				if ((sib & 7) == (reg & 7) && (sib >> 6) == (gc64 ? 3 : 2)) {
					jt[njt++] = (int32_t)o;
					break;
				}
			}
		}
	}
	d->gc_total = lj_mode_of(tot, ntot);
	d->jtrace = lj_mode_of(jt, njt);
	return 0;
}

/* ---- the state stage ---- */

static int itype_of(int gc64, uint64_t v)
{
	return gc64 ? (int)((int64_t)v >> 47) : (int)(int32_t)(uint32_t)(v >> 32);
}
#define IT_STR (-5)
#define IT_TAB (-12)

/* Does table T have a string key "_LOADED" when GCstr's len is at SL
 * and its data at SD? 1 yes, 0 no. */
static int has_loaded(const struct lj_objlayout *ol, int gc64, struct mem *m, uint64_t t,
		      unsigned sl, unsigned sd)
{
	uint64_t node;
	uint32_t hmask;
	if (!lj_is_gct(ol, m, t, LJ_GCT_TAB) || lj_read_ref(ol, m, t + ol->tab_node, &node) < 0 ||
	    mem_read_u32(m, t + ol->tab_hmask, &hmask) < 0 || hmask > 0xffff || ((hmask + 1) & hmask))
		return 0;
	size_t sz = (size_t)(hmask + 1) * ol->node_size;
	uint8_t *nb = malloc(sz);
	if (!nb)
		return 0;
	int found = 0;
	if (mem_read(m, node, nb, sz) == 0) {
		for (uint32_t i = 0; i <= hmask && !found; i++) {
			uint64_t k;
			memcpy(&k, nb + (size_t)i * ol->node_size + ol->node_key, 8);
			if (itype_of(gc64, k) != IT_STR)
				continue;
			uint64_t s = lj_gcptr(ol, k);
			uint32_t len;
			char buf[8];
			if (mem_read_u32(m, s + sl, &len) < 0 || len != 7 ||
			    mem_read(m, s + sd, buf, 7) < 0)
				continue;
			found = memcmp(buf, "_LOADED", 7) == 0;
		}
	}
	free(nb);
	return found;
}

int lj_derive_state(const struct lj_dcode *d, struct mem *m, uint64_t L, uint64_t g,
		    unsigned hostflags, struct lj_layout *out, char *why, size_t whylen)
{
	int gc64 = d->ci.gc64 == 1, gr = gc64 ? 8 : 4;
	const struct lj_objlayout *ol = gc64 ? &lj_obj_gc64 : &lj_obj_32;
	uint64_t szL = g - L;
	uint8_t gb[1200];
	size_t need = (size_t)d->ci.cur_L + 2u * (unsigned)gr;
	if (g <= L || szL < SIZEOF_L_MIN || szL > SIZEOF_L_MAX || (szL & 7) || need > sizeof gb) {
		snprintf(why, whylen, "state 0x%llx/0x%llx out of shape", (unsigned long long)L,
			 (unsigned long long)g);
		return -LS_E_GARBAGE;
	}
	if (d->gc_total < 0) {
		snprintf(why, whylen, "no gc.total check in the VM code");
		return -LS_E_GARBAGE;
	}
	if (mem_read(m, g, gb, need) < 0)
		return -LS_E_FAULT;
	/* mainthref, registrytv: tmptv (a lea target) follows registrytv
	 * in the beta3 order (mainthref, registrytv, tmptv: 2.1.0-beta3,
	 * Tarantool, OpenResty before 2020); in the 2020-06 order mainthref
	 * follows vmstate and registrytv follows tmptv, tmptv2 and nilnode
	 * (a 24-byte Node) */
	static const unsigned strl[2][2][2] = { { { 12, 16 }, { 16, 20 } },   /* 32-bit refs */
						{ { 16, 24 }, { 20, 24 } } }; /* GC64 */
	int32_t mt = -1, rt = -1, beta3 = 0, ok = 0;
	unsigned sl = 0, sd = 0;
	for (int fam = 0; fam < 2; fam++) {
		for (int k = 0; k < d->nlea; k++) {
			int32_t t = d->lea[k], cmt, crt;
			if (fam == 0) {
				cmt = t - 16;
				crt = t - 8;
			} else {
				cmt = (d->ci.vmstate + 4 + gr - 1) & ~(gr - 1);
				crt = t + 16 + 24;
			}
			if (cmt <= 0 || crt <= 0 || crt + 8 > d->ci.cur_L)
				continue;
			uint64_t ref = 0, tv;
			memcpy(&ref, gb + cmt, (size_t)gr);
			memcpy(&tv, gb + crt, 8);
			if (lj_gcptr(ol, ref) != L || itype_of(gc64, tv) != IT_TAB)
				continue;
			for (int s = 0; s < 2; s++) {
				if (!has_loaded(ol, gc64, m, lj_gcptr(ol, tv), strl[gc64][s][0],
						strl[gc64][s][1]))
					continue;
				if (ok && (cmt != mt || crt != rt || strl[gc64][s][0] != sl)) {
					snprintf(why, whylen,
						 "two layouts fit: mainthref g+%d/%d, registrytv g+%d/%d",
						 mt, cmt, rt, crt);
					return -LS_E_GARBAGE;
				}
				ok = 1;
				mt = cmt;
				rt = crt;
				beta3 = fam == 0;
				sl = strl[gc64][s][0];
				sd = strl[gc64][s][1];
			}
		}
	}
	if (!ok) {
		snprintf(why, whylen, "no mainthref/registrytv pair next to %d lea targets holds L and "
			 "a registry with _LOADED", d->nlea);
		return -LS_E_GARBAGE;
	}
	/* strempty: the zero-length GCstr closest below mainthref (nextgc
	 * 0, marked set, gct string, len 0, its terminator stremptyz 0) */
	int32_t se = -1;
	for (int32_t o = (mt - (int32_t)sd) & ~(gr - 1); o >= gr; o -= gr) {
		uint64_t next = 0;
		uint32_t len;
		memcpy(&next, gb + o, (size_t)gr);
		memcpy(&len, gb + o + sl, 4);
		if (next == 0 && gb[o + ol->marked] != 0 && gb[o + ol->gct] == LJ_GCT_STR && len == 0 &&
		    gb[o + sd] == 0) {
			se = o;
			break;
		}
	}
	if (se < 0) {
		snprintf(why, whylen, "no empty string below mainthref g+%d", mt);
		return -LS_E_GARBAGE;
	}
	memset(out, 0, sizeof *out);
	out->name = "derived from the VM code and state";
	out->source = "docs/luajit-derive.md";
	out->flags = (gc64 ? LJL_GC64 : 0) | (hostflags & LJL_OPENRESTY);
	if (beta3)
		out->flags |= (hostflags & LJL_TARANTOOL) ? LJL_TARANTOOL : LJL_SNAP8;
	else
		out->flags |= LJL_SNAP_MCOFS;
	out->g2disp = (uint16_t)d->ci.g2disp;
	out->sizeof_L = (uint16_t)szL;
	/* GCState: total, threshold (GCSize), currentwhite, state, 2 bytes,
	 * sweepstr (4), root (GCRef, aligned) */
	out->g_gc_state = (uint16_t)(d->gc_total + 2 * gr + 1);
	out->g_gc_root = (uint16_t)(d->gc_total + 2 * gr + 8);
	out->g_vmstate = (uint16_t)d->ci.vmstate;
	out->g_strempty = (uint16_t)se;
	out->g_mainthref = (uint16_t)mt;
	out->g_registrytv = (uint16_t)rt;
	out->g_cur_L = (uint16_t)d->ci.cur_L;
	out->g_jit_base = (uint16_t)(d->jit_base >= 0 ? d->jit_base : d->ci.cur_L + gr);
	/* no J.trace load: a build without the JIT (LUAJIT_DISABLE_JIT), whose
	 * vmstate never names a trace; jit_base is read in its place */
	out->g_jtrace = (uint16_t)(d->jtrace >= 0 ? d->jtrace : out->g_jit_base);
	out->str_len = (uint8_t)sl;
	out->str_data = (uint8_t)sd;
	/* cframe (vm_x64.dasc, CFRAME_SIZE 80; the probe checks the FDE) */
	out->cf_size = 80;
	out->cf_nres = gc64 ? 8 : 16;
	out->cf_L = gc64 ? 16 : 24;
	out->cf_pc = gc64 ? 24 : 28;
	out->cf_prev = 32;
	out->vmst_min = -7;
	return 0;
}

int lj_derive_find_state(const struct lj_dcode *d, struct mem *m, const struct proc_maps *maps,
			 uint64_t vm_start, uint64_t vm_end, uint64_t *Lp, uint64_t *Gp)
{
	int gc64 = d->ci.gc64 == 1;
	const struct lj_objlayout *ol = gc64 ? &lj_obj_gc64 : &lj_obj_32;
	size_t budget = FIND_MAX_BYTES;
	uint8_t *buf = malloc(FIND_CHUNK + 64);
	if (!buf)
		return -LS_E_NOMEM;
	int found = 0;
	for (int i = 0; i < maps->n && budget && !found; i++) {
		const struct proc_map *mp = &maps->m[i];
		if ((mp->perms & (MAP_R | MAP_W)) != (MAP_R | MAP_W) || proc_map_is_file(mp))
			continue;
		if (mp->path[0] == '[' && strcmp(mp->path, "[heap]") != 0)
			continue;
		if (!gc64 && mp->start >= 0x80000000ull)
			continue;
		for (uint64_t a = mp->start; a < mp->end && budget && !found; a += FIND_CHUNK) {
			size_t want = mp->end - a > FIND_CHUNK ? FIND_CHUNK : (size_t)(mp->end - a);
			ssize_t got = m->read(m, a, buf, want);
			if (got <= 0)
				break;
			budget = budget > (size_t)got ? budget - (size_t)got : 0;
			for (size_t o = 0; o + 64 <= (size_t)got; o += 8) {
				if (buf[o + ol->gct] != LJ_GCT_THREAD || buf[o + ol->L_dummy_ffid] != 1)
					continue;
				uint64_t gl = 0;
				memcpy(&gl, buf + o + ol->L_glref, ol->gcref);
				uint64_t L = a + o;
				if (gl <= L || gl - L < SIZEOF_L_MIN || gl - L > SIZEOF_L_MAX || (gl & 7))
					continue;
				/* the dispatch table: dispatch[0] in the VM code,
				 * the word before it (J or hotcount) not */
				uint64_t dd[2];
				if (mem_read(m, gl + d->ci.g2disp - 8, dd, sizeof dd) < 0)
					continue;
				if (dd[1] < vm_start || dd[1] >= vm_end || (dd[0] >= vm_start && dd[0] < vm_end))
					continue;
				*Lp = L;
				*Gp = gl;
				found = 1;
				break;
			}
		}
	}
	free(buf);
	return found;
}

int lj_layout_diff(const struct lj_layout *a, const struct lj_layout *b, char *buf, size_t len)
{
	struct {
		const char *n;
		int x, y;
	} f[] = {
		{ "G2DISP", a->g2disp, b->g2disp }, { "sizeof_L", a->sizeof_L, b->sizeof_L },
		{ "gc.state", a->g_gc_state, b->g_gc_state }, { "gc.root", a->g_gc_root, b->g_gc_root },
		{ "vmstate", a->g_vmstate, b->g_vmstate }, { "strempty", a->g_strempty, b->g_strempty },
		{ "mainthref", a->g_mainthref, b->g_mainthref },
		{ "registrytv", a->g_registrytv, b->g_registrytv }, { "cur_L", a->g_cur_L, b->g_cur_L },
		{ "jit_base", a->g_jit_base, b->g_jit_base }, { "J.trace", a->g_jtrace, b->g_jtrace },
		{ "str.len", a->str_len, b->str_len }, { "str.data", a->str_data, b->str_data },
		{ "cf_nres", a->cf_nres, b->cf_nres }, { "cf_L", a->cf_L, b->cf_L },
		{ "cf_pc", a->cf_pc, b->cf_pc }, { "GC64", !!(a->flags & LJL_GC64), !!(b->flags & LJL_GC64) },
	};
	int n = 0;
	size_t used = 0;
	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
		if (f[i].x == f[i].y)
			continue;
		n++;
		if (used < len) {
			int w = snprintf(buf + used, len - used, "%s%s %d/%d", used ? ", " : "", f[i].n,
					 f[i].x, f[i].y);
			if (w > 0)
				used += (size_t)w;
		}
	}
	return n;
}
