#!/bin/sh
# puc-rows.sh: compare luaspy's PUC layout row for a release with the
# offsets compiled from that release's own headers (docs/puc-lua.md §15).
# Usage: docs/tools/puc-rows.sh LUA_SRC_DIR MINOR PATCH [BUILDDIR]
# LUA_SRC_DIR holds lstate.h/lobject.h (a release tarball's src/, or a
# checkout of github.com/lua/lua at tag v5.MINOR.PATCH). BUILDDIR is the
# luaspy build directory holding tests/t_vm_puc (default: .).
# Exit 0 and "N fields match" when equal; otherwise prints the diff
# (< row, > source) and exits 1.
set -e
[ $# -ge 3 ] || { echo "usage: $0 LUA_SRC_DIR MINOR PATCH [BUILDDIR]" >&2; exit 2; }
src=$1 minor=$2 patch=$3 build=${4:-.}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -w -I"$src" -o "$tmp/puc_offsets" "$here/puc_offsets.c"
"$tmp/puc_offsets" >"$tmp/source"
"$build/tests/t_vm_puc" --rows "$minor" "$patch" >"$tmp/row" ||
	{ echo "no luaspy row for 5.$minor.$patch" >&2; exit 1; }
if diff "$tmp/row" "$tmp/source" >"$tmp/diff"; then
	echo "5.$minor.$patch: $(wc -l <"$tmp/row") fields match"
else
	grep '^[<>]' "$tmp/diff"
	exit 1
fi
