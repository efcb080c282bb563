#!/usr/bin/env bash
# Benchmark of the repository on S3 against a directory repository (issue 30,
# performance): `snapshot create --incremental` and `restore --repo` with
# --repo s3://BUCKET/PREFIX on the loopback, against the same commands with
# --repo DIR, alternating round by round in one run.
#
# The cluster is bench/run_repo.sh's (bench/data-cuts-N, made the same way
# when absent: `walcut run --nodes 3 --backups 1 --workload bank --accounts
# 200000 --txs N --cuts 20 --segment-size 64MiB --seed 42`, archives
# decompressed); default --txs 300000 (136 MiB), since moto_server keeps
# every object in its Python process. The S3 server is moto_server
# (--server moto, the default; WALCUT_MOTO_SERVER, PATH or ~/.pyenv/shims),
# tests/s3_server.py (--server py: Python's standard library, objects in
# files) or both, each on a free 127.0.0.1 port, stopped by PID at the end
# and after --max-seconds (default 1800) in any case.
#
# In a directory repository and in each S3 one it makes the full artifact once
# (the first runtime full, else a synthetic full of the first consistent cut)
# and then times, RUNS rounds, each command once per round in this order:
#   walcut snapshot create CLUSTER --repo DIR --incremental --cut K --parent FULL --name i-bench-R
#   walcut snapshot create CLUSTER --repo s3://... (the same)
#   walcut restore --repo DIR i-bench-R --out OUT
#   walcut restore --repo s3://... i-bench-R --out OUT
# (each S3 command right after its directory twin; OUT removed outside the
# timing). It prints the median wall and CPU seconds of walcut (GNU time:
# user + system), the S3 server's CPU seconds during the command (utime +
# stime from /proc/PID/stat, before and after), and the ratios S3 / directory
# (wall; the median of the per-round ratios, min-max), target at most 1.5x.
# The restored node files of the two are compared byte for byte (cmp) in the
# first round.
#
#   bench/run_repo_s3.sh [--txs N] [--runs R] [--cut K] [--server moto|py|both] [--jobs J] [--tmp DIR]
#
# Needs build/cli/walcut (or WALCUT=...), python3, curl, GNU time, zstd, jq, bc.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
txs=300000
runs=3
cutk=""
server=moto
jobs=""
max_seconds=1800
tmpbase="${TMPDIR:-/tmp}"
while [ $# -gt 0 ]; do
  case "$1" in
    --txs) txs="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --cut) cutk="$2"; shift 2 ;;
    --server) server="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --max-seconds) max_seconds="$2"; shift 2 ;;
    --tmp) tmpbase="$2"; shift 2 ;;
    -h|--help) sed -n '2,34p' "$0"; exit 0 ;;
    *) echo "run_repo_s3.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$server" in moto|py|both) ;; *) echo "run_repo_s3.sh: --server moto, py or both" >&2; exit 2 ;; esac
walcut="${WALCUT:-$root/build/cli/walcut}"
for tool in /usr/bin/time zstd jq bc curl python3; do
  command -v "$tool" >/dev/null || { echo "run_repo_s3.sh: missing $tool" >&2; exit 3; }
done
[ -x "$walcut" ] || { echo "run_repo_s3.sh: $walcut not built" >&2; exit 3; }
moto=""
if [ "$server" != py ]; then
  for c in "${WALCUT_MOTO_SERVER:-}" "$(command -v moto_server || true)" "$HOME/.pyenv/shims/moto_server"; do
    if [ -n "$c" ] && [ -x "$c" ]; then moto="$c"; break; fi
  done
  [ -n "$moto" ] || { echo "run_repo_s3.sh: moto_server not found (--server py uses tests/s3_server.py)" >&2; exit 3; }
fi
tmp="$(mktemp -d "$tmpbase/run_repo_s3.XXXXXX")"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
cp "$walcut" "$tmp/walcut"
walcut="$tmp/walcut"
export AWS_ACCESS_KEY_ID=AKIDWALCUTTEST AWS_SECRET_ACCESS_KEY=walcut-test-secret AWS_REGION=us-east-1
unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL AWS_ENDPOINT_URL_S3

# The cluster: bench/run_repo.sh's.
data="$root/bench/data-cuts"
[ "$txs" = 8700000 ] || data="$root/bench/data-cuts-$txs"
params="txs=$txs accounts=200000 seed=42 code=$(cat "$root"/node/*.cpp "$root"/walfmt/*.cpp | sha1sum | cut -c1-12)"
if [ ! -f "$data.params" ] || [ "$(cat "$data.params")" != "$params" ]; then
  rm -rf "$data" "$data.params"
  echo "generating: walcut run --txs $txs --accounts 200000 --cuts 20 --segment-size 64MiB --seed 42" >&2
  "$walcut" run "$data" --nodes 3 --backups 1 --workload bank --accounts 200000 --txs "$txs" --cuts 20 \
    --segment-size 64MiB --seed 42 >&2
  while IFS= read -r z; do zstd -q -d --rm "$z"; done < <(find "$data" -name '*.wal.zst')
  echo "$params" >"$data.params"
fi
cuts_json="$("$walcut" cuts --format json "$data")"
[ -n "$cutk" ] || cutk=$(jq '.window.latest' <<<"$cuts_json")
first=$(jq '[.cuts[] | select(.status == "consistent") | .cut] | min' <<<"$cuts_json")

# The servers: name -> endpoint and pid.
declare -A endpoint spid
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_up() {
  for _ in $(seq 1 300); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "run_repo_s3.sh: no S3 server at $1" >&2
  exit 3
}
if [ "$server" != py ]; then
  port=$(free_port)
  "$moto" -H 127.0.0.1 -p "$port" >"$tmp/moto.log" 2>&1 &
  spid[moto]=$!
  pids+=($!)
  endpoint[moto]="http://127.0.0.1:$port"
  wait_up "${endpoint[moto]}"
  curl -s -o /dev/null --aws-sigv4 aws:amz:us-east-1:s3 -u "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -X PUT \
    "${endpoint[moto]}/walcut-bench"
fi
if [ "$server" != moto ]; then
  python3 "$root/tests/s3_server.py" --root "$tmp/py-objects" --port-file "$tmp/py-port" --bucket walcut-bench \
    --max-seconds "$max_seconds" >/dev/null 2>"$tmp/py.log" &
  spid[py]=$!
  pids+=($!)
  for _ in $(seq 1 300); do [ -s "$tmp/py-port" ] && break; sleep 0.1; done
  endpoint[py]="http://127.0.0.1:$(cat "$tmp/py-port")"
fi
(sleep "$max_seconds"; for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done) &
pids+=($!)
servers=()
[ "$server" != py ] && servers+=(moto)
[ "$server" != moto ] && servers+=(py)

# CPU seconds (user + system) of process $1 so far, in milliseconds.
cpu_ms() {
  local f
  read -ra f <"/proc/$1/stat"
  echo $(((f[13] + f[14]) * 1000 / $(getconf CLK_TCK)))
}

# The repositories: DIR and one per server, each with the full artifact.
declare -A repo
repo[dir]="$tmp/repo"
for s in "${servers[@]}"; do repo[$s]="s3://walcut-bench/$s"; done
jflag=()
[ -n "$jobs" ] && jflag=(-j "$jobs")
snap=""
[ -d "$data/snapshots" ] && snap=$(find "$data/snapshots" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort | head -n 1)
for r in dir "${servers[@]}"; do
  ep=()
  [ "$r" = dir ] || ep=(--s3-endpoint "${endpoint[$r]}")
  if [ -n "$snap" ]; then
    "$walcut" snapshot create "$data" --repo "${repo[$r]}" "${ep[@]}" --full --from "$snap" >&2
    full="f-$snap"
  else
    "$walcut" snapshot create "$data" --repo "${repo[$r]}" "${ep[@]}" --full --cut "$first" >&2
    full="f-cut-$first"
  fi
done
for _ in 1 2; do find "$data" -type f -exec cat {} + >/dev/null; done

declare -A walls cpus scpus
once() {
  local label="$1" srv="$2"
  shift 2
  local t0 t1 u sy c0=0 c1=0
  [ -n "$srv" ] && c0=$(cpu_ms "${spid[$srv]}")
  t0=$(date +%s%N)
  /usr/bin/time -f '%U %S' -o "$tmp/time" "$@" >"$tmp/stdout" 2>"$tmp/err" || {
    echo "run_repo_s3.sh: $label failed: $(head -c 300 "$tmp/err")" >&2
    exit 3
  }
  t1=$(date +%s%N)
  [ -n "$srv" ] && c1=$(cpu_ms "${spid[$srv]}")
  read -r u sy < <(tail -n 1 "$tmp/time")
  walls[$label]+="$((t1 - t0)) "
  cpus[$label]+="$(echo "($u + $sy) * 1000 / 1" | bc) "
  scpus[$label]+="$((c1 - c0)) "
}
median() { tr ' ' '\n' | grep -v '^$' | sort -n | sed -n "$(((runs + 1) / 2))p"; }

labels=()
for r in dir "${servers[@]}"; do labels+=("create $r"); done
for r in dir "${servers[@]}"; do labels+=("restore $r"); done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((n = 0; n < runs; n++)); do
  for r in dir "${servers[@]}"; do
    ep=()
    srv=""
    [ "$r" = dir ] || { ep=(--s3-endpoint "${endpoint[$r]}"); srv="$r"; }
    once "create $r" "$srv" "$walcut" snapshot create "$data" --repo "${repo[$r]}" "${ep[@]}" "${jflag[@]}" \
      --incremental --cut "$cutk" --parent "$full" --name "i-bench-$n"
  done
  for r in dir "${servers[@]}"; do
    ep=()
    srv=""
    [ "$r" = dir ] || { ep=(--s3-endpoint "${endpoint[$r]}"); srv="$r"; }
    rm -rf "$tmp/out-$r"
    sync
    once "restore $r" "$srv" "$walcut" restore --repo "${repo[$r]}" "${ep[@]}" "${jflag[@]}" "i-bench-$n" \
      --format json --out "$tmp/out-$r"
  done
  if [ "$n" = 0 ]; then
    for r in "${servers[@]}"; do
      for f in "$tmp/out-dir"/node-*.snap; do
        cmp -s "$f" "$tmp/out-$r/$(basename "$f")" || { echo "run_repo_s3.sh: $r restore differs: $f" >&2; exit 1; }
      done
    done
  fi
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

inc_bytes=$(jq '[.files[] | .bytes] | add' "${repo[dir]}/i-bench-0/manifest.json")
full_bytes=$(jq '[.files[] | .bytes] | add' "${repo[dir]}/$full/manifest.json")
echo "cluster $data: increment i-bench-R of cut $cutk on $full: $inc_bytes bytes in the artifact;" \
  "restore reads $full ($full_bytes bytes) and the increment; restored node files identical (cmp)"
echo "servers: $(for s in "${servers[@]}"; do printf '%s %s; ' "$s" "${endpoint[$s]}"; done)jobs ${jobs:-default}"
echo
ratio() {
  local -n list=$1
  local a b r out=""
  read -ra a <<<"${list[$2]}"
  read -ra b <<<"${list[$3]}"
  for ((r = 0; r < runs; r++)); do out+="$(echo "scale=2; ${a[$r]} / ${b[$r]}" | bc) "; done
  echo "$out"
}
minmax() { tr ' ' '\n' | grep -v '^$' | sort -n | sed -n '1p;$p' | paste -sd-; }
echo "| command | wall s | walcut CPU s | server CPU s | ratio to dir, wall (min-max) | ratio, walcut CPU |"
echo "|---|---:|---:|---:|---:|---:|"
for l in "${labels[@]}"; do
  w=$(echo "scale=2; $(echo "${walls[$l]}" | median) / 1000000000" | bc)
  c=$(echo "scale=2; $(echo "${cpus[$l]}" | median) / 1000" | bc)
  sc=-
  rw=-
  rc=-
  case "$l" in
    *dir) ;;
    *)
      sc=$(echo "scale=2; $(echo "${scpus[$l]}" | median) / 1000" | bc)
      ref="${l% *} dir"
      rw="$(ratio walls "$l" "$ref" | median)x ($(ratio walls "$l" "$ref" | minmax))"
      rc="$(ratio cpus "$l" "$ref" | median)x"
      ;;
  esac
  echo "| \`$l\` | $w | $c | $sc | $rw | $rc |"
done
echo
for s in "${servers[@]}"; do
  echo "wall ratios round by round, $s: create $(ratio walls "create $s" "create dir")/ restore" \
    "$(ratio walls "restore $s" "restore dir")(target <= 1.5)"
done
