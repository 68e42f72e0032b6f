#!/bin/sh
# tests/summary.sh [-f N] DIR...: count automake .trs results under each
# DIR and print one line "N passed, N failed, N skipped" (XFAIL counts as
# passed, XPASS and ERROR as failed); -f N adds N failures counted
# elsewhere (e.g. a build step of .ci/run). Missing DIRs count nothing.
# Exit 1 when anything failed.
pass=0; fail=0; skip=0
if [ "${1:-}" = -f ]; then
	fail=$(($2 + 0)); shift 2
fi
for d in "$@"; do
	[ -d "$d" ] || continue
	for r in $(find "$d" -name '*.trs' 2>/dev/null); do
		res=$(sed -n 's/^:test-result: //p' "$r" | head -n 1)
		case "$res" in
		PASS|XFAIL) pass=$((pass + 1)) ;;
		SKIP) skip=$((skip + 1)) ;;
		*) fail=$((fail + 1)) ;;
		esac
	done
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
