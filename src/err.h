/* err.h: luaspy error codes. Modules return 0/count or -LS_E_*; only
 * the CLI prints (msg.h). */
#ifndef LUASPY_ERR_H
#define LUASPY_ERR_H

enum ls_err {
#define LS_ERR(name, code, text, hint) LS_E_##name,
#include "err_table.h"
#undef LS_ERR
	LS_E__MAX
};

/* Text of error E (positive or negative). Never NULL. */
const char *err_text(int e);
/* Hint for E, or NULL. */
const char *err_hint(int e);
/* Process exit status for E (see EXIT STATUS in luaspy.1). */
int err_exit_code(int e);
/* Map an errno (positive) from a syscall on the target to -LS_E_*:
 * ESRCH/ENOENT -> GONE, EPERM/EACCES -> PERM, EFAULT/EIO -> FAULT, ENOMEM -> NOMEM. */
int err_from_errno(int errnum);

#endif
