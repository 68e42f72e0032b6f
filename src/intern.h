/* intern.h: process-wide string interning. Interned strings are never
 * freed and equal strings share one pointer. Thread-safe (one mutex):
 * record --period encodes finished periods on a thread of its own. */
#ifndef LUASPY_INTERN_H
#define LUASPY_INTERN_H
#include <stddef.h>

/* Intern the NUL-terminated S. Returns the shared copy; NULL only for S == NULL. */
const char *intern(const char *s);
/* Intern LEN bytes at S (need not be NUL-terminated; NULs inside are kept
 * up to the first one). Returns the shared copy. */
const char *intern_n(const char *s, size_t len);
/* printf-style convenience. */
const char *internf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
