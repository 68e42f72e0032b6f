/* vm_puc_heap.c: the heap of PUC Lua 5.1-5.4 states for `luaspy heap`
 * (vm_ops.heap): every object of the collector's lists, sized as
 * luaC_freeobj / luaM_free free it, the VM's own byte count beside, and
 * a breadth-first search over table keys from _G and the registry that
 * names the largest tables. The sizes and list heads per release are in
 * docs/heap.md §2 (from lgc.c, lstate.c, lfunc.c, ltable.c, lstring.c of
 * each release; struct sizes from the same offsets as vm_puc_layout.c).
 * The target should be stopped (cmd_heap.c): lists are read once,
 * unlocked. Everything read is validated and bounded: a bad header is
 * counted as skipped and ends that list, a cycle in a list is found
 * (Brent) and ends it, a huge count is refused. */
#include <stdlib.h>
#include <string.h>
#include "err.h"
#include "heap.h"
#include "msg.h"
#include "vm_puc_int.h"

#define PH_MAX_LEN      (1ull << 40)  /* a string or userdata longer is garbage */
#define PH_MAX_SLOTS    (1u << 28)    /* array slots / hash nodes of a valid table */
#define PH_MAX_STACK    (1u << 24)    /* stack slots of a valid thread (LUAI_MAXSTACK 1e6) */
#define PH_MAX_CI       200000        /* CallInfos of a valid thread (MAX_CI_STEPS) */
#define PH_MAX_STRT     (1u << 28)    /* string table buckets */
#define PH_CHUNK        4096          /* TValues / nodes / pointers read at once */

/* What the heap walk needs beyond struct puc_layout, by release:
 * docs/heap.md §2. */
struct ph {
	const struct puc_layout *lay;
	struct mem *m;
	struct heap_state *s;
	uint64_t g, L;                 /* global_State, main thread */
	unsigned tt_proto, tt_uv;      /* 0: not a GC object (5.3 upvalues) */
	int sizeof_table, sizeof_proto, lastfree, lineinfo_size, udata_len, L_stacksize;
	uint64_t mainthread;
	/* 5.3: upvalues are not GC objects; counted once each from the closures */
	uint64_t *uv;
	size_t nuv, capuv;
	struct htab uvidx;
};

static void ph_setup(struct ph *p)
{
	const struct puc_layout *l = p->lay;
	switch (l->minor) {
	case 1:
		p->tt_proto = 9; p->tt_uv = 10; p->sizeof_proto = 120; p->lineinfo_size = 4;
		p->udata_len = 32; p->L_stacksize = 88; p->lastfree = 40;
		break;
	case 2:
		p->tt_proto = 9; p->tt_uv = 10; p->sizeof_proto = 128; p->lineinfo_size = 4;
		p->udata_len = 32; p->L_stacksize = 64; p->lastfree = l->t_array == 24 ? 40 : 32;
		break;
	case 3:
		p->tt_proto = 9; p->tt_uv = 0; p->sizeof_proto = 120; p->lineinfo_size = 4;
		p->udata_len = 24; p->L_stacksize = 184; p->lastfree = 32;
		break;
	default:
		p->tt_proto = 10; p->tt_uv = 9; p->sizeof_proto = 128; p->lineinfo_size = 1;
		p->udata_len = 16; p->L_stacksize = -1; p->lastfree = 32;
		break;
	}
	p->sizeof_table = l->t_sizearray == 56 ? 64 : 56;
}

/* ---- sizes ------------------------------------------------------------------- */

/* Bytes of the TString at O with header H (ts_data bytes); *LEN its length. */
static int str_size(struct ph *p, const uint8_t *h, uint64_t *len, uint64_t *bytes)
{
	const struct puc_layout *l = p->lay;
	if (l->str_len == PUC_STR_SHRLEN && h[8] == l->gct_sstr)
		*len = h[11];
	else
		*len = g64(h, 16);
	if (*len > PH_MAX_LEN)
		return -1;
	*bytes = (uint64_t)l->ts_data + *len + 1;
	return 0;
}

static void add_string(struct ph *p, uint64_t o, const uint8_t *h)
{
	uint64_t len, bytes;
	if (str_size(p, h, &len, &bytes) < 0) {
		p->s->bad++;
		return;
	}
	heap_add(p->s, HEAP_STRING, bytes);
	if (heap_string_wanted(p->s, len)) {
		char buf[HEAP_STR_PREVIEW];
		size_t n = len < sizeof buf ? (size_t)len : sizeof buf;
		if (mem_read(p->m, o + (uint64_t)p->lay->ts_data, buf, n) == 0)
			heap_string(p->s, o, len, bytes, buf, (int)n);
	}
}

/* Array slots and hash nodes of the table at O (its first 64 bytes in H). */
static int tab_parts(struct ph *p, const uint8_t *h, uint32_t *asize, uint32_t *nnode, uint64_t *node)
{
	const struct puc_layout *l = p->lay;
	uint32_t a = g32(h, l->t_sizearray);
	if (l->minor == 4 && (h[10] & 0x80) && (a & (a - 1))) {
		/* 5.4 alimit is a hint (BITRAS): the real size is the next power of 2 */
		uint32_t r = 1;
		while (r < a && r < PH_MAX_SLOTS)
			r <<= 1;
		a = r;
	}
	uint32_t lsn = h[l->t_lsizenode];
	*node = g64(h, l->t_node);
	uint64_t lastfree = g64(h, p->lastfree);
	if (a > PH_MAX_SLOTS || lsn > 28)
		return -1;
	*asize = a;
	*nnode = 1u << lsn;
	if (l->minor >= 3) {
		if (lastfree == 0)
			*nnode = 0;   /* isdummy(t): lastfree == NULL */
	} else if (lsn == 0 && (lastfree == *node || lastfree == *node - (uint64_t)l->node_size)) {
		/* 5.1, 5.2: no hash part is the static dummynode, whose lastfree
		 * stays at it (5.1's getfreepos leaves it one node below): a real
		 * one-node part starts at node + 1 and is resized once used up */
		*nnode = 0;
	}
	return 0;
}

static void add_table(struct ph *p, uint64_t o)
{
	uint8_t h[64];
	uint32_t asize, nnode;
	uint64_t node;
	if (mem_read(p->m, o, h, (size_t)p->sizeof_table) < 0 || tab_parts(p, h, &asize, &nnode, &node) < 0) {
		p->s->bad++;
		return;
	}
	uint64_t bytes = (uint64_t)p->sizeof_table + (uint64_t)asize * 16 +
			 (uint64_t)nnode * (uint64_t)p->lay->node_size;
	heap_add(p->s, HEAP_TABLE, bytes);
	heap_table(p->s, o, bytes, asize, nnode);
}

/* 5.3: count the closure's upvalue UV once (32 bytes: v, refcount, union). */
struct uv_key { const struct ph *p; uint64_t a; };
static int uv_eq(const void *ctx, uint32_t i)
{
	const struct uv_key *k = ctx;
	return k->p->uv[i] == k->a;
}

static void add_uv53(struct ph *p, uint64_t a)
{
	if (!ptr_ok(a))
		return;
	struct uv_key k = { p, a };
	uint64_t hh = htab_fnv1a_word(HTAB_FNV_INIT, a);
	size_t pos;
	if (htab_reserve(&p->uvidx) < 0 || array_grow(&p->uv, &p->capuv, p->nuv + 1, sizeof *p->uv) < 0)
		return;
	if (htab_find(&p->uvidx, hh, uv_eq, &k, &pos) >= 0)
		return;
	p->uv[p->nuv] = a;
	htab_insert(&p->uvidx, pos, hh, (uint32_t)p->nuv++);
	heap_add(p->s, HEAP_UPVAL, 32);
}

static void add_closure(struct ph *p, uint64_t o, unsigned tt)
{
	const struct puc_layout *l = p->lay;
	uint8_t h[48];
	if (mem_read(p->m, o, h, 16) < 0) {
		p->s->bad++;
		return;
	}
	unsigned nup = h[l->cl_nupvalues];
	int isC = l->minor == 1 ? h[l->cl_isC] != 0 : tt == l->gct_ccl;
	if (isC) {
		heap_add(p->s, HEAP_CFUNC, (uint64_t)l->ccl_upvalue + 16u * nup);
		return;
	}
	heap_add(p->s, HEAP_LFUNC, (uint64_t)l->lcl_p + 8 + 8u * nup);
	if (!p->tt_uv && nup) {
		uint64_t uv[256];
		if (mem_read(p->m, o + (uint64_t)l->lcl_p + 8, uv, 8u * nup) == 0)
			for (unsigned i = 0; i < nup; i++)
				add_uv53(p, uv[i]);
	}
}

static void add_proto(struct ph *p, uint64_t o)
{
	const struct puc_layout *l = p->lay;
	uint8_t h[128];
	if (mem_read(p->m, o, h, (size_t)p->sizeof_proto) < 0) {
		p->s->bad++;
		return;
	}
	int32_t nup = (int32_t)g32(h, l->p_sizeupvalues), nk = (int32_t)g32(h, l->p_sizek),
		ncode = (int32_t)g32(h, l->p_sizecode), nline = (int32_t)g32(h, l->p_sizelineinfo),
		np = (int32_t)g32(h, l->p_sizep), nloc = (int32_t)g32(h, l->p_sizelocvars),
		nabs = l->p_sizeabslineinfo >= 0 ? (int32_t)g32(h, l->p_sizeabslineinfo) : 0;
	if (nup < 0 || nk < 0 || ncode < 0 || nline < 0 || np < 0 || nloc < 0 || nabs < 0) {
		p->s->bad++;
		return;
	}
	uint64_t b = (uint64_t)p->sizeof_proto + 4ull * (uint64_t)ncode + 8ull * (uint64_t)np +
		     16ull * (uint64_t)nk + (uint64_t)p->lineinfo_size * (uint64_t)nline +
		     8ull * (uint64_t)nabs + 16ull * (uint64_t)nloc +
		     (uint64_t)l->upval_stride * (uint64_t)nup;
	heap_add(p->s, HEAP_PROTO, b);
}

static void add_udata(struct ph *p, uint64_t o)
{
	uint8_t h[48];
	if (mem_read(p->m, o, h, 40) < 0) {
		p->s->bad++;
		return;
	}
	uint64_t len = g64(h, p->udata_len), b;
	if (len > PH_MAX_LEN) {
		p->s->bad++;
		return;
	}
	if (p->lay->minor == 4) {
		unsigned nuv = g16(h, 10);
		b = (nuv == 0 ? 32u : 40u + 16u * nuv) + len;
	} else {
		b = 40 + len;
	}
	heap_add(p->s, HEAP_UDATA, b);
}

/* Thread L: lua_State (+ LUAI_EXTRASPACE), its stack, its CallInfos. The
 * main thread is the LG block (lg_size, global_State included). */
static void add_thread(struct ph *p, uint64_t L)
{
	const struct puc_layout *l = p->lay;
	uint8_t lb[256];
	if (l->L_size > (int)sizeof lb || mem_read(p->m, L, lb, (size_t)l->L_size) < 0) {
		p->s->bad++;
		return;
	}
	uint64_t slots;
	uint64_t stack = g64(lb, l->L_stack), last = g64(lb, l->L_stack_last);
	if (p->L_stacksize >= 0)
		slots = g32(lb, p->L_stacksize);
	else
		slots = last >= stack ? (last - stack) / 16 + 5 : 0;  /* 5.4: stacksize + EXTRA_STACK */
	if (slots > PH_MAX_STACK) {
		p->s->bad++;
		return;
	}
	uint64_t ci_bytes = 0;
	if (l->minor == 1) {
		uint32_t size_ci = g32(lb, 92);
		if (size_ci > PH_MAX_CI) {
			p->s->bad++;
			return;
		}
		ci_bytes = (uint64_t)size_ci * (uint64_t)l->ci_size;
	} else {
		/* the CallInfo list after base_ci (luaE_freeCI) */
		uint64_t ci = g64(lb, l->L_base_ci + l->ci_next);
		for (int n = 0; ci && n < PH_MAX_CI; n++) {
			if (!ptr_ok(ci) || rd64(p->m, ci + (uint64_t)l->ci_next, &ci) < 0) {
				p->s->bad++;
				break;
			}
			ci_bytes += (uint64_t)l->ci_size;
		}
	}
	uint64_t self = L == p->mainthread ? (uint64_t)l->lg_size : (uint64_t)(l->lx_l + l->L_size);
	heap_add(p->s, HEAP_THREAD, self + slots * 16 + ci_bytes);
}

/* Count one object at O by its type. Returns -1 when the walk must stop. */
static int add_object(struct ph *p, uint64_t o, unsigned tt)
{
	const struct puc_layout *l = p->lay;
	if (tt == l->gct_sstr || tt == l->gct_lstr) {
		uint8_t h[32];
		if (mem_read(p->m, o, h, 24) < 0) {
			p->s->bad++;
			return 0;
		}
		add_string(p, o, h);
	} else if (tt == l->gct_table) {
		add_table(p, o);
	} else if (tt == l->gct_lcl || tt == l->gct_ccl) {
		add_closure(p, o, tt);
	} else if (tt == 7) {
		add_udata(p, o);
	} else if (tt == 8) {
		add_thread(p, o);
	} else if (tt == p->tt_proto) {
		add_proto(p, o);
	} else if (p->tt_uv && tt == p->tt_uv) {
		heap_add(p->s, HEAP_UPVAL, 40);
	} else {
		p->s->bad++;
		return -1;   /* a type we do not know: the list is not trusted past it */
	}
	return p->s->cut ? -1 : 0;
}

/* Walk the list of GC objects from HEAD, linked by 'next' (offset 0).
 * CIRCULAR: a 5.1 tmudata ring (HEAD is its last element). A cycle
 * elsewhere (Brent) or an invalid pointer ends the list. */
static void walk_list(struct ph *p, uint64_t head, int circular)
{
	uint64_t o = head, saved = 0;
	uint64_t steps = 0, power = 1;
	if (circular && head) {
		if (rd64(p->m, head, &o) < 0)
			return;
	}
	while (o) {
		uint8_t h[16];
		if (!ptr_ok(o) || mem_read(p->m, o, h, sizeof h) < 0) {
			p->s->bad++;
			return;
		}
		if (add_object(p, o, h[8]) < 0)
			return;
		if (circular && o == head)
			return;
		o = g64(h, 0);
		if (o && o == saved && !circular) {
			p->s->cut = "a cycle in an object list";
			return;
		}
		if (++steps == power) {
			saved = o;
			power <<= 1;
			steps = 0;
		}
	}
}

/* 5.1, 5.2: strings hang off the string table's buckets (linked by 'next'). */
static void walk_strt(struct ph *p, uint64_t hash, uint32_t size)
{
	uint64_t b[PH_CHUNK];
	for (uint32_t i = 0; i < size && !p->s->cut; i += PH_CHUNK) {
		uint32_t n = size - i < PH_CHUNK ? size - i : PH_CHUNK;
		if (mem_read(p->m, hash + 8ull * i, b, 8u * n) < 0) {
			p->s->bad++;
			return;
		}
		for (uint32_t j = 0; j < n; j++)
			if (b[j])
				walk_list(p, b[j], 0);
	}
}

/* ---- the path search ------------------------------------------------------- */

/* The table in TValue TV (16 bytes), or 0. */
static uint64_t tv_table(const struct puc_layout *l, const uint8_t *tv)
{
	return tv_tag(l, tv) == l->tag_table && ptr_ok(g64(tv, 0)) ? g64(tv, 0) : 0;
}

/* Follow the array and hash parts of table entry I of the search. */
static void path_expand(struct ph *p, int64_t i)
{
	const struct puc_layout *l = p->lay;
	struct heap_state *s = p->s;
	uint64_t t = s->pn[i].addr;
	uint8_t h[64], buf[PH_CHUNK * 16];
	uint32_t asize, nnode;
	uint64_t node;
	if (mem_read(p->m, t, h, (size_t)p->sizeof_table) < 0 || tab_parts(p, h, &asize, &nnode, &node) < 0)
		return;
	uint64_t arr = g64(h, l->t_array);
	if (asize > HEAP_MAX_TABLE_SLOTS)
		asize = HEAP_MAX_TABLE_SLOTS;
	for (uint32_t j = 0; j < asize && !s->path_cut; j += PH_CHUNK) {
		uint32_t n = asize - j < PH_CHUNK ? asize - j : PH_CHUNK;
		if (mem_read(p->m, arr + 16ull * j, buf, 16u * n) < 0)
			break;
		for (uint32_t k = 0; k < n; k++) {
			uint64_t c = tv_table(l, buf + 16u * k);
			if (c && heap_path_add(s, c, i, NULL, (int64_t)j + k + 1) == -2)
				return;
		}
	}
	if (nnode > HEAP_MAX_TABLE_SLOTS)
		nnode = HEAP_MAX_TABLE_SLOTS;
	uint32_t per = (uint32_t)(sizeof buf / (size_t)l->node_size);
	for (uint32_t j = 0; j < nnode && !s->path_cut; j += per) {
		uint32_t n = nnode - j < per ? nnode - j : per;
		if (mem_read(p->m, node + (uint64_t)l->node_size * j, buf, (size_t)l->node_size * n) < 0)
			break;
		for (uint32_t k = 0; k < n; k++) {
			const uint8_t *nd = buf + (size_t)l->node_size * k;
			uint64_t c = tv_table(l, nd);
			if (!c)
				continue;
			int64_t e = heap_path_add(s, c, i, NULL, 0);
			if (e == -2)
				return;
			if (e < 0)
				continue;
			unsigned kt = l->node_key_tt_size == 1 ? nd[l->node_key_tt] : g32(nd, l->node_key_tt);
			uint64_t kv = g64(nd, l->node_key_val);
			if (kt == l->tag_sstr || kt == l->tag_lstr) {
				s->pn[e].key = intern_tstring(l, p->m, kv);
				if (!s->pn[e].key)
					s->pn[e].key = "?";
			} else if (l->minor >= 3 && kt == 3) {
				s->pn[e].idx = (int64_t)kv;
			} else if (l->minor <= 2 && kt == 3) {
				double d;
				memcpy(&d, &kv, 8);
				if (d > -9e15 && d < 9e15 && d == (double)(int64_t)d)
					s->pn[e].idx = (int64_t)d;
				else
					s->pn[e].key = "<number key>";
			} else {
				s->pn[e].key = "<key>";
			}
		}
	}
}

static void path_search(struct ph *p, const uint8_t *lb, const uint8_t *gb)
{
	const struct puc_layout *l = p->lay;
	uint64_t reg = tv_table(l, gb + l->g_l_registry), globals = 0;
	if (l->minor == 1) {
		globals = tv_table(l, lb + 120);   /* lua_State.l_gt (5.1) */
	} else if (reg) {
		/* registry[LUA_RIDX_GLOBALS = 2], in the array part */
		uint8_t h[64], tv[16];
		uint32_t asize, nnode;
		uint64_t node;
		if (mem_read(p->m, reg, h, (size_t)p->sizeof_table) == 0 &&
		    tab_parts(p, h, &asize, &nnode, &node) == 0 && asize >= 2 &&
		    mem_read(p->m, g64(h, l->t_array) + 16, tv, 16) == 0)
			globals = tv_table(l, tv);
	}
	if (globals)
		heap_path_add(p->s, globals, -1, "_G", 0);
	if (reg)
		heap_path_add(p->s, reg, -1, "registry", 0);
	for (size_t i = 0; i < p->s->npn && !p->s->path_cut; i++)
		path_expand(p, (int64_t)i);
}

/* ---- one state ---------------------------------------------------------------- */

static int heap_state_walk(struct vm *vm, struct mem *m, uint64_t L, struct heap_state *s)
{
	const struct puc_layout *l = vm->lay;
	struct ph p;
	memset(&p, 0, sizeof p);
	p.lay = l;
	p.m = m;
	p.s = s;
	p.L = L;
	ph_setup(&p);
	uint8_t lb[256], gb[512];
	if (l->L_size > (int)sizeof lb || mem_read(m, L, lb, (size_t)l->L_size) < 0)
		return -LS_E_FAULT;
	p.g = g64(lb, l->L_l_G);
	if (!ptr_ok(p.g) || mem_read(m, p.g, gb, sizeof gb) < 0)
		return -LS_E_FAULT;
	p.mainthread = g64(gb, l->g_mainthread);
	if (p.mainthread != L)
		return -LS_E_GARBAGE;
	int ag = l->g_allgc;
	if (l->minor == 1) {
		s->vm_bytes = g64(gb, 120);
		s->vm_bytes_how = "totalbytes";
		walk_list(&p, g64(gb, ag), 0);                 /* rootgc: main thread first */
		walk_list(&p, g64(gb, 80), 1);                 /* tmudata ring */
	} else {
		s->vm_bytes = g64(gb, 16) + g64(gb, 24);
		s->vm_bytes_how = "totalbytes + GCdebt";
		add_thread(&p, L);                             /* not in allgc */
		walk_list(&p, g64(gb, ag), 0);
		if (l->minor == 2) {
			walk_list(&p, g64(gb, ag + 8), 0);         /* finobj */
			walk_list(&p, g64(gb, ag + 72), 0);        /* tobefnz */
		} else {
			walk_list(&p, g64(gb, ag + 16), 0);        /* finobj */
			walk_list(&p, g64(gb, ag + 64), 0);        /* tobefnz */
			walk_list(&p, g64(gb, ag + 72), 0);        /* fixedgc */
		}
	}
	uint64_t strt = p.g + (uint64_t)l->g_strt_size - 12;
	uint32_t strt_size = g32(gb, l->g_strt_size);
	if (strt_size <= PH_MAX_STRT) {
		s->count[HEAP_STRTAB] = 1;
		s->bytes[HEAP_STRTAB] = 8ull * strt_size;
		if (l->minor <= 2)
			walk_strt(&p, g64(gb, l->g_strt_size - 12), strt_size);
	} else {
		s->bad++;
	}
	(void)strt;
	/* 5.1, 5.2: global_State.buff, the Mbuffer of concatenation and the
	 * lexer (halved by each collection, lgc.c checkSizes) */
	int buffsize = l->minor == 1 ? 104 : l->minor == 2 ? 232 : -1;
	if (buffsize > 0 && g64(gb, buffsize) < PH_MAX_LEN) {
		s->count[HEAP_VMBUF] = 1;
		s->bytes[HEAP_VMBUF] = g64(gb, buffsize);
	}
	s->not_walked = l->minor == 3 ? "upvalues no closure holds, the VM's small buffers"
				      : "the VM's small buffers";
	path_search(&p, lb, gb);
	free(p.uv);
	htab_free(&p.uvidx);
	msg_debug(1, "heap: state 0x%llx: %llu objects, %llu skipped", (unsigned long long)L,
		  (unsigned long long)s->objects, (unsigned long long)s->bad);
	return 0;
}

int puc_heap(struct vm *vm, struct target *t, struct mem *m, struct heap_state **out)
{
	(void)t;
	if (vm->nstates == 0)
		return -LS_E_NOTLUA;
	if (vm->lay->minor == 2 && vm->lay->rel_hi == 0)
		return -LS_E_UNSUPPORTED;   /* 5.2.0's global_State: not described (docs/heap.md) */
	struct heap_state *s = calloc((size_t)vm->nstates, sizeof *s);
	if (!s)
		return -LS_E_NOMEM;
	int n = 0;
	for (int i = 0; i < vm->nstates; i++) {
		heap_state_init(&s[n], vm->states[i]);
		int rc = heap_state_walk(vm, m, vm->states[i], &s[n]);
		if (rc < 0) {
			msg_debug(1, "heap: state 0x%llx: %s", (unsigned long long)vm->states[i], err_text(rc));
			heap_state_free(&s[n]);
			continue;
		}
		n++;
	}
	if (n == 0) {
		free(s);
		return -LS_E_GARBAGE;
	}
	*out = s;
	return n;
}
