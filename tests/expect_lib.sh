# Shared by shell tests (the real cluster's, the bench tools'): a failure
# message and exit, and expect_rc RC PATTERN COMMAND... (exit code RC and
# PATTERN in stderr; the command's output goes to $T/out and $T/err, so T
# must be set).
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() {
  local rc=$1 pat=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"
  local got=$?
  [ "$got" = "$rc" ] || fail "$* exited $got, expected $rc: $(cat "$T/err")"
  grep -q -- "$pat" "$T/err" || fail "$*: stderr lacks '$pat': $(cat "$T/err")"
}
# A scratch directory in T, removed when the script exits.
use_temp_dir() {
  T=$(mktemp -d)
  trap 'rm -rf "$T"' EXIT
}
