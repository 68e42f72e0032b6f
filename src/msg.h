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

/* "luaspy: cannot run 'CMD': <strerror(ERR)>" (exec of a command failed). */
void msg_cannot_run(const char *cmd, int err);

/* "luaspy: pid PID: unsupported runtime: WHY"; returns the exit status
 * of -LS_E_UNSUPPORTED. */
int msg_unsupported(int pid, const char *why);

/* "luaspy: falling behind: N samples late in the last second (up to L ms
 * lag); lower the rate with -r", MAX_LAG_NS the largest lag seen. */
void msg_falling_behind(unsigned long long nlate, unsigned long long max_lag_ns);

#endif
