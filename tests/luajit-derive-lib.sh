# tests/luajit-derive-lib.sh: shared by the luajit-derive*.test (sourced
# after tests/lib.sh). derive_walk LABEL ROW CMD... starts CMD
# tests/targets/derive_shapes.lua twice (interpreter only, then with the
# JIT) and checks, with the layout rows bypassed (LUASPY_LJ_NO_ROWS=1),
# that the probe derived the layout (equal to row ROW field by field when
# ROW is not empty) and that dumps show the known chain with its lines;
# with ROW, the same dumps with the rows show the same. string.format is
# lj_cf_string_format where the binary has symbols (tarantool).
S="$TARGETS/derive_shapes.lua"
CHAIN="leaf@11,middle@16,outer@21,main chunk@29"

derive_walk() {
	_label=$1 _row=$2
	shift 2
	for _mode in joff jit; do
		if [ "$_mode" = joff ]; then
			spawn T "$@" "$S" 600 joff
			_fmt="string.format|lj_cf_string_format,$CHAIN"
		else
			spawn T "$@" "$S" 600
			_fmt=$CHAIN
		fi
		wait_cpu "$T" 10 || fail_ "$_label did not start: $(cat "$TMPD/T.out")"
		LUASPY_LJ_NO_ROWS=1 "$LUASPY" dump --pid "$T" -v >"$TMPD/v.txt" 2>&1 ||
			fail_ "$_label: dump failed: $(tail -3 "$TMPD/v.txt")"
		grep -q "luajit: layout derived on main lua_State" "$TMPD/v.txt" ||
			fail_ "$_label: layout not derived: $(grep luajit "$TMPD/v.txt")"
		grep "layout derived on" "$TMPD/v.txt" | sed 's/^luaspy: \[v\] luajit: /'"$_label"': /'
		if [ -n "$_row" ]; then
			grep -qF "derived, as row '$_row" "$TMPD/v.txt" ||
				fail_ "$_label: derived layout is not row '$_row': $(grep -E 'differs|found LuaJIT' "$TMPD/v.txt")"
		fi
		for _rows in bypassed used; do
			[ "$_rows" = used ] && [ -z "$_row" ] && continue
			if [ "$_rows" = bypassed ]; then _env=LUASPY_LJ_NO_ROWS=1; else _env=LUASPY_LJ_NO_ROWS=0; fi
			env $_env python3 "$srcdir/tests/luajit_dumps.py" --luaspy "$LUASPY" --pid "$T" \
				--count 40 --min-count 4 --need-lua 4 --script "$S" --expect "$CHAIN" --expect "$_fmt" ||
				fail_ "$_label ($_mode, rows $_rows): expected frames not found"
			echo "$_label ($_mode, rows $_rows): chain found"
		done
		assert_untouched "$T"
		kill "$T"
	done
}
