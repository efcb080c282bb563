#!/usr/bin/env bash
# bench/fnvbench: its two FNV-1a paths agree on a sample snapshot file and on
# random bytes; bad options and unreadable files are refused (exit 2, one
# line naming the option's range or the file).
#   fnvbench_test.sh FNVBENCH SOURCE_DIR
set -euo pipefail
bin="$1"
src="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
snap="$src/samples/healthy/snapshots/full-1500/node-0.snap"
out=$("$bin" --rounds 1 "$snap")
echo "$out" | grep -q "^bytes 13703, " || fail "sample: $out"
echo "$out" | grep -q "values agree (" || fail "sample: $out"
out=$("$bin" --mib 3 --rounds 1)
echo "$out" | grep -q "^bytes 3145728, " || fail "random bytes: $out"
echo "$out" | grep -q "values agree (" || fail "random bytes: $out"

refused() {  # expected-message args...
  local want="$1"
  shift
  set +e
  err=$("$bin" "$@" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "$*: exit $rc, expected 2"
  [ "$err" = "$want" ] || fail "$*: said '$err', expected '$want'"
}
mkdir "$tmp/dir"
mkfifo "$tmp/fifo"
usage="usage: fnvbench [--mib N | FILE] [--rounds N]"
for bad in 0 4097 abc 5x ""; do refused "fnvbench: --mib wants 1 to 4096" --mib "$bad"; done
for bad in 0 1001 x; do refused "fnvbench: --rounds wants 1 to 1000" --rounds "$bad"; done
refused "$usage" --bogus
refused "$usage" --mib
refused "$usage" "$snap" "$snap"
refused "fnvbench: $tmp/dir: not a regular file" "$tmp/dir"
refused "fnvbench: $tmp/fifo: not a regular file" "$tmp/fifo"
refused "fnvbench: $tmp/missing: no such file" "$tmp/missing"
echo "fnvbench_test: ok"
