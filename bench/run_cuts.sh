#!/usr/bin/env bash
# Benchmark of the cut and restore commands (issue 4, item 8).
#
# Generates a cluster with `walcut run` (3 nodes, bank workload, 200,000
# accounts, about 1 GiB of WAL per node by default) under bench/data-cuts,
# decompresses its archived segments (so that the scan is not limited by
# zstd), warms the page cache, then times side by side in one run:
#   cat FILES > /dev/null                          (page-cache floor)
#   walcut stats DIR                               (the scan speed to match)
#   walcut cuts DIR, walcut cuts --jobs 1 DIR
#   walcut restore DIR --cut LAST --out T          (both cores, then --jobs 1)
# cat runs RUNS times first; the other commands run round by round, each
# once per round, RUNS rounds; the
# table shows the median wall time, CPU time, the ratio to stats, peak RSS
# and, for restore, writes applied per second and the size of the restored
# state; a last line gives the cuts/stats ratio of each round.
#
#   bench/run_cuts.sh [--txs N] [--runs R] [--regen]
#
# Needs build/cli/walcut (or WALCUT=...), GNU time, zstd, jq.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
txs=8700000
runs=3
regen=0
while [ $# -gt 0 ]; do
  case "$1" in
    --txs) txs="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --regen) regen=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run_cuts.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
walcut="${WALCUT:-$root/build/cli/walcut}"
for tool in /usr/bin/time zstd jq bc; do
  command -v "$tool" >/dev/null || { echo "run_cuts.sh: missing $tool" >&2; exit 3; }
done
[ -x "$walcut" ] || { echo "run_cuts.sh: $walcut not built" >&2; exit 3; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$walcut" "$tmp/walcut"
walcut="$tmp/walcut"

data="$root/bench/data-cuts"
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
mapfile -t files < <(find "$data" -name '*.wal' -type f | sort)
bytes=$(cat "${files[@]}" | wc -c)
for _ in 1 2; do cat "${files[@]}" >/dev/null; done
records=$("$walcut" stats --format json "$data" | jq .records)
last=$("$walcut" cuts --format json "$data" | jq .window.latest)

declare -A walls cpus rss
# Runs one command once and appends its wall time (ns), CPU time (ms) and
# peak RSS to the label's lists. The commands are run round by round (each
# once per round), so that a slow spell of the shared machine hits all of
# them alike and the ratios to stats stay fair.
once() {
  local label="$1"
  shift
  local t0 t1 kib u sy
  rm -rf "$tmp/out"
  t0=$(date +%s%N)
  /usr/bin/time -f '%M %U %S' -o "$tmp/rss" "$@" >"$tmp/stdout" 2>"$tmp/err" || {
    echo "run_cuts.sh: $label failed: $(head -c 300 "$tmp/err")" >&2
    exit 3
  }
  t1=$(date +%s%N)
  read -r kib u sy < <(tail -n 1 "$tmp/rss")
  walls[$label]+="$((t1 - t0)) "
  cpus[$label]+="$(echo "($u + $sy) * 1000 / 1" | bc) "
  [ "$kib" -gt "${rss[$label]:-0}" ] && rss[$label]=$kib
  return 0
}
median() { tr ' ' '\n' | grep -v '^$' | sort -n | sed -n "$(((runs + 1) / 2))p"; }

# cat first and on its own: right after a cat (read(2)), the next command
# to map the files pays to bring the pages back into use, which would slow
# whichever command follows it in a round. One unmeasured stats run then
# maps everything once.
for ((r = 0; r < runs; r++)); do once cat cat "${files[@]}"; done
"$walcut" stats "$data" >/dev/null
for ((r = 0; r < runs; r++)); do
  once stats "$walcut" stats "$data"
  once cuts "$walcut" cuts "$data"
  once "cuts --jobs 1" "$walcut" cuts --jobs 1 "$data"
  once restore "$walcut" restore "$data" --cut "$last" --format json --out "$tmp/out"
  if [ "$r" = 0 ]; then
    cp "$tmp/stdout" "$tmp/restore.json"
    state=$(du -sb "$tmp/out" | cut -f1)
  fi
  once "restore --jobs 1" "$walcut" restore "$data" --cut "$last" --jobs 1 --format json --out "$tmp/out"
done
declare -A med cpu
for l in cat stats cuts "cuts --jobs 1" restore "restore --jobs 1"; do
  med[$l]=$(echo "${walls[$l]}" | median)
  cpu[$l]=$(echo "${cpus[$l]}" | median)
done
writes=$(jq '[.nodes[].writes_applied] | add' "$tmp/restore.json")

echo "data: $(du -sh "$data" | cut -f1), ${#files[@]} segments, $bytes bytes, $records records; restored cut $last:" \
  "$writes writes applied, state $state bytes on disk"
echo
echo "| command | wall s | CPU s | vs stats | rec/s | writes/s | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for l in cat stats cuts "cuts --jobs 1" restore "restore --jobs 1"; do
  w=$(echo "scale=3; ${med[$l]} / 1000000000" | bc)
  c=$(echo "scale=2; ${cpu[$l]} / 1000" | bc)
  ratio=$(echo "scale=2; ${med[$l]} / ${med[stats]}" | bc)
  recs=-
  wps=-
  case "$l" in
    stats|cuts*) recs=$(echo "scale=2; $records / (${med[$l]} / 1000000000) / 1000000" | bc)M ;;
    restore*) wps=$(echo "scale=2; $writes / (${med[$l]} / 1000000000) / 1000000" | bc)M ;;
  esac
  echo "| \`$l\` | $w | $c | ${ratio}x | $recs | $wps | $(echo "scale=1; ${rss[$l]} / 1024" | bc) |"
done
read -ra sw <<<"${walls[stats]}"
read -ra cw <<<"${walls[cuts]}"
ratios=""
for ((r = 0; r < runs; r++)); do ratios+="$(echo "scale=2; ${cw[$r]} / ${sw[$r]}" | bc) "; done
echo
echo "cuts / stats, wall, round by round: $ratios(median $(echo "$ratios" | median)x)"
