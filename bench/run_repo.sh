#!/usr/bin/env bash
# Benchmark of the repository of snapshot artifacts (issue 14, item 5).
#
# Uses the bench cluster of bench/run_cuts.sh (bench/data-cuts, made and
# decompressed the same way when absent or made with other parameters:
# `walcut run --nodes 3 --backups 1 --workload bank --accounts 200000
# --txs 8700000 --cuts 20 --segment-size 64MiB --seed 42`, about 3.7 GB);
# `--txs N` other than 8700000 uses bench/data-cuts-N instead (a quick run:
# --txs 300000 is 136 MiB). In a repository under a temporary directory
# (TMPDIR, or --tmp DIR) it makes the full artifact once: the cluster's
# first runtime full snapshot if it has one, else a synthetic full of the
# first consistent cut (`f-cut-<first>`), and one increment of cut K on it
# (`i-cut-K`; K = --cut, default the latest consistent cut). It warms the
# page cache, then times side by side, round by round (each command once per
# round, RUNS rounds, every run into a fresh directory, removed outside the
# timing):
#   walcut snapshot create CLUSTER --repo R --incremental --cut K --parent FULL
#   zstd -1 -T0 of exactly the segment files that increment holds (listed
#     from its manifest) into a directory        (the create target's yardstick)
#   cp of the same files into a directory
#   walcut restore --repo R --cut K              (through FULL <- i-cut-K)
#   walcut restore CLUSTER --cut K --base R/FULL (the live WAL, same base)
# It prints the median wall and CPU seconds (GNU time: user + system of the
# command), bytes/s (the plain bytes of the segments over the median wall
# time; for restore, writes applied per second) and the ratios to the
# references, wall and CPU: create / zstd -1 -T0 (target at most 1.5) and
# restore --repo / restore of the live WAL (target at most 1.3), each the
# median of the ratios taken round by round (the two commands of a ratio run
# next to each other, so a slow spell of a shared machine hits both); a last
# line lists the wall ratios of every round. The load average is printed
# before and after.
#
#   bench/run_repo.sh [--txs N] [--runs R] [--cut K] [--tmp DIR] [--regen]
#
# Needs build/cli/walcut (or WALCUT=...), GNU time, zstd, jq, bc. Idempotent:
# the cluster is reused, everything else is made again under a temporary
# directory that is removed at the end.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
txs=8700000
runs=3
cutk=""
tmpbase="${TMPDIR:-/tmp}"
regen=0
while [ $# -gt 0 ]; do
  case "$1" in
    --txs) txs="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --cut) cutk="$2"; shift 2 ;;
    --tmp) tmpbase="$2"; shift 2 ;;
    --regen) regen=1; shift ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "run_repo.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
walcut="${WALCUT:-$root/build/cli/walcut}"
for tool in /usr/bin/time zstd jq bc; do
  command -v "$tool" >/dev/null || { echo "run_repo.sh: missing $tool" >&2; exit 3; }
done
[ -x "$walcut" ] || { echo "run_repo.sh: $walcut not built" >&2; exit 3; }
tmp="$(mktemp -d "$tmpbase/run_repo.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
cp "$walcut" "$tmp/walcut"
walcut="$tmp/walcut"

# The cluster: the same directory, parameters and decompression as run_cuts.sh.
data="$root/bench/data-cuts"
[ "$txs" = 8700000 ] || data="$root/bench/data-cuts-$txs"
params="txs=$txs accounts=200000 seed=42 code=$(cat "$root"/node/*.cpp "$root"/walfmt/*.cpp | sha1sum | cut -c1-12)"
if [ "$regen" = 1 ] || [ ! -f "$data.params" ] || [ "$(cat "$data.params")" != "$params" ]; then
  rm -rf "$data" "$data.params"
  echo "generating: walcut run --txs $txs --accounts 200000 --cuts 20 --segment-size 64MiB --seed 42" >&2
  "$walcut" run "$data" --nodes 3 --backups 1 --workload bank --accounts 200000 --txs "$txs" --cuts 20 \
    --segment-size 64MiB --seed 42 >&2
  while IFS= read -r z; do
    zstd -q -d --rm "$z"
  done < <(find "$data" -name '*.wal.zst')
  echo "$params" >"$data.params"
fi

cuts_json="$("$walcut" cuts --format json "$data")"
[ -n "$cutk" ] || cutk=$(jq '.window.latest' <<<"$cuts_json")
first=$(jq '[.cuts[] | select(.status == "consistent") | .cut] | min' <<<"$cuts_json")

# The full artifact and the increment that the restores go through.
repo="$tmp/repo"
snap=""
[ -d "$data/snapshots" ] && snap=$(find "$data/snapshots" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | head -n 1)
if [ -n "$snap" ]; then
  "$walcut" snapshot create "$data" --repo "$repo" --full --from "$snap" >&2
  full="f-$snap"
else
  "$walcut" snapshot create "$data" --repo "$repo" --full --cut "$first" >&2
  full="f-cut-$first"
fi
"$walcut" snapshot create "$data" --repo "$repo" --incremental --cut "$cutk" --parent "$full" >&2
inc="i-cut-$cutk"

# The cluster's files behind the increment's segments (.wal.zst in the
# artifact; .wal, or .wal.zst already compressed, in the cluster).
files=()
while IFS=$'\t' read -r node seg; do
  plain="$data/node-$node/wal/${seg%.zst}"
  if [ -f "$plain" ]; then files+=("$plain"); else files+=("$data/node-$node/wal/$seg"); fi
done < <(jq -r '.nodes[] | .node as $n | .wal.segments[] | "\($n)\t\(.)"' "$repo/$inc/manifest.json")
bytes=$(cat "${files[@]}" | wc -c)
zbytes=$(jq '[.files[] | select(.path | endswith(".wal.zst")) | .bytes] | add' "$repo/$inc/manifest.json")
for _ in 1 2; do cat "${files[@]}" "$repo/$inc"/node-*/wal/* >/dev/null; done

declare -A walls cpus
once() {
  local label="$1"
  shift
  local t0 t1 u sy
  t0=$(date +%s%N)
  /usr/bin/time -f '%U %S' -o "$tmp/time" "$@" >"$tmp/stdout" 2>"$tmp/err" || {
    echo "run_repo.sh: $label failed: $(head -c 300 "$tmp/err")" >&2
    exit 3
  }
  t1=$(date +%s%N)
  read -r u sy < <(tail -n 1 "$tmp/time")
  walls[$label]+="$((t1 - t0)) "
  cpus[$label]+="$(echo "($u + $sy) * 1000 / 1" | bc) "
}
median() { tr ' ' '\n' | grep -v '^$' | sort -n | sed -n "$(((runs + 1) / 2))p"; }
fresh() { rm -rf "$tmp/out" "$repo/i-bench"; mkdir -p "$tmp/out"; sync; }

labels=(create "zstd -1 -T0" cp "restore --repo" "restore live WAL")
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 0; r < runs; r++)); do
  fresh
  once create "$walcut" snapshot create "$data" --repo "$repo" --incremental --cut "$cutk" --parent "$full" \
    --name i-bench
  fresh
  once "zstd -1 -T0" zstd -1 -T0 -q --output-dir-mirror "$tmp/out" "${files[@]}"
  fresh
  once cp cp --parents "${files[@]}" "$tmp/out/"
  rm -rf "$tmp/out"
  once "restore --repo" "$walcut" restore --repo "$repo" --cut "$cutk" --format json --out "$tmp/out"
  [ "$r" = 0 ] && cp "$tmp/out/manifest.json" "$tmp/restore-repo.json"
  rm -rf "$tmp/out"
  once "restore live WAL" "$walcut" restore "$data" --cut "$cutk" --base "$repo/$full" --format json --out "$tmp/out"
  [ "$r" = 0 ] && cp "$tmp/stdout" "$tmp/restore-live.json"
done
fresh
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
declare -A med cpu
for l in "${labels[@]}"; do
  med[$l]=$(echo "${walls[$l]}" | median)
  cpu[$l]=$(echo "${cpus[$l]}" | median)
done
writes=$(jq '[.nodes[].writes_applied] | add' "$tmp/restore-live.json")
writes_repo=$(jq '[.nodes[].writes_applied] | add' "$tmp/restore-repo.json")

echo "cluster $data: ${#files[@]} segments of $inc ($full <- $inc), $bytes bytes plain, $zbytes in the artifact;" \
  "restore of cut $cutk: $writes writes applied from the live WAL, $writes_repo through the chain"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# The median over the rounds of label A's figure over label B's, from the
# lists in walls or cpus.
ratio() {
  local -n list=$1
  local a b r out=""
  read -ra a <<<"${list[$2]}"
  read -ra b <<<"${list[$3]}"
  for ((r = 0; r < runs; r++)); do out+="$(echo "scale=2; ${a[$r]} / ${b[$r]}" | bc) "; done
  echo "$out"
}
echo "| command | bytes | wall s | CPU s | bytes/s | writes/s | ratio, wall | ratio, CPU |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for l in "${labels[@]}"; do
  w=$(echo "scale=2; ${med[$l]} / 1000000000" | bc)
  c=$(echo "scale=2; ${cpu[$l]} / 1000" | bc)
  bps=$(echo "scale=1; $bytes / (${med[$l]} / 1000000000) / 1000000" | bc)" MB/s"
  wps=-
  rw=-
  rc=-
  ref=""
  case "$l" in
    create|cp) ref="zstd -1 -T0" ;;
    "restore --repo") ref="restore live WAL" ;;
  esac
  case "$l" in restore*) wps=$(echo "scale=2; $writes / (${med[$l]} / 1000000000) / 1000000" | bc)M ;; esac
  if [ -n "$ref" ]; then
    rw="$(ratio walls "$l" "$ref" | median)x"
    rc="$(ratio cpus "$l" "$ref" | median)x"
  fi
  echo "| \`$l\` | $bytes | $w | $c | $bps | $wps | $rw | $rc |"
done
echo
echo "wall ratios round by round: create / zstd -1 -T0: $(ratio walls create "zstd -1 -T0")(target <= 1.5);" \
  "restore --repo / live: $(ratio walls "restore --repo" "restore live WAL")(target <= 1.3)"
