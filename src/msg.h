/* msg.h: the only place luaspy prints diagnostics. One line each, on
 * stderr, prefixed "luaspy: ". */
#ifndef LUASPY_MSG_H
#define LUASPY_MSG_H

extern int msg_verbose; /* -v count */

/* "luaspy: <fmt>\n" on stderr, written with one write(2). */
void msg_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Same, only when msg_verbose >= LEVEL; prefixed "luaspy: [v] ". */
void msg_debug(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print error E about pid PID ("luaspy: pid 42: permission denied; run as
 * root or ...") and return err_exit_code(E). PID 0 omits the pid part. */
int msg_err_pid(int pid, int e);

#endif
