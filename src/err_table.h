/* err_table.h: every luaspy error, once: name, exit status, text, hint.
 * Expanded into enum ls_err (err.h) and the message table (err.c).
 * Exit statuses are documented in man/luaspy.1 (EXIT STATUS). */
/*  name          exit  text                                     hint */
LS_ERR(OK,          0, "success",                                 NULL)
LS_ERR(USAGE,       2, "usage error",                             "see 'luaspy --help'")
LS_ERR(NOPID,       3, "no such process",                         NULL)
LS_ERR(PERM,        4, "permission denied",                       "run as root or grant CAP_SYS_PTRACE")
LS_ERR(NOTLUA,      5, "not a Lua process",                       "no Lua runtime (LuaJIT or PUC Lua 5.1-5.4) was found in its memory")
LS_ERR(UNSUPPORTED, 6, "unsupported runtime",                     NULL)
LS_ERR(ARCH32,      6, "32-bit target is not supported",          "luaspy profiles x86_64 processes only")
LS_ERR(EXITED,      7, "target exited",                           NULL)
LS_ERR(KTHREAD,     3, "is a kernel thread, not a user process",  NULL)
LS_ERR(ZOMBIE,      3, "is a zombie (exited, not yet reaped)",    NULL)
LS_ERR(GONE,        7, "process or thread is gone",               NULL)
LS_ERR(FAULT,       1, "bad address in target memory",            NULL)
LS_ERR(GARBAGE,     1, "inconsistent data in target memory",      NULL)
LS_ERR(TORN,        1, "torn read of a running target",           NULL)
LS_ERR(NOMEM,       1, "out of memory",                           NULL)
LS_ERR(IO,          1, "input/output error",                      NULL)
LS_ERR(BUSY,        1, "thread could not be stopped in time",     NULL)
LS_ERR(UNWIND,      1, "native unwinding failed",                 NULL)
LS_ERR(INTERNAL,    1, "internal error",                          NULL)
LS_ERR(TRACED,      4, "already traced by another process",       NULL)
