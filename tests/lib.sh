# tests/lib.sh: shared helpers for luaspy's shell tests.
# Exit statuses (automake): 0 pass, 77 skip (reason printed), 99 hard error, 1 fail.
# Every test that starts a process registers its pid with track_pid; the
# EXIT trap kills those pids (never by name).

: "${LUASPY:=./luaspy}"
: "${srcdir:=.}"
: "${builddir:=.}"
TARGETS="$srcdir/tests/targets"

fail_() { echo "FAIL: $*" >&2; exit 1; }
skip_() { echo "SKIP: $*" >&2; exit 77; }
framework_failure_() { echo "ERROR: $*" >&2; exit 99; }

_tracked=""
track_pid() { _tracked="$_tracked $1"; }
_cleanup() {
	for p in $_tracked; do
		kill -CONT "$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
	done
	[ -n "${TMPD:-}" ] && rm -rf "$TMPD"
	return 0
}
trap _cleanup EXIT
trap 'exit 1' INT TERM HUP

TMPD=$(mktemp -d "${TMPDIR:-/tmp}/luaspy-test.XXXXXX") || framework_failure_ "mktemp"

require_cmd() {
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || skip_ "'$c' is not installed"
	done
}

require_root() {
	[ "$(id -u)" = 0 ] || skip_ "needs root (ptrace of other users' processes)"
}

# spawn VAR CMD...: start CMD in the background (stdout/stderr to
# $TMPD/VAR.out), store its pid in $VAR and track it. VAR.out is emptied
# here, before the background job opens it: a test that spawns VAR again
# would otherwise poll the last run's output until the job truncates it
# (names-puc-cfunc read an empty offset that way, CI-like run).
spawn() {
	_var=$1; shift
	: >"$TMPD/$_var.out"
	"$@" >>"$TMPD/$_var.out" 2>&1 &
	_p=$!
	track_pid "$_p"
	eval "$_var=\$_p"
}

# wait_cpu PID [TICKS]: wait (max 60 s) until PID has used TICKS clock
# ticks of CPU (default 10), i.e. it is past startup and busy. Returns as
# soon as it is; the bound only matters when it never gets busy (a slow
# start under load or ASan took over the 5 s this once allowed).
wait_cpu() {
	_wc_end=$(( $(date +%s) + 60 ))
	while :; do
		_t=$(awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null) || return 1
		[ "${_t:-0}" -ge "${2:-10}" ] && return 0
		[ "$(date +%s)" -lt "$_wc_end" ] || return 1
		sleep 0.05
	done
}

# cpu_ticks PID: the clock ticks (1/100 s) of CPU PID has used so far
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null; }

# expect_msg STATUS ERE CMD...: run CMD; it must exit STATUS and print
# exactly one line on stderr, matching "^luaspy: ERE" (the messages of
# luaspy.1, EXIT STATUS). The msg-*.test files use it.
expect_msg() {
	_st=$1 _pat=$2; shift 2
	"$@" >"$TMPD/out" 2>"$TMPD/err"
	_rc=$?
	[ "$_rc" = "$_st" ] || fail_ "'$*' exited $_rc, expected $_st; stderr: $(cat "$TMPD/err")"
	[ "$(wc -l <"$TMPD/err")" = 1 ] || fail_ "'$*' printed $(wc -l <"$TMPD/err") lines on stderr: $(cat "$TMPD/err")"
	grep -q "^luaspy: $_pat" "$TMPD/err" || fail_ "'$*': stderr '$(cat "$TMPD/err")' does not match '$_pat'"
	echo "ok: $* -> $_rc: $(cat "$TMPD/err")"
}

# record_until ROUNDS OUT CHECK ARG...: run `luaspy record ARG... -f folded`
# up to ROUNDS times, appending each round's stacks to OUT and its output
# (stdout and stderr: the Samples line, --stats) to OUT.log, until
# `CHECK OUT` succeeds: on a loaded machine a round may take few samples,
# so a test waits for enough of them instead of assuming a rate. Fails the
# test when a record fails; returns 1 when CHECK never succeeded.
record_until() {
	_ru_n=$1 _ru_out=$2 _ru_check=$3; shift 3
	: >"$_ru_out"; : >"$_ru_out.log"
	_ru_k=0
	while [ $_ru_k -lt "$_ru_n" ]; do
		_ru_k=$((_ru_k + 1))
		"$LUASPY" record "$@" -f folded -o "$_ru_out.$_ru_k" >"$_ru_out.log.$_ru_k" 2>&1 ||
			fail_ "record $* failed: $(tail -3 "$_ru_out.log.$_ru_k")"
		cat "$_ru_out.$_ru_k" >>"$_ru_out"
		cat "$_ru_out.log.$_ru_k" >>"$_ru_out.log"
		"$_ru_check" "$_ru_out" && { echo "record_until: $_ru_k round(s), $(samples_in "$_ru_out") samples"; return 0; }
	done
	echo "record_until: $_ru_check still fails after $_ru_n rounds, $(samples_in "$_ru_out") samples"
	return 1
}
# samples_in FOLDED: the number of samples in a folded-stacks file
samples_in() { awk '{ s += $NF } END { print s + 0 }' "$1"; }

# expect_line STATUS LINE CMD...: run CMD; it must exit STATUS and print
# exactly LINE on stderr (messages pinned verbatim)
expect_line() {
	_st=$1 _msg=$2; shift 2
	"$@" >"$TMPD/out" 2>"$TMPD/err"
	_rc=$?
	[ "$_rc" = "$_st" ] || fail_ "'$*' exited $_rc, expected $_st; stderr: $(cat "$TMPD/err")"
	[ "$(cat "$TMPD/err")" = "$_msg" ] || fail_ "'$*': stderr '$(cat "$TMPD/err")', expected '$_msg'"
	echo "ok: exit $_rc: $_msg"
}

# listening PORT: a TCP socket listens on 127.0.0.1:PORT or any address
listening() {
	_hex=$(printf ':%04X' "$1")
	awk -v p="$_hex" '$4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' /proc/net/tcp
}

# all_stopped PID: every thread of PID is in state T (after kill -STOP)
all_stopped() {
	for _t in /proc/"$1"/task/*; do
		[ "$(awk '{print $3}' "$_t/stat" 2>/dev/null)" = T ] || return 1
	done
}

# eu_stack_compare NAME PID: stop PID, compare `luaspy dump --native-only`
# with eu-stack thread by thread (tests/eu_stack_compare.py), resume.
# eu-stack itself gives up inside LuaJIT's internal VM subroutines (no CFI
# for them; luaspy falls back to a frameless leaf), so a stop that lands
# there is retried: up to 8 stops, at least one must match exactly and
# none may differ otherwise. Leaves $TMPD/NAME.json.
eu_stack_compare() {
	_ok=0
	for _try in 1 2 3 4 5 6 7 8; do
		kill -STOP "$2"
		wait_for 10 all_stopped "$2"
		eu-stack -p "$2" >"$TMPD/$1.eu" 2>"$TMPD/$1.eu.err"
		"$LUASPY" dump --native-only --json -p "$2" >"$TMPD/$1.json" || fail_ "$1: luaspy dump failed"
		[ "$(proc_state "$2")" = T ] || fail_ "$1: a stopped target must stay stopped"
		python3 "$srcdir/tests/eu_stack_compare.py" "$TMPD/$1.eu" "$TMPD/$1.json" >"$TMPD/$1.cmp"
		_rc=$?
		cat "$TMPD/$1.cmp"
		kill -CONT "$2"
		wait_for 10 settled "$2"
		assert_untouched "$2"
		[ $_rc = 0 ] && { _ok=1; break; }
		[ $_rc = 2 ] || fail_ "$1: stacks differ from eu-stack"
		msleep 100  # let it run elsewhere before the next stop
	done
	[ $_ok = 1 ] || fail_ "$1: no stop gave equal stacks"
}

# proc_state PID: scheduler state letter
proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null; }

# tracer_of PID: TracerPid from status
tracer_of() { awk '/^TracerPid:/ {print $2}' "/proc/$1/status" 2>/dev/null; }

# assert_untouched PID: running or sleeping, not stopped, not traced
assert_untouched() {
	_s=$(proc_state "$1")
	case "$_s" in
	t|T) fail_ "pid $1 left stopped (state $_s)" ;;
	"") fail_ "pid $1 is gone" ;;
	esac
	[ "$(tracer_of "$1")" = 0 ] || fail_ "pid $1 left traced by $(tracer_of "$1")"
}

# Random times come from one seeded generator so a failure can be
# replayed: the seed is LUASPY_SEED from the environment, else random; the
# first rand_ms prints it. rand_ms MAX sets RAND_MS to a number of
# milliseconds in [0, MAX) (a variable, not output: a $(...) subshell
# would not advance the generator).
_rand_state=""
rand_ms() {
	if [ -z "$_rand_state" ]; then
		_rand_state=${LUASPY_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
		_rand_state=$((_rand_state % 2147483648))
		echo "random seed $_rand_state (replay with LUASPY_SEED=$_rand_state)"
	fi
	_rand_state=$(( (_rand_state * 1103515245 + 12345) % 2147483648 ))
	RAND_MS=$(( (_rand_state / 65536) % $1 ))
}
# wait_for TIMEOUT CMD...: run CMD every 50 ms until it succeeds; fail the
# test (naming CMD) when TIMEOUT seconds pass first. For waits on a
# condition instead of fixed sleeps.
wait_for() {
	_wf_end=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
	until "$@"; do
		[ $(( $(date +%s%N) / 1000000 )) -lt $_wf_end ] || fail_ "waited in vain for: $*"
		sleep 0.05
	done
}
# poll_for TIMEOUT CMD...: as wait_for, but return 1 on timeout
poll_for() {
	_wf_end=$(( $(date +%s%N) / 1000000 + $1 * 1000 )); shift
	until "$@"; do
		[ $(( $(date +%s%N) / 1000000 )) -lt $_wf_end ] || return 1
		sleep 0.05
	done
}
# settled PID: not stopped and not traced (after a tracer went away, the
# kernel's detach takes a moment)
settled() { _s=$(proc_state "$1"); [ "$_s" != t ] && [ "$(tracer_of "$1")" = 0 ]; }
# is_state PID LETTER: PID's scheduler state is LETTER
is_state() { [ "$(proc_state "$1")" = "$2" ]; }
# msleep MS
msleep() { sleep "$(awk "BEGIN { printf \"%.3f\", $1 / 1000 }")"; }
# iterations N_CI N_STRESS: loop count, the larger one under `make stress`
iterations() { if [ -n "${LUASPY_STRESS:-}" ]; then echo "$2"; else echo "$1"; fi; }

# A busy Lua script with a known shape: main chunk (line 5) -> outer ->
# middle -> leaf, for SECONDS of CPU. It reads os.clock (a system call:
# under load ptrace stops land there out of proportion,
# docs/sampling.md §5.2) once per k calls of outer, k doubled until they
# take 0.1 s.
write_busy_lua() { # write_busy_lua FILE [SECONDS]
	cat >"$1" <<LUA
local function leaf(n) local s = 0 for i = 1, n do s = s + i * 7 + i * 13 end return s end
local function middle(n) local s = 0 for i = 1, 10 do s = s + leaf(n) end return s end
local function outer(n) local s = 0 for i = 1, 10 do s = s + middle(n) end return s end
local t0, k, c = os.clock(), 1, 0
while c < ${2:-60} do for _ = 1, k do outer(20000) end
  local d = os.clock() - t0; if d - c < 0.1 then k = k * 2 end; c = d end
LUA
}

# openresty_root DIR: unpack lua-nginx-module and OpenResty's LuaJIT into
# DIR/root without installing them (they conflict with stock luajit:
# docs/hosts.md §2). Debs come from $LUASPY_DEB_DIR when set, else apt-get
# download; skips the test with the reason when neither works. Sets MOD to
# the nginx modules folder.
openresty_root() {
	mkdir -p "$1/debs" "$1/root"
	_pkgs="libnginx-mod-http-lua libnginx-mod-http-ndk libluajit2-5.1-2 libluajit2-5.1-common lua-resty-core lua-resty-lrucache"
	if [ -n "${LUASPY_DEB_DIR:-}" ] && ls "$LUASPY_DEB_DIR"/libnginx-mod-http-lua_*.deb >/dev/null 2>&1; then
		cp "$LUASPY_DEB_DIR"/*.deb "$1/debs/"
	else
		(cd "$1/debs" && apt-get download $_pkgs >"$1/apt.log" 2>&1) ||
			skip_ "cannot download the OpenResty/lua-nginx-module debs: $(tail -1 "$1/apt.log")"
	fi
	for _d in "$1"/debs/*.deb; do dpkg-deb -x "$_d" "$1/root" || framework_failure_ "dpkg-deb -x $_d"; done
	MOD="$1/root/usr/lib/nginx/modules"
	[ -f "$MOD/ngx_http_lua_module.so" ] || skip_ "ngx_http_lua_module.so not in the debs"
}
