/* place.h: keeping luaspy's sampling thread off the sampled thread's CPU.
 *
 * The stop window runs on the stopper thread, pinned to the CPU the
 * sampled thread last ran on (stopper.h). The sampling thread unwinds and
 * walks afterwards, and keeps off that CPU so as not to take it from the
 * target; within the affinity luaspy was started with, and not at all
 * with one allowed CPU. */
#ifndef LUASPY_PLACE_H
#define LUASPY_PLACE_H

#include <sched.h>

struct place {
	cpu_set_t mask;          /* our affinity at the first call */
	int init;                /* 0 not yet, 1 ok, -1 unusable */
	int cpu;                 /* CPU we keep off, -1 none */
};

/* Move the calling thread off CPU (the one the next sampled thread last
 * ran on, from its stat; < 0 unknown: stay) onto the rest of the start
 * affinity. P starts zeroed. Best effort: a refused sched_setaffinity
 * leaves the thread where it is. */
void place_keep_off(struct place *p, int cpu);

#endif
