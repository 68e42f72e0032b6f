#!/bin/sh
# bench/heap_bench.sh [N] [LUA]: luaspy heap on a LUA target (default
# lua5.4) holding N small tables (default 1 000 000, 3 fields each, in
# _G.cache): heap bytes, wall time, the target's pause (as luaspy reports
# it), luaspy's peak RSS and bytes per object, for the text summary and
# for -f heapsnapshot (with its file size). Ratios from one run; run as
# root on an otherwise idle machine. Not a test: nothing is asserted.
set -e
N=${1:-1000000}
LUA=${2:-lua5.4}
LUASPY=${LUASPY:-./luaspy}
T=$(mktemp -d)
trap 'kill $P 2>/dev/null; rm -rf "$T"' EXIT
mkfifo "$T/in"
exec 3<>"$T/in"
cat >"$T/t.lua" <<LUA
cache = {}
for i = 1, $N do cache[i] = { a = i, b = i, c = i } end
collectgarbage("collect")
local f = assert(io.open("$T/count.tmp", "w"))
f:write(string.format("%.0f\n", collectgarbage("count") * 1024))
f:close()
os.rename("$T/count.tmp", "$T/count")
io.read()
LUA
sh -c "exec $LUA $T/t.lua <$T/in" &
P=$!
while [ ! -s "$T/count" ]; do sleep 0.2; done
echo "target: $LUA, $N tables, $(cat "$T/count") bytes by collectgarbage(\"count\")"
for fmt in text heapsnapshot; do
	/usr/bin/time -f "%e %M" -o "$T/time" "$LUASPY" heap --pid "$P" -f $fmt -o "$T/out.$fmt"
	read -r wall rss_kb <"$T/time"
	objs=$(grep -m1 'total walked' "$T/out.text" | awk '{print $3}')
	pause=$(sed -n 's/.*threads stopped for \(.*\) ms/\1/p' "$T/out.text" | head -1)
	echo "$fmt: wall ${wall} s, luaspy peak RSS $((rss_kb / 1024)) MiB" \
		"($(awk -v r="$rss_kb" -v o="$objs" 'BEGIN { printf "%.0f", r * 1024 / o }') bytes/object)," \
		"output $(du -k "$T/out.$fmt" | cut -f1) KiB; text run's pause ${pause} ms, ${objs} objects"
done
