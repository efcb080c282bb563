#!/usr/bin/env bash
# Benchmark of the WAL inspection commands (issue 2, item 8).
#
# Generates a cluster of synthetic WAL with walgen (3 nodes x 350 MiB by
# default: 1.03 GiB) under bench/data/plain, and the same records with every
# segment zstd-compressed under bench/data/zst; warms the page cache; then
# times, side by side in one run:
#   cat FILES > /dev/null                      (the floor: page-cache reads)
#   crcfloor FILES, crcfloor --read FILES      (the bare checksum loop, mapped / read())
#   walcut stats DIR, walcut stats --jobs 1 DIR
#   walcut verify DIR, walcut verify --jobs 1 DIR
#   walcut dump DIR > /dev/null, walcut dump --jobs 1 DIR > /dev/null
# on both copies, plus zstd -dc of the compressed files to /dev/null (the
# decompression floor). Each command runs RUNS times; the table shows the
# median wall time, records/s, GB/s of WAL (uncompressed) bytes, the ratio to
# cat (and to zstd -dc for the compressed copy), and the peak RSS.
#
#   bench/run_walfmt.sh [--nodes N] [--bytes SIZE] [--segment-size SIZE]
#                       [--seed S] [--runs R] [--regen]
#
# Needs: build/bench/walgen, build/bench/crcfloor and build/cli/walcut
# (ninja -C build), GNU time
# (/usr/bin/time), zstd, jq. It installs nothing; it says what is missing.
# The generated data stays in bench/data/ (gitignored) and is reused when the
# parameters match; --regen rebuilds it. WALCUT_OLD=BINARY adds `dump (old)`
# rows: an older walcut's dump timed in the same run, for before/after
# figures from one machine state.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
nodes=3
bytes=350MiB
segsize=16MiB
seed=42
runs=5
regen=0
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --bytes) bytes="$2"; shift 2 ;;
    --segment-size) segsize="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --regen) regen=1; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "run_walfmt.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

walgen="${WALGEN:-$root/build/bench/walgen}"
walcut="${WALCUT:-$root/build/cli/walcut}"
walcut_old="${WALCUT_OLD:-}"
crcfloor="${CRCFLOOR:-$root/build/bench/crcfloor}"
data="$root/bench/data"
plain="$data/plain"
zst="$data/zst"

missing=0
need() {
  if [ ! -x "$1" ]; then
    echo "run_walfmt.sh: missing $1 ($2)" >&2
    missing=1
  fi
}
need "$walgen" "build it: cmake -S . -B build -G Ninja && ninja -C build walgen"
need /usr/bin/time "GNU time; Debian: apt-get install time"
for tool in zstd jq; do
  command -v "$tool" >/dev/null || { echo "run_walfmt.sh: missing $tool (Debian: apt-get install $tool)" >&2; missing=1; }
done
[ "$missing" = 0 ] || exit 3
have_walcut=1
if [ ! -x "$walcut" ]; then
  echo "run_walfmt.sh: $walcut not built yet: measuring cat and zstd only" >&2
  have_walcut=0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# Private copies: a concurrent rebuild of build/ must not swap binaries mid-run.
if [ "$have_walcut" = 1 ]; then cp "$walcut" "$tmp/walcut"; walcut="$tmp/walcut"; fi
if [ -x "$crcfloor" ]; then cp "$crcfloor" "$tmp/crcfloor"; crcfloor="$tmp/crcfloor"; fi
if [ -n "$walcut_old" ]; then
  [ -x "$walcut_old" ] || { echo "run_walfmt.sh: WALCUT_OLD=$walcut_old is not an executable" >&2; exit 3; }
  cp "$walcut_old" "$tmp/walcut-old"
  walcut_old="$tmp/walcut-old"
fi

# --- Data.
# The data depends on the arguments and on the code that writes it.
code_hash=$(cat "$root/bench/walgen.cpp" "$root"/walfmt/{writer,record,segment}.cpp 2>/dev/null | sha1sum | cut -c1-12)
params="nodes=$nodes bytes=$bytes segment-size=$segsize seed=$seed code=$code_hash"
if [ "$regen" = 1 ] || [ ! -f "$data/params" ] || [ "$(cat "$data/params")" != "$params" ]; then
  rm -rf "$data"
  mkdir -p "$data"
  echo "generating: walgen --nodes $nodes --bytes $bytes --segment-size $segsize --seed $seed" >&2
  "$walgen" "$plain" --nodes "$nodes" --bytes "$bytes" --segment-size "$segsize" --seed "$seed" >"$data/plain.json"
  "$walgen" "$zst" --nodes "$nodes" --bytes "$bytes" --segment-size "$segsize" --seed "$seed" \
    --compress --archive-last >"$data/zst.json"
  echo "$params" >"$data/params"
fi
mapfile -t plain_files < <(find "$plain" -name '*.wal' -type f | sort)
mapfile -t zst_files < <(find "$zst" -name '*.wal.zst' -type f | sort)
plain_bytes=$(cat "${plain_files[@]}" | wc -c)
zst_bytes=$(cat "${zst_files[@]}" | wc -c)
gen_records=$(jq .records "$data/plain.json")
if [ "$(find "$zst" -name '*.wal' -type f | wc -l)" != 0 ]; then
  echo "run_walfmt.sh: $zst holds plain segments; rerun with --regen" >&2
  exit 3
fi

# --- Page cache: read everything twice; say how much is resident when
# fincore (util-linux) can tell.
for _ in 1 2; do cat "${plain_files[@]}" "${zst_files[@]}" >/dev/null; done
if command -v fincore >/dev/null; then
  resident=$(fincore -b -n -o RES "${plain_files[@]}" "${zst_files[@]}" | awk '{s+=$1} END {print s}')
  echo "page cache: $resident of $((plain_bytes + zst_bytes)) bytes resident" >&2
fi

# --- Records, counted by walcut itself.
records=$gen_records
if [ "$have_walcut" = 1 ]; then
  records=$("$walcut" stats --format json "$plain" | jq .records)
  zrecords=$("$walcut" stats --format json "$zst" | jq .records)
  if [ "$records" != "$gen_records" ] || [ "$zrecords" != "$gen_records" ]; then
    echo "run_walfmt.sh: record counts disagree: walgen $gen_records, walcut stats $records (plain), $zrecords (zst)" >&2
  fi
fi

# --- Timing. measure LABEL CMD...: RUNS runs, stdout to /dev/null; records
# the median and the best wall time (ns), the peak RSS (KiB, the largest of
# the runs) and the exit code of the last run.
declare -A med best rss code cpu
measure() {
  local label="$1"
  shift
  local times=() cpus=() r t0 t1 rc maxrss=0 kib u sy
  for ((r = 0; r < runs; r++)); do
    t0=$(date +%s%N)
    set +e
    /usr/bin/time -f '%M %U %S' -o "$tmp/rss" "$@" >/dev/null 2>"$tmp/err"
    rc=$?
    set -e
    t1=$(date +%s%N)
    times+=($((t1 - t0)))
    read -r kib u sy < <(tail -n 1 "$tmp/rss")
    cpus+=("$(echo "($u + $sy) * 1000000000 / 1" | bc)")
    [ "$kib" -gt "$maxrss" ] && maxrss=$kib
  done
  if [ "$rc" != 0 ]; then
    echo "run_walfmt.sh: $label exited $rc:" >&2
    head -n 5 "$tmp/err" >&2
  fi
  mapfile -t sorted < <(printf '%s\n' "${times[@]}" | sort -n)
  med[$label]=${sorted[$((runs / 2))]}
  mapfile -t sorted_cpu < <(printf '%s\n' "${cpus[@]}" | sort -n)
  cpu[$label]=${sorted_cpu[$((runs / 2))]}
  best[$label]=${sorted[0]}
  rss[$label]=$maxrss
  code[$label]=$rc
  printf '%-28s median %8.3f s  best %8.3f s  CPU %8.3f s  peak RSS %7.1f MiB  exit %s\n' "$label" \
    "$(echo "${med[$label]} / 1000000000" | bc -l)" "$(echo "${best[$label]} / 1000000000" | bc -l)" \
    "$(echo "${cpu[$label]} / 1000000000" | bc -l)" "$(echo "$maxrss / 1024" | bc -l)" "$rc" >&2
}

echo "measuring ($runs runs each) ..." >&2
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
measure "cat" cat "${plain_files[@]}"
[ -x "$crcfloor" ] && measure "crcfloor (bare CRC loop)" "$crcfloor" "${plain_files[@]}"
[ -x "$crcfloor" ] && measure "crcfloor --read" "$crcfloor" --read "${plain_files[@]}"
if [ "$have_walcut" = 1 ]; then
  measure "stats" "$walcut" stats "$plain"
  measure "stats --jobs 1" "$walcut" stats --jobs 1 "$plain"
  measure "verify" "$walcut" verify "$plain"
  measure "verify --jobs 1" "$walcut" verify --jobs 1 "$plain"
  [ -n "$walcut_old" ] && measure "dump (old)" "$walcut_old" dump "$plain"
  measure "dump" "$walcut" dump "$plain"
  measure "dump --jobs 1" "$walcut" dump --jobs 1 "$plain"
fi
measure "zst: cat" cat "${zst_files[@]}"
measure "zst: zstd -dc" zstd -dc "${zst_files[@]}"
if [ "$have_walcut" = 1 ]; then
  measure "zst: stats" "$walcut" stats "$zst"
  measure "zst: stats --jobs 1" "$walcut" stats --jobs 1 "$zst"
  measure "zst: verify" "$walcut" verify "$zst"
  measure "zst: verify --jobs 1" "$walcut" verify --jobs 1 "$zst"
  [ -n "$walcut_old" ] && measure "zst: dump (old)" "$walcut_old" dump "$zst"
  measure "zst: dump" "$walcut" dump "$zst"
  measure "zst: dump --jobs 1" "$walcut" dump --jobs 1 "$zst"
fi

# --- Table (markdown, on stdout).
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
echo "# walfmt benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- machine: $(nproc) CPUs, $cpu_model, $(awk '/MemTotal/ {printf "%.1f GiB RAM", $2/1048576}' /proc/meminfo), $(uname -sr)"
echo "- load average before/after: $load_before / $load_after"
echo "- data: walgen --nodes $nodes --bytes $bytes --segment-size $segsize --seed $seed:" \
  "$records records, $plain_bytes bytes plain ($(echo "$plain_bytes / $records" | bc) bytes/record)," \
  "$zst_bytes bytes zstd ($(echo "scale=2; $plain_bytes / $zst_bytes" | bc)x), ${#plain_files[@]} segments"
echo "- $runs runs per command, medians; files in the page cache. wall: elapsed time; CPU: user+sys of the process"
echo "  (all threads). rec/s and GB/s (10^9 bytes of uncompressed WAL) per wall second; rec/CPU-s per CPU second."
echo
echo "| command | wall s | CPU s | rec/s | rec/CPU-s | GB/s | vs cat | vs zstd -dc | peak RSS MiB | exit |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
fmt_num() { printf "%.${2}f" "$1"; }
row() {
  local label="$1" ns="${med[$1]:-}"
  [ -n "$ns" ] || return 0
  local c="${cpu[$1]}" secs csecs rps rpc gbs vs_cat vs_z=""
  [ "$c" -gt 0 ] || c=1
  secs=$(fmt_num "$(echo "$ns / 1000000000" | bc -l)" 3)
  csecs=$(fmt_num "$(echo "${cpu[$1]} / 1000000000" | bc -l)" 2)
  rps=$(fmt_num "$(echo "$records * 1000 / $ns" | bc -l)" 2)M
  rpc=$(fmt_num "$(echo "$records * 1000 / $c" | bc -l)" 2)M
  gbs=$(fmt_num "$(echo "$plain_bytes / $ns" | bc -l)" 2)
  vs_cat=$(fmt_num "$(echo "$ns / ${med[cat]}" | bc -l)" 2)x
  if [[ "$label" == zst:* ]] && [ -n "${med["zst: zstd -dc"]:-}" ]; then
    vs_z=$(fmt_num "$(echo "$ns / ${med["zst: zstd -dc"]}" | bc -l)" 2)x
  fi
  case "$label" in
    *cat|*zstd*) rps="-"; rpc="-" ;;
  esac
  printf '| `%s` | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$label" "$secs" "$csecs" "$rps" "$rpc" "$gbs" \
    "$vs_cat" "$vs_z" "$(fmt_num "$(echo "${rss[$label]} / 1024" | bc -l)" 1)" "${code[$label]}"
}
for label in "cat" "crcfloor (bare CRC loop)" "crcfloor --read" "stats" "stats --jobs 1" "verify" "verify --jobs 1" \
  "dump (old)" "dump" "dump --jobs 1" "zst: cat" "zst: zstd -dc" "zst: stats" "zst: stats --jobs 1" "zst: verify" \
  "zst: verify --jobs 1" "zst: dump (old)" "zst: dump" "zst: dump --jobs 1"; do
  row "$label"
done
echo
echo "(\`zst: cat\` reads the $zst_bytes compressed bytes; its GB/s is in uncompressed bytes like every row."
echo "\`stats\`, \`verify\` and \`dump\` without --jobs use one thread per core.)"
