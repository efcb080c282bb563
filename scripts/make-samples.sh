#!/usr/bin/env bash
# Regenerates samples/ byte for byte from fixed seeds (walgen, walfmt's own
# writer). Usage: scripts/make-samples.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
walgen="$build/bench/walgen"
[ -x "$walgen" ] || { echo "make-samples.sh: $walgen not built (run scripts/build.sh)" >&2; exit 3; }

rm -rf samples/synthetic-healthy samples/synthetic-torn samples/synthetic-corrupt
# Healthy: 3 nodes, 1 backup, small segments so that older ones are archived as .wal.zst.
"$walgen" samples/synthetic-healthy --nodes 3 --bytes 160K --segment-size 32K --seed 7 --cut-every 150 --compress -q
# Torn tail: the same cluster, node 2's last segment cut inside its last record.
cp -r samples/synthetic-healthy samples/synthetic-torn
last=$(ls samples/synthetic-torn/node-2/wal/*.wal | sort | tail -n 1)
truncate -s -9 "$last"
# Corrupted: node 1's second segment (plain copy of the archive) with one byte changed mid-file.
cp -r samples/synthetic-healthy samples/synthetic-corrupt
seg=samples/synthetic-corrupt/node-1/wal/0000000000000001.wal
zstd -q -d -f samples/synthetic-corrupt/node-1/wal/0000000000000001.wal.zst -o "$seg"
rm samples/synthetic-corrupt/node-1/wal/0000000000000001.wal.zst
printf '\x42' | dd of="$seg" bs=1 seek=5000 conv=notrunc status=none
du -sh samples/synthetic-* >&2
