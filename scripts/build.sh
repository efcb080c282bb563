#!/usr/bin/env bash
# Configures and builds walcut in ./build (Release with debug info), with its
# tests. WALCUT_TEST_SEAMS=ON|OFF (default ON; scripts/test.sh sets ON)
# builds the test-only targets with fault injection (walcut_seams, the
# suites); the walcut and libwalfmt that are installed never have it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B build -G Ninja "${launcher[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALCUT_WERROR=ON \
  -DWALCUT_TEST_SEAMS="${WALCUT_TEST_SEAMS:-ON}" >/dev/null
ninja -C build
