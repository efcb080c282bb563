#!/usr/bin/env bash
# Every C++ file of the tree is formatted as .clang-format says (clang-format
# 14, Debian's `clang-format` package). Prints the files that are not and
# exits 1; `clang-format -i FILE` fixes one. Run by ctest as "build: clang-format".
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
command -v clang-format >/dev/null || { echo "check-format: clang-format is not installed (bash scripts/deps.sh)" >&2; exit 1; }
mapfile -t files < <(find walfmt node cut recovery repo cli tests bench fuzz examples -name '*.cpp' -o -name '*.h' | sort)
err=$(mktemp)
trap 'rm -f "$err"' EXIT
if ! clang-format --dry-run --Werror "${files[@]}" >/dev/null 2>"$err"; then
  grep -o '^[^ :]*:[0-9]*:[0-9]*: error' "$err" | cut -d: -f1 | sort -u |
    sed 's/^/check-format: not formatted (clang-format -i FILE): /' >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
