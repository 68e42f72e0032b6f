dnl LS_REQUIRE_PKG(VAR, pkg-config modules, debian package)
dnl Find MODULES with pkg-config or stop with a message naming the Debian package.
AC_DEFUN([LS_REQUIRE_PKG], [
  PKG_CHECK_MODULES([$1], [$2], [],
    [AC_MSG_ERROR([$2 not found by pkg-config; on Debian install it with: apt-get install $3])])
])
