#!/bin/sh
# bench/fleet-rss.sh: memory and open files of a long fleet-style record
# (issue 15): `record --pgrep-full TAG --period P --upload URL
# --upload-queue DIR` while LuaJIT workers come and go (a new one every
# P/2 s, each living 1.5 P: three alive at a time, each calling 300
# functions in random nests: new stacks all the time) and the Pyroscope
# stand-in (tests/upload_receiver.py) is down from 1/3 to 1/2 of the run
# (its periods wait in DIR, then go). luaspy's VmRSS, open fds and, from
# its -v lines, its heap in use (glibc mallinfo2) are read every P
# seconds. Flat after the first period means nothing grows with run
# time or with the processes followed and dropped.
#   LUASPY=./luaspy sh bench/fleet-rss.sh [DURATION_S [PERIOD_S]]
#   (as root, needs luajit and python3; `make bench-fleet`: 1800 s at
#   --period 60)
set -u
LUASPY=${LUASPY:-./luaspy}
dur=${1:-1800}
per=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
recv="$here/../tests/upload_receiver.py"
for c in luajit python3; do
	command -v $c >/dev/null || { echo "bench/fleet-rss.sh: $c is not installed" >&2; exit 1; }
done
D=$(mktemp -d "${TMPDIR:-/tmp}/luaspy-fleet.XXXXXX") || exit 1
pids=""
trap 'for p in $pids $(cat "$D/workers" 2>/dev/null); do kill -KILL $p 2>/dev/null; done; rm -rf "$D"' EXIT
trap 'exit 1' INT TERM HUP
TAG="lsfleet$$"
life=$((per * 3 / 2))
{
	echo "local f = {}"
	i=1
	while [ $i -le 300 ]; do
		echo "f[$i] = function(d) local s = 0 for k = 1, 200 do s = s + k end if d > 0 then return f[math.random(300)](d - 1) end return s end"
		i=$((i + 1))
	done
	echo "local t0 = os.time() while os.time() - t0 < $life do f[math.random(300)](math.random(12)) end"
} >"$D/$TAG.lua"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir "$D/srv" "$D/out"
NAME='^fleet\{hostname=[^,]+,pid=[0-9]+,process=luajit,runtime=[^,]+\}$'
server() { python3 "$recv" "$PORT" "$D/srv" "$NAME" & S=$!; pids="$pids $S"; }
# workers: the first now, then one every per/2 s (each lives 1.5 periods)
( while :; do
	luajit "$D/$TAG.lua" & echo $! >>"$D/workers"
	sleep $((per / 2))
  done ) & pids="$pids $!"
while [ ! -s "$D/workers" ]; do sleep 0.1; done
server
"$LUASPY" record -v --stats --pgrep-full "$TAG" --period "$per" -d "$dur" -o "$D/out/p-%n.pb.gz" \
	--upload "http://127.0.0.1:$PORT" --app fleet --upload-queue "$D/queue" \
	--upload-header 'X-Scope-OrgID: tenant1' --upload-header 'Authorization: Bearer s3cret' \
	2>"$D/err" & L=$!; pids="$pids $L"
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
fds() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
heap() { sed -n 's/.*period [0-9]*: luaspy.s heap: \([0-9]*\) kB in use.*/\1/p' "$D/err" | tail -1; }
printf '%8s %10s %6s %10s %6s %8s %8s %8s\n' "t (s)" "RSS (kB)" "fds" "heap (kB)" "files" "queued" "received" "workers"
t=0 first="" last=""
while kill -0 "$L" 2>/dev/null; do
	sleep "$per"
	t=$((t + per))
	# the server is down from 1/3 to 1/2 of the run
	if [ $t -ge $((dur / 3)) ] && [ $t -lt $((dur / 2)) ] && [ -n "${S:-}" ]; then
		kill "$S" 2>/dev/null; wait "$S" 2>/dev/null; S=""
	elif [ $t -ge $((dur / 2)) ] && [ -z "${S:-}" ]; then
		server
	fi
	r=$(rss "$L") f=$(fds "$L") h=$(heap)
	[ -n "$r" ] || break
	printf '%8d %10d %6d %10s %6d %8d %8d %8d\n' "$t" "$r" "$f" "${h:--}" "$(ls "$D/out" | wc -l)" \
		"$(ls "$D/queue" 2>/dev/null | grep -c '\.lsq$')" "$(grep -c '^ok' "$D/srv/log" 2>/dev/null)" \
		"$(for w in $(cat "$D/workers"); do kill -0 "$w" 2>/dev/null && echo; done | wc -l)"
	# the baseline: the first reading after a period was written (its
	# -v heap line): the DWARF line tables are loaded by then
	[ -z "$first" ] && [ -n "$h" ] && first="$r $f $h"
	last="$r $f ${h:-0}"
	find "$D/out" -name 'p-*.pb.gz' -mmin +3 -delete 2>/dev/null
	find "$D/srv" -name 'req-*.pb.gz' -mmin +3 -delete 2>/dev/null
done
wait "$L"
grep -E '^(Samples|Uploads|Upload queue|processes|--pgrep):' "$D/err"
grep -c 'bad' "$D/srv/log" 2>/dev/null | sed 's/^/requests refused by the receiver: /'
set -- $first $last
[ $# = 6 ] && echo "after the first file: RSS $1 kB, $2 fds, heap $3 kB; last: RSS $4 kB, $5 fds, heap $6 kB; growth RSS $(( $4 - $1 )) kB, heap $(( $6 - $3 )) kB"
