/* tests/callchain.c: a known native call chain for stack tests:
 * main -> chain_a -> chain_b -> chain_c -> spin (busy loop) in the main
 * thread, and a second thread worker -> chain_w -> pause().
 * Built twice (Makefile.am): with frame pointers at -O0 and without
 * them at -O1, so CFI, not frame pointers, must do the unwinding. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void spin(void)
{
	for (;;)
		sink++;
}
__attribute__((noinline)) void chain_c(void) { spin(); sink++; }
__attribute__((noinline)) void chain_b(void) { chain_c(); sink++; }
__attribute__((noinline)) void chain_a(void) { chain_b(); sink++; }

__attribute__((noinline)) void chain_w(void)
{
	for (;;)
		pause();
}
static void *worker(void *arg) { chain_w(); return arg; }

int main(int argc, char **argv)
{
	pthread_t th;
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	printf("%d\n", (int)getpid());
	fflush(stdout);
	chain_a();
	return 0;
}
