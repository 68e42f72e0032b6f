/* t_fiber_rows.c: prints the Tarantool fiber layout rows of
 * src/fiber_tarantool.c for tests/dump-fibers-layout.test, which checks
 * them against the DWARF of Debian's tarantool. */
#include <stdio.h>
#include "fiber_tarantool.h"

int main(void)
{
	fiber_tarantool_rows(stdout);
	return ferror(stdout) ? 1 : 0;
}
