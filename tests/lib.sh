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
# $TMPD/VAR.out), store its pid in $VAR and track it.
spawn() {
	_var=$1; shift
	"$@" >"$TMPD/$_var.out" 2>&1 &
	_p=$!
	track_pid "$_p"
	eval "$_var=\$_p"
}

# wait_cpu PID [TICKS]: wait (max 5 s) until PID has used TICKS clock
# ticks of CPU (default 10), i.e. it is past startup and busy.
wait_cpu() {
	_i=0
	while [ $_i -lt 100 ]; do
		_t=$(awk '{print $14+$15}' "/proc/$1/stat" 2>/dev/null) || return 1
		[ "${_t:-0}" -ge "${2:-10}" ] && return 0
		sleep 0.05
		_i=$((_i + 1))
	done
	return 1
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
