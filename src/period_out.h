/* period_out.h: record --period: finished periods are written and pushed
 * by a thread of their own, so that sampling never waits for output (a
 * slow disk, a FIFO nobody reads yet, encoding a large profile). Jobs
 * wait in a bounded queue, run one at a time in the order given; when
 * the queue is full a new job is refused (the caller counts and says
 * it). docs/report.md §6. */
#ifndef LUASPY_PERIOD_OUT_H
#define LUASPY_PERIOD_OUT_H

#define PERIOD_OUT_QUEUE_MAX 4   /* finished periods waiting for the writer */

/* Run one job (on the writer thread); it owns JOB and frees it. ARG is
 * period_out_start's. */
typedef void (*period_out_fn)(void *job, void *arg);

/* Start the writer thread: RUN(job, ARG) for every job queued. Returns 0
 * or -errno (the thread could not start). */
int period_out_start(period_out_fn run, void *arg);

/* Queue JOB for the writer. Never blocks on output. Returns 0 (the
 * writer owns JOB now) or -1 when PERIOD_OUT_QUEUE_MAX jobs wait already
 * (JOB stays the caller's). */
int period_out_push(void *job);

/* Jobs queued or running now. */
int period_out_pending(void);

/* Run every job queued (however long its output takes), then stop the
 * writer thread. Safe to call when it was never started. */
void period_out_finish(void);

#endif
