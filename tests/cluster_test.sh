#!/usr/bin/env bash
# The real cluster on the loopback (walcut cluster/node/load/cut start):
# bring-up and its refusals, load with cuts while a node is killed and
# restarted, a cut on request, bad input on a node's port, and the cuts of
# the WAL the processes wrote. Every process started here is stopped on exit.
# Usage: cluster_test.sh WALCUT
set -uo pipefail
W=$1
T=$(mktemp -d)
D=$T/c
cleanup() {
  for d in "$D" "$T/p" "$T/q1" "$T/q2"; do "$W" cluster down "$d" -q >/dev/null 2>&1; done
  rm -rf "$T"
}
trap cleanup EXIT
# shellcheck source=tests/expect_lib.sh
source "$(dirname "$0")/expect_lib.sh"

"$W" cluster up "$D" --nodes 3 --accounts 200 --cut-every 200ms -q || fail "cluster up"
port0=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['ports'][0])" "$D/runtime.json")

# Refusals: the same DIR again, a DIR with other files, a port in use, a
# directory that is not a real cluster, a node that is not running.
expect_rc 2 "already there" "$W" cluster up "$D" -q
mkdir "$T/other" && echo x >"$T/other/f"
expect_rc 2 "not empty" "$W" cluster up "$T/other" -q
expect_rc 3 "node 0 exited while starting: exit status 3" "$W" cluster up "$T/p" --nodes 1 --backups 0 --base-port "$port0" -q
grep -q "cannot listen on 127.0.0.1:$port0" "$T/p/node-0/node.log" || fail "port in use: $(cat "$T/p/node-0/node.log")"
"$W" run "$T/sim" --txs 50 --cuts 1 >/dev/null 2>&1 || fail "walcut run"
expect_rc 2 "not a real cluster" "$W" cluster down "$T/sim" -q
expect_rc 2 "not a real cluster" "$W" cut start "$T/sim"
expect_rc 2 "the cluster has nodes 0..2" "$W" cluster kill "$D" --node 7 -q

# Load with cuts every 200 ms; node 1 is killed (SIGKILL) and restarted.
"$W" load "$D" --clients 6 --duration 4s --history "$T/h.jsonl" >"$T/load.txt" 2>&1 &
load=$!
sleep 1.5
"$W" cluster kill "$D" --node 1 -q || fail "kill"
expect_rc 2 "not running" "$W" cluster kill "$D" --node 1 -q
sleep 0.5
"$W" cluster restart "$D" --node 1 -q || fail "restart: $(tail -3 "$D/node-1/node.log")"
expect_rc 2 "is running" "$W" cluster restart "$D" --node 1 -q
wait $load || fail "load: $(cat "$T/load.txt")"
grep -q "committed" "$T/load.txt" || fail "load printed: $(cat "$T/load.txt")"
[ "$(wc -l <"$T/h.jsonl")" -gt 50 ] || fail "history has $(wc -l <"$T/h.jsonl") lines"
grep -q '"outcome":"committed"' "$T/h.jsonl" || fail "no committed transaction in the history"

# A cut on request.
"$W" cut start "$D" >"$T/cut.txt" || fail "cut start: $(cat "$T/cut.txt")"
grep -q "consistent" "$T/cut.txt" || fail "cut start printed: $(cat "$T/cut.txt")"

# The tools on the WAL while the nodes write it: nothing is locked, a
# segment being written is read up to its last complete record.
"$W" load "$D" --clients 4 --duration 3s --history "$T/h2.jsonl" -q >/dev/null 2>&1 &
load=$!
sleep 1
"$W" verify "$D" >"$T/v.txt" || fail "verify on the live cluster: $(tail -3 "$T/v.txt")"
"$W" cuts "$D" >"$T/k.txt"; rc=$?
[ $rc -le 1 ] && grep -q consistent "$T/k.txt" || fail "cuts on the live cluster: exit $rc"
"$W" scan "$D/node-0" -o "$T/s0.json" -q; rc=$?
[ $rc -le 1 ] && [ -s "$T/s0.json" ] || fail "scan on the live cluster: exit $rc"
timeout 2 "$W" dump --follow "$D/node-1" >"$T/follow.txt"
[ "$(wc -l <"$T/follow.txt")" -gt 100 ] || fail "dump --follow printed $(wc -l <"$T/follow.txt") lines"
k=$("$W" cuts "$D" --format json | python3 -c "
import json, sys
print(max(c['cut'] for c in json.load(sys.stdin)['cuts'] if c['status'] == 'consistent'))")
"$W" snapshot create --repo "$T/repo" "$D" --full --cut "$k" -q >/dev/null || fail "snapshot create --full on the live cluster"
sleep 0.5
"$W" snapshot create --repo "$T/repo" "$D" --incremental --latest -q >/dev/null || fail "snapshot create --incremental on the live cluster"
wait $load

# Bad input on node 0's port: garbage, a frame longer than the limit, a
# truncated frame, a Hello from another cluster. Each connection is closed
# and logged; the node keeps serving.
send() { python3 - "$port0" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(bytes.fromhex(sys.argv[2]))
s.settimeout(5)
try:
    s.recv(1)
except Exception:
    pass
s.close()
PY
}
send "676172626167652067617262616765"        # "garbage garbage"
send "57434e01ffffff7f00000000"              # magic, then a length of 2 GiB
send "57434e011000000000000000aabb"          # a 16-byte frame cut after 2 bytes
sleep 0.3
grep -q "closing the connection from 127.0.0.1:.*bad magic\|closing the connection from 127.0.0.1:.*magic" "$D/node-0/node.log" ||
  fail "garbage not logged: $(tail -5 "$D/node-0/node.log")"
grep -q "closing the connection.*limit\|closing the connection.*longer" "$D/node-0/node.log" ||
  fail "oversized frame not logged: $(tail -5 "$D/node-0/node.log")"
"$W" cluster status "$D" >"$T/status.txt" || fail "status"
[ "$(grep -c ready "$T/status.txt")" = 3 ] || fail "after bad input: $(cat "$T/status.txt")"
"$W" cut start "$D" >/dev/null || fail "cut start after bad input"

"$W" cluster down "$D" -q || fail "down"
for n in 0 1 2; do
  pid=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['pids'][$n])" "$D/runtime.json")
  [ "$pid" = 0 ] || fail "runtime.json still names pid $pid for node $n"
done

# The WAL the processes wrote: verify is clean, every cut is consistent
# without a finding or inconsistent with its reason, and the last consistent
# cut restores and passes its checks.
"$W" verify "$D" >/dev/null || fail "verify"
cat "$T/h2.jsonl" >>"$T/h.jsonl"  # the history check needs every client transaction
python3 "$(dirname "$0")/../scripts/sweep_verify.py" "$W" "$D" "$T/h.jsonl" || fail "cuts"
last=$("$W" cuts "$D" --format json | python3 -c "
import json, sys
print(max(c['cut'] for c in json.load(sys.stdin)['cuts'] if c['status'] == 'consistent'))")
"$W" restore "$D" --cut "$last" --out "$T/r" >/dev/null || fail "restore of cut $last"

# cluster down while cuts run back to back: every node hears the signal, a
# running cut completes on all of them, nobody takes over as initiator and
# aborts a cut as if a node had crashed. So no cut is incomplete or aborted
# for a node gone (a loaded machine may still abort one whose transaction
# the recovery protocol finished: that is not the shutdown's doing).
for i in 1 2; do
  "$W" cluster up "$T/q$i" --nodes 3 --accounts 200 --cut-every 2ms -q || fail "up q$i"
  "$W" load "$T/q$i" --clients 4 --duration 1s -q >/dev/null 2>&1 || fail "load q$i"
  "$W" cluster down "$T/q$i" -q || fail "down q$i"
  [ ! -e "$T/q$i/stopping" ] || fail "cluster down left $T/q$i/stopping"
  grep -q "stopping: asked to (signal)" "$T/q$i"/node-*/node.log || fail "no node of q$i logged the signal"
  for n in 0 1 2; do
    grep -q "^node $n: stopping: " "$T/q$i/node-$n/node.log" ||
      fail "node $n of q$i did not log its stop: $(tail -2 "$T/q$i/node-$n/node.log")"
  done
  bad=$("$W" cuts "$T/q$i" --format json | python3 -c "
import json, re, sys
j = json.load(sys.stdin)
assert j['counts']['cuts'] > 10, j['counts']
for c in j['cuts']:
    if c['status'] == 'incomplete' or re.search('crashed|was down|no CUT_START', c.get('reason') or ''):
        print(c['cut'], c['status'], c.get('reason'))") || fail "cuts q$i"
  [ -z "$bad" ] || fail "cluster down with cuts every 2ms left: $bad"
done
echo "ok: cluster of 3 processes, load, kill -9 and restart, cut $last restored, clean cluster down"
