#!/bin/sh
# stress-fork.sh: `make stress`'s long run of a forking server (issue
# 13.4): record -s of a shell that forks a short-lived LuaJIT child
# (tests/targets/forker.sh, 0.15 s of CPU each) every 0.35 s for
# $STRESS_SECONDS (default 600). Prints luaspy's RSS and open files every
# minute; fails when either grew after the first minute (RSS by more
# than 25% + 8 MiB, files by more than 20) or fewer than 95% of the
# children were sampled. Needs root and luajit.
: "${LUASPY:=./luaspy}"
: "${srcdir:=.}"
: "${STRESS_SECONDS:=600}"
[ "$(id -u)" = 0 ] || { echo "stress-fork: SKIP: needs root"; exit 77; }
command -v luajit >/dev/null 2>&1 || { echo "stress-fork: SKIP: no luajit"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/luaspy-stress.XXXXXX") || exit 99
P= L=
cleanup() {
	[ -n "$P" ] && kill "$P" 2>/dev/null
	[ -n "$L" ] && kill "$L" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
: >"$T/log"
N=$((STRESS_SECONDS * 100 / 35))
sh "$srcdir/tests/targets/forker.sh" "$T/log" 0.35 "$N" >/dev/null 2>&1 &
P=$!
"$LUASPY" record -s -p "$P" --stats -o "$T/f.txt" 2>"$T/err" &
L=$!
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$L/status" 2>/dev/null; }
nfd() { ls "/proc/$L/fd" 2>/dev/null | wc -l; }
echo "stress-fork: $N children over ${STRESS_SECONDS} s; luaspy pid $L"
m=0 rss1= fd1= bad=0
while :; do
	i=0 # a minute, or until the server is done
	while [ $i -lt 600 ] && kill -0 "$P" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	kill -0 "$P" 2>/dev/null || break
	kill -0 "$L" 2>/dev/null || { echo "stress-fork: FAIL: luaspy ended early"; cat "$T/err"; exit 1; }
	m=$((m + 1))
	r=$(rss) f=$(nfd)
	echo "minute $m: luaspy RSS $r KiB, $f open files, $(wc -l <"$T/log") children done"
	if [ $m = 1 ]; then
		rss1=$r fd1=$f
	else
		[ "$r" -le $((rss1 * 5 / 4 + 8192)) ] || { echo "stress-fork: RSS grew from $rss1 to $r KiB"; bad=1; }
		[ "$f" -le $((fd1 + 20)) ] || { echo "stress-fork: open files grew from $fd1 to $f"; bad=1; }
	fi
done
i=0
while kill -0 "$L" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
wait "$L" || { echo "stress-fork: FAIL: record failed"; cat "$T/err"; exit 1; }
L=
cat "$T/err"
n=0 s=0
for c in $(cat "$T/log"); do
	n=$((n + 1))
	grep -q "^process $c \"luajit .*;child_work (" "$T/f.txt" && s=$((s + 1))
done
echo "stress-fork: children sampled: $s of $n"
[ $((s * 100)) -ge $((n * 95)) ] || { echo "stress-fork: FAIL: fewer than 95% sampled"; bad=1; }
[ $bad = 0 ] || exit 1
echo "stress-fork: PASS"
