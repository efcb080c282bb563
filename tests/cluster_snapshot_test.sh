#!/usr/bin/env bash
# Full snapshots and WAL retention on a real cluster (walcut cluster
# snapshot, cluster up --full-snapshot-every / --wal-retention): snapshots
# taken under load without aborting a transaction, their refusals, a node
# killed and restarted from its latest snapshot after the segments holding
# its NODE_START were deleted (its incarnation, hence its transaction ids,
# must not repeat), restores from the snapshots, and the history check with
# periodic snapshots and every segment kept. Every process started here is
# stopped on exit.
# Usage: cluster_snapshot_test.sh WALCUT
set -uo pipefail
W=$1
here=$(cd "$(dirname "$0")" && pwd)
T=$(mktemp -d)
D=$T/r
K=$T/k
cleanup() {
  [ -n "${pid0:-}" ] && kill -CONT "$pid0" 2>/dev/null
  for d in "$D" "$K"; do "$W" cluster down "$d" -q >/dev/null 2>&1; done
  [ -n "${KEEP:-}" ] && echo "kept $T" >&2 || rm -rf "$T"
}
trap cleanup EXIT
# shellcheck source=tests/expect_lib.sh
source "$(dirname "$0")/expect_lib.sh"
incarnation() {  # incarnation NODE: as `cluster status` reports it
  "$W" cluster status "$D" | sed -n "s/^node $1 .*incarnation \([0-9]*\) .*/\1/p"
}
has_node_start() {  # has_node_start NODE INCARNATION: its NODE_START is still in the WAL
  "$W" dump "$D" --node "$1" --type node_start 2>/dev/null | grep -q "incarnation $2\b"
}

# ---- WAL retention: small segments, cuts every 100 ms, snapshots on request.
expect_rc 2 "--wal-retention: 'some' is not keep or after-snapshot" "$W" cluster up "$T/x" --wal-retention some -q
expect_rc 2 "--full-snapshot-every" "$W" cluster up "$T/x" --full-snapshot-every 1ms -q
"$W" cluster up "$D" --nodes 3 --accounts 200 --cut-every 100ms --segment-size 4096 \
  --wal-retention after-snapshot -q || fail "cluster up"
"$W" load "$D" --clients 4 --duration 8s >"$T/load.txt" 2>&1 &
load=$!
sleep 1
"$W" cluster snapshot "$D" --name first >"$T/snap.txt" || fail "cluster snapshot: $(cat "$T/snap.txt")"
grep -q "full snapshot first taken by node 0" "$T/snap.txt" || fail "snapshot printed: $(cat "$T/snap.txt")"
[ "$(grep -c "SNAPSHOT at" "$T/snap.txt")" = 3 ] || fail "snapshot printed: $(cat "$T/snap.txt")"
for n in 0 1 2; do [ -s "$D/snapshots/first/node-$n.snap" ] || fail "no snapshots/first/node-$n.snap"; done

# Refusals: a name taken, a name that is not one, a node down.
expect_rc 2 "has a snapshot named first" "$W" cluster snapshot "$D" --name first
expect_rc 2 "is not a snapshot name" "$W" cluster snapshot "$D" --name ../x
expect_rc 2 "--timeout" "$W" cluster snapshot "$D" --timeout 0s
"$W" cluster kill "$D" --node 1 -q || fail "kill"
expect_rc 3 "node 1 is not up and ready: a full snapshot needs every node" \
  "$W" cluster snapshot "$D" --timeout 500ms
# Node 0 refuses for a second, then is stopped (SIGSTOP) and answers no
# more: the time runs out in a call that gets no answer, and the reason
# node 0 gave before it is the one reported, not that call's.
pid0=$("$W" cluster status "$D" | sed -n 's/^node 0 .*pid \([0-9]*\) .*/\1/p')
[ -n "$pid0" ] || fail "cluster status gives no pid for node 0"
(sleep 1 && kill -STOP "$pid0") &
stopper=$!
expect_rc 3 "no full snapshot could be taken within 3s: node 1 is not up and ready: a full snapshot needs every node$" \
  "$W" cluster snapshot "$D" --timeout 3s
wait "$stopper"
kill -CONT "$pid0"
"$W" cluster restart "$D" --node 1 -q || fail "restart: $(tail -3 "$D/node-1/node.log")"
[ "$(incarnation 1)" = 1 ] || fail "node 1's incarnation after one restart: $(incarnation 1)"
[ "$(cat "$D/node-1/incarnation")" = 1 ] || fail "node-1/incarnation holds $(cat "$D/node-1/incarnation")"

# Snapshots until node 1's NODE_START(1) is gone with the segments before
# them, then a second kill: the restarted node must still know it is
# incarnation 2, and recover from its latest snapshot.
for i in 1 2 3 4 5 6 7 8; do
  has_node_start 1 1 || break
  sleep 0.3
  "$W" cluster snapshot "$D" -q >/dev/null || fail "cluster snapshot $i: $(cat "$T/err")"
done
has_node_start 1 1 && fail "node 1's NODE_START(1) is still in its WAL after 8 snapshots"
"$W" cluster kill "$D" --node 1 -q || fail "second kill"
sleep 0.2
"$W" cluster restart "$D" --node 1 -q || fail "second restart: $(tail -3 "$D/node-1/node.log")"
[ "$(incarnation 1)" = 2 ] || fail "node 1's incarnation after two restarts: $(incarnation 1) (its NODE_START(1) was deleted)"
grep -q "recovered from its latest full snapshot" "$D/node-1/node.log" || fail "node 1 did not recover from a snapshot"
wait $load || fail "load: $(cat "$T/load.txt")"
# Paused transactions wait; none is refused.
grep -q "refused: 0;" "$T/load.txt" || fail "load: $(cat "$T/load.txt")"
"$W" cluster down "$D" -q || fail "cluster down"

for n in 0 1 2; do
  [ -e "$D/node-$n/wal/0000000000000000.wal" ] && fail "node $n still has segment 0 under after-snapshot retention"
done
python3 - "$D/cluster.json" <<'EOF' || fail "cluster.json"
import json, sys
c = json.load(open(sys.argv[1]))
names = [s["name"] for s in c["full_snapshots"]]
assert c["wal_retention"] == "after-snapshot", c.get("wal_retention")
assert names[0] == "first" and names[1] == "full-1", names
assert all(n["first_segment"] > 0 for n in c["node_dirs"]), c["node_dirs"]
assert all("segments_deleted" in n for s in c["full_snapshots"] for n in s["nodes"]), c["full_snapshots"]
EOF
# Every cut consistent or with its reason; every consistent cut the WAL
# still holds restores (from the oldest snapshot it holds, then cut by cut)
# with its fingerprints and the bank total. The history check needs the
# whole WAL and says so.
python3 "$here/../scripts/sweep_verify.py" "$W" "$D" /dev/null || fail "cuts and restores of the retention cluster"
"$W" check "$D" >"$T/check.txt" 2>&1
grep -q "base full-" "$T/check.txt" || fail "check: the restore window does not start at a full snapshot: $(cat "$T/check.txt")"
: >"$T/empty.hist"
expect_rc 2 "history check needs every node.s whole WAL" "$W" history check "$D" "$T/empty.hist"
"$W" restore "$D" --latest --out "$T/out1" -q >/dev/null || fail "restore --latest"

# ---- Every segment kept, a snapshot every 300 ms, the initiator killed once:
# the history check holds and a restore from a snapshot equals the restore
# from genesis.
"$W" cluster up "$K" --nodes 3 --accounts 200 --cut-every 100ms --full-snapshot-every 300ms -q || fail "cluster up (keep)"
"$W" load "$K" --clients 4 --duration 4s --history "$T/k.hist" -q >"$T/kload.txt" 2>&1 &
load=$!
sleep 1.5
"$W" cluster kill "$K" --node 0 -q || fail "kill node 0"
sleep 0.3
"$W" cluster restart "$K" --node 0 -q || fail "restart node 0: $(tail -3 "$K/node-0/node.log")"
wait $load || fail "load (keep): $(cat "$T/kload.txt")"
sleep 0.5
# A cut asked for while a node is down (and no transaction is open) completes
# inconsistent: exit 1 at once, naming the cut.
"$W" cluster kill "$K" --node 2 -q || fail "kill node 2"
timeout 20 "$W" cut start "$K" >"$T/cut.txt" 2>&1
rc=$?
[ $rc = 1 ] && grep -q "^cut [0-9]* taken by node 1: INCONSISTENT" "$T/cut.txt" ||
  fail "cut start with node 2 down: exit $rc: $(cat "$T/cut.txt")"
"$W" cluster down "$K" -q || fail "cluster down (keep)"
grep -q "full snapshot .* taken and listed" "$K"/node-1/node.log "$K"/node-2/node.log ||
  fail "no snapshot was taken by the initiator that took over"
python3 "$here/../scripts/sweep_verify.py" "$W" "$K" "$T/k.hist" || fail "cuts, restores and history of the keep cluster"
read -r snap cut < <(python3 - "$K" "$W" <<'EOF'
import json, subprocess, sys
d, w = sys.argv[1:3]
snaps = json.load(open(f"{d}/cluster.json"))["full_snapshots"]
cuts = json.loads(subprocess.run([w, "cuts", d, "--format", "json"], capture_output=True, text=True).stdout)["cuts"]
last = max(c["cut"] for c in cuts if c["status"] == "consistent")
print(snaps[0]["name"], last)
EOF
)
[ -n "$snap" ] && [ -n "$cut" ] || fail "no snapshot or no consistent cut in the keep cluster"
"$W" restore "$K" --cut "$cut" --base genesis --out "$T/g" -q >/dev/null || fail "restore cut $cut from genesis"
"$W" restore "$K" --cut "$cut" --base "$snap" --out "$T/s" -q >"$T/s.txt" || fail "restore cut $cut from $snap"
grep -q "from base $snap (full)" "$T/s.txt" || fail "restore from $snap printed: $(cat "$T/s.txt")"
"$W" diff "$T/g" "$T/s" -q >/dev/null || fail "cut $cut from genesis and from $snap differ"
echo "cluster_snapshot_test: ok"
