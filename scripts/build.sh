#!/usr/bin/env bash
# Configures and builds walcut in ./build (Release with debug info).
#   bash scripts/build.sh          every target: walcut, the tests, benchmarks (scripts/test.sh)
#   bash scripts/build.sh walcut   only the targets named, after installing only the packages
#                                  configuring and compiling need (scripts/demo.sh)
# WALCUT_TEST_SEAMS=ON|OFF (default ON) builds the test-only targets with fault
# injection (walcut_seams, the suites); the walcut and libwalfmt that are
# installed never have it.
set -euo pipefail
cd "$(dirname "$0")/.."
if (($#)); then bash scripts/deps.sh demo; else bash scripts/deps.sh; fi
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALCUT_WERROR=ON \
  -DWALCUT_TEST_SEAMS="${WALCUT_TEST_SEAMS:-ON}" >/dev/null
ninja -C build "$@"
