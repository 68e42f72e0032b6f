/* threads.h: a target's thread list and each thread's scheduler state,
 * fresh every tick at a few syscalls. */
#ifndef LUASPY_THREADS_H
#define LUASPY_THREADS_H

#include <stdint.h>
#include <sys/types.h>
#include "proc_task.h"

struct thread_list {
	struct proc_thread *th;  /* the threads, as last listed */
	int *stat_fd;            /* per thread: /proc/PID/task/TID/stat, -1; NULL */
	int n;
	int task_fd;             /* /proc/PID/task, for its link count; 0 none */
	uint64_t relist_ns;      /* when to list /proc/PID/task again */
};

/* Fresh states of PID's threads into L->th[].state and .cpu: one fstat
 * and one pread per listed thread, or a new listing every 100 ms, when a
 * thread started or ended since the last call (a new thread is listed at
 * the first call after it starts), or at every call past 256 threads.
 * With STATES 0 (the perf sampler: the kernel samples only running
 * threads) the preads are left out: the list is kept by the fstat and
 * the relisting, and the states and CPUs are those of the last listing.
 * L starts zeroed. Returns 0 or -LS_E_* (the process is gone or can't be
 * read). */
int threads_update(struct thread_list *l, pid_t pid, int states);

/* Close L's stat files and free the list; L is empty (and reusable). */
void threads_drop(struct thread_list *l);

#endif
