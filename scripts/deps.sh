#!/usr/bin/env bash
# Installs what walcut needs from Debian's packages, when it is missing.
# Idempotent; does nothing when everything is there.
#   bash scripts/deps.sh        everything the tests need (scripts/build.sh, scripts/test.sh)
#   bash scripts/deps.sh demo   only what configuring the build and building `walcut` need (scripts/demo.sh)
set -euo pipefail
# Configuring (CMakeLists.txt: fmt, zstd, CLI11, nlohmann_json, Catch2 for
# the tests' targets, libxxhash for repo/, standalone Asio for node/'s real
# cluster, libcurl for repo/'s S3 client: HTTP(S) with AWS SigV4 signing, and
# OpenSSL's libcrypto (libssl-dev, listed on its own though libcurl's package
# pulls it in) for the SHA-256 of what it uploads and for the AES-256-GCM of
# an encrypted repository, repo/crypt.h) and compiling walcut.
pkgs=(cmake ninja-build g++ libcli11-dev libzstd-dev libfmt-dev nlohmann-json3-dev catch2 libxxhash-dev libasio-dev
  libcurl4-openssl-dev libssl-dev ccache)
if [ "${1:-}" != demo ]; then
  # The tests: clang and its libFuzzer runtime (scripts/fuzz.sh), the zstd and
  # rsvg-convert tools, the packaging and install checks (dpkg-dev, pkgconf,
  # groff for the manual pages, zsh for the completion), GNU parallel, and
  # clang-format (the test command checks the formatting).
  pkgs+=(clang clang-format libclang-rt-14-dev zstd librsvg2-bin dpkg-dev pkgconf groff-base zsh parallel)
fi
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
