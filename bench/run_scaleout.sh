#!/usr/bin/env bash
# Benchmark of the restore where the WAL lives (docs/scale-out.md, issue 19
# item 6): on a cluster directory (default bench/data-cuts, made by
# bench/run_cuts.sh), round by round, R rounds:
#   single   walcut restore DATA --cut K --out T            (one host: scans every node, restores every node)
#   per node walcut scan DATA/node-<i> --out S<i>           (each node's host, one after another)
#            walcut cuts S* --cluster-json ... --verdict-out V --cut K   (central, from the summaries)
#            walcut restore DATA/node-<i> --verdict V --out P<i>         (each node's host, one after another)
#            walcut restore assemble OUT P*                 (central)
# Every command is its own process, timed by GNU time (wall, user+sys CPU,
# peak RSS). The table gives per command the median over the rounds; the
# summary compares the slowest node's restore (and its scan + restore, the
# whole work of one host) with 1/N of the single-host restore's CPU time,
# per round, and checks that the assembled node files equal the single-host
# ones byte for byte (cmp). DATA is only read.
#
#   bench/run_scaleout.sh [--data DIR] [--cut K] [--runs R]
#
# Needs build/cli/walcut (or WALCUT=...), GNU time, jq.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data="$root/bench/data-cuts"
cut=""
runs=3
while [ $# -gt 0 ]; do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --cut) cut="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "run_scaleout.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
walcut="${WALCUT:-$root/build/cli/walcut}"
for tool in /usr/bin/time jq bc; do
  command -v "$tool" >/dev/null || { echo "run_scaleout.sh: missing $tool" >&2; exit 3; }
done
[ -x "$walcut" ] || { echo "run_scaleout.sh: $walcut not built" >&2; exit 3; }
[ -f "$data/cluster.json" ] || { echo "run_scaleout.sh: $data is not a cluster directory (run bench/run_cuts.sh)" >&2; exit 3; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$walcut" "$tmp/walcut"
walcut="$tmp/walcut"
nodes=$(jq '.nodes' "$data/cluster.json")
if [ -z "$cut" ]; then
  cut=$("$walcut" cuts "$data" --format json | jq '.window.latest')
fi
mapfile -t files < <(find "$data" -name '*.wal*' -type f | sort)
bytes=$(cat "${files[@]}" | wc -c)
for _ in 1 2; do cat "${files[@]}" >/dev/null; done
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), CPU pressure (some, avg60) $(awk '/some/{print $3}' /proc/pressure/cpu 2>/dev/null), commit $(git -C "$root" rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# data: $data ($nodes nodes, $(echo "scale=2; $bytes / 1073741824" | bc) GiB of WAL), cut $cut, $runs rounds, $(nproc) cores"

# timed NAME CMD...: runs CMD, appends "NAME wall cpu rss_kib" to $tmp/times.
timed() {
  local name="$1"; shift
  /usr/bin/time -f "%e %U %S %M" -o "$tmp/t" "$@" >"$tmp/out" 2>"$tmp/err" || {
    echo "run_scaleout.sh: $name failed:" >&2; cat "$tmp/err" >&2; exit 1; }
  read -r wall user sys rss <"$tmp/t"
  echo "$name $wall $(echo "$user + $sys" | bc) $rss" >>"$tmp/times"
}

: >"$tmp/times"
for r in $(seq 1 "$runs"); do
  w="$tmp/r$r"
  mkdir -p "$w"
  timed single "$walcut" restore "$data" --cut "$cut" --out "$w/single"
  for i in $(seq 0 $((nodes - 1))); do
    timed "scan-$i" "$walcut" scan "$data/node-$i" --out "$w/s$i.json"
  done
  timed verdict "$walcut" cuts "$w"/s*.json --cluster-json "$data/cluster.json" --verdict-out "$w/v.json" --cut "$cut"
  for i in $(seq 0 $((nodes - 1))); do
    timed "restore-$i" "$walcut" restore "$data/node-$i" --verdict "$w/v.json" --out "$w/p$i"
  done
  parts=()
  for i in $(seq 0 $((nodes - 1))); do parts+=("$w/p$i"); done
  timed assemble "$walcut" restore assemble "$w/out" "${parts[@]}"
  for i in $(seq 0 $((nodes - 1))); do
    cmp -s "$w/single/node-$i.snap" "$w/out/node-$i.snap" || { echo "round $r: node $i differs" >&2; exit 1; }
  done
  # Per round: the single-host CPU over N, the slowest node's restore wall,
  # and its scan + restore wall (what one host does).
  field() { awk -v r="$r" -v k="$1" -v f="$2" '$1==k{n++; if(n==r) print $f}' "$tmp/times"; }
  single_cpu=$(field single 3)
  single_wall=$(field single 2)
  slowest=0; slowest_cpu=0; slowest_host=0; sum_restore=0
  for i in $(seq 0 $((nodes - 1))); do
    rw=$(field "restore-$i" 2)
    rc=$(field "restore-$i" 3)
    sw=$(field "scan-$i" 2)
    sum_restore=$(echo "$sum_restore + $rw" | bc)
    if [ "$(echo "$rw > $slowest" | bc)" = 1 ]; then slowest=$rw; fi
    if [ "$(echo "$rc > $slowest_cpu" | bc)" = 1 ]; then slowest_cpu=$rc; fi
    host=$(echo "$sw + $rw" | bc)
    if [ "$(echo "$host > $slowest_host" | bc)" = 1 ]; then slowest_host=$host; fi
  done
  share=$(echo "scale=3; $single_cpu / $nodes" | bc)
  echo "round $r: single-host restore ${single_wall}s wall, ${single_cpu}s CPU (/$nodes = ${share}s);" \
       "per-node restores one after another ${sum_restore}s wall;" \
       "slowest node's restore ${slowest}s wall = $(echo "scale=2; $slowest / $share" | bc)x, ${slowest_cpu}s CPU = $(echo "scale=2; $slowest_cpu / $share" | bc)x;" \
       "slowest host's scan + restore ${slowest_host}s wall = $(echo "scale=2; $slowest_host / $share" | bc)x;" \
       "slowest node's restore against single-host wall / $nodes: $(echo "scale=2; $slowest * $nodes / $single_wall" | bc)x"
  rm -rf "$w"
done

echo
printf '%-12s %9s %9s %10s\n' command "wall s" "cpu s" "rss MiB"
for name in single $(for i in $(seq 0 $((nodes - 1))); do echo "scan-$i"; done) verdict \
    $(for i in $(seq 0 $((nodes - 1))); do echo "restore-$i"; done) assemble; do
  mid=$(( (runs + 1) / 2 ))
  w=$(awk -v k="$name" '$1==k{print $2}' "$tmp/times" | sort -n | sed -n "${mid}p")
  c=$(awk -v k="$name" '$1==k{print $3}' "$tmp/times" | sort -n | sed -n "${mid}p")
  m=$(awk -v k="$name" '$1==k{print $4}' "$tmp/times" | sort -n | sed -n "${mid}p")
  printf '%-12s %9.2f %9.2f %10.0f\n' "$name" "$w" "$c" "$((m / 1024))"
done
echo "(medians over $runs rounds; every round's assembled node files equal the single-host restore's: cmp)"
