/* vm_puc_names.c: pure decoding of PUC Lua bytecode metadata: 5.4
 * relative line info, and call-site names (ldebug.c getfuncname /
 * getobjname / findsetreg / 5.1 symbexec) over a copied Proto. No target
 * access: everything comes through struct puc_nameinfo callbacks, so the
 * unit tests drive it with synthetic code. */
#include <string.h>
#include "vm_puc.h"

/* ---- 5.4 line info ------------------------------------------------------ */

int puc_line54(const int8_t *lineinfo, int sizelineinfo, const int32_t *abs, int nabs,
	       int linedefined, int pc)
{
	if (pc < 0 || pc >= sizelineinfo || !lineinfo)
		return -1;
	int basepc;
	int64_t line;   /* garbage deltas may leave int range */
	if (nabs <= 0 || pc < abs[0]) {
		basepc = -1;
		line = linedefined;
	} else {
		int lo = 0, hi = nabs - 1;   /* last entry with entry.pc <= pc */
		while (lo < hi) {
			int mid = lo + (hi - lo + 1) / 2;
			if (abs[2 * mid] <= pc)
				lo = mid;
			else
				hi = mid - 1;
		}
		basepc = abs[2 * lo];
		line = abs[2 * lo + 1];
		if (basepc < -1 || basepc > pc)
			return -1;
	}
	for (int i = basepc + 1; i <= pc; i++)
		if (lineinfo[i] != -128)
			line += lineinfo[i];
	return line < 0 || line > INT32_MAX ? -1 : (int)line;
}

/* ---- instruction decoding ---------------------------------------------- */

struct isa_ops {
	int move, loadk, loadkx, loadnil, getupval, getglobal, gettabup, gettable,
	    geti, getfield, self, jmp, call, tailcall, tforcall, tforloop, setlist,
	    closure, forloop, forprep, mmbin, mmbini, mmbink;
	const char *amode;      /* '1' where the opcode writes register A */
};

/* -1: no such opcode in this ISA */
static const struct isa_ops isa51 = {
	0, 1, -1, 3, 4, 5, -1, 6, -1, -1, 11, 22, 28, 29, -1, 33, 34, 36, 31, 32, -1, -1, -1,
	"11111110001111111111110000111101100011" };
static const struct isa_ops isa52 = {
	0, 1, 2, 4, 5, -1, 6, 7, -1, -1, 12, 23, 29, 30, 34, 35, 36, 37, 32, 33, -1, -1, -1,
	"1111111100011111111111100000111011010110" };
static const struct isa_ops isa53 = {
	0, 1, 2, 4, 5, -1, 6, 7, -1, -1, 12, 30, 36, 37, 41, 42, 43, 44, 39, 40, -1, -1, -1,
	"11111111000111111111111111111100000111011010110" };
static const struct isa_ops isa54 = {
	0, 3, 4, 8, 9, -1, 11, 12, 13, 14, 20, 56, 68, 69, 76, 77, 78, 79, 73, 74, 46, 47, 48,
	"11111111110111100001111111111111111111111111110001111100000000000001110001100101110" };

static const struct isa_ops *isa_of(const struct puc_layout *lay)
{
	switch (lay->isa) {
	case PUC_ISA_51: return &isa51;
	case PUC_ISA_52: return &isa52;
	case PUC_ISA_53: return &isa53;
	default: return &isa54;
	}
}

#define I54 (lay->isa == PUC_ISA_54)
static int OP(const struct puc_layout *lay, uint32_t i) { return I54 ? (int)(i & 0x7f) : (int)(i & 0x3f); }
static int A(const struct puc_layout *lay, uint32_t i) { return I54 ? (int)((i >> 7) & 0xff) : (int)((i >> 6) & 0xff); }
static int B(const struct puc_layout *lay, uint32_t i) { return I54 ? (int)((i >> 16) & 0xff) : (int)((i >> 23) & 0x1ff); }
static int C(const struct puc_layout *lay, uint32_t i) { return I54 ? (int)((i >> 24) & 0xff) : (int)((i >> 14) & 0x1ff); }
static int K54(uint32_t i) { return (int)((i >> 15) & 1); }
static int Bx(const struct puc_layout *lay, uint32_t i) { return I54 ? (int)(i >> 15) : (int)(i >> 14); }
static int Ax(const struct puc_layout *lay, uint32_t i) { return I54 ? (int)(i >> 7) : (int)(i >> 6); }
static int sJ(const struct puc_layout *lay, uint32_t i)
{
	if (I54)
		return (int)((i >> 7) & 0x1ffffff) - 16777215;
	return (int)(i >> 14) - 131071; /* sBx */
}

int puc_is_call_op(const struct puc_layout *lay, uint32_t ins)
{
	const struct isa_ops *o = isa_of(lay);
	int op = OP(lay, ins);
	return op == o->call || op == o->tailcall;
}

static int amode(const struct isa_ops *o, const struct puc_layout *lay, int op)
{
	return op >= 0 && op < lay->num_opcodes && o->amode[op] == '1';
}

/* ---- names ---------------------------------------------------------------- */

#define ISK(x) ((x) & 0x100)
#define INDEXK(x) ((x) & 0xff)

static const char *upname(const struct puc_nameinfo *ni, int idx)
{
	const char *s = ni->upvalname(ni->arg, idx);
	return s ? s : "?";
}

/* BUDGET: getobjname calls left for one name (puc_funcname's
 * NAME_BUDGET): 5.4 GETTABLE names both its key and its table, so on
 * garbage code the calls double per level without it. */
static const char *getobjname(const struct puc_nameinfo *ni, int lastpc, int reg,
			      const char **name, int *budget);

/* Is S (a callback's name, or NULL) "_ENV"? Reads at most 5 bytes. */
static int is_env(const char *s)
{
	return s && strncmp(s, "_ENV", 5) == 0;
}

/* 5.2/5.3 kname; 5.1 kname (constants only) */
static void kname5x(const struct puc_nameinfo *ni, int pc, int c, const char **name, int *budget)
{
	if (ISK(c)) {
		const char *s = ni->kstr(ni->arg, INDEXK(c));
		if (s) {
			*name = s;
			return;
		}
	} else if (ni->lay->isa != PUC_ISA_51) {
		const char *what = getobjname(ni, pc, c, name, budget);
		if (what && *what == 'c')
			return;
	}
	*name = "?";
}

static void kname54(const struct puc_nameinfo *ni, int c, const char **name)
{
	const char *s = ni->kstr(ni->arg, c);
	*name = s ? s : "?";
}

static void rname54(const struct puc_nameinfo *ni, int pc, int c, const char **name, int *budget)
{
	const char *what = getobjname(ni, pc, c, name, budget);
	if (!(what && *what == 'c'))
		*name = "?";
}

/* 5.2+: findsetreg */
static int findsetreg(const struct puc_nameinfo *ni, int lastpc, int reg)
{
	const struct puc_layout *lay = ni->lay;
	const struct isa_ops *o = isa_of(lay);
	int setreg = -1, jmptarget = 0;
	if (I54 && lastpc < ni->sizecode) {
		int op = OP(lay, ni->code[lastpc]);
		if (op == o->mmbin || op == o->mmbini || op == o->mmbink)
			lastpc--;
	}
	for (int pc = 0; pc < lastpc && pc < ni->sizecode; pc++) {
		uint32_t i = ni->code[pc];
		int op = OP(lay, i), a = A(lay, i), change;
		if (op == o->loadnil) {
			int b = B(lay, i);
			change = a <= reg && reg <= a + b;
		} else if (op == o->tforcall) {
			change = reg >= a + 2;
		} else if (op == o->call || op == o->tailcall) {
			change = reg >= a;
		} else if (op == o->jmp) {
			int dest = pc + 1 + sJ(lay, i);
			if (I54 ? (dest <= lastpc && dest > jmptarget)
				: (pc < dest && dest <= lastpc && dest > jmptarget))
				jmptarget = dest;
			change = 0;
		} else {
			change = amode(o, lay, op) && reg == a;
		}
		if (change)
			setreg = pc < jmptarget ? -1 : pc;
	}
	return setreg;
}

/* 5.1: symbexec, reduced to what getobjname needs (the verifier checks
 * are dropped): the last instruction before LASTPC that changed REG,
 * following forward jumps that do not skip LASTPC. Returns its pc, or
 * sizecode-1 (the final RETURN, "neutral") when none. */
static int symbexec51(const struct puc_nameinfo *ni, int lastpc, int reg)
{
	const struct puc_layout *lay = ni->lay;
	const struct isa_ops *o = &isa51;
	int last = ni->sizecode - 1;
	int steps = 0;
	for (int pc = 0; pc < lastpc && pc < ni->sizecode && steps < 1 << 22; pc++, steps++) {
		uint32_t i = ni->code[pc];
		int op = OP(lay, i), a = A(lay, i), b = B(lay, i), c = C(lay, i);
		if (op >= lay->num_opcodes)
			break;
		if (amode(o, lay, op) && a == reg)
			last = pc;
		if (op == o->loadnil) {
			if (a <= reg && reg <= b)
				last = pc;
		} else if (op == o->self) {
			if (reg == a + 1)
				last = pc;
		} else if (op == o->tforloop) {
			if (reg >= a + 2)
				last = pc;
		} else if (op == o->forloop || op == o->forprep || op == o->jmp) {
			int sbx = sJ(lay, i);
			int dest = pc + 1 + sbx;
			if (pc < dest && dest <= lastpc)
				pc += sbx;
		} else if (op == o->call || op == o->tailcall) {
			if (reg >= a)
				last = pc;
		} else if (op == o->setlist) {
			if (c == 0)
				pc++;
		} else if (op == o->closure) {
			int nup = ni->child_nups ? ni->child_nups(ni->arg, Bx(lay, i)) : -1;
			if (nup > 0)
				pc += nup;
		}
	}
	return last;
}

static const char *getobjname(const struct puc_nameinfo *ni, int lastpc, int reg,
			      const char **name, int *budget)
{
	const struct puc_layout *lay = ni->lay;
	const struct isa_ops *o = isa_of(lay);
	if (--*budget < 0)
		return NULL;
	*name = ni->localname(ni->arg, reg + 1, lastpc);
	if (*name)
		return "local";
	int pc = lay->isa == PUC_ISA_51 ? symbexec51(ni, lastpc, reg) : findsetreg(ni, lastpc, reg);
	if (pc < 0 || pc >= ni->sizecode)
		return NULL;
	uint32_t i = ni->code[pc];
	int op = OP(lay, i);
	if (op == o->move) {
		int b = B(lay, i);
		if (b < A(lay, i))
			return getobjname(ni, pc, b, name, budget);
		return NULL;
	}
	if (op == o->getglobal) {   /* 5.1 */
		const char *s = ni->kstr(ni->arg, Bx(lay, i));
		*name = s ? s : "?";
		return "global";
	}
	if (lay->isa == PUC_ISA_51) {
		if (op == o->gettable) {
			kname5x(ni, pc, C(lay, i), name, budget);
			return "field";
		}
		if (op == o->getupval) {
			*name = upname(ni, B(lay, i));
			return "upvalue";
		}
		if (op == o->self) {
			kname5x(ni, pc, C(lay, i), name, budget);
			return "method";
		}
		return NULL;
	}
	if (!I54 && (op == o->gettabup || op == o->gettable)) {
		int t = B(lay, i);
		const char *vn = op == o->gettable ? ni->localname(ni->arg, t + 1, pc) : upname(ni, t);
		kname5x(ni, pc, C(lay, i), name, budget);
		return is_env(vn) ? "global" : "field";
	}
	if (I54 && (op == o->gettabup || op == o->gettable || op == o->getfield)) {
		int t = B(lay, i);
		if (op == o->gettable)
			rname54(ni, pc, C(lay, i), name, budget);
		else
			kname54(ni, C(lay, i), name);
		const char *tn;
		if (op == o->gettabup) {
			tn = ni->upvalname(ni->arg, t);
		} else {
			const char *saved = *name;
			if (!getobjname(ni, pc, t, &tn, budget))
				tn = NULL;
			*name = saved;
		}
		return is_env(tn) ? "global" : "field";
	}
	if (I54 && op == o->geti) {
		*name = "integer index";
		return "field";
	}
	if (op == o->getupval) {
		*name = upname(ni, B(lay, i));
		return "upvalue";
	}
	if (op == o->loadk || op == o->loadkx) {
		int b;
		if (op == o->loadk)
			b = Bx(lay, i);
		else if (pc + 1 < ni->sizecode)
			b = Ax(lay, ni->code[pc + 1]);
		else
			return NULL;
		const char *s = ni->kstr(ni->arg, b);
		if (s) {
			*name = s;
			return "constant";
		}
		return NULL;
	}
	if (op == o->self) {
		if (I54) {
			if (K54(i))
				kname54(ni, C(lay, i), name);
			else
				rname54(ni, pc, C(lay, i), name, budget);
		} else {
			kname5x(ni, pc, C(lay, i), name, budget);
		}
		return "method";
	}
	return NULL;
}

/* metamethod event names per version, in TMS order */
/* 5.1 names no metamethod (ldebug.c getfuncname); 5.2 and 5.3/5.4 orders: */
static const char *const tm52[] = { "__index", "__newindex", "__gc", "__mode", "__len",
	"__eq", "__add", "__sub", "__mul", "__div", "__mod", "__pow", "__unm", "__lt",
	"__le", "__concat", "__call" };
static const char *const tm53[] = { "__index", "__newindex", "__gc", "__mode", "__len",
	"__eq", "__add", "__sub", "__mul", "__mod", "__pow", "__div", "__idiv", "__band",
	"__bor", "__bxor", "__shl", "__shr", "__unm", "__bnot", "__lt", "__le", "__concat",
	"__call", "__close" };
enum { TM_INDEX, TM_NEWINDEX, TM_GC, TM_MODE, TM_LEN, TM_EQ, TM_ADD, TM_SUB, TM_MUL,
       TM_MOD, TM_POW, TM_DIV, TM_IDIV, TM_BAND, TM_BOR, TM_BXOR, TM_SHL, TM_SHR,
       TM_UNM, TM_BNOT, TM_LT, TM_LE, TM_CONCAT, TM_CALL, TM_CLOSE };

/* getobjname calls per name: ldebug.c's recursion is as deep as the
 * compiler's register moves (a few); 64 also bounds garbage code to
 * 64 findsetreg scans. */
#define NAME_BUDGET 64

const char *puc_funcname(const struct puc_nameinfo *ni, int pc, const char **name)
{
	int budget = NAME_BUDGET;
	const struct puc_layout *lay = ni->lay;
	const struct isa_ops *o = isa_of(lay);
	*name = NULL;
	if (pc < 0 || pc >= ni->sizecode)
		return NULL;
	uint32_t i = ni->code[pc];
	int op = OP(lay, i);
	if (op == o->call || op == o->tailcall)
		return getobjname(ni, pc, A(lay, i), name, &budget);
	if (lay->isa == PUC_ISA_51) {
		if (op == o->tforloop)
			return getobjname(ni, pc, A(lay, i), name, &budget);
		return NULL;   /* 5.1 names no metamethod */
	}
	if (op == o->tforcall) {
		*name = "for iterator";
		return "for iterator";
	}
	int tm = -1;
	if (lay->isa == PUC_ISA_52) {
		/* 5.2 opcode numbers */
		static const signed char map52[40] = {
			[12] = TM_INDEX, [6] = TM_INDEX, [7] = TM_INDEX, [8] = TM_NEWINDEX,
			[10] = TM_NEWINDEX, [24] = TM_EQ, [13] = 6, [14] = 7, [15] = 8, [16] = 9,
			[17] = 10, [18] = 11, [19] = 12, [21] = TM_LEN, [25] = 13, [26] = 14,
			[22] = 15 };
		static const unsigned char has52[40] = { [12] = 1, [6] = 1, [7] = 1, [8] = 1,
			[10] = 1, [24] = 1, [13] = 1, [14] = 1, [15] = 1, [16] = 1, [17] = 1,
			[18] = 1, [19] = 1, [21] = 1, [25] = 1, [26] = 1, [22] = 1 };
		if (op < 40 && has52[op]) {
			*name = tm52[map52[op]];
			return "metamethod";
		}
		return NULL;
	}
	if (lay->isa == PUC_ISA_53) {
		if (op == 12 || op == 6 || op == 7) tm = TM_INDEX;
		else if (op == 8 || op == 10) tm = TM_NEWINDEX;
		else if (op >= 13 && op <= 24) tm = op - 13 + TM_ADD;
		else if (op == 25) tm = TM_UNM;
		else if (op == 26) tm = TM_BNOT;
		else if (op == 28) tm = TM_LEN;
		else if (op == 29) tm = TM_CONCAT;
		else if (op == 31) tm = TM_EQ;
		else if (op == 32) tm = TM_LT;
		else if (op == 33) tm = TM_LE;
		if (tm < 0)
			return NULL;
		*name = tm53[tm];
		return "metamethod";
	}
	/* 5.4 */
	if (op == 20 || op == 11 || op == 12 || op == 13 || op == 14) tm = TM_INDEX;
	else if (op >= 15 && op <= 18) tm = TM_NEWINDEX;
	else if (op == 46 || op == 47 || op == 48) tm = C(lay, i);
	else if (op == 49) tm = TM_UNM;
	else if (op == 50) tm = TM_BNOT;
	else if (op == 52) tm = TM_LEN;
	else if (op == 53) tm = TM_CONCAT;
	else if (op == 57) tm = TM_EQ;
	else if (op == 58 || op == 62 || op == 64) tm = TM_LT;
	else if (op == 59 || op == 63 || op == 65) tm = TM_LE;
	else if (op == 54 || op == 70) tm = TM_CLOSE;
	if (tm < 0 || tm > TM_CLOSE)
		return NULL;
	*name = tm53[tm] + (lay->tm_strip ? 2 : 0);
	return "metamethod";
}
