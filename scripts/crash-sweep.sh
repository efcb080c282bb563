#!/usr/bin/env bash
# Crash sweep of the real cluster: RUNS runs of SECONDS each. In every run a
# 3-node cluster on the loopback (--sync group, or always on odd seeds)
# takes a cut every 200 ms under `walcut load`
# while a random node (the initiator included) is killed with SIGKILL at a
# random moment and restarted a moment later, again and again. After the run:
#  - every cut is consistent, or inconsistent with its reason recorded, and a
#    consistent cut has no finding;
#  - `walcut history check` passes: every consistent cut restores, holds
#    every transaction acknowledged before it started, none that started
#    after it finished, and equals the history's state; nothing acknowledged
#    is lost.
# Usage: scripts/crash-sweep.sh WALCUT RUNS SECONDS SEED [WORKDIR]
# Exit 0 when every run passes; 1 at the first failing run (its seed and
# directory are printed, the directory is kept). Each run is bounded in time
# and stops the processes it started, also when interrupted.
set -uo pipefail
W=$1; RUNS=$2; SECS=$3; SEED=$4
WORK=${5:-$(mktemp -d)}
mkdir -p "$WORK"
here=$(cd "$(dirname "$0")" && pwd)
current=""
cleanup() { [ -n "$current" ] && "$W" cluster down "$current" -q >/dev/null 2>&1; }
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

for ((r = 0; r < RUNS; r++)); do
  seed=$((SEED + r))
  RANDOM=$seed
  d="$WORK/run-$seed"
  rm -rf "$d" "$d.hist"
  current="$d"
  # --sync group and --sync always by turns: with both, a commit is
  # acknowledged only once it is on disk, so none may be lost to a SIGKILL.
  sync=group; ((seed % 2)) && sync=always
  if ! "$W" cluster up "$d" --nodes 3 --accounts 200 --cut-every 200ms --sync $sync -q; then
    echo "crash-sweep: seed $seed: cluster up failed ($d)" >&2; exit 1
  fi
  "$W" load "$d" --clients 6 --duration "${SECS}s" --seed "$seed" --history "$d.hist" -q >"$d.load" 2>&1 &
  load=$!
  kills=0
  end=$((SECONDS + SECS))
  # Kill and restart until the load ends (at most one node down at a time).
  while [ $SECONDS -lt $((end - 1)) ] && [ $kills -lt 50 ]; do
    sleep "0.$((RANDOM % 7 + 2))"
    n=$((RANDOM % 3))
    "$W" cluster kill "$d" --node $n -q >/dev/null 2>&1 && kills=$((kills + 1))
    sleep "0.$((RANDOM % 5 + 1))"
    if ! "$W" cluster restart "$d" --node $n -q >"$d.restart" 2>&1; then
      echo "crash-sweep: seed $seed: node $n did not come back: $(cat "$d.restart")" >&2
      kill "$load" 2>/dev/null; wait "$load" 2>/dev/null; exit 1
    fi
  done
  wait "$load"
  "$W" cluster down "$d" -q >/dev/null 2>&1
  current=""
  if ! python3 "$here/sweep_verify.py" "$W" "$d" "$d.hist"; then
    echo "crash-sweep: seed $seed: FAILED after $kills kills (kept: $d)" >&2; exit 1
  fi
  echo "crash-sweep: seed $seed: ok (--sync $sync, $kills kills; $(head -1 "$d.load" | sed 's/^.*: //'))"
  rm -rf "$d" "$d.hist" "$d.load" "$d.restart"
done
echo "crash-sweep: $RUNS runs passed"
