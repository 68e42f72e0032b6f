/* proc_task.h: processes and threads from /proc. */
#ifndef LUASPY_PROC_TASK_H
#define LUASPY_PROC_TASK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_thread {
	pid_t tid;
	char name[32];   /* comm, sanitised */
	char state;      /* R, S, D, T, t, Z, X, I ... ('?' when unknown) */
	int cpu;         /* CPU it last ran on (stat field 39), -1 unknown */
};

/* Check that PID can be profiled: exists, is a user process, not a zombie,
 * not held by another tracer (strace, gdb: the same TracerPid for 100 ms;
 * only then does the check wait), readable by us, 64-bit. Returns 0 or
 * -LS_E_NOPID, -LS_E_KTHREAD, -LS_E_ZOMBIE, -LS_E_TRACED, -LS_E_PERM,
 * -LS_E_ARCH32. */
int proc_check(pid_t pid);

/* List threads of PID into *OUT (malloc'd, caller frees), count in *N.
 * A thread that vanishes while listing is skipped. Returns 0 or -LS_E_*. */
int proc_threads(pid_t pid, struct proc_thread **out, int *n);

/* Parse one /proc/PID/task/TID/stat line BUF (NUL-terminated): *STATE the
 * state letter, *CPU the CPU the thread last ran on (field 39; -1 when
 * absent). Returns 0, or -EINVAL when BUF is not a stat line. */
int proc_stat_state_cpu(const char *buf, char *state, int *cpu);

/* The process tracing PID now (TracerPid in /proc/PID/status), or 0 when
 * none, unknown, or a thread of luaspy itself. */
pid_t proc_tracer(pid_t pid);

/* Command name of PID (comm, at most LEN-1 bytes, control characters,
 * quotes and backslashes replaced by '?'). 0 or -LS_E_*. */
int proc_comm(pid_t pid, char *buf, size_t len);

/* Scheduler state letter of thread TID of PID ('?' if gone). */
char proc_thread_state(pid_t pid, pid_t tid);

/* Command line of PID, arguments joined by spaces, at most LEN-1 bytes;
 * non-printable bytes replaced by '?'. Returns 0 or -LS_E_*. */
int proc_cmdline(pid_t pid, char *buf, size_t len);

/* Cumulative CPU time (utime+stime) of PID in clock ticks, or -1. */
long long proc_cpu_ticks(pid_t pid);

/* Direct children of PID (from /proc/PID/task/TID/children, every thread
 * of it, each file read whole) into *OUT, grown with array_grow (*CAP
 * elements; the caller frees *OUT). Returns how many (0 when PID is gone),
 * or -1 when out of memory (*OUT keeps the ones read before). */
int proc_children(pid_t pid, pid_t **out, size_t *cap);

/* Is the process alive (kill(pid, 0) or EPERM)? */
int proc_alive(pid_t pid);

#endif
