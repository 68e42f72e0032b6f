/* child.c: launching and reaping the command luaspy runs. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "child.h"
#include "err.h"
#include "proc_ptrace.h"
#include "stopper.h"

int child_launch(struct child *c, char *const argv[], int *exec_errno)
{
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -LS_E_INTERNAL;
	pid_t pid = fork();
	if (pid < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -LS_E_INTERNAL;
	}
	if (pid == 0) {
		close(pfd[0]);
		signal(SIGPIPE, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL); /* ptrace_stop blocks SIGCHLD */
		execvp(argv[0], argv);
		int e = errno;
		ssize_t w = write(pfd[1], &e, sizeof e);
		(void)w;
		_exit(127);
	}
	close(pfd[1]);
	int e = 0;
	ssize_t n = read(pfd[0], &e, sizeof e);
	close(pfd[0]);
	c->pid = pid;
	if (n == (ssize_t)sizeof e) {
		int status;
		waitpid(pid, &status, 0);
		c->reaped = 1;
		c->status = status;
		*exec_errno = e;
		return 1;
	}
	return 0;
}

/* child_housekeep's work, on the stopper thread. ARG: the child or NULL. */
static int housekeep_fn(void *arg)
{
	struct child *c = arg;
	/* The child's main thread may still be seized from a stop that timed
	 * out: its ptrace stop is proc_ptrace.c's to collect, not ours (and
	 * collecting it may reap the child's exit). */
	ptrace_reap_pending();
	if (!c || !c->pid || c->reaped)
		return 0;
	int status;
	if (ptrace_child_reaped(c->pid, &status)) {
		c->status = status;
		c->reaped = 1;
		return 0;
	}
	if (ptrace_is_pending(c->pid))
		return 0;
	pid_t r = waitpid(c->pid, &status, WNOHANG | __WALL);
	if (r != c->pid)
		return 0;
	if (WIFSTOPPED(status)) {
		/* a stray ptrace stop (never expected: we are detached between
		 * samples); let it go with its signal */
		ptrace_detach_stray(c->pid, status);
		return 0;
	}
	c->status = status;
	c->reaped = 1;
	return 0;
}

void child_housekeep(struct child *c)
{
	stopper_call(-1, housekeep_fn, c);
}

void child_check(struct child *c)
{
	if (c->pid && !c->reaped)
		child_housekeep(c);
}

void child_kill(struct child *c)
{
	if (!c->pid || c->reaped)
		return;
	kill(c->pid, SIGTERM);
	for (int i = 0; i < 100; i++) {
		child_check(c);
		if (c->reaped)
			return;
		struct timespec ts = { 0, 10 * 1000000L };
		nanosleep(&ts, NULL);
	}
	kill(c->pid, SIGKILL);
	int status;
	if (waitpid(c->pid, &status, 0) == c->pid) {
		c->status = status;
		c->reaped = 1;
	}
}

int child_exit_status(const struct child *c)
{
	if (WIFEXITED(c->status))
		return WEXITSTATUS(c->status);
	if (WIFSIGNALED(c->status))
		return 128 + WTERMSIG(c->status);
	return 1;
}
