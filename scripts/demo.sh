#!/usr/bin/env bash
# Builds walcut and runs its main job on the bundled samples: verify the WAL
# of every node, show what it holds, dump a few records, and show how a torn
# tail and a corrupted segment are reported. Exits non-zero if walcut does
# not give the expected verdict on any sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh >/dev/null
w=build/cli/walcut
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
expect() {  # expect CODE CMD...
  local want=$1; shift
  say "walcut ${*:2}"
  set +e; "$@"; local got=$?; set -e
  echo "(exit $got)"
  [ "$got" = "$want" ] || { echo "demo: expected exit $want, got $got" >&2; exit 1; }
}
expect 0 $w verify samples/synthetic-healthy
expect 0 $w stats samples/synthetic-healthy
expect 0 $w dump --node 0 -n 12 samples/synthetic-healthy
expect 0 $w dump --type cut_start,cut_finish,cut_abort --node 1 samples/synthetic-healthy
expect 0 $w verify samples/synthetic-torn
expect 1 $w verify samples/synthetic-corrupt
