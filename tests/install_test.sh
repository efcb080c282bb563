#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then the installed copy as a
# user and another program see it: exactly the expected files; every
# installed header compiles on its own with nothing but the prefix on the
# include path; examples/ configured and built against the prefix through
# find_package(walcut), shared and static; its WAL checked by the installed
# walcut (verify: clean; dump: the records the example read back, line for
# line); and the example built once more through pkg-config (walfmt.pc).
#
#   tests/install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/walcut-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }

# The installed files, exactly.
libdir=$(sed -nE 's/^libdir=\$\{prefix\}\///p' "$build/walfmt.pc")
version=$(sed -nE 's/^Version: //p' "$build/walfmt.pc")
{
  echo bin/walcut
  for h in $(awk '$2 == "INSTALLED" { print $1 }' "$build/include-rules.txt"); do echo "include/$h"; done
  for p in "$src"/docs/man/*.1; do echo "share/man/man1/$(basename "$p").gz"; done
  echo share/bash-completion/completions/walcut
  echo share/zsh/site-functions/_walcut
  echo share/doc/walcut/FORMAT.md
  echo "$libdir/libwalfmt.a"
  echo "$libdir/libwalfmt.so"
  echo "$libdir/libwalfmt.so.1"
  echo "$libdir/libwalfmt.so.$version"
  echo "$libdir/pkgconfig/walfmt.pc"
  for f in walcutConfig.cmake walcutConfigVersion.cmake walcutTargets.cmake; do echo "$libdir/cmake/walcut/$f"; done
} | sort >"$tmp/want"
(cd "$prefix" && find . \( -type f -o -type l \) | sed 's#^\./##' | grep -v '^'"$libdir"'/cmake/walcut/walcutTargets-.*\.cmake$' | sort) >"$tmp/got"
diff -u "$tmp/want" "$tmp/got" || fail "installed files differ from the expected list (- expected, + installed)"
echo "ok: $(wc -l <"$tmp/got") files installed"

"$prefix/bin/walcut" --version >/dev/null || fail "installed walcut --version"
"$prefix/bin/walcut" verify "$src/samples/healthy" >/dev/null || fail "installed walcut verify samples/healthy"
# Fault injection is for the test build alone (walcut_seams): the installed
# walcut writes its file whatever WALCUT_FAIL_IO_AT says.
WALCUT_FAIL_IO_AT=1 "$prefix/bin/walcut" scan "$src/samples/healthy/node-0" --out "$tmp/summary.json" >/dev/null ||
  fail "installed walcut scan --out with WALCUT_FAIL_IO_AT=1: the fault was injected"
[ -s "$tmp/summary.json" ] || fail "installed walcut scan --out with WALCUT_FAIL_IO_AT=1 wrote nothing"

# Each installed header on its own, with the prefix as the only extra
# include directory (not the source tree).
cxx=${CXX:-c++}
for h in "$prefix"/include/walfmt/*.h; do
  echo "#include <walfmt/$(basename "$h")>" |
    "$cxx" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$prefix/include" -x c++ - 2>"$tmp/hdr.err" ||
    { cat "$tmp/hdr.err" >&2; fail "installed header walfmt/$(basename "$h") does not compile on its own"; }
done
echo "ok: every installed header compiles on its own"

# examples/ against the prefix, through find_package(walcut). A sanitizer
# build's library needs the sanitizer runtime in the program as well.
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
san=""
if grep -q '^WALCUT_SANITIZE:BOOL=ON' "$build/CMakeCache.txt"; then san="-fsanitize=address,undefined"; fi
cmake -S "$src/examples" -B "$tmp/example" "${gen[@]}" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$san" \
  >"$tmp/example.log" 2>&1 || { cat "$tmp/example.log" >&2; fail "configuring examples/ against the prefix"; }
cmake --build "$tmp/example" >>"$tmp/example.log" 2>&1 || { cat "$tmp/example.log" >&2; fail "building examples/"; }
# The shared build finds libwalfmt.so.1 in the prefix (its run path), not elsewhere.
ldd "$tmp/example/wal_roundtrip" >"$tmp/ldd.shared"
ldd "$tmp/example/wal_roundtrip_static" >"$tmp/ldd.static"
grep -q "$prefix/$libdir/libwalfmt.so.1" "$tmp/ldd.shared" ||
  { cat "$tmp/ldd.shared" >&2; fail "wal_roundtrip does not load the installed libwalfmt.so.1"; }
if grep -q libwalfmt "$tmp/ldd.static"; then fail "wal_roundtrip_static loads libwalfmt.so"; fi

# Its WAL, read by the installed walcut: verify is clean, dump shows the
# records the example read back (position, type, description), in order.
check_wal() {  # BINARY OUT
  "$1" "$2" >"$2.out" 2>"$2.err" || { cat "$2.err" >&2; fail "$(basename "$1") $2: exit $?"; }
  grep -q "^11 records in 4 segments" "$2.out" || { cat "$2.out" >&2; fail "$(basename "$1"): unexpected summary"; }
  "$prefix/bin/walcut" verify "$2" >"$2.verify" || { cat "$2.verify" >&2; fail "walcut verify $2"; }
  grep -q "verified 1 node, 4 segments, .* 11 records: OK" "$2.verify" || { cat "$2.verify" >&2; fail "walcut verify $2: not OK"; }
  "$prefix/bin/walcut" dump "$2" >"$2.dump" || fail "walcut dump $2"
  awk '{ line = $3 " " $4; for (i = 9; i <= NF; i++) line = line " " $i; print line }' "$2.dump" >"$2.dump.short"
  sed '$d' "$2.out" | diff -u - "$2.dump.short" || fail "walcut dump $2 differs from what $(basename "$1") read back"
}
check_wal "$tmp/example/wal_roundtrip" "$tmp/wal-shared"
check_wal "$tmp/example/wal_roundtrip_static" "$tmp/wal-static"
cmp "$tmp/wal-shared/node-0/wal/0000000000000003.wal" "$tmp/wal-static/node-0/wal/0000000000000003.wal" ||
  fail "the shared and the static library wrote different bytes"
echo "ok: examples/ built with find_package(walcut); its WAL verified and dumped by the installed walcut"

# The same program through pkg-config.
if command -v pkg-config >/dev/null; then
  flags=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --cflags --libs walfmt) || fail "pkg-config walfmt"
  incdir=$(PKG_CONFIG_PATH="$prefix/$libdir/pkgconfig" pkg-config --variable=includedir walfmt)
  [ "$(realpath "$incdir")" = "$(realpath "$prefix/include")" ] || fail "walfmt.pc: includedir $incdir is not $prefix/include"
  # shellcheck disable=SC2086
  "$cxx" -std=c++20 $san -o "$tmp/pc_example" "$src/examples/wal_roundtrip.cpp" $flags || fail "building with pkg-config walfmt"
  LD_LIBRARY_PATH="$prefix/$libdir" "$tmp/pc_example" "$tmp/wal-pc" >/dev/null || fail "the pkg-config build failed"
  "$prefix/bin/walcut" verify "$tmp/wal-pc" >/dev/null || fail "walcut verify of the pkg-config build's WAL"
  echo "ok: built with pkg-config walfmt"
else
  fail "pkg-config not found (scripts/deps.sh installs pkgconf)"
fi
