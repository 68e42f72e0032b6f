# tests/perf_lib.sh: helpers of the perf-sampler-*.test scripts that
# compare --sampler perf with --blocking (after tests/lib.sh).

# rec NAME.EXT LOG MIN ARGS...: record 2 s rounds (at most 4) into NAME.EXT
# until it holds MIN samples (a loaded machine gives few per round)
rec() {
	_o=$1 _l=$2 _min=$3; shift 3
	: >"$TMPD/$_o"
	for _r in 1 2 3 4; do
		"$LUASPY" record "$@" -d 2 -f folded -o "$TMPD/$_o.$_r" >"$TMPD/$_l" 2>&1 || return $?
		cat "$TMPD/$_o.$_r" >>"$TMPD/$_o"
		[ "$(samples_in "$TMPD/$_o")" -ge "$_min" ] && return 0
	done
	return 0
}

# compare NAME PID MAXBAD NEED...
compare() {
	_n=$1 _p=$2 _max=$3; shift 3
	rec "$_n.blk" "$_n.blog" 600 --pid "$_p" --blocking -r 1000 ||
		fail_ "$_n: record --blocking failed: $(tail -2 "$TMPD/$_n.blog")"
	"$LUASPY" record --pid "$_p" --blocking -r 1000 -d 2 -f folded -o "$TMPD/$_n.blk2" \
		>"$TMPD/$_n.blog2" 2>&1 || fail_ "$_n: record --blocking failed: $(tail -2 "$TMPD/$_n.blog2")"
	rec "$_n.perf" "$_n.plog" 300 --pid "$_p" --sampler perf -r 1000 --stats
	_rc=$?
	[ $_rc = 4 ] && skip_ "perf events not allowed here: $(head -1 "$TMPD/$_n.plog")"
	[ $_rc = 0 ] || fail_ "$_n: record --sampler perf failed: $(tail -2 "$TMPD/$_n.plog")"
	grep -q "^sampler: perf" "$TMPD/$_n.plog" || fail_ "$_n: --stats does not name the perf sampler"
	grep -E "^(Samples|perf records|perf tick copies|errors)" "$TMPD/$_n.plog" | sed "s/^/$_n: /"
	# NEED_IF_KEPT=1: the names only where most samples were kept; a run
	# whose heap reads mostly tore (a quiet machine: the target ran on
	# long before the walk) loses paths to counted errors, its kept
	# stacks are still judged (docs/sampling.md §8)
	if [ -n "${NEED_IF_KEPT:-}" ]; then
		_ke=$(sed -n 's/^Samples: \([0-9]*\)  *Errors: \([0-9]*\).*/\1 \2/p' "$TMPD/$_n.plog" | tail -1)
		_k=${_ke% *} _e=${_ke#* }
		_k=${_k:-0} _e=${_e:-0}
		if [ $((_k * 2)) -lt $((_k + _e)) ]; then
			echo "$_n: $_k kept, $_e errors: names not asked (most samples torn)"
			set --
		fi
	fi
	# NEED_IF_TICK=1: the names only where the eBPF tick copy (the Lua
	# state copied at the tick, docs/sampling.md §8) served most perf
	# samples and most were kept; without it (a build without libbpf, no
	# CAP_BPF) the heap is read after the sample and a quiet machine
	# tears most coroutine samples: only the kept stacks are judged
	if [ -n "${NEED_IF_TICK:-}" ]; then
		_tk=$(sed -n 's/^perf tick copies (eBPF): \([0-9]*\) samples walked over one.*/\1/p' "$TMPD/$_n.plog")
		_ke=$(sed -n 's/^Samples: \([0-9]*\)  *Errors: \([0-9]*\).*/\1 \2/p' "$TMPD/$_n.plog" | tail -1)
		_k=${_ke% *} _e=${_ke#* }
		_k=${_k:-0} _e=${_e:-0} _tk=${_tk:-0}
		if [ $((_tk * 2)) -lt $((_k + _e)) ] || [ $((_k * 2)) -lt $((_k + _e)) ]; then
			echo "$_n: $_tk of $((_k + _e)) samples over a tick copy, $_k kept: names not asked"
			set --
		fi
	fi
	_args="--noise $TMPD/$_n.blk2"
	for _x in "$@"; do _args="$_args --need $_x"; done
	python3 "$srcdir/tests/perf_compare.py" "$TMPD/$_n.perf" "$TMPD/$_n.blk" --max-bad "$_max" $_args |
		sed "s/^/$_n: /"
	[ "$(python3 "$srcdir/tests/perf_compare.py" "$TMPD/$_n.perf" "$TMPD/$_n.blk" --max-bad "$_max" $_args \
		>/dev/null; echo $?)" = 0 ] || fail_ "$_n: perf stacks differ from --blocking"
}

