#!/usr/bin/env bash
# Builds the libFuzzer target for the segment reader with clang
# (ASan + UBSan) in build-fuzz/, writes the seed corpus, and fuzzes for
# SECONDS (default 60). Exits non-zero on any crash, leak, timeout, OOM or
# sanitizer report; the reproducer is left in build-fuzz/artifacts/.
#
#   scripts/fuzz.sh [SECONDS]
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (parallel
# fuzzing processes, default 1), FUZZ_EXTRA (more libFuzzer flags).
set -euo pipefail

seconds="${1:-60}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [SECONDS]" >&2
  exit 2
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${FUZZ_JOBS:-1}"

for tool in clang clang++ cmake ninja; do
  if ! command -v "$tool" >/dev/null; then
    echo "fuzz.sh: $tool not found (Debian: apt-get install clang cmake ninja-build)" >&2
    exit 3
  fi
done

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALCUT_FUZZ=ON -DBUILD_TESTING=OFF >"$build/configure.log" 2>&1 || {
  cat "$build/configure.log" >&2
  echo "fuzz.sh: configure failed" >&2
  exit 3
}
ninja -C "$build" fuzz_segment_reader fuzz_seedgen

seeds="$build/fuzz-seeds"
corpus="$build/fuzz-corpus"
artifacts="$build/artifacts"
mkdir -p "$corpus" "$artifacts"
rm -rf "$seeds"
"$build/fuzz/fuzz_seedgen" "$seeds"

# The first corpus dir receives new inputs; the seeds and the committed
# corpus (fuzz/corpus, if any) are read only.
dirs=("$corpus" "$seeds")
[ -d "$root/fuzz/corpus" ] && dirs+=("$root/fuzz/corpus")

log="$build/fuzz.log"
parallel=()
if [ "$jobs" -gt 1 ]; then
  # Each worker logs to fuzz-<n>.log in the current directory.
  parallel=(-jobs="$jobs" -workers="$jobs")
  cd "$build"
fi
echo "fuzz.sh: fuzzing for ${seconds}s (log: $log)"
set +e
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
"$build/fuzz/fuzz_segment_reader" \
  -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=30 \
  -dict="$root/fuzz/segment.dict" -artifact_prefix="$artifacts/" -print_final_stats=1 \
  "${parallel[@]}" ${FUZZ_EXTRA:-} \
  "${dirs[@]}" >"$log" 2>&1
rc=$?
set -e
logs=("$log")
[ "$jobs" -gt 1 ] && logs+=("$build"/fuzz-*.log)
tail -n 25 "$log"
if [ "$rc" -ne 0 ] || grep -qE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: |invariant violated" "${logs[@]}"; then
  echo "fuzz.sh: FAILED (exit $rc); reproducers in $artifacts/:" >&2
  ls -l "$artifacts" >&2 || true
  exit 1
fi
echo "fuzz.sh: OK, no crash in ${seconds}s"
