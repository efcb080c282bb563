#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz/ and
# fuzzes each in turn, splitting SECONDS (default 60) evenly between them.
# Exits non-zero when any target reports a crash, leak, timeout, OOM,
# sanitizer report or violated invariant; the reproducer is left in
# build-fuzz/artifacts/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#
# A target is fuzz/fuzz_<name>.cpp (built as fuzz_<name>, listed in
# fuzz/CMakeLists.txt). Its seeds are fuzz/corpus/<name>/ (read only; new
# inputs go to build-fuzz/corpus/<name>/), its dictionary fuzz/dict/<name>.dict
# when present, and its own libFuzzer flags the "// fuzz.sh:" line of the
# .cpp. TARGET names a subset (default: every target).
#
# Environment: FUZZ_BUILD_DIR (default build-fuzz), WALCUT_FUZZ_ARGV_BIN (the
# walcut fuzz_argv runs; default build/cli/walcut), FUZZ_EXTRA (more libFuzzer
# flags for every target, e.g. "-fork=2" or "-seed=1"), FUZZ_CPU_SECONDS
# (a campaign: each target runs until it has used that much CPU time, however
# long that takes on a shared machine; SECONDS is then ignored).
set -euo pipefail

usage() {
  echo "usage: scripts/fuzz.sh [SECONDS] [TARGET...]" >&2
  exit 2
}
seconds=60
if [ $# -gt 0 ] && [[ "$1" =~ ^[0-9]+$ ]]; then
  seconds="$1"
  shift
fi
[ "$seconds" -ge 1 ] || usage
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FUZZ_BUILD_DIR:-$root/build-fuzz}"

all=()
for f in "$root"/fuzz/fuzz_*.cpp; do
  n="$(basename "$f" .cpp)"
  all+=("${n#fuzz_}")
done
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
  [ -f "$root/fuzz/fuzz_$t.cpp" ] || {
    echo "fuzz.sh: no target '$t' (targets: ${all[*]})" >&2
    exit 2
  }
done

for tool in clang clang++ cmake ninja; do
  if ! command -v "$tool" >/dev/null; then
    echo "fuzz.sh: $tool not found (Debian: apt-get install clang cmake ninja-build)" >&2
    exit 3
  fi
done

mkdir -p "$build"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# fuzz_argv runs a walcut binary: the regular build's (scripts/test.sh builds
# it first) when there is one, so that the libraries are not compiled a second
# time with clang only for it; else this build's own (WALCUT_FUZZ_ARGV_BIN).
argv_bin=()
if [ -z "${WALCUT_FUZZ_ARGV_BIN:-}" ] && [ -x "$root/build/cli/walcut" ]; then
  argv_bin=(-DWALCUT_FUZZ_ARGV_BIN="$root/build/cli/walcut")
elif [ -n "${WALCUT_FUZZ_ARGV_BIN:-}" ]; then
  argv_bin=(-DWALCUT_FUZZ_ARGV_BIN="$WALCUT_FUZZ_ARGV_BIN")
fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja "${launcher[@]}" "${argv_bin[@]}" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALCUT_FUZZ=ON -DBUILD_TESTING=OFF >"$build/configure.log" 2>&1 || {
  cat "$build/configure.log" >&2
  echo "fuzz.sh: configure failed" >&2
  exit 3
}
ninja -C "$build" "${targets[@]/#/fuzz_}"

# Targets that go through files (snapshot, restore_manifest) write them
# under TMPDIR; tmpfs keeps the snapshot writer's fsync cheap.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
  export TMPDIR=/dev/shm
fi

# The time is split evenly; every target gets at least one second.
each=$((seconds / ${#targets[@]}))
[ "$each" -ge 1 ] || each=1
cpu_budget="${FUZZ_CPU_SECONDS:-}"
if [ -n "$cpu_budget" ]; then
  [[ "$cpu_budget" =~ ^[0-9]+$ ]] && [ "$cpu_budget" -ge 1 ] || usage
  each=$((cpu_budget * 1000))  # wall-time cap far above the CPU budget
fi
ticks="$(getconf CLK_TCK)"
# CPU seconds (user + system) used so far by process $1.
cpu_of() { awk -v t="$ticks" '{ sub(/^.*\) /, ""); print int(($12 + $13) / t) }' "/proc/$1/stat" 2>/dev/null || echo 0; }
artifacts="$build/artifacts"
mkdir -p "$artifacts"
failed=()
printf '%-18s %5s %5s %10s %8s %7s %7s  %s\n' target wall cpu execs exec/s cov ft result
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  seeds="$root/fuzz/corpus/$t"
  mkdir -p "$corpus"
  dirs=("$corpus")
  [ -d "$seeds" ] && dirs+=("$seeds")
  flags=()
  [ -f "$root/fuzz/dict/$t.dict" ] && flags+=(-dict="$root/fuzz/dict/$t.dict")
  # shellcheck disable=SC2207
  flags+=($(sed -n 's|^// fuzz.sh:||p' "$root/fuzz/fuzz_$t.cpp"))
  log="$build/fuzz-$t.log"
  set +e
  start=$SECONDS
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
  "$build/fuzz/fuzz_$t" \
    -max_total_time="$each" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
    -artifact_prefix="$artifacts/$t-" "${flags[@]}" ${FUZZ_EXTRA:-} \
    "${dirs[@]}" >"$log" 2>&1 &
  pid=$!
  cpu=0
  interrupted=0
  while kill -0 "$pid" 2>/dev/null; do
    sleep 2
    c="$(cpu_of "$pid")"
    [ "$c" -gt 0 ] && cpu="$c"
    if [ -n "$cpu_budget" ] && [ "$cpu" -ge "$cpu_budget" ] && [ "$interrupted" = 0 ]; then
      kill -INT "$pid" 2>/dev/null
      interrupted=1
    fi
  done
  wait "$pid"
  rc=$?
  # libFuzzer exits 72 when interrupted: here that is the end of the budget.
  [ "$interrupted" = 1 ] && [ "$rc" = 72 ] && rc=0
  wall=$((SECONDS - start))
  set -e
  final() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
  cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2 || true)"
  ft="$(grep -oE 'ft: [0-9]+' "$log" | tail -n 1 | cut -d' ' -f2 || true)"
  result=ok
  if [ "$rc" -ne 0 ] || grep -qE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: |invariant violated" "$log"; then
    result="FAILED (exit $rc, log $log)"
    failed+=("$t")
  fi
  printf '%-18s %5s %5s %10s %8s %7s %7s  %s\n' "$t" "$wall" "$cpu" "$(final number_of_executed_units)" \
    "$(final average_exec_per_sec)" "${cov:-?}" "${ft:-?}" "$result"
done

if [ ${#failed[@]} -gt 0 ]; then
  for t in "${failed[@]}"; do
    echo "--- fuzz_$t (build-fuzz/fuzz-$t.log):" >&2
    grep -E -m 5 -A 12 "ERROR: |runtime error:|invariant violated" "$build/fuzz-$t.log" >&2 || tail -n 25 "$build/fuzz-$t.log" >&2
  done
  echo "fuzz.sh: FAILED: ${failed[*]}; reproducers in $artifacts/:" >&2
  ls -l "$artifacts" >&2 || true
  exit 1
fi
if [ -n "$cpu_budget" ]; then
  echo "fuzz.sh: OK, ${#targets[@]} targets, no crash in ${cpu_budget} CPU seconds each"
else
  echo "fuzz.sh: OK, ${#targets[@]} targets, no crash in ${each}s each"
fi
