#!/usr/bin/env bash
# bench/crcfloor's options: --block sizes out of range are refused (exit 2,
# one line naming the range); --read --block --rescan checks the same records
# as a plain read, counted once, and reports both passes' times.
#   crcfloor_test.sh CRCFLOOR SOURCE_DIR
set -euo pipefail
bin="$1"
src="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }
seg="$src/samples/crash-during-cut/node-2/wal/0000000000000004.wal"
[ -f "$seg" ] || fail "no sample segment $seg"
want="crcfloor: --block wants a byte count from 4096 to 64 MiB"
for bad in 12 4095 67108865 abc 4096x ""; do
  set +e
  err=$("$bin" --read --block "$bad" "$seg" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ "$rc" = 2 ] || fail "--block '$bad': exit $rc, expected 2"
  [ "$err" = "$want" ] || fail "--block '$bad': said '$err'"
done
set +e
err=$("$bin" --read --block 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" = 2 ] || fail "--block without a value: exit $rc, expected 2"
echo "$err" | grep -q "^crcfloor: unknown option --block$" || fail "--block without a value: said '$err'"
plain=$("$bin" --read "$seg")
small=$("$bin" --read --block 4096 --rescan "$seg")
field() { echo "$1" | sed -nE "s/.*\"$2\":([^,}]*).*/\\1/p"; }
[ "$(field "$plain" records)" -gt 1000 ] || fail "plain read: $plain"
[ "$(field "$small" records)" = "$(field "$plain" records)" ] || fail "--rescan counted other records: $small vs $plain"
[ "$(field "$small" bad)" = 0 ] || fail "--block 4096 --rescan: bad records: $small"
[ "$(field "$small" block)" = 4096 ] || fail "--block 4096 not reported: $small"
[ -n "$(field "$small" rescan_seconds)" ] || fail "no rescan_seconds: $small"
[ -z "$(field "$plain" rescan_seconds)" ] || fail "rescan_seconds without --rescan: $plain"
echo "ok: crcfloor --block and --rescan"
