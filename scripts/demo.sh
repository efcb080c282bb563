#!/usr/bin/env bash
# Builds walcut (only the `walcut` target: no tests, fuzzers or benchmarks;
# scripts/test.sh builds those) and tells the whole story on the bundled
# samples (made by `walcut run`, see samples/README.md): run a small cluster,
# verify the WAL of every node, show what it holds, list its cuts with the
# restore window, restore a cut, and check it all the way CI does (`walcut
# check`), then show how a crash during a cut, a torn tail and a corrupted
# segment are reported. Each section's heading names where it is described.
# Exits non-zero if walcut does not give the expected exit code on any
# sample. To add a command: `expect EXIT_CODE $w SUBCOMMAND ARGS...` in the
# section of its sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh walcut >/dev/null
w=build/cli/walcut
bold=; under=; plain=
if [ -t 1 ]; then bold=$'\033[1m'; under=$'\033[1;4m'; plain=$'\033[0m'; fi
say() { printf '\n%s$ %s%s\n' "$bold" "$*" "$plain"; }
section() { printf '\n%s%s%s (%s)\n' "$under" "$1" "$plain" "$2"; }  # section TITLE WHERE-DESCRIBED
expect() {  # expect CODE CMD...
  local want=$1; shift
  say "walcut ${*:2}"
  set +e; "$@"; local got=$?; set -e
  echo "(exit $got)"
  [ "$got" = "$want" ] || { echo "demo: expected exit $want, got $got" >&2; exit 1; }
}
s=samples
tmp=$(mktemp -d /tmp/walcut-demo-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# run: a small cluster of our own, then the same tools on it.
section "walcut run" "node/README.md"
expect 0 $w run $tmp/run --nodes 3 --backups 1 --workload bank --txs 2000 --cut-every 300 --seed 7
expect 0 $w check $tmp/run

# healthy: 3 nodes, 6 consistent cuts, a full snapshot between cuts 3 and 4.
section "samples/healthy" "samples/README.md, healthy"
expect 0 $w verify $s/healthy
expect 0 $w stats $s/healthy
expect 0 $w dump --node 0 -n 8 $s/healthy
expect 0 $w dump --type cut_start,cut_finish,cut_abort,snapshot --node 1 $s/healthy
expect 0 $w cuts $s/healthy
expect 0 $w restore $s/healthy --cut 6 --base full-1500 --out $tmp/healthy-6
expect 0 $w check $s/healthy
expect 0 $w check $s/healthy --cut 6
expect 0 $w check $s/healthy --format junit --output $tmp/healthy.xml

# crash-during-cut: node 2 crashes during cut 3; cut 3 is aborted, the cuts
# before and after it finish on every node.
section "samples/crash-during-cut" "samples/README.md, crash-during-cut"
expect 0 $w verify $s/crash-during-cut
expect 0 $w dump --type cut_start,cut_finish,cut_abort,node_start --node 0,2 $s/crash-during-cut
expect 1 $w cuts $s/crash-during-cut
expect 1 $w restore $s/crash-during-cut --cut 3 --out $tmp/crash-3
expect 0 $w restore $s/crash-during-cut --latest --out $tmp/crash-latest
expect 1 $w check $s/crash-during-cut
expect 1 $w check $s/crash-during-cut --cut 3
expect 0 $w check $s/crash-during-cut --cut 4

# torn-tail: node 2's last record cut short, what a crash leaves: tolerated.
section "samples/torn-tail" "samples/README.md, torn-tail"
expect 0 $w verify $s/torn-tail
expect 0 $w check $s/torn-tail

# corrupted-segment: one bit flipped in node 1's segment 2: a finding.
section "samples/corrupted-segment" "samples/README.md, corrupted-segment"
expect 1 $w verify $s/corrupted-segment
expect 1 $w stats $s/corrupted-segment
expect 1 $w check $s/corrupted-segment --level files
expect 1 $w check $s/corrupted-segment

# pruned: WAL retention removed the oldest segments; cut 5 is unavailable,
# cut 6 restores from full-2400, chosen by restore itself.
section "samples/pruned" "samples/README.md, pruned"
expect 0 $w verify $s/pruned
expect 0 $w cuts $s/pruned
expect 0 $w restore $s/pruned --latest --check auto --out $tmp/pruned-latest
expect 0 $w check $s/pruned --level restore

# A repository of snapshot artifacts that outlives the WAL: a full, then
# increments; list, check with a trial restore, restore without the cluster.
section "repository" "repo/REPOSITORY.md"
expect 0 $w snapshot create $s/healthy --repo $tmp/repo --full --from full-1500
expect 0 $w snapshot create $s/healthy --repo $tmp/repo --incremental --cut 4
expect 0 $w snapshot create $s/healthy --repo $tmp/repo --incremental --latest
expect 0 $w snapshot create $s/crash-during-cut --repo $tmp/repo2 --full --cut 2
expect 1 $w snapshot create $s/crash-during-cut --repo $tmp/repo2 --incremental --cut 3
expect 0 $w snapshot list $tmp/repo
expect 0 $w snapshot check $tmp/repo --restore
expect 0 $w restore --repo $tmp/repo --latest --out $tmp/repo-latest
expect 0 $w diff $tmp/repo-latest $tmp/healthy-6
expect 0 $w snapshot create --repo $tmp/repo --full --cut 6
expect 0 $w snapshot expire $tmp/repo --keep-full 1
expect 0 $w snapshot list $tmp/repo

echo
echo "demo: every command gave the expected exit code"
