#!/usr/bin/env bash
# Builds walcut and runs every test: the Catch2 suites through CTest, then a
# short libFuzzer run of every fuzz target (FUZZ_SECONDS in all, default 60; 0 skips).
set -euo pipefail
cd "$(dirname "$0")/.."
WALCUT_TEST_SEAMS=ON bash scripts/build.sh  # the fault-injection tests need it
ctest --test-dir build --output-on-failure -j "$(nproc)"
if [ "${FUZZ_SECONDS:-60}" != 0 ] && [ -f scripts/fuzz.sh ]; then
  bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
fi
