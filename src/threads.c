/* threads.c: the thread list of a target (see threads.h).
 * Listing /proc/PID/task and reading every thread's stat costs ~8
 * syscalls per tick for one thread. The list is taken every RELIST_NS,
 * and at once when a thread came or went: the link count of the open
 * /proc/PID/task directory is the thread count + 2 (one fstat per tick),
 * and a listed thread whose stat file no longer reads is gone. So a new
 * thread is sampled from the tick after it starts (a 50 ms thread was
 * seen by the 100 ms relisting only when one fell on its life: 37 % of
 * rate x CPU time sampled, 72 % now, tests/luajit-short-threads.test;
 * issue 13 item 2). In between, each listed thread's state
 * comes from one pread of its stat file, kept open (up to MAX_STAT_FDS
 * threads; larger processes are relisted every tick), for the ptrace
 * sampler only: the perf sampler needs the list, not the states. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/stat.h>
#include "threads.h"
#include "timeutil.h"

#define RELIST_NS (100 * 1000000ull)
#define MAX_STAT_FDS 256

void threads_drop(struct thread_list *l)
{
	for (int i = 0; l->stat_fd && i < l->n; i++)
		if (l->stat_fd[i] >= 0)
			close(l->stat_fd[i]);
	free(l->stat_fd);
	free(l->th);
	if (l->task_fd > 0)
		close(l->task_fd);
	l->task_fd = 0;
	l->stat_fd = NULL;
	l->th = NULL;
	l->n = 0;
}

/* Each listed thread's state from its open stat file; 1 when every
 * listed thread is alive, 0 when one is gone (list again). */
static int reread_states(struct thread_list *l)
{
	int alive = 0;
	for (int i = 0; i < l->n; i++) {
		char buf[512];
		ssize_t r = l->stat_fd[i] < 0 ? -1 : pread(l->stat_fd[i], buf, sizeof buf - 1, 0);
		char st = 'X';
		int cpu = -1;
		if (r > 0) {
			buf[r] = 0;
			if (proc_stat_state_cpu(buf, &st, &cpu) < 0)
				st = 'X';
		}
		l->th[i].state = st;
		l->th[i].cpu = cpu;
		alive += l->th[i].state != 'X';
	}
	return alive == l->n;
}

/* Did the thread count of the task directory stay L->n? */
static int same_count(const struct thread_list *l)
{
	struct stat sb;
	if (l->task_fd <= 0 || fstat(l->task_fd, &sb) < 0)
		return 0;
	return sb.st_nlink == (nlink_t)l->n + 2;
}

int threads_update(struct thread_list *l, pid_t pid, int states)
{
	uint64_t now = time_now_ns();
	if (l->th && l->stat_fd && now < l->relist_ns && same_count(l) && (!states || reread_states(l)))
		return 0;
	threads_drop(l);
	struct proc_thread *th;
	int n;
	int rc = proc_threads(pid, &th, &n);
	if (rc < 0)
		return rc;
	l->th = th;
	l->n = n;
	l->relist_ns = now + RELIST_NS;
	char tp[64];
	snprintf(tp, sizeof tp, "/proc/%d/task", (int)pid);
	l->task_fd = open(tp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (n <= MAX_STAT_FDS && (l->stat_fd = malloc((size_t)n * sizeof *l->stat_fd))) {
		for (int i = 0; i < n; i++) {
			char path[64];
			snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)th[i].tid);
			l->stat_fd[i] = open(path, O_RDONLY | O_CLOEXEC);
		}
	}
	return 0;
}
