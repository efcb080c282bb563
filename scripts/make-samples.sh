#!/usr/bin/env bash
# Regenerates samples/ byte for byte: small clusters made by `walcut run` with
# fixed seeds, two of them then damaged on purpose. samples/README.md says
# what each one holds. Usage: scripts/make-samples.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
w="$build/cli/walcut"
[ -x "$w" ] || { echo "make-samples.sh: $w not built (run scripts/build.sh)" >&2; exit 3; }
command -v zstd >/dev/null || { echo "make-samples.sh: zstd not installed (scripts/deps.sh)" >&2; exit 3; }

# The options every sample shares: 3 nodes, 1 backup, bank, 6 cuts, 64 KiB
# segments (so each node has several, the older ones archived as .wal.zst),
# and a fixed epoch (the wall-clock time of cluster time 0, in cluster.json)
# so that the samples do not depend on when they were made.
common=(--nodes 3 --backups 1 --workload bank --txs 3000 --cut-every 400 --seed 12 --segment-size 64K
        --epoch 2026-11-30T12:00:00Z)

run() {  # run DIR OPTIONS...: walcut run, summary to stderr (it holds wall-clock times)
  local dir=$1; shift
  rm -rf "$dir"
  "$w" run "$dir" "$@" >&2
}

# The byte at OFFSET of FILE, as a number.
byte_at() { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }

# healthy: six consistent cuts, a full snapshot between cuts 3 and 4.
run samples/healthy "${common[@]}" --full-snapshot-at 1500

# crash-during-cut: node 2 crashes at 128.5 ms, after its CUT_START(3) and
# before its CUT_FINISH(3), and restarts 5 ms later. Cut 3 is inconsistent,
# cuts 1, 2, 4 and 5 consistent.
run samples/crash-during-cut "${common[@]}" --crash 2@128500us+5ms

# corrupted-segment: the healthy cluster with one byte flipped inside a
# record of node 1's segment 2 (of 0..6), decompressed so the damage is
# visible in the plain file.
rm -rf samples/corrupted-segment
cp -r samples/healthy samples/corrupted-segment
wal=samples/corrupted-segment/node-1/wal
seg=$wal/0000000000000002.wal
zstd -q -d -f "$wal/0000000000000002.wal.zst" -o "$seg"
rm "$wal/0000000000000002.wal.zst"
# The first record at or after offset 0x8000; flip the low bit of its 5th
# payload byte (record header: 16 bytes).
rec=$("$w" dump --node 1 --from 2/00008000 -n 1 --format json "$wal" | sed -n 's/.*"offset":\([0-9]*\).*/\1/p')
[ -n "$rec" ] || { echo "make-samples.sh: no record after 2/00008000 on node 1" >&2; exit 3; }
off=$((rec + 16 + 4))
printf '%b' "\\x$(printf %02x $(( $(byte_at "$seg" $off) ^ 1 )))" | dd of="$seg" bs=1 seek=$off conv=notrunc status=none
printf 'corrupted-segment: node 1, %s, record at 2/%08X, byte %d (0x%X) flipped\n' "${seg##*/}" "$rec" "$off" "$off" >&2

# torn-tail: the healthy cluster with node 2's last record cut short, as a
# crash in the middle of an append leaves it (walcut run always restarts a
# crashed node, and the restart cuts a torn tail off, so the script makes it).
rm -rf samples/torn-tail
cp -r samples/healthy samples/torn-tail
plain=(samples/torn-tail/node-2/wal/*.wal)  # the glob sorts; one plain segment, the last
last=${plain[-1]}
truncate -s -9 "$last"
printf 'torn-tail: node 2, %s cut to %d bytes\n' "${last##*/}" "$(stat -c %s "$last")" >&2

# pruned: the healthy cluster with a full snapshot after every 1,200
# workload transactions (full-1200, full-2400) and WAL retention on: after
# each snapshot every node deletes its segments wholly before the one holding
# its SNAPSHOT record (or its last cut record, if earlier), so the oldest
# segments are gone.
run samples/pruned "${common[@]}" --full-snapshot-every 1200 --wal-retention after-snapshot

du -sh samples/healthy samples/crash-during-cut samples/corrupted-segment samples/torn-tail samples/pruned >&2
