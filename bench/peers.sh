#!/usr/bin/env bash
# walcut against its peers on one machine, in the same run: PostgreSQL's
# pg_waldump, RocksDB's ldb and a RocksDB WAL replay, each on a WAL of about
# the same size as walcut's own (about 1 GB each by default).
#
#   bench/peers.sh [--install] [--size-mb N] [--rounds R] [--regen]
#
# --install   installs postgresql-15 and rocksdb-tools from Debian's
#             packages (apt-get; needs root). Without it nothing is installed
#             and a missing tool is named (exit 3).
# --size-mb   WAL size of each data set in MB (default 1024).
# --rounds    measured rounds (default 5), after one warm-up round.
# --regen     makes the data sets again (they are kept in bench/data-peers/
#             and reused while the size matches).
#
# Data (bench/data-peers/, gitignored):
#   pg/      PostgreSQL 15 WAL segments made by pgbench (scale 50, 2 clients)
#            on a throwaway cluster (fsync and synchronous_commit off: the
#            WAL records are the same, only made faster), the range
#            [start, end) in pg.range;
#   rocks/   a RocksDB directory whose one WAL holds db_bench fillrandom
#            writes (16-byte keys, 100-byte values, no flush);
#   walgen/  walcut's synthetic cluster (bench/walgen, 3 nodes, 16 MiB
#            segments, seed 42), with its cuts.
# Then bench/peers_bench.py times, alternating round by round:
#   cat of each data set, crcfloor --read on walgen's segments,
#   pg_waldump --stats, pg_waldump (text), ldb dump_wal, the RocksDB WAL
#   replay (opening the DB as a secondary instance reads the whole WAL into
#   a memtable, vector and skip list; the DB itself is never written), and
#   walcut stats -j1, verify -j1, dump -j1 (with and without
#   --io-threads 0) and a restore of the last cut (-j1 with and without
#   --io-threads 0, -j2) on walgen/;
# and prints records/s, bytes/s, per wall and per CPU second, the threads
# that did work, the walcut/peer ratios and each reader against its floor.
#
# Needs: build/cli/walcut, build/bench/walgen, build/bench/crcfloor (ninja -C
# build), GNU time, python3, and for --install root and Debian's mirrors.
# PostgreSQL runs as the user postgres (the package creates it) when this
# script runs as root, else as the caller.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
install=0
size_mb=1024
rounds=5
regen=0
usage() { sed -n '2,39p' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install=1; shift ;;
    --size-mb) size_mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --regen) regen=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "peers.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$size_mb" =~ ^[0-9]+$ ]] && [ "$size_mb" -ge 16 ] || { echo "peers.sh: --size-mb wants a number >= 16" >&2; exit 2; }
[[ "$rounds" =~ ^[0-9]+$ ]] && [ "$rounds" -ge 1 ] || { echo "peers.sh: --rounds wants a number >= 1" >&2; exit 2; }

if [ "$install" = 1 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "peers.sh: --install needs root (apt-get install postgresql-15 rocksdb-tools)" >&2
    exit 3
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 rocksdb-tools >&2
fi

pgbin=/usr/lib/postgresql/15/bin
walcut="${WALCUT:-$root/build/cli/walcut}"
walgen="${WALGEN:-$root/build/bench/walgen}"
crcfloor="${CRCFLOOR:-$root/build/bench/crcfloor}"
missing=0
need() {
  if [ ! -x "$1" ]; then
    echo "peers.sh: $1 not found: $2" >&2
    missing=1
  fi
}
for t in pg_waldump pgbench initdb pg_ctl psql; do need "$pgbin/$t" "run with --install (Debian package postgresql-15)"; done
need "$(command -v ldb || echo /usr/bin/ldb)" "run with --install (Debian package rocksdb-tools)"
need "$(command -v db_bench || echo /usr/bin/db_bench)" "run with --install (Debian package rocksdb-tools)"
need "$walcut" "ninja -C build walcut"
need "$walgen" "ninja -C build walgen"
need "$crcfloor" "ninja -C build crcfloor"
need /usr/bin/time "apt-get install time"
[ "$missing" = 0 ] || exit 3

data="$root/bench/data-peers"
params="size_mb=$size_mb"
if [ "$regen" = 1 ] || [ "$(cat "$data/params" 2>/dev/null)" != "$params" ]; then
  rm -rf "$data"
fi
mkdir -p "$data"
echo "$params" >"$data/params"
bytes=$((size_mb * 1000 * 1000))

# --- walcut: walgen, 3 nodes --------------------------------------------
if [ ! -f "$data/walgen.done" ]; then
  echo "peers.sh: generating walgen/ ($size_mb MB)" >&2
  rm -rf "$data/walgen"
  "$walgen" "$data/walgen" --nodes 3 --bytes $((bytes / 3)) --segment-size 16MiB --seed 42 --quiet >/dev/null
  touch "$data/walgen.done"
fi

# --- RocksDB: db_bench fillrandom into one WAL, never flushed -----------
if [ ! -f "$data/rocks.done" ]; then
  echo "peers.sh: generating rocks/ ($size_mb MB of WAL)" >&2
  rm -rf "$data/rocks" "$data/rocks-skiplist"
  # A WAL record here is one write batch of one put: 16-byte key, 100-byte
  # value, about 138 bytes with its headers.
  num=$((bytes / 138))
  db_bench --benchmarks=fillrandom --num="$num" --key_size=16 --value_size=100 --db="$data/rocks" \
    --write_buffer_size=$((4 * bytes)) --db_write_buffer_size=$((4 * bytes)) --max_write_buffer_number=2 \
    --disable_auto_compactions=1 --compression_type=none --threads=1 >"$data/rocks.db_bench.txt" 2>&1 || {
    cat "$data/rocks.db_bench.txt" >&2
    echo "peers.sh: db_bench failed" >&2
    exit 1
  }
  ls "$data"/rocks/*.log >/dev/null 2>&1 || { echo "peers.sh: db_bench left no WAL in $data/rocks" >&2; exit 1; }
  if ls "$data"/rocks/*.sst >/dev/null 2>&1; then
    echo "peers.sh: db_bench flushed to SST files; the WAL does not hold every write" >&2
    exit 1
  fi
  echo "$num" >"$data/rocks.writes"
  touch "$data/rocks.done"
fi

# The replay reads the WAL into a memtable, run twice: rocks/ with the vector
# memtable (appends, sorted once when read, the cheapest RocksDB has for a
# bulk load) and rocks-skiplist/ with the default skip list. The secondary
# instance takes its options from the DB's OPTIONS file; rocks-skiplist/ is
# rocks/ hard-linked (the same WAL), and sed -i writes each OPTIONS file
# anew, so the two directories differ only there. Setting the factory is
# idempotent and leaves the WAL alone.
[ -d "$data/rocks-skiplist" ] || cp -al "$data/rocks" "$data/rocks-skiplist"
for f in "$data"/rocks-skiplist/OPTIONS-*; do
  sed -i 's/^\([[:space:]]*memtable_factory=\).*/\1SkipListFactory/' "$f"
done
grep -q 'memtable_factory=SkipListFactory' "$data"/rocks-skiplist/OPTIONS-* ||
  { echo "peers.sh: no memtable_factory line in $data/rocks-skiplist/OPTIONS-*" >&2; exit 1; }
for f in "$data"/rocks/OPTIONS-*; do
  sed -i 's/^\([[:space:]]*memtable_factory=\).*/\1VectorRepFactory/' "$f"
done
grep -q 'memtable_factory=VectorRepFactory' "$data"/rocks/OPTIONS-* ||
  { echo "peers.sh: no memtable_factory line in $data/rocks/OPTIONS-*" >&2; exit 1; }

# --- PostgreSQL: pgbench on a throwaway cluster --------------------------
if [ ! -f "$data/pg.done" ]; then
  echo "peers.sh: generating pg/ ($size_mb MB of WAL with pgbench)" >&2
  pgdata="$data/pgcluster"
  rm -rf "$pgdata" "$data/pg"
  mkdir -p "$pgdata" "$data/pgrun"
  as_pg=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || { echo "peers.sh: no user postgres (install postgresql-15)" >&2; exit 3; }
    chown postgres "$pgdata" "$data/pgrun"
    as_pg=(runuser -u postgres --)
  fi
  port=54329
  stop_pg() { "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdata" -m fast stop >/dev/null 2>&1 || true; }
  trap stop_pg EXIT
  "${as_pg[@]}" "$pgbin/initdb" -D "$pgdata" -A trust -U postgres >"$data/pg.initdb.txt" 2>&1
  cat >>"$pgdata/postgresql.conf" <<EOF
port = $port
listen_addresses = ''
unix_socket_directories = '$data/pgrun'
max_wal_size = $((4 * size_mb + 1024))MB
min_wal_size = $((2 * size_mb + 1024))MB
wal_keep_size = $((2 * size_mb + 1024))MB
checkpoint_timeout = 1d
fsync = off
synchronous_commit = off
full_page_writes = on
EOF
  "${as_pg[@]}" "$pgbin/pg_ctl" -D "$pgdata" -l "$data/pgrun/pg.log" -w start >/dev/null
  psql=("${as_pg[@]}" "$pgbin/psql" -h "$data/pgrun" -p "$port" -U postgres -d postgres -qAtX)
  "${as_pg[@]}" "$pgbin/pgbench" -h "$data/pgrun" -p "$port" -U postgres -i -s 50 -q postgres >"$data/pg.pgbench.txt" 2>&1
  start="$("${psql[@]}" -c "CHECKPOINT; SELECT pg_switch_wal(); SELECT pg_current_wal_lsn();" | tail -n 1)"
  while :; do
    "${as_pg[@]}" "$pgbin/pgbench" -h "$data/pgrun" -p "$port" -U postgres -n -c 2 -j 2 -t 5000 postgres \
      >>"$data/pg.pgbench.txt" 2>&1
    done_bytes="$("${psql[@]}" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$start')::bigint;")"
    [ "$done_bytes" -ge "$bytes" ] && break
  done
  end="$("${psql[@]}" -c "SELECT pg_current_wal_lsn();")"
  stop_pg
  trap - EXIT
  # The segments holding [start, end): names are timeline, log and segment
  # number (16 MiB segments, the default).
  mkdir -p "$data/pg"
  segname() {  # LSN "HI/LO" -> the name of the segment holding it
    local hi="${1%/*}" lo="${1#*/}"
    printf '%08X%08X%08X' 1 $((16#$hi)) $((16#$lo / 16777216))
  }
  first="$(segname "$start")"
  last="$(segname "$end")"
  for f in "$pgdata"/pg_wal/0000000100000*; do
    n="$(basename "$f")"
    if [[ ! "$n" > "$last" ]] && [[ ! "$n" < "$first" ]]; then cp "$f" "$data/pg/"; fi
  done
  printf '%s %s\n' "$start" "$end" >"$data/pg.range"
  rm -rf "$pgdata" "$data/pgrun"
  touch "$data/pg.done"
fi

exec python3 "$root/bench/peers_bench.py" --rounds "$rounds" --data "$data" \
  --walcut "$walcut" --crcfloor "$crcfloor" --pgbin "$pgbin"
