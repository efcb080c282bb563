#!/usr/bin/env bash
# Crash sweep of the real cluster: RUNS runs of SECONDS each. In every run a
# 3-node cluster on the loopback (--sync group, or always on odd seeds)
# takes a cut every 200 ms and a full snapshot every second (every third run:
# one after each restart, with WAL retention after-snapshot) under `walcut load`
# while a random node (the initiator included) is killed with SIGKILL at a
# random moment and restarted a moment later, again and again. After the run:
#  - every cut is consistent, or inconsistent with its reason recorded, and a
#    consistent cut has no finding;
#  - `walcut check --level restore` restores every consistent cut the WAL
#    holds, with its fingerprints and the bank total;
#  - `walcut history check` passes (runs that keep their whole WAL): every
#    consistent cut restores, holds every transaction acknowledged before it
#    started, none that started after it finished, and equals the history's
#    state; nothing acknowledged is lost.
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
  # Full snapshots every second; every third run instead takes one after
  # each restart and deletes the WAL it makes unnecessary (small segments,
  # so that it does), which the history check cannot follow: check --level
  # restore checks those runs' cuts instead. Such a run ends with a cut
  # taken after its last snapshot: the cuts before it lose their WAL.
  snap=(--full-snapshot-every 1s)
  retain=0
  ((seed % 3 == 0)) && retain=1 && snap=(--wal-retention after-snapshot --segment-size 16384)
  if ! "$W" cluster up "$d" --nodes 3 --accounts 200 --cut-every 200ms --sync $sync "${snap[@]}" -q; then
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
    ((retain)) && "$W" cluster snapshot "$d" --timeout 2s -q >/dev/null 2>&1
  done
  wait "$load"
  if ((retain)); then
    # A cut the last recovery still disturbs may be inconsistent: up to 5.
    for ((i = 0; i < 5; i++)); do "$W" cut start "$d" >"$d.cut" 2>&1 && break; done
    if ((i == 5)); then echo "crash-sweep: seed $seed: no consistent cut after the load: $(cat "$d.cut")" >&2; exit 1; fi
  fi
  "$W" cluster down "$d" -q >/dev/null 2>&1
  current=""
  if ! grep -q '"full_snapshots"' "$d/cluster.json"; then
    echo "crash-sweep: seed $seed: no full snapshot was taken (kept: $d)" >&2; exit 1
  fi
  if ! python3 "$here/sweep_verify.py" "$W" "$d" "$d.hist"; then
    echo "crash-sweep: seed $seed: FAILED after $kills kills (kept: $d)" >&2; exit 1
  fi
  echo "crash-sweep: seed $seed: ok (--sync $sync ${snap[*]}, $kills kills; $(head -1 "$d.load" | sed 's/^.*: //'))"
  rm -rf "$d" "$d.hist" "$d.load" "$d.restart" "$d.cut"
done
echo "crash-sweep: $RUNS runs passed"
