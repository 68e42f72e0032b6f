#!/bin/sh
# stress-fork.sh: `make stress`'s long run of a forking server (issue
# 13.4): record -s of a shell that forks a short-lived LuaJIT child
# (tests/targets/forker.sh, 0.15 s of CPU each) every 0.35 s for
# $STRESS_SECONDS (default 600). Prints luaspy's RSS and open files every
# minute (they follow how many children live at that moment); once every
# child is gone, fails when luaspy still holds a module file open, when
# its RSS grew by more than 25% + 8 MiB over the first minute's, or when
# fewer than 95% of the children were sampled. Needs root and luajit.
: "${LUASPY:=./luaspy}"
: "${srcdir:=.}"
: "${STRESS_SECONDS:=600}"
: "${STRESS_PERIOD:=60}" # seconds between the RSS lines
: "${STRESS_VV:=}" # -vv: say, for each child not sampled, what luaspy logged of it
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
sh "$srcdir/tests/targets/forker.sh" "$T/log" 0.35 "$N" "$T/hold" >/dev/null 2>&1 &
P=$!
"$LUASPY" record -s -p "$P" $STRESS_VV --stats -o "$T/f.txt" 2>"$T/err" &
L=$!
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$L/status" 2>/dev/null; }
nfd() { ls "/proc/$L/fd" 2>/dev/null | wc -l; }
echo "stress-fork: $N children over ${STRESS_SECONDS} s; luaspy pid $L"
m=0 rss1= bad=0
while :; do
	i=0 # a period, or until the server is done
	while [ $i -lt $((STRESS_PERIOD * 10)) ] && kill -0 "$P" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
	kill -0 "$P" 2>/dev/null || break
	kill -0 "$L" 2>/dev/null || { echo "stress-fork: FAIL: luaspy ended early"; cat "$T/err"; exit 1; }
	m=$((m + 1))
	r=$(rss) f=$(nfd)
	echo "$((m * STRESS_PERIOD)) s: luaspy RSS $r KiB, $f open files, $(wc -l <"$T/log") children done"
	[ $m = 1 ] && rss1=$r
	[ "$(wc -l <"$T/log")" -ge "$N" ] && [ -z "$(pgrep -P "$P" luajit)" ] && break
done
nmod() { ls -l "/proc/$L/fd" 2>/dev/null | grep -c -e '\.so' -e '/luajit$' -e '\.debug$'; }
i=0 # every child is gone: luaspy closes them at its next scan
while [ "$(nmod)" -gt 0 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
r=$(rss) f=$(nfd)
echo "all children gone: luaspy RSS $r KiB, $f open files, $(nmod) module files"
[ "$(nmod)" = 0 ] || { echo "stress-fork: module files of exited children still open"; bad=1; }
[ "$r" -le $((${rss1:-$r} * 5 / 4 + 8192)) ] || { echo "stress-fork: RSS grew from $rss1 to $r KiB"; bad=1; }
: >"$T/hold"
i=0
while kill -0 "$L" 2>/dev/null && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
wait "$L" || { echo "stress-fork: FAIL: record failed"; cat "$T/err"; exit 1; }
L=
grep -v '\[v\]' "$T/err"
n=0 s=0 miss=0
for c in $(cat "$T/log"); do
	n=$((n + 1))
	if grep -q "^process $c \"luajit .*;child_work (" "$T/f.txt"; then
		s=$((s + 1))
		continue
	fi
	miss=$((miss + 1))
	[ -n "$STRESS_VV" ] && [ $miss -le 20 ] || continue
	# what was seen of a child not sampled: its samples, its probes
	echo "not sampled: child $c: $(grep -c "^process $c " "$T/f.txt") stacks;" \
		"$(grep -E "pid $c[:, ]" "$T/err" | sed -E 's/^.*\[v\] //; s/[0-9.]+ ms/N ms/' | sort | uniq -c | sort -rn | head -4 | tr '\n' '|')"
done
echo "stress-fork: children sampled: $s of $n"
[ $((s * 100)) -ge $((n * 95)) ] || { echo "stress-fork: FAIL: fewer than 95% sampled"; bad=1; }
[ $bad = 0 ] || exit 1
echo "stress-fork: PASS"
