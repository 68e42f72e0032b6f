/* period_out.c: record --period's writer thread and its bounded queue
 * (period_out.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include "period_out.h"

static struct {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int running;
	int stop;                         /* period_out_finish: exit once the queue is empty */
	void *q[PERIOD_OUT_QUEUE_MAX];    /* a ring: q[head], ... n of them */
	int head, n;
	int busy;                         /* a job is running */
	period_out_fn run;
	void *arg;
} w = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void *writer(void *unused)
{
	(void)unused;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);  /* signals are the sampling thread's */
	/* the sampling thread runs at nice -10 when allowed (session.c) and
	 * this one inherits it: encoding a period is no reason to take a
	 * CPU from the target or anyone else */
	id_t tid = (id_t)syscall(SYS_gettid);
	errno = 0;
	int nice = getpriority(PRIO_PROCESS, tid);
	if (errno == 0 && nice < 0)
		setpriority(PRIO_PROCESS, tid, 0);
	pthread_mutex_lock(&w.mu);
	for (;;) {
		while (!w.n && !w.stop)
			pthread_cond_wait(&w.cv, &w.mu);
		if (!w.n)
			break;
		void *job = w.q[w.head];
		w.head = (w.head + 1) % PERIOD_OUT_QUEUE_MAX;
		w.n--;
		w.busy = 1;
		pthread_mutex_unlock(&w.mu);
		w.run(job, w.arg);
		pthread_mutex_lock(&w.mu);
		w.busy = 0;
	}
	pthread_mutex_unlock(&w.mu);
	return NULL;
}

int period_out_start(period_out_fn run, void *arg)
{
	w.run = run;
	w.arg = arg;
	int e = pthread_create(&w.thread, NULL, writer, NULL);
	if (e != 0)
		return -e;
	w.running = 1;
	return 0;
}

int period_out_push(void *job)
{
	pthread_mutex_lock(&w.mu);
	if (w.n >= PERIOD_OUT_QUEUE_MAX) {
		pthread_mutex_unlock(&w.mu);
		return -1;
	}
	w.q[(w.head + w.n) % PERIOD_OUT_QUEUE_MAX] = job;
	w.n++;
	pthread_cond_signal(&w.cv);
	pthread_mutex_unlock(&w.mu);
	return 0;
}

int period_out_pending(void)
{
	pthread_mutex_lock(&w.mu);
	int n = w.n + w.busy;
	pthread_mutex_unlock(&w.mu);
	return n;
}

void period_out_finish(void)
{
	if (!w.running)
		return;
	pthread_mutex_lock(&w.mu);
	w.stop = 1;
	pthread_cond_signal(&w.cv);
	pthread_mutex_unlock(&w.mu);
	pthread_join(w.thread, NULL);
	w.running = 0;
}
