#!/usr/bin/env bash
# walcut history check on a real cluster on the loopback: load with a cut
# every 200 ms while node 2 is killed (SIGKILL) and restarted; the check
# passes (text and JSON). Then the same WAL with a doctored history: a
# transaction moved before a cut it is not in (rule 1), an aborted one said
# committed (outcomes); and the usage errors: a malformed history (file and
# line named), no such history, a cluster.json without an epoch, a WAL whose
# oldest segments were removed. Every process started here is stopped on exit.
# Usage: history_test.sh WALCUT
set -uo pipefail
W=$1
T=$(mktemp -d)
D=$T/c
cleanup() {
  "$W" cluster down "$D" -q >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
expect_rc() {  # expect_rc RC PATTERN COMMAND...: exit code RC and PATTERN in stdout or stderr
  local rc=$1 pat=$2; shift 2
  "$@" >"$T/out" 2>"$T/err"
  local got=$?
  [ "$got" = "$rc" ] || fail "$* exited $got, expected $rc: $(tail -5 "$T/out") $(cat "$T/err")"
  grep -q -- "$pat" "$T/out" "$T/err" || fail "$*: output lacks '$pat': $(tail -5 "$T/out") $(cat "$T/err")"
}

"$W" cluster up "$D" --nodes 3 --accounts 100 --cut-every 200ms --sync group -q || fail "cluster up"
"$W" load "$D" --clients 4 --duration 3s --history "$T/h.jsonl" -q >"$T/load.txt" 2>&1 &
load=$!
sleep 1.2
"$W" cluster kill "$D" --node 2 -q || fail "kill"
sleep 0.3
"$W" cluster restart "$D" --node 2 -q || fail "restart: $(tail -3 "$D/node-2/node.log")"
wait $load || fail "load: $(cat "$T/load.txt")"
"$W" cluster down "$D" -q || fail "cluster down"

# The check passes, in text and in JSON.
expect_rc 0 "^pass: " "$W" history check "$D" "$T/h.jsonl"
grep -q "^cut [0-9]*: pass (" "$T/out" || fail "no cut passed: $(cat "$T/out")"
grep -q "^outcomes: pass" "$T/out" || fail "outcomes: $(cat "$T/out")"
"$W" history check "$D" "$T/h.jsonl" --format json --clock-slack 2ms >"$T/h.json" || fail "json: exit $?"
python3 - "$T/h.json" <<'EOF' || fail "json: $(head -c 2000 "$T/h.json")"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["schema"] == "walcut.history-check/1", j["schema"]
assert j["pass"] is True and j["clock_slack_us"] == 2000
checked = [c for c in j["cuts"] if c["checked"]]
assert len(checked) >= 3, len(checked)
assert all(c["pass"] and c["findings"] == [] and c["status"] == "consistent" for c in checked)
assert any(c["acknowledged_before"] > 0 for c in checked)
assert any(c["started_after"] > 0 for c in checked)
assert j["history_transactions"]["committed"] > 50
EOF

# Rule 1: a committed transaction that started after a consistent cut
# finished is said to have been acknowledged before that cut started.
python3 - "$T/h.json" "$T/h.jsonl" "$T/rule1.jsonl" <<'EOF' || fail "could not doctor the history"
import json, sys
rep = json.load(open(sys.argv[1]))
cut = [c for c in rep["cuts"] if c["checked"]][0]
lines = [json.loads(l) for l in open(sys.argv[2])]
for t in lines:
    if t["outcome"] == "committed" and t["start_us"] > cut["finish_unix_us"] + 100000:
        t["start_us"] = cut["start_unix_us"] - 20000
        t["ack_us"] = cut["start_unix_us"] - 10000
        break
else:
    sys.exit(1)
open(sys.argv[3], "w").write("".join(json.dumps(t) + "\n" for t in lines))
EOF
expect_rc 1 "rule 1 acknowledged-in-cut: .* before cut [0-9]* started" "$W" history check "$D" "$T/rule1.jsonl"
grep -q "^FAIL: " "$T/out" || fail "no FAIL summary: $(tail -3 "$T/out")"

# Outcomes: a transaction aborted for a conflict said committed.
python3 - "$T/h.jsonl" "$T/outcome.jsonl" <<'EOF' || fail "no aborted transaction in the history"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
t = next(t for t in lines if t["outcome"] == "aborted" and t.get("reason") == "conflict")
t["outcome"] = "committed"
t.pop("reason", None)
open(sys.argv[2], "w").write("".join(json.dumps(t) + "\n" for t in lines))
EOF
expect_rc 1 "rule 3 outcome: .* no node's WAL commits it" "$W" history check "$D" "$T/outcome.jsonl"

# Usage errors.
{ head -2 "$T/h.jsonl"; echo '{"client": 1'; } >"$T/bad.jsonl"
expect_rc 2 "bad.jsonl:3: not a JSON object" "$W" history check "$D" "$T/bad.jsonl"
expect_rc 2 "nothing.jsonl: no such file" "$W" history check "$D" "$T/nothing.jsonl"
expect_rc 2 "clock-slack" "$W" history check "$D" "$T/h.jsonl" --clock-slack 5
cp -r "$D" "$T/noepoch"
python3 - "$T/noepoch/cluster.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
del j["epoch_unix_us"]
json.dump(j, open(sys.argv[1], "w"))
EOF
expect_rc 2 "no epoch_unix_us" "$W" history check "$T/noepoch" "$T/h.jsonl"
"$W" run "$T/pruned" --txs 600 --cuts 2 --segment-size 4096 --full-snapshot-at 400 --wal-retention after-snapshot \
  >/dev/null 2>&1 || fail "walcut run --wal-retention"
expect_rc 2 "needs every node's whole WAL" "$W" history check "$T/pruned" "$T/h.jsonl"
echo "ok: history check on a real cluster"
