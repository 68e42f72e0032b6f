/* t_heap.c: unit tests for the object graph of src/heap.h: dominators
 * and retained sizes of heap_graph_finish against a naive set-based
 * computation on random graphs (cycles, self references, unreached
 * nodes, duplicate edges), and the edge accessors. Exit 0 pass, 1 fail. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "heap.h"

static int failures;
#define CHECK(c) do { if (!(c)) { printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); failures++; } } while (0)

#define MAXN 64

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* Dominator sets by the textbook iteration: dom(root) = {root},
 * dom(w) = {w} u the intersection of dom(p) over reached preds p. */
static void naive_idom(int n, const uint64_t *succ, uint32_t *idom)
{
	uint64_t reach = 1, dom[MAXN];
	for (int changed = 1; changed;) {
		changed = 0;
		for (int v = 0; v < n; v++)
			if ((reach >> v & 1) && (succ[v] | reach) != reach) {
				reach |= succ[v];
				changed = 1;
			}
	}
	uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
	for (int v = 0; v < n; v++)
		dom[v] = v == 0 ? 1 : all;
	for (int changed = 1; changed;) {
		changed = 0;
		for (int w = 1; w < n; w++) {
			if (!(reach >> w & 1))
				continue;
			uint64_t d = all;
			for (int p = 0; p < n; p++)
				if ((reach >> p & 1) && (succ[p] >> w & 1))
					d &= dom[p];
			d |= 1ull << w;
			if (d != dom[w]) {
				dom[w] = d;
				changed = 1;
			}
		}
	}
	for (int w = 0; w < n; w++) {
		idom[w] = UINT32_MAX;
		if (w == 0) {
			idom[w] = 0;
			continue;
		}
		if (!(reach >> w & 1))
			continue;
		int k = __builtin_popcountll(dom[w]);
		for (int d = 0; d < n; d++)
			if (d != w && (dom[w] >> d & 1) && __builtin_popcountll(dom[d]) == k - 1)
				idom[w] = (uint32_t)d;
	}
}

/* One random graph of N nodes, about DEG references each: heap_graph_finish
 * must give the naive dominators and retained sizes. */
static void test_random(int n, int deg)
{
	uint64_t succ[MAXN] = { 0 };
	uint32_t self[MAXN], want[MAXN];
	struct heap_state s;
	heap_state_init(&s, 0x1000);
	for (int v = 0; v < n; v++) {
		self[v] = v == 0 ? 0 : 1 + rnd(1000);
		CHECK(heap_node(&s, v == 0 ? 0 : 0x10000 + 32 * (uint64_t)v, HEAP_TABLE, self[v]) == v);
		heap_edges_begin(&s, (uint32_t)v);
		int m = v == 0 ? 1 + rnd(3) : (int)rnd(2 * deg + 1);
		for (int k = 0; k < m; k++) {
			int w = 1 + (int)rnd((uint32_t)n - 1);
			succ[v] |= 1ull << w;
			if (k & 1)
				heap_edge(&s, 0x10000 + 32 * (uint64_t)w, HEAP_E_INDEX, NULL, k);
			else
				heap_edge(&s, 0x10000 + 32 * (uint64_t)w, HEAP_E_KEY, "f", 0);
		}
		if (rnd(8) == 0)   /* a reference to no object: dropped */
			heap_edge(&s, 0x8, HEAP_E_OTHER, "[lost]", 0);
	}
	CHECK(heap_graph_finish(&s) == 0);
	if (!s.idom || !s.retained) {
		printf("FAIL n=%d: no dominators: %s\n", n, s.graph_cut ? s.graph_cut : "?");
		heap_state_free(&s);
		return;
	}
	naive_idom(n, succ, want);
	uint64_t ret[MAXN];
	int reached = 0;
	for (int v = 0; v < n; v++) {
		if (s.idom[v] != want[v]) {
			printf("FAIL n=%d node %d: idom %u, want %u\n", n, v, s.idom[v], want[v]);
			failures++;
			break;
		}
		ret[v] = want[v] == UINT32_MAX ? 0 : self[v];
		reached += want[v] != UINT32_MAX;
	}
	/* retained: own bytes plus the dominator tree's children, deepest first */
	for (int pass = 0; pass < n; pass++)
		for (int v = 1; v < n; v++)
			if (want[v] != UINT32_MAX) {
				uint64_t r = self[v];
				for (int c = 1; c < n; c++)
					if (want[c] == (uint32_t)v && c != v)
						r += ret[c];
				ret[v] = r;
			}
	for (int v = 1; v < n; v++)
		if (s.retained[v] != ret[v]) {
			printf("FAIL n=%d node %d: retained %llu, want %llu\n", n, v,
			       (unsigned long long)s.retained[v], (unsigned long long)ret[v]);
			failures++;
			break;
		}
	CHECK(s.unreached == (uint64_t)(n - reached));
	heap_state_free(&s);
}

/* A chain whose back references make the iteration's first guesses
 * wrong: 0 -> 1 -> 2 -> ... -> n-1, and each node back to node 1. */
static void test_chain(void)
{
	struct heap_state s;
	heap_state_init(&s, 0x1000);
	int n = 2000;
	for (int v = 0; v < n; v++) {
		heap_node(&s, v == 0 ? 0 : 0x10000 + 32 * (uint64_t)v, HEAP_TABLE, 10);
		heap_edges_begin(&s, (uint32_t)v);
		if (v + 1 < n)
			heap_edge(&s, 0x10000 + 32 * (uint64_t)(v + 1), HEAP_E_KEY, "next", 0);
		if (v > 1)
			heap_edge(&s, 0x10000 + 32, HEAP_E_OTHER, "[back]", 0);
	}
	if (heap_graph_finish(&s) != 0 || !s.idom) {
		printf("FAIL chain: no dominators: %s\n", s.graph_cut ? s.graph_cut : "?");
		failures++;
		heap_state_free(&s);
		return;
	}
	for (int v = 1; v < n; v++)
		CHECK(s.idom[v] == (uint32_t)v - 1);
	CHECK(s.retained[1] == 10ull * (uint64_t)(n - 1));
	char path[64];
	CHECK(heap_node_path(&s, 3, path, sizeof path) == 0);
	heap_state_free(&s);
}

/* Edges keep their kind, name and index, big and negative ones too. */
static void test_edges(void)
{
	struct heap_state s;
	heap_state_init(&s, 0x1000);
	static const char other[] = "[other]";
	const int64_t idx[] = { 7, -5, (int64_t)1 << 40, 0x7fffffff, 0x80000000, INT64_MIN };
	heap_node(&s, 0, HEAP_TABLE, 0);
	heap_edges_begin(&s, 0);
	for (int i = 0; i < 6; i++)
		heap_edge(&s, 0x100 + 16 * (uint64_t)i, HEAP_E_INDEX, NULL, idx[i]);
	heap_edge(&s, 0x100, HEAP_E_KEY, "name", 0);
	heap_edge(&s, 0x110, HEAP_E_OTHER, other, 0);
	heap_edge(&s, 0x120, HEAP_E_OTHER, NULL, 0);
	heap_edge(&s, 0x999, HEAP_E_KEY, "lost", 0);
	for (int i = 0; i < 6; i++)
		heap_node(&s, 0x100 + 16 * (uint64_t)i, HEAP_STRING, 10);
	CHECK(heap_graph_finish(&s) == 0);
	CHECK(s.ne == 9 && s.edges_lost == 1);
	for (int i = 0; i < 6; i++) {
		CHECK(heap_edge_kind(&s.e[i]) == HEAP_E_INDEX);
		CHECK(heap_edge_idx(&s, &s.e[i]) == idx[i]);
		CHECK(heap_edge_name(&s, &s.e[i]) == NULL);
		CHECK(heap_edge_to(&s.e[i]) == (uint32_t)i + 1);
	}
	CHECK(heap_edge_kind(&s.e[6]) == HEAP_E_KEY && strcmp(heap_edge_name(&s, &s.e[6]), "name") == 0);
	CHECK(heap_edge_name(&s, &s.e[7]) == other);
	CHECK(heap_edge_name(&s, &s.e[8]) == NULL);
	char path[64];
	CHECK(heap_node_path(&s, 2, path, sizeof path) == 0 && strcmp(path, "[-5]") == 0);
	heap_state_free(&s);
}

/* A list 300 000 deep whose every node also references one shared
 * node (a class, a metatable): each node is dominated by the one before
 * it, the shared node by the root; an iteration over successors climbs
 * the list once per node here (quadratic), Lengauer-Tarjan does not. */
static void test_deep_list(void)
{
	struct heap_state s;
	heap_state_init(&s, 0x1000);
	uint32_t n = 300000;
	uint64_t shared = 0x10000 + 32 * (uint64_t)(n + 1);
	for (uint32_t v = 0; v < n; v++) {
		heap_node(&s, v == 0 ? 0 : 0x10000 + 32 * (uint64_t)v, HEAP_TABLE, 10);
		heap_edges_begin(&s, v);
		if (v == 0)
			heap_edge(&s, shared, HEAP_E_ROOT, "class", 0);
		if (v + 1 < n)
			heap_edge(&s, 0x10000 + 32 * (uint64_t)(v + 1), HEAP_E_KEY, "next", 0);
		if (v > 0)
			heap_edge(&s, shared, HEAP_E_OTHER, heap_metatable_edge, 0);
	}
	heap_node(&s, shared, HEAP_TABLE, 100);
	if (heap_graph_finish(&s) != 0 || !s.idom) {
		printf("FAIL deep list: no dominators: %s\n", s.graph_cut ? s.graph_cut : "?");
		failures++;
		heap_state_free(&s);
		return;
	}
	int bad = 0;
	for (uint32_t v = 1; v < n; v++)
		bad += s.idom[v] != v - 1;
	CHECK(bad == 0);
	CHECK(s.idom[n] == 0);
	CHECK(s.retained[1] == 10ull * (n - 1));
	heap_state_free(&s);
}

/* Semi-NCA's bad shape: a list K long from the root whose last node
 * holds M objects that a hub the root also holds refers to, met after
 * the list: each of the M is dominated by the root, and semi-NCA would
 * climb the whole list for each (K * M steps); past its budget
 * Lengauer-Tarjan runs instead; with MEM_LIMIT (--max-memory) between
 * their costs the graph is cut, saying so. The state is left in *SP
 * (the caller frees it). */
static void fan_under_list(struct heap_state *sp, uint64_t mem_limit)
{
	struct heap_state s;
	heap_state_init(&s, 0x1000);
	s.mem_limit = mem_limit;
	uint32_t k = 100000, m = 100000;
	uint64_t list = 0x100000, fan = list + 32 * (uint64_t)(k + 1), hub = fan + 32 * (uint64_t)(m + 1);
	heap_node(&s, 0, HEAP_TABLE, 0);
	heap_edges_begin(&s, 0);
	heap_edge(&s, list + 32, HEAP_E_ROOT, "list", 0);
	heap_edge(&s, hub, HEAP_E_ROOT, "hub", 0);
	for (uint32_t v = 1; v <= k; v++) {   /* nodes 1 .. k */
		int64_t i = heap_node(&s, list + 32 * (uint64_t)v, HEAP_TABLE, 10);
		heap_edges_begin(&s, (uint32_t)i);
		if (v < k)
			heap_edge(&s, list + 32 * (uint64_t)(v + 1), HEAP_E_KEY, "next", 0);
		else
			for (uint32_t j = 1; j <= m; j++)
				heap_edge(&s, fan + 32 * (uint64_t)j, HEAP_E_INDEX, NULL, j);
	}
	for (uint32_t j = 1; j <= m; j++)   /* nodes k + 1 .. k + m */
		heap_node(&s, fan + 32 * (uint64_t)j, HEAP_TABLE, 1);
	int64_t h = heap_node(&s, hub, HEAP_TABLE, 0);
	heap_edges_begin(&s, (uint32_t)h);
	for (uint32_t j = 1; j <= m; j++)
		heap_edge(&s, fan + 32 * (uint64_t)j, HEAP_E_INDEX, NULL, j);
	if (mem_limit) {   /* semi-NCA's bound passed, Lengauer-Tarjan's not */
		CHECK(heap_graph_finish(&s) == -1 && s.graph_cut && strstr(s.graph_cut, "dominators"));
		CHECK(s.idom == NULL && s.retained == NULL);
		*sp = s;
		return;
	}
	if (heap_graph_finish(&s) != 0 || !s.idom) {
		printf("FAIL fan under list: no dominators: %s\n", s.graph_cut ? s.graph_cut : "?");
		failures++;
		*sp = s;
		return;
	}
	int bad = 0;
	for (uint32_t v = 2; v <= k; v++)
		bad += s.idom[v] != v - 1;
	for (uint32_t j = 1; j <= m; j++)
		bad += s.idom[k + j] != 0;
	CHECK(bad == 0);
	CHECK(s.idom[1] == 0 && s.idom[h] == 0);
	CHECK(s.retained[1] == 10ull * k && s.retained[h] == 0);
	*sp = s;
}

static void test_fan_under_list(void)
{
	struct heap_state s;
	fan_under_list(&s, 0);
	/* --max-memory between semi-NCA's cost and Lengauer-Tarjan's */
	uint64_t lo = s.nn * (uint64_t)HEAP_COST_NODE + s.ne * (uint64_t)HEAP_COST_EDGE;
	uint64_t hi = s.nn * (uint64_t)HEAP_COST_NODE_LT + s.ne * (uint64_t)HEAP_COST_EDGE;
	heap_state_free(&s);
	fan_under_list(&s, lo + (hi - lo) / 2);
	heap_state_free(&s);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	test_edges();
	for (int i = 0; i < 20000; i++)
		test_random(2 + (int)rnd(MAXN - 1), 1 + (int)rnd(3));
	test_chain();
	test_deep_list();
	test_fan_under_list();
	if (failures)
		printf("%d failures\n", failures);
	else
		printf("t_heap: all passed\n");
	return failures != 0;
}
