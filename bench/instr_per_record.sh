#!/usr/bin/env bash
# Instructions per record of walcut stats / verify and of the bare loops
# (crcfloor), counted by valgrind's cachegrind: deterministic, unlike the
# clock on a shared machine. The count is marginal: one run on the first
# segment of a node, one on its first four, and the difference divided by
# the difference in records, so that start-up (dynamic linking, option
# parsing) is left out.
#
#   bench/instr_per_record.sh [WAL_DIR]   (default bench/data/plain/node-0/wal)
#
# Needs valgrind (Debian: apt-get install valgrind), build/cli/walcut and
# build/bench/crcfloor (WALCUT= and CRCFLOOR= point at others), jq.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wal="${1:-$root/bench/data/plain/node-0/wal}"
walcut="${WALCUT:-$root/build/cli/walcut}"
crcfloor="${CRCFLOOR:-$root/build/bench/crcfloor}"
command -v valgrind >/dev/null || { echo "instr_per_record.sh: valgrind missing (apt-get install valgrind)" >&2; exit 3; }
mapfile -t segs < <(find "$wal" -name '*.wal' -type f | sort | head -n 4)
[ "${#segs[@]}" = 4 ] || { echo "instr_per_record.sh: $wal needs at least 4 plain segments" >&2; exit 3; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/one/wal" "$tmp/four/wal"
ln -s "$(realpath "${segs[0]}")" "$tmp/one/wal/"
for s in "${segs[@]}"; do ln -s "$(realpath "$s")" "$tmp/four/wal/"; done
r1=$("$walcut" stats --format json "$tmp/one/wal" | jq .records)
r4=$("$walcut" stats --format json "$tmp/four/wal" | jq .records)
ir() { valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null |
  awk '/I *refs/ {gsub(",", "", $NF); print $NF}'; }
echo "records: $r1 in one segment, $r4 in four"
for c in "stats -j1" "verify -j1" "crcfloor" "crcfloor --read" "crcfloor --read --inline-header-crc"; do
  case "$c" in
    crcfloor*) read -ra a <<<"${c#crcfloor}"; i1=$(ir "$crcfloor" "${a[@]}" "$tmp"/one/wal/*.wal)
               i4=$(ir "$crcfloor" "${a[@]}" "$tmp"/four/wal/*.wal) ;;
    *) read -ra a <<<"$c"; i1=$(ir "$walcut" "${a[@]}" "$tmp/one/wal"); i4=$(ir "$walcut" "${a[@]}" "$tmp/four/wal") ;;
  esac
  printf '%-40s %12s %12s  %6.1f per record\n' "$c" "$i1" "$i4" "$(echo "($i4 - $i1) / ($r4 - $r1)" | bc -l)"
done
