#!/bin/sh
# bench/faults.sh: wall-clock measures of two fault paths, moved out of
# the tests (tests/fault-sigstop.test and tests/fault-exec.test check the
# behaviour; how long it takes is a measurement, not a pass/fail):
#   sigstop  a 3 s `record` of a LuaJIT target that a third process stops
#            and continues every 50 ms (was asserted "under 6 s")
#   timeout  `record --timeout 0.5` of a process that never becomes Lua,
#            until it gives up with exit 5 (was asserted "under 3 s")
# Prints the median, min and max of ROUNDS runs (default 5) in ms.
#   LUASPY=./luaspy sh bench/faults.sh [ROUNDS]      (as root; `make bench-faults`)
set -u
LUASPY=${LUASPY:-./luaspy}
rounds=${1:-5}
command -v luajit >/dev/null || { echo "bench/faults.sh: luajit is not installed" >&2; exit 1; }
D=$(mktemp -d "${TMPDIR:-/tmp}/luaspy-bench.XXXXXX") || exit 1
pids=""
trap 'for p in $pids; do kill -CONT $p 2>/dev/null; kill -KILL $p 2>/dev/null; done; rm -rf "$D"' EXIT
trap 'exit 1' INT TERM HUP

ms() { echo $(( $(date +%s%N) / 1000000 )); }
# stats FILE: median min max of the numbers in FILE, one a line
stats() { sort -n "$1" | awk '{ v[NR] = $1 } END { printf "median %d ms  min %d ms  max %d ms  (%d runs)\n", v[int((NR + 1) / 2)], v[1], v[NR], NR }'; }

cat >"$D/busy.lua" <<'LUA'
local function leaf(n) local s = 0 for i = 1, n do s = s + i * 7 end return s end
local t0 = os.clock()
while os.clock() - t0 < 3600 do leaf(20000) end
LUA
luajit "$D/busy.lua" & T=$!; pids="$pids $T"
sh -c 'while :; do kill -STOP $0; sleep 0.05; kill -CONT $0; sleep 0.05; done' "$T" & K=$!; pids="$pids $K"
sleep 1
: >"$D/sigstop"
i=0
while [ $i -lt "$rounds" ]; do
	t0=$(ms)
	"$LUASPY" record -p "$T" -r 100 -d 3 -o "$D/s.txt" 2>/dev/null || echo "round $i: record failed" >&2
	echo $(( $(ms) - t0 )) >>"$D/sigstop"
	i=$((i + 1))
done
kill "$K"
echo "sigstop: 3 s record under SIGSTOP/SIGCONT every 50 ms: $(stats "$D/sigstop")"

sleep 600 & S=$!; pids="$pids $S"
: >"$D/timeout"
i=0
while [ $i -lt "$rounds" ]; do
	t0=$(ms)
	"$LUASPY" record -p "$S" -d 1 --timeout 0.5 -o "$D/no.txt" 2>/dev/null
	rc=$?
	echo $(( $(ms) - t0 )) >>"$D/timeout"
	[ $rc = 5 ] || echo "round $i: exit $rc, expected 5" >&2
	i=$((i + 1))
done
echo "timeout: --timeout 0.5 on a process without Lua, until exit 5: $(stats "$D/timeout")"
