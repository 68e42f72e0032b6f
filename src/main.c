/* main.c: luaspy entry point. */
#include <stdlib.h>
#include "cli.h"
#include "err.h"

int main(int argc, char **argv)
{
	/* never ask a debuginfod server: symbolization is local only */
	unsetenv("DEBUGINFOD_URLS");
	struct cli_opts o;
	int rc = cli_parse(argc, argv, &o);
	if (rc > 0)
		return 0;
	if (rc < 0)
		return err_exit_code(rc);
	return cli_run(&o);
}
