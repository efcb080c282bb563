#!/usr/bin/env python3
"""apply_floor.py: the restore's apply pass on a large state beside its two
floors, round by round (issue 31, items 2 and 4).

    bench/apply_floor.py [--rounds N] [--data DIR] [--walcut BIN] [--statebench BIN]
                         [--keys N] [--writes M] [--key-bytes K]

DIR is a cluster (default bench/data-peers/walgen, the peers' walgen data
that bench/peers.sh makes). Each round, in this order:
  restore --latest -j1 --format json           the apply pass of each node
                                               (writes_applied / apply_cpu_seconds)
  restore --latest -j1 --dry-run --format json the read floor: the cut decided
                                               first, then a second read that
                                               decodes every write and applies
                                               the cut rule, with no state
  statebench --keys N --writes M --key-bytes K the state floor: a bare insert
                                               loop of as many writes into a
                                               table that starts empty (fresh
                                               memory, like the first node of a
                                               -j1 restore), then again into
                                               its reused memory (like the
                                               nodes after it)
The defaults (5.5 M key space, 1.806 M writes, 20-byte keys, 93-byte values)
are one node of the walgen data at 1 GB. Prints each figure per round, the
medians, and the apply pass against each floor (node 0 against fresh
memory, the other nodes against reused memory).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import loadavg


def node_rates(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"apply_floor.py: {' '.join(cmd)} exited with {r.returncode}: {r.stderr.strip()}")
    try:
        return [n["writes_applied"] / n["apply_cpu_seconds"] / 1e6 for n in json.loads(r.stdout)["nodes"]]
    except (ValueError, KeyError, TypeError, ZeroDivisionError):
        sys.exit(f"apply_floor.py: {' '.join(cmd)} printed no per-node writes_applied and apply_cpu_seconds")


def insert_floor(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"apply_floor.py: {' '.join(cmd)} exited with {r.returncode}")
    rates = {}
    for line in r.stdout.splitlines():
        m = re.search(r"(fresh|reused) memory: .* ([0-9.]+) M writes/s", line)
        if m:
            rates[m.group(1)] = float(m.group(2))
    if set(rates) != {"fresh", "reused"}:
        sys.exit(f"apply_floor.py: statebench printed no fresh and reused rates: {r.stdout.strip()}")
    return rates["fresh"], rates["reused"]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", default=os.path.join(root, "bench", "data-peers", "walgen"))
    ap.add_argument("--walcut", default=os.path.join(root, "build", "cli", "walcut"))
    ap.add_argument("--statebench", default=os.path.join(root, "build", "bench", "statebench"))
    ap.add_argument("--keys", type=int, default=5500000)
    ap.add_argument("--writes", type=int, default=1806000)
    ap.add_argument("--key-bytes", type=int, default=20)
    a = ap.parse_args()
    if a.rounds < 1:
        sys.exit("apply_floor.py: --rounds wants at least 1")
    for path in (a.walcut, a.statebench):
        if not os.access(path, os.X_OK):
            sys.exit(f"apply_floor.py: {path} is not an executable (ninja -C build?)")
    if not os.path.isdir(a.data):
        sys.exit(f"apply_floor.py: {a.data} is not a directory (bash bench/peers.sh makes it)")
    scratch = tempfile.mkdtemp(prefix="walcut-apply-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    out = os.path.join(scratch, "out")
    restore = [a.walcut, "restore", a.data, "--latest", "-j1", "--format", "json", "-q"]
    bench = [a.statebench, "--keys", str(a.keys), "--writes", str(a.writes), "--key-bytes", str(a.key_bytes)]
    before = loadavg()
    rows = []  # per round: (apply per node, dry run per node, fresh, reused)
    try:
        for r in range(a.rounds):
            apply = node_rates(restore + ["--out", out])
            shutil.rmtree(out, ignore_errors=True)
            dry = node_rates(restore + ["--dry-run"])
            fresh, reused = insert_floor(bench)
            rows.append((apply, dry, fresh, reused))
            print(f"round {r + 1}: apply " + " / ".join(f"{x:.2f}" for x in apply) + "; dry run "
                  + " / ".join(f"{x:.2f}" for x in dry) + f"; insert loop fresh {fresh:.2f}, reused {reused:.2f}"
                  + " (M writes per CPU second)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{a.rounds} rounds; load average before {before}, after {loadavg()}")
    nodes = len(rows[0][0])

    def med(values):
        return statistics.median(values)

    for i in range(nodes):
        floor = "fresh" if i == 0 else "reused"
        ap_i = [row[0][i] for row in rows]
        dry_i = [row[1][i] for row in rows]
        ins = [row[2] if i == 0 else row[3] for row in rows]
        to_dry = [x / y for x, y in zip(ap_i, dry_i)]
        to_ins = [x / y for x, y in zip(ap_i, ins)]
        print(f"node {i}: apply pass {med(ap_i):.2f} M writes per CPU second ({min(ap_i):.2f}-{max(ap_i):.2f}); "
              f"dry run {med(dry_i):.2f}, {med(to_dry):.2f}x of it; insert loop ({floor} memory) {med(ins):.2f}, "
              f"{med(to_ins):.2f}x of it ({min(to_ins):.2f}-{max(to_ins):.2f})")


if __name__ == "__main__":
    main()
