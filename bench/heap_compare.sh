#!/bin/sh
# bench/heap_compare.sh OLD NEW [VM...]: are two luaspy binaries' heap
# outputs byte-identical? For each VM (default lua5.1 lua5.4 luajit
# tarantool) a target holding tests/targets/heap_known.lua's heap is
# stopped (SIGSTOP) and both binaries write the text summary (but for its
# first line, which says the pause), -f paths, -f heapsnapshot and -f
# pprof (compared uncompressed) of it; prints "same" or the first
# difference per output. Run from the source tree, as root. Not a test.
set -e
OLD=$1 NEW=$2
shift 2
[ $# -gt 0 ] || set -- lua5.1 lua5.4 luajit tarantool
T=$(mktemp -d)
P=
trap '[ -n "$P" ] && kill -KILL $P 2>/dev/null; rm -rf "$T"' EXIT
mkfifo "$T/in"
exec 3<>"$T/in"
rc=0
for v in "$@"; do
	command -v "$v" >/dev/null 2>&1 || { echo "$v: not installed"; continue; }
	rm -f "$T/count"
	sh -c "exec $v tests/targets/heap_known.lua $T/count <$T/in" &
	P=$!
	while [ ! -s "$T/count" ]; do sleep 0.2; done
	kill -STOP "$P"
	for b in old new; do
		eval bin=\$$(echo $b | tr a-z A-Z)
		"$bin" heap --pid "$P" | sed 1d >"$T/$b.text"
		"$bin" heap --pid "$P" -f paths -o "$T/$b.paths"
		"$bin" heap --pid "$P" -f heapsnapshot -o "$T/$b.heapsnapshot"
		"$bin" heap --pid "$P" -f pprof -o "$T/$b.pb.gz"
		gzip -dc "$T/$b.pb.gz" >"$T/$b.pprof"
	done
	kill -KILL "$P"
	P=
	for f in text paths heapsnapshot pprof; do
		if cmp -s "$T/old.$f" "$T/new.$f"; then
			echo "$v $f: same ($(wc -c <"$T/new.$f") bytes)"
		else
			echo "$v $f: DIFFERENT: $(cmp "$T/old.$f" "$T/new.$f" 2>&1 | head -1)"
			rc=1
		fi
	done
done
exit $rc
