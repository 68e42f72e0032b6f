#!/usr/bin/env python3
# heapsnapshot_check.py FILE: is FILE a well-formed Chrome DevTools heap
# snapshot (tests/heap-snapshot.test)? Checks the meta block, that the
# flat arrays agree with the counts and with each other (edge_count per
# node, to_node indices, string indices), that node 0 is the root, and
# that the Lua state's root reaches a table named by the property edge
# "_G" holding a table by the property edge "cache". Prints one line of
# counts; exits 1 with the reason otherwise.
import json
import sys

def fail(msg):
    print("heapsnapshot_check: " + msg, file=sys.stderr)
    sys.exit(1)

d = json.load(open(sys.argv[1]))
meta = d["snapshot"]["meta"]
nf, ef = meta["node_fields"], meta["edge_fields"]
if nf[:5] != ["type", "name", "id", "self_size", "edge_count"]:
    fail("node_fields %r" % nf)
if ef != ["type", "name_or_index", "to_node"]:
    fail("edge_fields %r" % ef)
ntypes, etypes = meta["node_types"][0], meta["edge_types"][0]
nodes, edges, strings = d["nodes"], d["edges"], d["strings"]
N, E = len(nodes) // len(nf), len(edges) // 3
if N != d["snapshot"]["node_count"] or len(nodes) % len(nf):
    fail("node_count %d, nodes hold %d" % (d["snapshot"]["node_count"], N))
if E != d["snapshot"]["edge_count"] or len(edges) % 3:
    fail("edge_count %d, edges hold %d" % (d["snapshot"]["edge_count"], E))
if sum(nodes[4::len(nf)]) != E:
    fail("the nodes' edge_count add up to %d, not %d" % (sum(nodes[4::len(nf)]), E))
ids = set()
for i in range(N):
    t, name, nid = nodes[i * len(nf)], nodes[i * len(nf) + 1], nodes[i * len(nf) + 2]
    if not 0 <= t < len(ntypes) or not 0 <= name < len(strings):
        fail("node %d: type %d name %d" % (i, t, name))
    if nid in ids:
        fail("node %d: id %d twice" % (i, nid))
    ids.add(nid)
for k in range(E):
    t, n, to = edges[3 * k:3 * k + 3]
    if not 0 <= t < len(etypes) or to % len(nf) or not 0 <= to < len(nodes):
        fail("edge %d: type %d to_node %d" % (k, t, to))
    if etypes[t] != "element" and etypes[t] != "hidden" and not 0 <= n < len(strings):
        fail("edge %d: name %d" % (k, n))
if ntypes[nodes[0]] != "synthetic":
    fail("node 0 is not synthetic")

# edges of node i: ranges by the running sum of edge_count
first = [0] * (N + 1)
for i in range(N):
    first[i + 1] = first[i] + nodes[i * len(nf) + 4]
def out(i):
    for k in range(first[i], first[i + 1]):
        yield etypes[edges[3 * k]], edges[3 * k + 1], edges[3 * k + 2] // len(nf)
def prop(i, key):
    for t, n, to in out(i):
        if t == "property" and strings[n] == key:
            return to
    return None
state = next(to for t, n, to in out(0))
g = prop(state, "_G")
if g is None:
    fail("the state has no _G edge")
cache = prop(g, "cache")
if cache is None or strings[nodes[cache * len(nf) + 1]] != "table":
    fail("_G has no property 'cache' leading to a table")
print("%d nodes, %d edges, %d strings; _G.cache is node %d with %d edges" %
      (N, E, len(strings), cache, first[cache + 1] - first[cache]))
