#!/bin/sh
# lj-offsets.sh: the numbers of a luaspy LuaJIT layout row, compiled
# against a LuaJIT source tree (docs/luajit.md §15, "Adding a release").
# Usage: docs/tools/lj-offsets.sh LUAJIT_SRC_DIR gc64|32 [CFLAGS...]
# LUAJIT_SRC_DIR is the tree's src/ (lj_obj.h, lj_jit.h, lj_dispatch.h).
# Prints "field value" lines in the column order of struct lj_layout.
set -e
[ $# -ge 2 ] || { echo "usage: $0 LUAJIT_SRC_DIR gc64|32 [CFLAGS...]" >&2; exit 2; }
src=$1 mode=$2
shift 2
case $mode in
gc64) refs=-DLUAJIT_ENABLE_GC64 ;;
32) refs=-DLUAJIT_DISABLE_GC64 ;;
*) echo "$0: mode must be gc64 or 32" >&2; exit 2 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
${CC:-cc} -w $refs "$@" -I"$src" -o "$tmp/lj_offsets" "$here/lj_offsets.c"
"$tmp/lj_offsets"
