#!/usr/bin/env bash
# bench/fnvbench: its two FNV-1a paths agree on a sample snapshot file and on
# random bytes; bad options and unreadable files are refused (exit 2, one
# line naming the option's range or the file).
#   fnvbench_test.sh FNVBENCH SOURCE_DIR
set -euo pipefail
bin="$1"
src="$2"
source "$(dirname "$0")/expect_lib.sh"
use_temp_dir
tmp="$T"
snap="$src/samples/healthy/snapshots/full-1500/node-0.snap"
out=$("$bin" --rounds 1 "$snap")
echo "$out" | grep -q "^bytes 13703, " || fail "sample: $out"
echo "$out" | grep -q "values agree (" || fail "sample: $out"
out=$("$bin" --mib 3 --rounds 1)
echo "$out" | grep -q "^bytes 3145728, " || fail "random bytes: $out"
echo "$out" | grep -q "values agree (" || fail "random bytes: $out"

refused() {  # expected-message args...: exit 2 and exactly that line
  local want="$1"
  shift
  set +e
  expect_rc 2 "" "$bin" "$@"
  set -e
  [ "$(cat "$T/err")" = "$want" ] || fail "$*: said '$(cat "$T/err")', expected '$want'"
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
