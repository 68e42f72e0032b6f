#!/bin/sh
# .ci/luajit-custom.sh DIR: build Debian's luajit source package with
# non-default options into DIR/luajit-nojit32 (-DLUAJIT_DISABLE_GC64
# -DLUAJIT_DISABLE_JIT -DLUAJIT_SECURITY_STRHASH=0) and DIR/luajit-jit32
# (-DLUAJIT_DISABLE_GC64), for tests/luajit-derive-custom.test. The
# deb-src entry lives in a sources file of its own, removed at the end.
set -eu
dir=$1
src=/etc/apt/sources.list.d/luaspy-ci-src.sources
work=$(mktemp -d /tmp/luajit-custom.XXXXXX)
trap 'rm -f "$src"; rm -rf "$work"' EXIT
printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' >"$src"
apt-get update -q
cd "$work"
apt-get source -q --download-only luajit
dpkg-source -x luajit_*.dsc tree
mkdir -p "$dir"
for v in nojit32 jit32; do
	rm -rf "b-$v"
	cp -a tree "b-$v"
	case $v in
	nojit32) x="-DLUAJIT_DISABLE_GC64 -DLUAJIT_DISABLE_JIT -DLUAJIT_SECURITY_STRHASH=0" ;;
	jit32) x="-DLUAJIT_DISABLE_GC64" ;;
	esac
	make -C "b-$v" -j2 XCFLAGS="$x" >"b-$v.log" 2>&1 || { tail -20 "b-$v.log"; exit 1; }
	cp "b-$v/src/luajit" "$dir/luajit-$v"
done
rm -f "$src"
apt-get update -q
