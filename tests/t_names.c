/* t_names.c: C++ names (docs/naming.md §5): symtab_demangled() over
 * names as ELF files spell them: mangled, C, clones, garbage, too long,
 * deeply nested (untrusted input), the per-name cache and the switch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "elf_sym.h"
#include "intern.h"
#include "check.h"

/* "_Z" LEN 'a' x LEN "v": the function aaa...a() (LEN + 3 + digits
 * bytes) */
static const char *long_name(int len)
{
	char *b = malloc((size_t)len + 16);
	if (!b)
		return NULL;
	int o = sprintf(b, "_Z%d", len);
	memset(b + o, 'a', (size_t)len);
	strcpy(b + o + len, "v");
	const char *r = intern(b);
	free(b);
	return r;
}

int main(void)
{
	const char *m = intern("_ZN2ns5Class6methodEi");
	CHECK(symtab_demangled(NULL) == NULL);
	if (!symtab_can_demangle()) {
		/* built without __cxa_demangle: names stay as they are */
		CHECK(symtab_demangled(m) == m);
		return check_summary("t_names");
	}
	const char *d = symtab_demangled(m);
	CHECK(d == intern("ns::Class::method(int)"), "got '%s'", d);
	CHECK(symtab_demangled(m) == d, "cached: the same interned string");
	/* C names never reach the demangler (it would call "i" int) */
	static const char *const plain[] = { "i", "f", "main", "lua_pcallk", "_start", "_Z",
					     "_GLOBAL__sub_I_main", "" };
	for (size_t k = 0; k < sizeof plain / sizeof plain[0]; k++) {
		const char *p = intern(plain[k]);
		CHECK(symtab_demangled(p) == p, "'%s' -> '%s'", plain[k], symtab_demangled(p));
	}
	/* clones, templates */
	const char *c = symtab_demangled(intern("_Z3foov.cold"));
	CHECK(!strcmp(c, "foo() [clone .cold]"), "got '%s'", c);
	c = symtab_demangled(intern("_ZN2ns3BoxIiE3runEv"));
	CHECK(!strcmp(c, "ns::Box<int>::run()"), "got '%s'", c);
	/* refused: stays mangled */
	const char *g = intern("_ZN2ns5Cla");
	CHECK(symtab_demangled(g) == g);
	g = intern("_Z\xff\xfe garbage");
	CHECK(symtab_demangled(g) == g);
	/* a name of 1006 bytes is demangled; one of 4102 is over the bound
	 * and not read at all (GCC 12's demangler itself refuses names of
	 * 1 KiB and more: they stay mangled either way) */
	const char *ok = long_name(1000), *big = long_name(4095);
	CHECK(ok && strlen(ok) <= SYM_DEMANGLE_MAX_BYTES && big && strlen(big) > SYM_DEMANGLE_MAX_BYTES);
	if (ok && big) {
		const char *od = symtab_demangled(ok);
		CHECK(od != ok && strlen(od) == 1002 && !strcmp(od + 1000, "()"), "got '%.40s'", od);
		CHECK(symtab_demangled(big) == big);
	}
	/* deep nesting within the bound (pointer to pointer to ... 4000
	 * deep): whatever the demangler makes of it, no crash, a name back */
	char deep[4100];
	strcpy(deep, "_Z1fP");
	memset(deep + 5, 'P', 4000);
	strcpy(deep + 4005, "iv");
	CHECK(symtab_demangled(intern(deep)) != NULL);
	/* --no-demangle */
	symtab_demangle(0);
	CHECK(symtab_demangled(m) == m);
	symtab_demangle(1);
	CHECK(symtab_demangled(m) == d);
	return check_summary("t_names");
}
