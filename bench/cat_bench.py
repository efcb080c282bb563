#!/usr/bin/env python3
"""cat_bench.py: `walcut stats -j1` and `verify -j1` against `cat` of the same
segment files (issue 31: checksums at memory speed), round by round (every
command once per round, in a fixed order), so that a slow spell of a shared
machine hits all of them.

    bench/cat_bench.py [--rounds N] [--data DIR] [--walcut BIN] [--old OLD_WALCUT]
                       [--crcfloor BIN]

DIR holds `plain/` as bench/run_walfmt.sh makes it (walgen --nodes 3 --bytes
350MiB --segment-size 16MiB --seed 42). Measured, output to /dev/null:
  cat FILES (the floor: page-cache reads, one copy of every byte)
  crcfloor --read FILES, crcfloor --read --reader-crc FILES (when found)
  walcut stats -j1 DIR, walcut verify -j1 DIR
and the same walcut commands with OLD_WALCUT when given (before/after in one
run). Prints per command the median wall, CPU (user+sys) and peak RSS, then
the medians of the per-round ratios of wall and of CPU times.
"""
import argparse
import glob
import os
import sys

from benchlib import print_ratios, print_table, rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--data", default="bench/data")
    ap.add_argument("--walcut", default="build/cli/walcut")
    ap.add_argument("--crcfloor", default="build/bench/crcfloor")
    ap.add_argument("--old", help="an older walcut, timed in the same rounds")
    a = ap.parse_args()
    plain = os.path.join(a.data, "plain")
    files = sorted(glob.glob(os.path.join(plain, "*", "wal", "*.wal")))
    if not files:
        sys.exit(f"cat_bench: no segments under {plain} (bench/run_walfmt.sh makes them)")
    cmds = {"cat": ["cat"] + files}
    if os.access(a.crcfloor, os.X_OK):
        cmds["crcfloor --read"] = [a.crcfloor, "--read"] + files
        cmds["crcfloor --read --reader-crc"] = [a.crcfloor, "--read", "--reader-crc"] + files
    bins = [("", a.walcut)] + ([("old ", a.old)] if a.old else [])
    for tag, b in bins:
        cmds[tag + "stats -j1"] = [b, "stats", "-j1", plain]
        cmds[tag + "verify -j1"] = [b, "verify", "-j1", plain]
    rows, load = rounds(cmds, a.rounds)
    print_table(rows, a.rounds, load)
    pairs = [(tag + k, "cat") for tag, _ in bins for k in ("stats -j1", "verify -j1")]
    pairs += [(k, "cat") for k in cmds if k.startswith("crcfloor")]
    if a.old:
        pairs += [(k, "old " + k) for k in ("stats -j1", "verify -j1")]
    print_ratios(rows, pairs)


if __name__ == "__main__":
    main()
