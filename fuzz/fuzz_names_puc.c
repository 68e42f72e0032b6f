/* fuzz/fuzz_names_puc.c: libFuzzer target for the PUC Lua 5.1-5.4
 * call-site name decoder (vm_puc_names.c: puc_funcname, getobjname,
 * findsetreg, 5.1 symbexec), driven directly rather than through a walk:
 * any bytecode, pc and register numbers, local/upvalue/constant names
 * with garbage bytes, must give a known kind and a bounded name, or
 * none; never a crash, a hang or a read outside what it was given.
 *
 * Input: byte 0 picks the layout row (mod puc_nlayouts); byte 1 the mode;
 * bytes 2-3 a pc (int16, little-endian: out of range too).
 *
 * Mode even ("image"): the rest is a memory image of tests/img_puc.h
 * (IMG_PUC_NREG regions of IMG_PUC_REGLEN bytes at img_puc_addr[], short
 * or absent when the input is). The Proto at img_puc_addr[IMG_RP] is read
 * as the walker reads it (puc_proto_get: code, local and upvalue names
 * as TStrings with garbage lengths, tags and pointers) and named with
 * puc_callsite_name (constants read from the image, 5.1 child Protos'
 * nups) at the pc given and at every pc below 8.
 *
 * Mode odd ("direct"): the rest is a Proto in the decoder's own terms
 * (struct puc_nameinfo), parsed as:
 *   nloc (mod 17), nup (mod 17), nk (mod 33): 3 bytes
 *   nloc locals:  startpc int16, endpc int16, string
 *   nup upvalue names: string
 *   nk constants: string (length byte 0xff: not a string, NULL)
 *   16 bytes: nups of child Protos 0-15 (5.1 CLOSURE), others unknown
 *   the rest: code, 32-bit words (sizecode = their count, may be 0)
 * where a string is a length byte and that many bytes (any bytes; cut
 * where the input ends), handed to the decoder NUL-terminated as the
 * walker's interned copies are (vm_puc.h). Named at the pc given and at
 * every pc below 8.
 *
 * Built with -DFUZZ_NAMES_PUC_SEEDS instead of libFuzzer, main() writes
 * seeds into the directory given: per layout row and kind of call site
 * (global, field, method, upvalue, local, constant, move chain,
 * metamethod, for iterator) one in direct mode; in image mode, every
 * kind on the last row of each ISA and the global on every row. It
 * prints the name each gives. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "img_puc.h"
#include "proc_mem.h"
#include "vm_puc_int.h"

#define NREG IMG_PUC_NREG
#define REGLEN IMG_PUC_REGLEN
#define A img_puc_addr
#define NAME_PCS 8    /* every pc below this is named too */

/* ---- direct mode: a Proto from the input ---------------------------------- */

#define MAXLOC 16
#define MAXUP 16
#define MAXK 32

struct fproto {
	int nloc, nup, nk;
	struct { const char *name; int startpc, endpc; } loc[MAXLOC];
	const char *up[MAXUP];
	const char *k[MAXK];
	uint8_t child[16];
	char arena[(MAXLOC + MAXUP + MAXK) * 256];
	size_t used;
};

struct rd {
	const uint8_t *p, *end;
};

static unsigned rd_u8(struct rd *r)
{
	return r->p < r->end ? *r->p++ : 0;
}

static int rd_i16(struct rd *r)
{
	unsigned lo = rd_u8(r), hi = rd_u8(r);
	return (int16_t)(uint16_t)(lo | hi << 8);
}

/* A string of the input, NUL-terminated in FP's arena; NULL for length
 * 0xff when NULL_OK. */
static const char *rd_str(struct rd *r, struct fproto *fp, int null_ok)
{
	unsigned len = rd_u8(r);
	if (null_ok && len == 0xff)
		return NULL;
	size_t have = (size_t)(r->end - r->p);
	size_t n = len < have ? len : have;
	char *s = fp->arena + fp->used;   /* room: 255 + 1 per string */
	memcpy(s, r->p, n);
	s[n] = 0;
	r->p += n;
	fp->used += n + 1;
	return s;
}

static const char *f_local(void *arg, int n, int pc)
{
	const struct fproto *fp = arg;
	for (int i = 0; i < fp->nloc && fp->loc[i].startpc <= pc; i++)
		if (pc < fp->loc[i].endpc && --n == 0)
			return fp->loc[i].name;
	return NULL;
}

static const char *f_up(void *arg, int idx)
{
	const struct fproto *fp = arg;
	return idx >= 0 && idx < fp->nup ? fp->up[idx] : NULL;
}

static const char *f_k(void *arg, int k)
{
	const struct fproto *fp = arg;
	return k >= 0 && k < fp->nk ? fp->k[k] : NULL;
}

static int f_child(void *arg, int idx)
{
	const struct fproto *fp = arg;
	return idx >= 0 && idx < 16 ? fp->child[idx] : -1;
}

static int known_what(const char *w)
{
	static const char *const kinds[] = { "global", "local", "method", "field", "upvalue",
					     "constant", "for iterator", "metamethod" };
	for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
		if (!strcmp(w, kinds[i]))
			return 1;
	return 0;
}

/* A name and kind as the decoder gives them: a known kind with a name
 * (its strings are ours: strlen is safe, ASan checks it), or none. */
static void check(const char *what, const char *name)
{
	if (!what)
		return;
	if (!known_what(what) || !name || strlen(name) > STR_MAX)
		abort();
}

#define MAXCODE 16384   /* words of code taken from the input */

static struct fproto fp;
static struct vm vm;   /* the Proto cache puc_proto_get fills (emptied each run) */

/* Name the call site at PC (and every pc below NAME_PCS) of the direct
 * mode Proto in D (N bytes); VERBOSE prints the name at PC. */
static void run_direct(const struct puc_layout *lay, int pc, const uint8_t *d, size_t n,
		       int verbose)
{
	struct rd r = { d, d + n };
	fp.used = 0;
	fp.nloc = (int)(rd_u8(&r) % (MAXLOC + 1));
	fp.nup = (int)(rd_u8(&r) % (MAXUP + 1));
	fp.nk = (int)(rd_u8(&r) % (MAXK + 1));
	for (int i = 0; i < fp.nloc; i++) {
		fp.loc[i].startpc = rd_i16(&r);
		fp.loc[i].endpc = rd_i16(&r);
		fp.loc[i].name = rd_str(&r, &fp, 0);
	}
	for (int i = 0; i < fp.nup; i++)
		fp.up[i] = rd_str(&r, &fp, 0);
	for (int i = 0; i < fp.nk; i++)
		fp.k[i] = rd_str(&r, &fp, 1);
	for (int i = 0; i < 16; i++)
		fp.child[i] = (uint8_t)rd_u8(&r);
	size_t nw = (size_t)(r.end - r.p) / 4;
	if (nw > MAXCODE)
		nw = MAXCODE;
	/* exactly SIZECODE words, so that ASan sees a read past the end */
	uint32_t *c = malloc(nw ? nw * 4 : 1);
	if (!c)
		return;
	memcpy(c, r.p, nw * 4);
	struct puc_nameinfo ni = { lay, c, (int)nw, &fp, f_local, f_up, f_k, f_child };
	const char *name, *what = puc_funcname(&ni, pc, &name);
	check(what, name);
	if (verbose)
		printf("%s %s\n", what ? what : "-", what && name ? name : "-");
	for (int i = 0; i < NAME_PCS && i < (int)nw; i++) {
		what = puc_funcname(&ni, i, &name);
		check(what, name);
	}
	free(c);
}

/* Name the call site at PC (and every pc below NAME_PCS) of the Proto in
 * image D (SIZE bytes); VERBOSE prints the name at PC. */
static void run_image(const struct puc_layout *lay, int pc, const uint8_t *d, size_t size,
		      int verbose)
{
	struct mem_region r[NREG];
	int n = 0;
	for (size_t off = 0; off < size && n < NREG; off += REGLEN, n++) {
		size_t len = size - off < REGLEN ? size - off : REGLEN;
		r[n] = (struct mem_region){ A[n], d + off, len };
	}
	struct mem_image im;
	mem_image_init(&im, r, n);
	vm.lay = lay;
	struct puc_proto *p = puc_proto_get(&vm, &im.base, A[IMG_RP]);
	if (p) {
		const char *what, *name = puc_callsite_name(&vm, &im.base, p, pc, &what);
		check(what, name);
		if (verbose)
			printf("%s %s\n", what ? what : "-", what && name ? name : "-");
		for (int i = 0; i < NAME_PCS && i < p->sizecode; i++) {
			name = puc_callsite_name(&vm, &im.base, p, i, &what);
			check(what, name);
		}
	} else if (verbose) {
		printf("no Proto\n");
	}
	puc_protos_free(&vm);
}

#ifndef FUZZ_NAMES_PUC_SEEDS

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	const struct puc_layout *lay = &puc_layouts[data[0] % puc_nlayouts];
	int pc = (int16_t)(uint16_t)(data[2] | data[3] << 8);
	if (data[1] & 1)
		run_direct(lay, pc, data + 4, size - 4, 0);
	else
		run_image(lay, pc, data + 4, size - 4, 0);
	return 0;
}

#else /* seed writer */

/* One call site per kind, for each ISA. Register 0 is called at CALLPC;
 * the Proto has upvalue 0 "_ENV", constants 0 "print" and 1 "x", local
 * "x" (register 0) over LOCS-LOCE. */
enum { S_GLOBAL, S_FIELD, S_METHOD, S_UPVAL, S_LOCAL, S_CONST, S_MOVE, S_MM, S_ITER, S_N };
static const char *const skind[S_N] = { "global", "field", "method", "upvalue", "local",
					"constant", "move", "metamethod", "iterator" };

struct prog {
	uint32_t code[8];
	int n, pc, locs, loce;
};

static uint32_t i54bx(int op, int a, int bx) { return (uint32_t)op | (uint32_t)a << 7 | (uint32_t)bx << 15; }

/* opcodes per ISA (lopcodes.h of 5.1, 5.2, 5.3, 5.4) */
struct ops { int move, loadk, getupval, getglobal, gettabup, gettable, getfield, self, call,
	     ret, add, tforcall; };
static const struct ops ops51 = { 0, 1, 4, 5, -1, 6, -1, 11, 28, 30, 12, 33 };
static const struct ops ops52 = { 0, 1, 5, -1, 6, 7, -1, 12, 29, 31, 13, 34 };
static const struct ops ops53 = { 0, 1, 5, -1, 6, 7, -1, 12, 36, 38, 13, 41 };
static const struct ops ops54 = { 0, 3, 9, -1, 11, 12, 14, 20, 68, 70, 46, 76 };

/* Program of kind S for layout L; 0, or -1 when the ISA has no such site. */
static int prog_of(const struct puc_layout *l, int s, struct prog *pr)
{
	int i54 = l->isa == PUC_ISA_54, i51 = l->isa == PUC_ISA_51;
	const struct ops *o = i51 ? &ops51 : l->isa == PUC_ISA_52 ? &ops52 :
			      l->isa == PUC_ISA_53 ? &ops53 : &ops54;
#define ABC(op, a, b, c) (i54 ? img_puc_i54(op, a, b, c, 0) : img_puc_i53(op, a, b, c))
#define ABCK(op, a, b, c) (i54 ? img_puc_i54(op, a, b, c, 1) : img_puc_i53(op, a, b, 0x100 | (c)))
#define ABX(op, a, bx) (i54 ? i54bx(op, a, bx) : img_puc_i53bx(op, a, bx))
	/* register R = global "print" */
#define GLOBAL(r) (i51 ? ABX(o->getglobal, r, 0) : i54 ? ABC(o->gettabup, r, 0, 0) : ABCK(o->gettabup, r, 0, 0))
	memset(pr, 0, sizeof *pr);
	uint32_t *c = pr->code;
	int n = 0;
	switch (s) {
	case S_GLOBAL:
		c[n++] = GLOBAL(0);
		break;
	case S_FIELD:   /* print.x */
		c[n++] = GLOBAL(1);
		c[n++] = i54 ? ABC(o->getfield, 0, 1, 1) : ABCK(o->gettable, 0, 1, 1);
		break;
	case S_METHOD:   /* print:x() */
		c[n++] = GLOBAL(1);
		c[n++] = ABCK(o->self, 0, 1, 1);
		break;
	case S_UPVAL:
		c[n++] = ABC(o->getupval, 0, 0, 0);
		break;
	case S_LOCAL:    /* local x = print; x() */
		c[n++] = GLOBAL(0);
		pr->locs = 1, pr->loce = 3;
		break;
	case S_CONST:    /* ("x")() */
		c[n++] = ABX(o->loadk, 0, 1);
		break;
	case S_MOVE:     /* register 1 = register 0 = print; call register 1 */
		c[n++] = GLOBAL(0);
		c[n++] = ABC(o->move, 1, 0, 0);
		pr->pc = n;
		c[n++] = ABC(o->call, 1, 1, 1);
		c[n++] = ABC(o->ret, 0, 1, 0);
		pr->n = n;
		return 0;
	case S_MM:       /* a + b: the named site is the arithmetic instruction */
		if (i51)
			return -1;
		c[n++] = GLOBAL(0);
		c[n++] = i54 ? ABC(o->add, 0, 1, 6) : ABC(o->add, 0, 0, 0x100);
		pr->pc = n - 1;
		c[n++] = ABC(o->ret, 0, 1, 0);
		pr->n = n;
		return 0;
	case S_ITER:     /* for ... in print do */
		if (i51)
			return -1;
		c[n++] = GLOBAL(0);
		c[n++] = ABC(o->tforcall, 0, 0, 1);
		pr->pc = n - 1;
		c[n++] = ABC(o->ret, 0, 1, 0);
		pr->n = n;
		return 0;
	}
	pr->pc = n;
	c[n++] = ABC(o->call, 0, 1, 1);
	c[n++] = ABC(o->ret, 0, 1, 0);
	pr->n = n;
	return 0;
#undef ABC
#undef ABCK
#undef ABX
#undef GLOBAL
}

static int write_file(const char *dir, const char *name, const uint8_t *hdr, const void *body,
		      size_t len)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(hdr, 1, 4, f) != 4 || (len && fwrite(body, 1, len, f) != len) ||
	    fclose(f) != 0) {
		perror(path);
		return -1;
	}
	return 0;
}

static uint8_t img[NREG][REGLEN];

/* The image of img_puc_build with PR's code, a second constant "x" and
 * the local's range. */
static void prog_image(const struct puc_layout *l, const struct prog *pr)
{
	img_puc_build(l, img);
	const struct puc_layout *lay = l;
	uint32_t v = (uint32_t)pr->n;
	memcpy(&img[IMG_RP][lay->p_sizecode], &v, 4);
	memcpy(&img[IMG_RCODE][0], pr->code, (size_t)pr->n * 4);   /* up to 16 */
	v = 2;
	memcpy(&img[IMG_RP][lay->p_sizek], &v, 4);
	uint64_t sx = A[IMG_RSTR] + 192;
	memcpy(&img[IMG_RK][16], &sx, 8);
	if (lay->tv_tt_size == 1)
		img[IMG_RK][24] = (uint8_t)lay->tag_sstr;
	else
		memcpy(&img[IMG_RK][24], &(uint32_t){ lay->tag_sstr }, 4);
	uint32_t s = (uint32_t)pr->locs, e = (uint32_t)pr->loce;
	memcpy(&img[IMG_RCODE][200], &s, 4);
	memcpy(&img[IMG_RCODE][204], &e, 4);
}

static size_t prog_direct(const struct prog *pr, uint8_t *out)
{
	size_t n = 0;
	out[n++] = 1, out[n++] = 1, out[n++] = 2;   /* nloc nup nk */
	out[n++] = (uint8_t)pr->locs, out[n++] = 0, out[n++] = (uint8_t)pr->loce, out[n++] = 0;
	out[n++] = 1, out[n++] = 'x';
	out[n++] = 4, memcpy(out + n, "_ENV", 4), n += 4;
	out[n++] = 5, memcpy(out + n, "print", 5), n += 5;
	out[n++] = 1, out[n++] = 'x';
	memset(out + n, 0, 16), n += 16;
	memcpy(out + n, pr->code, (size_t)pr->n * 4), n += (size_t)pr->n * 4;
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	for (int i = 0; i < puc_nlayouts; i++) {
		const struct puc_layout *l = &puc_layouts[i];
		for (int s = 0; s < S_N; s++) {
			struct prog pr;
			if (prog_of(l, s, &pr) < 0)
				continue;
			char name[256];
			uint8_t hdr[4] = { (uint8_t)i, 0, (uint8_t)pr.pc, 0 };
			uint8_t body[256];
			size_t len;
			/* image: every kind on the last row of each ISA, the
			 * global on every row (4 KiB each) */
			int last = i + 1 == puc_nlayouts || puc_layouts[i + 1].isa != l->isa;
			if (!last && s != S_GLOBAL)
				goto direct;
			prog_image(l, &pr);
			snprintf(name, sizeof name, "row%02d-%s-img-%s", i, l->name, skind[s]);
			if (write_file(argv[1], name, hdr, img, sizeof img) < 0)
				return 1;
			printf("%s: ", name);
			run_image(l, pr.pc, &img[0][0], sizeof img, 1);
		direct:
			len = prog_direct(&pr, body);
			hdr[1] = 1;
			snprintf(name, sizeof name, "row%02d-%s-direct-%s", i, l->name, skind[s]);
			if (write_file(argv[1], name, hdr, body, len) < 0)
				return 1;
			printf("%s: ", name);
			run_direct(l, pr.pc, body, len, 1);
		}
	}
	return 0;
}
#endif
