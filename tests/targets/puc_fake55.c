/* puc_fake55.c: a process exporting a lua_ident of a release the walker
 * does not know (Lua 5.5.0), for tests/puc-unsupported.test. Sleeps. */
#include <unistd.h>

__attribute__((used, visibility("default")))
const char lua_ident[] = "$LuaVersion: Lua 5.5.0  Copyright (C) 1994-2025 Lua.org, PUC-Rio $"
			 "$LuaAuthors: R. Ierusalimschy, L. H. de Figueiredo, W. Celes $";

int main(void)
{
	for (int i = 0; i < 600; i++)
		sleep(1);
	return 0;
}
