#!/usr/bin/env bash
# Configures and builds walcut in ./build (Release with debug info).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWALCUT_WERROR=ON >/dev/null
ninja -C build
