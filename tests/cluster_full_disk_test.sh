#!/usr/bin/env bash
# A full disk under a real node: node 2's WAL directory is a small tmpfs
# that fills up under load. The node stops with a clear error naming the
# WAL file and "No space left on device" (exit 3 in its log), the others go
# on without it, and nothing it acknowledged is lost: once its WAL is back on
# a disk with room, it restarts from it, a cut is consistent, and the
# restored cluster keeps the bank total; `walcut history check` (when this
# walcut has it) passes on the whole history.
# Needs root for the tmpfs: it runs itself in a private mount namespace
# (unshare -m), so the mount never outlives it. Without root or unshare it
# exits 77 (CTest: skipped).
# Usage: cluster_full_disk_test.sh WALCUT
set -uo pipefail
W=$(realpath "$1")
if [ -z "${WALCUT_IN_NS:-}" ]; then
  if [ "$(id -u)" != 0 ] || ! unshare -m true 2>/dev/null; then
    echo "skip: needs root and unshare -m for a tmpfs mount"; exit 77
  fi
  WALCUT_IN_NS=1 exec unshare -m --propagation private bash "$0" "$W"
fi
T=$(mktemp -d)
D=$T/c
cleanup() {
  "$W" cluster down "$D" -q >/dev/null 2>&1
  mountpoint -q "$D/node-2/wal" && umount "$D/node-2/wal"
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$W" cluster up "$D" --nodes 3 --backups 1 --accounts 200 --segment-size 65536 --cut-every 300ms -q ||
  fail "cluster up"
"$W" cluster kill "$D" --node 2 -q || fail "kill"
# Node 2's WAL onto a tmpfs with room for about two more segments.
mv "$D/node-2/wal" "$D/node-2/wal.disk"
mkdir "$D/node-2/wal"
used=$(du -sk "$D/node-2/wal.disk" | cut -f1)
mount -t tmpfs -o size=$((used + 160))k tmpfs "$D/node-2/wal" || fail "mount tmpfs"
cp -a "$D/node-2/wal.disk/." "$D/node-2/wal/"
"$W" cluster restart "$D" --node 2 -q || fail "restart on the tmpfs: $(tail -3 "$D/node-2/node.log")"

"$W" load "$D" --clients 6 --duration 8s --history "$T/h.jsonl" >"$T/load.txt" 2>&1 ||
  fail "load: $(cat "$T/load.txt")"
err=$(grep -m1 "No space left on device" "$D/node-2/node.log") ||
  fail "node 2 did not report the full disk: $(tail -5 "$D/node-2/node.log")"
grep -q "wal/[0-9a-f]*\.wal" "$D/node-2/node.log" || fail "the error names no WAL file: $(tail -3 "$D/node-2/node.log")"
"$W" cluster status "$D" | grep -q "^node 2  down" || fail "node 2 still runs: $("$W" cluster status "$D")"
# The others went on: the load committed transactions after node 2 stopped.
grep -q '"outcome":"committed"' "$T/h.jsonl" || fail "nothing committed"

# Back on a disk with room: node 2 recovers from what it wrote.
rm -rf "$D/node-2/wal.disk"
mkdir "$D/node-2/wal.disk" && cp -a "$D/node-2/wal/." "$D/node-2/wal.disk/"
umount "$D/node-2/wal" && rmdir "$D/node-2/wal" && mv "$D/node-2/wal.disk" "$D/node-2/wal"
"$W" cluster restart "$D" --node 2 -q || fail "restart after the full disk: $(tail -3 "$D/node-2/node.log")"
"$W" cut start "$D" >"$T/cut.txt" || fail "cut after the full disk: $(cat "$T/cut.txt")"
"$W" cluster down "$D" -q || fail "down"
"$W" verify "$D" -q >"$T/verify.txt" 2>&1 || fail "verify: $(cat "$T/verify.txt")"
"$W" restore "$D" --latest --check auto --out "$T/r" -q >"$T/restore.txt" 2>&1 ||
  fail "restore: $(cat "$T/restore.txt")"
if "$W" help 2>/dev/null | grep -qE '^ +history '; then
  "$W" history check "$D" "$T/h.jsonl" >"$T/hist.txt" 2>&1 || fail "history check: $(cat "$T/hist.txt")"
fi
echo "ok: node 2 stopped on a full disk ($err), lost nothing acknowledged, recovered"
