#!/bin/sh
# bench/period-rss.sh: memory and open files of a long `record --period`
# (issue 15): a LuaJIT target calling 300 functions in random nests (new
# stacks all the time), recorded with --period P for D seconds; luaspy's
# VmRSS and open file descriptors are read every P seconds. Flat after
# the first period means the aggregate is reset and nothing else grows
# with run time. Prints one row per reading, then the growth from the
# end of the first period to the last reading.
#   LUASPY=./luaspy sh bench/period-rss.sh [DURATION_S [PERIOD_S]]
#   (as root; `make bench-period`: 1800 s at --period 60)
set -u
LUASPY=${LUASPY:-./luaspy}
dur=${1:-1800}
per=${2:-60}
command -v luajit >/dev/null || { echo "bench/period-rss.sh: luajit is not installed" >&2; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/luaspy-bench.XXXXXX") || exit 1
pids=""
trap 'for p in $pids; do kill -KILL $p 2>/dev/null; done; rm -rf "$D"' EXIT
trap 'exit 1' INT TERM HUP
{
	echo "local f = {}"
	i=1
	while [ $i -le 300 ]; do
		echo "f[$i] = function(d) local s = 0 for k = 1, 200 do s = s + k end if d > 0 then return f[math.random(300)](d - 1) end return s end"
		i=$((i + 1))
	done
	echo "local t0 = os.time() while os.time() - t0 < $dur + 60 do f[math.random(300)](math.random(12)) end"
} >"$D/many.lua"
luajit "$D/many.lua" & T=$!; pids="$pids $T"
mkdir "$D/out"
"$LUASPY" record -p "$T" --period "$per" -d "$dur" -o "$D/out/p-%n.pb.gz" 2>"$D/err" & L=$!; pids="$pids $L"
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
printf '%8s %10s %6s %8s\n' "t (s)" "RSS (kB)" "fds" "files"
t=0 first="" last=""
while kill -0 "$L" 2>/dev/null; do
	sleep "$per"
	t=$((t + per))
	r=$(rss "$L") f=$(fds "$L")
	[ -n "$r" ] || break
	printf '%8d %10d %6d %8d\n' "$t" "$r" "$f" "$(ls "$D/out" | wc -l)"
	# the baseline: the first reading after the first file (its writing
	# loads the DWARF line tables once)
	[ -z "$first" ] && [ "$(ls "$D/out" | wc -l)" -ge 1 ] && first="$r $f"
	last="$r $f"
	# keep the disk use bounded: the profiles are not the point here
	find "$D/out" -name 'p-*.pb.gz' -mmin +2 -delete 2>/dev/null
done
wait "$L"
tail -3 "$D/err"
set -- $first $last
[ $# = 4 ] && echo "after the first file: RSS $1 kB, $2 fds; last: RSS $3 kB, $4 fds; growth $(( $3 - $1 )) kB"
