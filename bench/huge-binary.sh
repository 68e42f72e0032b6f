#!/bin/sh
# bench/huge-binary.sh: what one `dump` costs on a huge executable (issue
# 19 point 4). Builds (once, cached in DIR) tests/targets/puc_static.c
# linked statically with liblua5.X.a and an assembly file of NFUNCS
# functions with symbols and CFI (a .symtab and .eh_frame_hdr of NFUNCS
# entries) plus BLOB_MB MiB of code bytes and DATA_MB MiB of .data that
# a constructor fills with pointers into the heap, one per 4 KiB page of
# a 64 MiB block (as a big program's globals point at its objects), then
# runs it and times `luaspy dump` (wall and CPU) and counts its
# process_vm_readv calls (strace -c -f).
#
#   bench/huge-binary.sh [-B] [-n NFUNCS] [-b BLOB_MB] [-d DATA_MB] [-l 5.3|5.4] [-r RUNS] [DIR]
#
# -B: only build (when not cached) and print the binary's path
# (tests/host-huge-binary.test). The binary runs `puc_static SECS`.
#
# Needs cc, liblua5.X-dev (the .a), and for the measurement strace and
# GNU time (/usr/bin/time). Defaults: 200000 functions, 100 MiB code, 16 MiB data, Lua 5.3, 5 runs, DIR
# /tmp/luaspy-huge. LUASPY (default ./luaspy) is the binary measured.
# Output: the binary's size, then per run the wall time of one dump and
# its process_vm_readv count.
set -eu
n=200000 blob=100 data=16 lv=5.3 runs=5 build_only=
while getopts Bn:b:d:l:r: o; do
	case $o in
	B) build_only=1 ;; n) n=$OPTARG ;; b) blob=$OPTARG ;; d) data=$OPTARG ;; l) lv=$OPTARG ;; r) runs=$OPTARG ;;
	*) echo "usage: $0 [-B] [-n NFUNCS] [-b BLOB_MB] [-d DATA_MB] [-l 5.3|5.4] [-r RUNS] [DIR]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
dir=${1:-/tmp/luaspy-huge}
top=$(cd "$(dirname "$0")/.." && pwd)
LUASPY=${LUASPY:-./luaspy}
exe=$dir/huge-$lv-$n-$blob-$data
mkdir -p "$dir"
if [ ! -x "$exe" ]; then
	t0=$(date +%s)
	awk -v n="$n" -v blob="$blob" 'BEGIN {
		print "\t.text"
		for (i = 0; i < n; i++) {
			printf "\t.globl huge_fn_%d\n\t.type huge_fn_%d, @function\nhuge_fn_%d:\n", i, i, i
			printf "\t.cfi_startproc\n\tpushq %%rbp\n\t.cfi_def_cfa_offset 16\n"
			printf "\tmovl $%d, %%eax\n\tpopq %%rbp\n\t.cfi_def_cfa_offset 8\n\tret\n", i
			printf "\t.cfi_endproc\n\t.size huge_fn_%d, .-huge_fn_%d\n", i, i
		}
		printf "\t.globl huge_blob\n\t.type huge_blob, @function\nhuge_blob:\n"
		printf "\t.fill %d, 1, 0x90\n\tret\n\t.size huge_blob, .-huge_blob\n", blob * 1048576
		print "\t.section .note.GNU-stack,\"\",@progbits"
	}' >"$dir/huge.s"
	cat >"$dir/huge_data.c" <<EOC
#include <stdlib.h>
#define NPTR ($data * 131072)
void *huge_data[NPTR] = { (void *)1 }; /* in .data: file-backed, rw */
__attribute__((constructor)) static void huge_fill(void)
{
	char *h = malloc(64 << 20);
	for (long i = 0; h && i < NPTR; i++)
		huge_data[i] = h + (i * 4096) % (64 << 20) + 64;
}
EOC
	# shellcheck disable=SC2046
	cc -O1 -g $(pkg-config --cflags "lua$lv") -o "$exe.tmp" "$top/tests/targets/puc_static.c" "$dir/huge.s" "$dir/huge_data.c" \
		"/usr/lib/x86_64-linux-gnu/liblua$lv.a" -lm -ldl >&2
	mv "$exe.tmp" "$exe"
	rm -f "$dir/huge.s"
	echo "built $exe in $(($(date +%s) - t0)) s" >&2
fi
[ -z "$build_only" ] || { echo "$exe"; exit 0; }
echo "binary: $(du -m "$exe" | cut -f1) MB, $n functions, $(size -A "$exe" | awk '$1 == ".text" || $1 == ".data" { printf "%s %d MB ", $1, $2 / 1048576 }')"
"$exe" 600 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT INT TERM
sleep 1
i=0
while [ $i -lt "$runs" ]; do
	i=$((i + 1))
	/usr/bin/time -f '%e %U %S' -o "$dir/time.$i" "$LUASPY" dump --pid $pid >"$dir/dump.$i" 2>&1 ||
		{ echo "dump failed:"; cat "$dir/dump.$i"; }
	reads=$(strace -f -c -e trace=process_vm_readv -o "$dir/strace.$i" "$LUASPY" dump --pid $pid >/dev/null 2>&1;
		awk '$NF == "process_vm_readv" { print $4 }' "$dir/strace.$i")
	awk -v i=$i -v r="${reads:-0}" '{ printf "run %d: dump %.3f s wall, %.3f s CPU, %s process_vm_readv\n", i, $1, $2 + $3, r }' "$dir/time.$i"
done
echo "(wall time includes waiting for a CPU on a loaded machine; CPU time does not)"
echo "last dump:"
cat "$dir/dump.$runs"
