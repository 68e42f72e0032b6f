/* child.h: the command luaspy launches (record/top -- COMMAND): start it,
 * notice and reap its exit, end it. */
#ifndef LUASPY_CHILD_H
#define LUASPY_CHILD_H

#include <sys/types.h>

struct child {
	pid_t pid;               /* 0: no command launched (--pid) */
	int status;              /* wait status, once reaped */
	int reaped;              /* 1 once the exit was collected */
};

/* Fork and exec ARGV[0] (searched in PATH) with ARGV, SIGPIPE and the
 * signal mask reset to defaults, into C (zeroed by the caller). Returns
 * 0 when the command runs; 1 when it could not be executed (*EXEC_ERRNO
 * holds exec's errno; the child is reaped, C->reaped set); -LS_E_INTERNAL
 * when pipe or fork failed (nothing to reap). Prints nothing. */
int child_launch(struct child *c, char *const argv[], int *exec_errno);

/* On the stopper thread (stopper.h): release the stops that timed out
 * (ptrace_reap_pending) and, when C (may be NULL) is a launched child
 * that was not reaped yet, collect its exit if it ended. A ptrace stop
 * of the child is left to proc_ptrace.c, which may reap the exit itself
 * (ptrace_child_reaped). Non-blocking. */
void child_housekeep(struct child *c);

/* child_housekeep(C) when C is a launched child not reaped yet; else
 * nothing. */
void child_check(struct child *c);

/* Ask C's command to end: SIGTERM, up to 1 s for it to exit (polling
 * child_check every 10 ms), then SIGKILL and a blocking wait. No-op
 * when nothing was launched or it was reaped already. */
void child_kill(struct child *c);

/* The exit status luaspy passes on for a reaped child: its exit code, or
 * 128 + the signal that killed it, or 1. */
int child_exit_status(const struct child *c);

#endif
