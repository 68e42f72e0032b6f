#!/bin/sh
# tests/timeout.sh PROGRAM [ARG...]: the automake LOG_COMPILER of every
# test. Runs PROGRAM (a *.test script through $SHELL, or a t_* unit test)
# under timeout(1) so one hung test can never eat the suite's time: after
# N seconds it gets SIGTERM (lib.sh's trap kills the pids it tracked),
# 10 s later SIGKILL, and the test is reported FAILED with the reason.
#   N: LUASPY_TEST_TIMEOUT from the environment (default 300), or the
#   test's own "# timeout: N" line among its first 20 lines.
n=${LUASPY_TEST_TIMEOUT:-300}
for a in "$@"; do :; done  # the last argument is the test itself
if [ -f "$a" ]; then
	t=$(head -n 20 "$a" 2>/dev/null | sed -n 's/^# timeout: \([0-9][0-9]*\)$/\1/p' | head -n 1)
	[ -n "$t" ] && [ -z "${LUASPY_TEST_TIMEOUT:-}" ] && n=$t
fi
timeout -k 10 "$n" "$@"
rc=$?
case $rc in
124|137) echo "FAIL: timed out after $n s (killed by tests/timeout.sh)" >&2; exit 1 ;;
esac
exit $rc
