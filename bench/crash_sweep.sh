#!/usr/bin/env bash
# The long crash sweep of the real cluster (issue: at least 500 runs): the
# same runs as the test command's small sweep (scripts/crash-sweep.sh: a
# 3-node cluster on the loopback, cuts every 200 ms and full snapshots under
# load (WAL retention in every third run), a random node killed with SIGKILL
# and restarted again and again; every cut consistent or inconsistent with
# its reason, every consistent cut restored by `walcut check --level
# restore`, `walcut history check` passes), many more of them. Bounded: RUNS runs of SECONDS each, then it stops; the first failing
# run stops it and keeps its directory.
#   bash bench/crash_sweep.sh [RUNS [SECONDS [SEED]]]     (default 500 runs of 6 s, seed 1000)
# WALCUT=path/to/walcut overrides build/walcut. Prints one line per run and,
# at the end, the totals for bench/RESULTS.md.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WALCUT:-build/walcut}
RUNS=${1:-500}; SECS=${2:-6}; SEED=${3:-1000}
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
bash scripts/crash-sweep.sh "$W" "$RUNS" "$SECS" "$SEED" | tee "$log"
rc=${PIPESTATUS[0]}
kills=$(sed -nE 's/.*ok \(--sync [^,]+, ([0-9]+) kills.*/\1/p' "$log" | awk '{s += $1} END {print s + 0}')
ok=$(grep -c ': ok (' "$log")
echo "crash_sweep: $ok/$RUNS runs passed, $kills SIGKILLs in all, $(($(date +%s) - start)) s (exit $rc)"
exit "$rc"
