#!/bin/sh
# forker.sh LOG INTERVAL_S COUNT [HOLD]: a forking server's shape: every
# INTERVAL_S seconds fork a short-lived LuaJIT child (fork_child.lua,
# about 0.15 s of CPU), COUNT times, then wait for the last ones. Each
# child appends its pid to LOG when done. With HOLD, stay until the file
# HOLD exists (a test looks at its profiler with every child gone).
d=$(dirname "$0")
i=0
while [ "$i" -lt "$3" ]; do
	luajit "$d/fork_child.lua" "$1" &
	sleep "$2"
	i=$((i + 1))
done
wait
if [ -n "$4" ]; then
	while [ ! -e "$4" ]; do sleep 0.1; done
fi
