#!/usr/bin/env bash
# scripts/check-includes.cmake on a small tree made for it, with one file of
# each kind it must refuse and of each kind it must accept: it reports
# exactly the refused ones (file:line: why) and fails; on the same tree
# without them it passes.
#
#   tests/include_rules_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
tmp=$(mktemp -d /tmp/walcut-includes-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
t=$tmp/tree
mkdir -p "$t"/{walfmt,cut,recovery,tests,bench,examples}
put() { printf '%s\n' "${@:2}" >"$t/$1"; }
put walfmt/api.h '#include "walfmt/util.h"'            # installed -> project-wide: refused
put walfmt/util.h '#include "walfmt/own.h"'            # public -> internal: refused
put walfmt/own.h ''
put cut/scan.h '#include "walfmt/api.h"'               # installed: fine
put cut/table.h ''
put cut/up.cpp '#include "recovery/restore.h"'         # cut does not link recovery: refused
put recovery/restore.h '#include "cut/scan.h"'         # public: fine
put recovery/restore.cpp '#include "walfmt/util.h"' '#include "cut/table.h"'  # internal to cut: refused (line 2)
put recovery/bad.cpp '#include "walfmt/own.h"'         # internal to walfmt: refused
put tests/cut_table_test.cpp '#include "cut/table.h"'  # cut's own tests: fine
put tests/recovery_x_test.cpp '#include "cut/table.h"' # another module's tests: refused
put bench/b.cpp '#include "cut/table.h"' '#include "walfmt/own.h"' '#include <fmt/format.h>'  # benches: fine
put examples/e.cpp '#include <walfmt/api.h>' '#include <walfmt/util.h>' '#include <vector>'  # examples: installed only (line 2 refused)
put cut/missing.cpp '#include "walfmt/nothere.h"'      # no such header: refused
cat >"$tmp/rules.txt" <<'RULES'
walfmt/api.h INSTALLED
walfmt/util.h PUBLIC
walfmt/own.h INTERNAL
cut/scan.h PUBLIC
cut/table.h INTERNAL
recovery/restore.h PUBLIC
library walfmt 
library cut walfmt
library recovery cut,walfmt
RULES
run() { cmake -DSOURCE_DIR="$t" -DRULES="$tmp/rules.txt" -P "$src/scripts/check-includes.cmake" >"$tmp/out" 2>&1; }
if run; then cat "$tmp/out"; echo "FAIL: the check passed a tree with violations" >&2; exit 1; fi
grep -E '^[a-z]+/[a-z_]+\.(h|cpp):[0-9]+: ' "$tmp/out" | sort >"$tmp/got"
cat >"$tmp/want" <<'WANT'
cut/missing.cpp:1: includes walfmt/nothere.h, which does not exist
cut/up.cpp:1: cut includes recovery/restore.h but does not link against recovery (layering)
examples/e.cpp:2: examples use the installed API only; walfmt/util.h is PUBLIC
recovery/bad.cpp:1: includes walfmt/own.h, internal to walfmt
recovery/restore.cpp:2: includes cut/table.h, internal to cut
tests/recovery_x_test.cpp:1: includes cut/table.h, internal to cut (only tests/cut_* may)
walfmt/api.h:1: an installed header includes walfmt/util.h, which is not installed (PUBLIC)
walfmt/util.h:1: a public header includes walfmt/own.h, which is internal
WANT
diff -u "$tmp/want" "$tmp/got" || { echo "FAIL: the check's findings differ (- expected, + reported)" >&2; exit 1; }
rm "$t"/cut/missing.cpp "$t"/cut/up.cpp "$t"/examples/e.cpp "$t"/recovery/bad.cpp "$t"/tests/recovery_x_test.cpp
put recovery/restore.cpp '#include "walfmt/util.h"'
put walfmt/api.h ''
put walfmt/util.h ''
put walfmt/own.cpp '#include "walfmt/own.h"'           # the library's own source: fine
run || { cat "$tmp/out"; echo "FAIL: the check refused a clean tree" >&2; exit 1; }
echo "ok: the include check reports the 8 violations and passes the clean tree"
