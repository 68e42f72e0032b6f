/* heap_child.h: `luaspy heap -- COMMAND`: hold the command luaspy
 * launched (child.h) traced from the moment its Lua VM is found, so that
 * its heap can be walked when it calls lua_close (before anything is
 * freed), when it exits without closing its state (os.exit, a signal),
 * or at any moment luaspy chooses (Ctrl-C, --duration, --interval).
 *
 * Every thread of the command is seized (PTRACE_SEIZE with
 * TRACECLONE, TRACEFORK, TRACEEXIT and EXITKILL) and an int3 is written
 * at the entry of lua_close. A hit is the snapshot "at lua_close"; the
 * byte is then put back and the thread restarted at the entry. A
 * process the command forks gets the byte back in its copy and is let
 * go. EXITKILL: luaspy killed by SIGKILL takes the command with it, as
 * the int3 left in its code would kill it at lua_close anyway. Only our
 * own child is ever traced this way. docs/heap.md §10.
 *
 * All calls come from the one thread that called heap_child_attach
 * (ptrace requests must); SIGCHLD must be blocked in it (ptrace_stop's
 * rule, proc_ptrace.h), so that the waits sleep in sigtimedwait. */
#ifndef LUASPY_HEAP_CHILD_H
#define LUASPY_HEAP_CHILD_H

#include <stdint.h>
#include <sys/types.h>

struct heap_child;

/* What heap_child_wait saw. */
enum heap_child_event {
	HC_TIMEOUT = 0,   /* the deadline passed */
	HC_SIGNAL,        /* *STOP_FLAG was set (Ctrl-C & co. in luaspy) */
	HC_CLOSE,         /* a thread stopped at lua_close's entry: the heap is whole */
	HC_EXIT,          /* the process is exiting without lua_close having run
	                   * (its main thread stopped before it exits): whole */
	HC_GONE,          /* the process ended (reaped: heap_child_status) */
};

/* Seize every thread of PID (our child, as child.h launched it) and, when
 * CLOSE_ADDR is not 0, write an int3 at that target address (lua_close's
 * entry). Returns 0 with *OUT, or -LS_E_* (nothing left traced, no byte
 * changed). */
int heap_child_attach(pid_t pid, uint64_t close_addr, struct heap_child **out);

/* Run the command until an event, DEADLINE_NS (CLOCK_MONOTONIC, as
 * time_now_ns; 0: none) or *STOP_FLAG (may be NULL; a signal handler
 * sets it, its signal ends the sleep at once): signal stops are passed
 * on, new threads continued, forks cleaned of the int3. Returns an enum heap_child_event;
 * on HC_CLOSE and HC_EXIT the thread that saw it stays stopped (the
 * rest run) until heap_child_resume or heap_child_detach. */
int heap_child_wait(struct heap_child *hc, uint64_t deadline_ns, const volatile int *stop_flag);

/* Stop every thread of the command that runs (PTRACE_INTERRUPT), up to
 * TIMEOUT_NS for all. Returns how many threads could not be stopped
 * (left running); *NTH gets the number of threads. A thread that hits
 * lua_close meanwhile is held stopped there (heap_child_closing). */
int heap_child_stop(struct heap_child *hc, uint64_t timeout_ns, int *nth);

/* Restart every stopped thread, passing on the signals they stopped
 * with. 0 or -LS_E_GONE. */
int heap_child_resume(struct heap_child *hc);

/* 1 once a thread stopped at lua_close (the int3 is gone then). */
int heap_child_closing(const struct heap_child *hc);

/* 1 once the main thread stopped at its exit with lua_close not run
 * (HC_EXIT). */
int heap_child_exiting(const struct heap_child *hc);

/* Put the byte back (if still out), restart and detach every thread, and
 * free HC. The command runs on, untraced. NULL: no-op. */
void heap_child_detach(struct heap_child *hc);

/* 1 when the process was reaped by a wait of HC, with its wait status
 * in *STATUS; 0 otherwise. */
int heap_child_status(const struct heap_child *hc, int *status);

#endif
