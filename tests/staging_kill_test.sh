#!/usr/bin/env bash
# A real `walcut restore` killed while it writes: with SIGKILL at several
# points (OUT is then absent or complete and identical to a clean restore,
# never partial; the next restore names the leftovers and --clean-stale
# removes them), with SIGINT, SIGTERM and SIGHUP (exit 128+N, nothing left
# behind), and two restores into one OUT at once (one wins, the other fails at
# once with exit 3 naming the winner, nothing left behind).
#
#   tests/staging_kill_test.sh WALCUT_BIN
set -euo pipefail
set -m  # background jobs keep SIGINT (a non-interactive shell would ignore it in them)
w=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
fail=0
bad() { echo "FAIL: $*" >&2; fail=1; }
leftovers() { (cd "$t" && ls -A | grep -E '^\.(out|race)[^/]*\.(tmp-|lock)' || true); }

# Big enough that a restore takes a while (-j1), small enough to stay quick.
"$w" run "$t/c" --nodes 3 --txs 12000 --accounts 100000 --cuts 3 --seed 5 >/dev/null
"$w" restore "$t/c" --latest --out "$t/ref" -j1 >/dev/null

same_as_ref() {  # OUT: complete, the node files byte for byte those of the clean restore
  local out=$1
  [ -f "$out/manifest.json" ] || { bad "$out exists without manifest.json (partial)"; return; }
  for f in "$t"/ref/node-*.snap; do
    cmp -s "$f" "$out/$(basename "$f")" || bad "$out/$(basename "$f") differs from the clean restore (partial)"
  done
  [ "$(ls "$out" | wc -l)" = "$(ls "$t/ref" | wc -l)" ] || bad "$out: $(ls "$out" | tr '\n' ' ') is not the clean restore's file list"
}

wait_for_staging() {  # PID NAME: until the staging directory of NAME appears (or the process ends)
  local i
  for i in $(seq 1 2000); do
    if ls -A "$t" | grep "^\.$2\.tmp-$1-" >/dev/null; then return 0; fi
    kill -0 "$1" 2>/dev/null || return 0
    sleep 0.002
  done
}

# 1. SIGKILL at several points: right away, then at growing delays after the
#    staging directory appeared.
killed_mid=0 complete=0
for delay in start 0 0.02 0.05 0.1 0.2 0.4 0.8; do
  rm -rf "$t/out"
  "$w" restore "$t/c" --latest --out "$t/out" -j1 >/dev/null 2>&1 &
  pid=$!
  if [ "$delay" = start ]; then sleep 0.005; else wait_for_staging "$pid" out; sleep "$delay"; fi
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -e "$t/out" ]; then
    same_as_ref "$t/out"
    complete=$((complete + 1))
  else
    left=$(leftovers)
    if [ -n "$left" ]; then
      killed_mid=$((killed_mid + 1))
      # The next restore into that directory names every leftover, on stderr, and still succeeds.
      "$w" restore "$t/c" --latest --out "$t/other" -j1 >/dev/null 2>"$t/err" || bad "restore after kill -9 (delay $delay) failed: $(cat "$t/err")"
      for name in $left; do
        grep -q "walcut: note: stale .*$t/$name" "$t/err" || bad "delay $delay: $name not named; stderr: $(cat "$t/err")"
      done
      same_as_ref "$t/other"
      rm -rf "$t/other"
      # --clean-stale removes them.
      "$w" restore "$t/c" --latest --out "$t/other" -j1 --clean-stale >/dev/null 2>"$t/err" || bad "restore --clean-stale failed: $(cat "$t/err")"
      [ -z "$(leftovers)" ] || bad "delay $delay: --clean-stale left $(leftovers)"
      for name in $left; do grep -q "walcut: removed stale $t/$name" "$t/err" || bad "delay $delay: removal of $name not said"; done
      rm -rf "$t/other"
    fi
  fi
done
[ "$killed_mid" -ge 2 ] || bad "only $killed_mid of the kills hit a restore while it was writing (need 2): the restore is too quick"
echo "SIGKILL: $killed_mid killed while writing, $complete complete"

# 2. SIGINT, SIGTERM, SIGHUP: the staging directory and the lock removed, exit 128+N.
for sig in INT TERM HUP; do
  rm -rf "$t/out"
  "$w" restore "$t/c" --latest --out "$t/out" -j1 >/dev/null 2>"$t/err" &
  pid=$!
  wait_for_staging "$pid" out
  sleep 0.02
  kill "-$sig" "$pid"
  rc=0
  wait "$pid" || rc=$?
  want=$((128 + $(kill -l "$sig")))
  if [ -e "$t/out" ]; then
    # The signal came after the rename: the restore is complete (and the exit says so or the signal).
    same_as_ref "$t/out"
  else
    [ "$rc" = "$want" ] || bad "SIG$sig: exit $rc, expected $want"
    grep -q "removed $t/.out.tmp-$pid-" "$t/err" || bad "SIG$sig: removal not said: $(cat "$t/err")"
  fi
  [ -z "$(leftovers)" ] || bad "SIG$sig left $(leftovers)"
done

# 3. Two restores into one OUT: the second fails at once (exit 3, naming the
#    first), the first completes, nothing is left behind.
rm -rf "$t/race"
"$w" restore "$t/c" --latest --out "$t/race" -j1 >/dev/null 2>&1 &
pid=$!
wait_for_staging "$pid" race
rc=0
start=$(date +%s%N)
"$w" restore "$t/c" --latest --out "$t/race" -j1 >/dev/null 2>"$t/err" || rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
# Which case it was is told by the second's answer, not by whether the first
# is still running afterwards: the first may finish while the second runs.
case "$rc" in
  3)
    grep -q "another walcut (process $pid) is writing it" "$t/err" || bad "the loser does not name the winner: $(cat "$t/err")"
    [ "$ms" -lt 2000 ] || bad "the loser took $ms ms: not failing fast" ;;
  2)
    echo "note: the first restore finished before the second looked at OUT" >&2
    grep -q "already exists; refusing to overwrite" "$t/err" || bad "restore into an existing OUT: $(cat "$t/err")" ;;
  *) bad "second restore into one OUT: exit $rc, expected 3 (or 2 once the first is done): $(cat "$t/err")" ;;
esac
wait "$pid" || bad "the first restore into one OUT failed"
same_as_ref "$t/race"
[ -z "$(leftovers)" ] || bad "two restores into one OUT left $(leftovers)"

[ "$fail" = 0 ] && echo "ok"
exit "$fail"
