/* t_limit.c: unit tests for the limits that cut data visibly: a full
 * stack (stack_push, src/frame.h) keeps both ends and one "<elided N
 * frames>" frame; limit_hit (src/limit.h) counts per kind. Real
 * processes can't push a stack past STACK_MAX_FRAMES (merge_stacks cuts
 * first), so the growth rule is checked here. Exit 0 pass, 1 fail. */
#include <stdio.h>
#include <string.h>
#include "check.h"
#include "frame.h"
#include "intern.h"
#include "limit.h"

/* Push N frames named f0..f<N-1> (innermost first) onto ST. */
static void push_n(struct stack *st, int n)
{
	for (int i = 0; i < n; i++) {
		struct frame fr = { .kind = FRAME_NATIVE, .name = internf("f%d", i) };
		CHECK(stack_push(st, &fr) == 0, "push %d", i);
	}
}

/* The one elided frame of ST and its count, or -1. */
static int elided_of(const struct stack *st, int *count)
{
	int at = -1;
	for (int i = 0; i < st->n; i++)
		if (st->f[i].kind == FRAME_ELIDED) {
			CHECK(at < 0, "a second elided frame at %d", i);
			at = i;
		}
	if (at >= 0)
		CHECK(sscanf(st->f[at].name, "<elided %d frames>", count) == 1, "%s", st->f[at].name);
	return at;
}

static void test_stack_push(int total)
{
	struct stack st = { 0 };
	push_n(&st, total);
	int count = 0, at = elided_of(&st, &count);
	if (total <= STACK_MAX_FRAMES) {
		CHECK(st.n == total && at < 0, "%d frames: n %d, elided at %d", total, st.n, at);
	} else {
		CHECK(st.n <= STACK_MAX_FRAMES, "n %d", st.n);
		CHECK(at == STACK_MAX_FRAMES / 2, "elided at %d", at);
		/* both ends kept, in order, and every frame accounted for */
		CHECK(!strcmp(st.f[0].name, "f0"), "%s", st.f[0].name);
		CHECK(!strcmp(st.f[at - 1].name, internf("f%d", at - 1)), "%s", st.f[at - 1].name);
		CHECK(!strcmp(st.f[st.n - 1].name, internf("f%d", total - 1)), "%s", st.f[st.n - 1].name);
		CHECK(st.n - 1 + count == total, "%d kept + %d elided != %d", st.n - 1, count, total);
		int ok = 1;
		for (int i = at + 2; i < st.n; i++) {
			int a, b;
			sscanf(st.f[i - 1].name, "f%d", &a);
			sscanf(st.f[i].name, "f%d", &b);
			ok &= b == a + 1;
		}
		CHECK(ok, "outer frames out of order");
	}
	stack_free(&st);
}

static void test_limit_hit(void)
{
	CHECK(limit_count(LIMIT_PUC_STATES) == 0);
	limit_hit(LIMIT_PUC_STATES, 1);
	limit_hit(LIMIT_PUC_STATES, 2);
	limit_hit(LIMIT_PUC_STATES, 0);
	CHECK(limit_count(LIMIT_PUC_STATES) == 3, "%llu", (unsigned long long)limit_count(LIMIT_PUC_STATES));
	CHECK(limit_count(LIMIT_PUC_COROS) == 0);
	limit_hit(LIMIT__N, 5); /* out of range: ignored */
	CHECK(limit_count(LIMIT__N) == 0);
	for (int k = 0; k < LIMIT__N; k++)
		CHECK(limit_text(k) && limit_text(k)[0], "kind %d has no text", k);
}

int main(void)
{
	test_stack_push(10);
	test_stack_push(STACK_MAX_FRAMES);
	test_stack_push(STACK_MAX_FRAMES + 1);
	test_stack_push(10000);
	test_stack_push(100000);
	test_limit_hit();
	return check_summary("t_limit");
}
