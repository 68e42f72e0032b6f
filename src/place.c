/* place.c: CPU placement of the sampling thread (see place.h). */
#include "place.h"

void place_keep_off(struct place *p, int cpu)
{
	if (!p->init) {
		p->init = 1;
		p->cpu = -1;
		if (sched_getaffinity(0, sizeof p->mask, &p->mask) < 0)
			p->init = -1;
	}
	if (p->init < 0 || CPU_COUNT(&p->mask) < 2)
		return;
	if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == p->cpu)
		return;
	cpu_set_t set = p->mask;
	CPU_CLR(cpu, &set);
	if (CPU_COUNT(&set) == 0)
		set = p->mask;
	if (sched_setaffinity(0, sizeof set, &set) == 0)
		p->cpu = cpu;
}
