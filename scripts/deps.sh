#!/usr/bin/env bash
# Installs what walcut needs to build and test, from Debian's packages, when
# it is missing. Idempotent; does nothing when everything is there.
set -euo pipefail
pkgs=(cmake ninja-build g++ clang clang-format libclang-rt-14-dev libcli11-dev libzstd-dev libfmt-dev
      nlohmann-json3-dev catch2 zstd librsvg2-bin libxxhash-dev ccache
      dpkg-dev pkgconf groff-base zsh parallel)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
