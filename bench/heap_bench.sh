#!/bin/sh
# bench/heap_bench.sh [N] [LUA]: luaspy heap on a LUA target (default
# lua5.4) holding N small tables (default 1 000 000, 3 fields each, in
# _G.cache): heap bytes, wall time, the target's pause (as luaspy reports
# it), luaspy's peak RSS and bytes per object, for the text summary and
# for -f heapsnapshot (with its file size), the walk's CPU time in
# seconds per GiB of heap (luaspy -v), and the pause of gcore(1) on the
# same process (it stops the process for its whole dump) when gcore is
# installed. Ratios from one run; run as root on an otherwise idle
# machine. Not a test: nothing is asserted.
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
heap=$(cat "$T/count")
for fmt in text heapsnapshot; do
	/usr/bin/time -f "%e %M" -o "$T/time" "$LUASPY" heap -v --pid "$P" -f $fmt -o "$T/out.$fmt" 2>"$T/log"
	read -r wall rss_kb <"$T/time"
	objs=$(grep -m1 'total walked' "$T/out.text" | awk '{print $3}')
	pause=$(sed -n 's/.*threads stopped for \(.*\) ms/\1/p' "$T/out.text" | head -1)
	walk=$(sed -n 's/.*heap: walk .* ms, \(.*\) ms of it on luaspy.s CPU/\1/p' "$T/log" | head -1)
	graph=$(sed -n 's/.*heap: graph \(.*\) ms of luaspy.s CPU/\1/p' "$T/log" | head -1)
	echo "$fmt: wall ${wall} s, luaspy peak RSS $((rss_kb / 1024)) MiB" \
		"($(awk -v r="$rss_kb" -v o="$objs" 'BEGIN { printf "%.0f", r * 1024 / o }') bytes/object)," \
		"output $(du -k "$T/out.$fmt" | cut -f1) KiB; text run's pause ${pause} ms, ${objs} objects;" \
		"walk CPU ${walk} ms ($(awk -v w="$walk" -v h="$heap" 'BEGIN { printf "%.2f", w / 1000 / (h / 1073741824) }') s/GiB)," \
		"graph CPU ${graph} ms"
done
if command -v gcore >/dev/null 2>&1; then
	/usr/bin/time -f "%e" -o "$T/time" gcore -o "$T/core" "$P" >/dev/null 2>&1
	echo "gcore: the process stopped for $(cat "$T/time") s, core $(du -m "$T/core.$P" | cut -f1) MiB"
fi
