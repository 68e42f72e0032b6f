/* err.c: the error table expanded into lookups. */
#include <errno.h>
#include <stddef.h>
#include "err.h"

static const struct {
	int code;
	const char *text;
	const char *hint;
} table[] = {
#define LS_ERR(name, code, text, hint) { code, text, hint },
#include "err_table.h"
#undef LS_ERR
};

static int idx(int e)
{
	if (e < 0)
		e = -e;
	return e < LS_E__MAX ? e : LS_E_INTERNAL;
}

const char *err_text(int e) { return table[idx(e)].text; }
const char *err_hint(int e) { return table[idx(e)].hint; }
int err_exit_code(int e) { return table[idx(e)].code; }

int err_from_errno(int errnum)
{
	switch (errnum) {
	case ESRCH: case ENOENT: return -LS_E_GONE;
	case EPERM: case EACCES: return -LS_E_PERM;
	case EFAULT: case EIO: return -LS_E_FAULT;
	case ENOMEM: return -LS_E_NOMEM;
	default: return -LS_E_IO;
	}
}
