#!/usr/bin/env bash
# The Debian packages: cpack -G DEB makes walcut, libwalfmt1 and
# libwalfmt-dev; their control fields name the right dependencies; apt
# accepts the three together on this system (a simulated install: nothing is
# changed); extracted with dpkg -x into a temporary root, the files are where
# README.md's "Install" says, the installed walcut runs and checks a sample,
# its manual pages render, and the pkg-config file and the shared library
# resolve inside that root. Where the test may mount (root, unshare), the
# packages are also installed for real with dpkg -i, and removed with
# dpkg -r, in a throwaway root: an overlay over / in a private mount
# namespace, all of whose writes are discarded.
#
#   tests/package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d /tmp/walcut-package-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# Pipelines end in `grep ... >/dev/null`, never `grep -q`: with pipefail, grep -q
# leaving at its first match can kill the writer (tar -t) by SIGPIPE and fail a
# pipeline whose answer was yes.

cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log" >&2; fail "cpack -G DEB"; }
version=$(sed -nE 's/^Version: //p' "$build/walfmt.pc")
arch=$(dpkg --print-architecture)
debs=()
for p in walcut libwalfmt1 libwalfmt-dev; do
  deb=$tmp/pkg/${p}_${version}_${arch}.deb
  [ -f "$deb" ] || { ls "$tmp/pkg" >&2; fail "no $(basename "$deb")"; }
  debs+=("$deb")
  [ "$(dpkg-deb -f "$deb" Package)" = "$p" ] || fail "$deb: Package is not $p"
done
ls "$tmp"/pkg/*.deb | wc -l | grep -x 3 >/dev/null || fail "cpack made other packages than the three"

field() { dpkg-deb -f "$tmp/pkg/${1}_${version}_${arch}.deb" "$2"; }
needs() {  # PACKAGE DEPENDENCY
  field "$1" Depends | tr ',' '\n' | sed -E 's/^ +//; s/ .*//' | grep -x "$2" >/dev/null ||
    fail "$1 does not depend on $2 (Depends: $(field "$1" Depends))"
}
for d in libc6 libstdc++6 libfmt9 libzstd1 libxxhash0 libssl3 libcurl4; do needs walcut "$d"; done
for d in libc6 libstdc++6 libfmt9 libzstd1; do needs libwalfmt1 "$d"; done
for d in libfmt-dev libzstd-dev; do needs libwalfmt-dev "$d"; done
field libwalfmt-dev Depends | grep "libwalfmt1 (= $version)" >/dev/null || fail "libwalfmt-dev does not depend on libwalfmt1 (= $version)"
dpkg-deb --ctrl-tarfile "$tmp/pkg/libwalfmt1_${version}_${arch}.deb" | tar -t | grep -x './shlibs' >/dev/null ||
  fail "libwalfmt1 has no shlibs file"
echo "ok: three packages; Depends: $(field walcut Depends)"

# apt resolves the three on this system without installing anything.
if command -v apt-get >/dev/null; then
  apt-get install -s -q "${debs[@]}" >"$tmp/apt.log" 2>&1 || { cat "$tmp/apt.log" >&2; fail "apt-get install -s refuses the packages"; }
  for p in walcut libwalfmt1 libwalfmt-dev; do
    grep -q "^Conf $p ($version " "$tmp/apt.log" || { cat "$tmp/apt.log" >&2; fail "apt-get install -s does not configure $p"; }
  done
  echo "ok: apt-get install -s accepts them"
fi

root=$tmp/root
for deb in "${debs[@]}"; do dpkg -x "$deb" "$root"; done
for f in usr/bin/walcut usr/share/man/man1/walcut.1.gz usr/share/man/man1/walcut-check.1.gz \
         usr/share/bash-completion/completions/walcut usr/share/zsh/vendor-completions/_walcut \
         usr/lib/libwalfmt.so.1 usr/lib/libwalfmt.so usr/lib/libwalfmt.a usr/include/walfmt/writer.h \
         usr/lib/cmake/walcut/walcutConfig.cmake usr/lib/pkgconfig/walfmt.pc usr/share/doc/walcut/FORMAT.md; do
  [ -e "$root/$f" ] || fail "/$f is not in the packages"
done
[ "$(find "$root/usr/share/man/man1" -name '*.1.gz' | wc -l)" = "$(ls "$src"/docs/man/*.1 | wc -l)" ] ||
  fail "the packages do not hold every page of docs/man"

w=$root/usr/bin/walcut
ldd "$w" >"$tmp/ldd" 2>&1
if grep -q "not found" "$tmp/ldd"; then cat "$tmp/ldd" >&2; fail "the packaged walcut misses a library"; fi
# libcurl is loaded only for S3 (dlopen), not at every start-up.
if grep -q "libcurl" "$tmp/ldd"; then cat "$tmp/ldd" >&2; fail "the packaged walcut links libcurl"; fi
"$w" --version | grep "$version" >/dev/null || fail "packaged walcut --version does not say $version"
"$w" verify "$src/samples/healthy" >"$tmp/verify" || { cat "$tmp/verify" >&2; fail "packaged walcut verify samples/healthy"; }
set +e; "$w" verify "$src/samples/corrupted-segment" >/dev/null 2>&1; rc=$?; set -e
[ $rc = 1 ] || fail "packaged walcut verify samples/corrupted-segment: exit $rc, expected 1"
"$w" cuts "$src/samples/healthy" >/dev/null || fail "packaged walcut cuts samples/healthy"
# No fault injection in what is packaged (it is walcut_seams', a test build's).
WALCUT_FAIL_IO_AT=1 "$w" scan "$src/samples/healthy/node-0" --out "$tmp/summary.json" >/dev/null ||
  fail "packaged walcut scan --out with WALCUT_FAIL_IO_AT=1: the fault was injected"
[ -s "$tmp/summary.json" ] || fail "packaged walcut scan --out with WALCUT_FAIL_IO_AT=1 wrote nothing"
out=$(zcat "$root/usr/share/man/man1/walcut-verify.1.gz" | LC_ALL=C groff -man -ww -Tutf8 2>&1) || fail "man page render"
echo "$out" | grep "walcut-verify - check the integrity" >/dev/null || fail "walcut-verify(1) does not render its NAME"
ldd "$root/usr/lib/libwalfmt.so.1" >"$tmp/ldd.lib" 2>&1
if grep -q "not found" "$tmp/ldd.lib"; then cat "$tmp/ldd.lib" >&2; fail "libwalfmt.so.1 misses a library"; fi
inc=$(PKG_CONFIG_PATH="$root/usr/lib/pkgconfig" pkg-config --variable=includedir walfmt)
[ "$(realpath "$inc")" = "$root/usr/include" ] || fail "walfmt.pc in the package: includedir $inc"
echo "ok: dpkg -x into a temporary root; the packaged walcut verifies samples/healthy"

# dpkg -i and dpkg -r for real, in a throwaway copy-on-write root.
ov=$tmp/overlay
mkdir -p "$ov/upper" "$ov/work" "$ov/root"
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
   unshare -m --propagation private sh -c "mount -t overlay overlay -o lowerdir=/,upperdir=$ov/upper,workdir=$ov/work $ov/root" 2>/dev/null; then
  mkdir -p "$ov/upper/root/walcut-test"
  cp "${debs[@]}" "$ov/upper/root/walcut-test/"
  cp -r "$src/samples/healthy" "$ov/upper/root/walcut-test/healthy"
  unshare -m --propagation private sh -c '
    set -e
    ov=$1
    mount -t overlay overlay -o lowerdir=/,upperdir="$ov/upper",workdir="$ov/work" "$ov/root"
    mount -t proc proc "$ov/root/proc"
    chroot "$ov/root" sh -c "
      set -e
      cd /root/walcut-test
      dpkg -i ./*.deb
      for p in walcut libwalfmt1 libwalfmt-dev; do dpkg -s \$p | grep -qx \"Status: install ok installed\"; done
      walcut verify healthy
      test -f /usr/share/man/man1/walcut-restore.1.gz
      dpkg -r walcut libwalfmt-dev libwalfmt1
      ! test -e /usr/bin/walcut
      ! test -e /usr/lib/libwalfmt.so.1
      ! test -e /usr/include/walfmt"' _ "$ov" >"$tmp/dpkg-i.log" 2>&1 ||
    { cat "$tmp/dpkg-i.log" >&2; fail "dpkg -i / dpkg -r in a throwaway root"; }
  grep -q "^verified 3 nodes, .* OK$" "$tmp/dpkg-i.log" || { cat "$tmp/dpkg-i.log" >&2; fail "the dpkg -i installed walcut did not verify samples/healthy"; }
  echo "ok: dpkg -i, walcut verify, dpkg -r in a throwaway root"
else
  echo "note: no mount namespace here (needs root and unshare): dpkg -i not tried, dpkg -x above only"
fi
