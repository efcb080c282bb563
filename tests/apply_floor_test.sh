#!/usr/bin/env bash
# bench/apply_floor.py with stand-ins for walcut and statebench (scripts that
# print what the real ones print): its medians and ratios from known
# figures, and each refusal (exit 1, or 2 for argparse, one line naming what
# is wrong).
#   apply_floor_test.sh SOURCE_DIR
set -euo pipefail
src="$1"
script="$src/bench/apply_floor.py"
source "$(dirname "$0")/expect_lib.sh"
use_temp_dir
tmp="$T"
mkdir "$tmp/data"
# walcut: 8 M writes per apply-CPU-second on node 0 and 10 on node 1; with
# --dry-run 20 and 25.
cat > "$tmp/walcut" <<'W'
#!/usr/bin/env bash
if [[ " $* " == *" --dry-run "* ]]; then
  echo '{"nodes":[{"writes_applied":20000000,"apply_cpu_seconds":1.0},{"writes_applied":25000000,"apply_cpu_seconds":1.0}]}'
else
  echo '{"nodes":[{"writes_applied":8000000,"apply_cpu_seconds":1.0},{"writes_applied":10000000,"apply_cpu_seconds":1.0}]}'
fi
W
cat > "$tmp/statebench" <<'S'
#!/usr/bin/env bash
echo "wide fresh memory: 1806000 writes, 1539994 keys of 20 bytes, values of 93 bytes: 0.5 s CPU, 250 ns/write, 4.00 M writes/s"
echo "wide reused memory: 1806000 writes, 1539994 keys of 20 bytes, values of 93 bytes: 0.2 s CPU, 100 ns/write, 20.00 M writes/s"
S
printf '#!/usr/bin/env bash\necho nothing useful\n' > "$tmp/quiet"
printf '#!/usr/bin/env bash\necho broken >&2\nexit 3\n' > "$tmp/broken"
chmod +x "$tmp/walcut" "$tmp/statebench" "$tmp/quiet" "$tmp/broken"
touch "$tmp/plain"

out=$(python3 "$script" --rounds 2 --data "$tmp/data" --walcut "$tmp/walcut" --statebench "$tmp/statebench")
echo "$out" | grep -qx "round 1: apply 8.00 / 10.00; dry run 20.00 / 25.00; insert loop fresh 4.00, reused 20.00 (M writes per CPU second)" \
  || fail "round line: $out"
echo "$out" | grep -qx "node 0: apply pass 8.00 M writes per CPU second (8.00-8.00); dry run 20.00, 0.40x of it; insert loop (fresh memory) 4.00, 2.00x of it (2.00-2.00)" \
  || fail "node 0 line: $out"
echo "$out" | grep -qx "node 1: apply pass 10.00 M writes per CPU second (10.00-10.00); dry run 25.00, 0.40x of it; insert loop (reused memory) 20.00, 0.50x of it (0.50-0.50)" \
  || fail "node 1 line: $out"

refused() {  # exit message args...: that exit, and the message on the last line
  local code="$1" want="$2"
  shift 2
  set +e
  expect_rc "$code" "" python3 "$script" "$@"
  set -e
  tail -n 1 "$T/err" | grep -qF -- "$want" || fail "$*: said '$(cat "$T/err")', expected '$want'"
}
ok=(--data "$tmp/data" --walcut "$tmp/walcut" --statebench "$tmp/statebench")
refused 1 "apply_floor.py: --rounds wants at least 1" --rounds 0 "${ok[@]}"
refused 2 "invalid int value: 'x'" --rounds x "${ok[@]}"
refused 1 "apply_floor.py: $tmp/plain is not an executable (ninja -C build?)" --data "$tmp/data" --walcut "$tmp/plain" --statebench "$tmp/statebench"
refused 1 "apply_floor.py: $tmp/missing is not an executable (ninja -C build?)" --data "$tmp/data" --walcut "$tmp/walcut" --statebench "$tmp/missing"
refused 1 "apply_floor.py: $tmp/plain is not a directory (bash bench/peers.sh makes it)" --data "$tmp/plain" --walcut "$tmp/walcut" --statebench "$tmp/statebench"
refused 1 "exited with 3: broken" --rounds 1 --data "$tmp/data" --walcut "$tmp/broken" --statebench "$tmp/statebench"
refused 1 "apply_floor.py: $tmp/broken --keys 5500000 --writes 1806000 --key-bytes 20 exited with 3" --rounds 1 --data "$tmp/data" --walcut "$tmp/walcut" --statebench "$tmp/broken"
refused 1 "apply_floor.py: statebench printed no fresh and reused rates: nothing useful" --rounds 1 --data "$tmp/data" --walcut "$tmp/walcut" --statebench "$tmp/quiet"
refused 1 "printed no per-node writes_applied and apply_cpu_seconds" --rounds 1 --data "$tmp/data" --walcut "$tmp/quiet" --statebench "$tmp/statebench"
echo "apply_floor_test: ok"
