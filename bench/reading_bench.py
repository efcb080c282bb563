#!/usr/bin/env python3
"""reading_bench.py: how walcut reads segments, against the bare loops and
zstd, round by round (every command once per round, in a fixed order), so
that a slow spell of a shared machine hits all of them.

    bench/reading_bench.py [--rounds N] [--data DIR] [--old OLD_WALCUT]
                           [--walcut BIN] [--crcfloor BIN]

DIR holds `plain/` and `zst/` as bench/run_walfmt.sh makes them (walgen
--nodes 3 --bytes 350MiB --segment-size 16MiB --seed 42, and the same with
--compress --archive-last). Measured, output to /dev/null:
  crcfloor --read, crcfloor (mmap), crcfloor --read --inline-header-crc
  walcut stats -j1, verify -j1, stats -j2, dump -j1 on plain/
  zstd -dc of the .wal.zst files, walcut stats -j1 on zst/
and the same walcut commands with OLD_WALCUT when given (before/after in one
run). Prints per command the median wall, CPU (user+sys, all threads) and
peak RSS, then ratios: the median of the per-round ratios of wall times,
then of CPU times (user + sys, all threads: crcfloor and zstd -dc run on one
thread, walcut's zst: stats -j1 decodes on a second one).
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
    zst = os.path.join(a.data, "zst")
    pfiles = sorted(glob.glob(os.path.join(plain, "*", "wal", "*.wal")))
    zfiles = sorted(glob.glob(os.path.join(zst, "*", "wal", "*.wal.zst")))
    if not pfiles or not zfiles:
        sys.exit(f"reading_bench: no segments under {plain} or {zst} (bench/run_walfmt.sh makes them)")
    cmds = {
        "crcfloor --read": [a.crcfloor, "--read"] + pfiles,
        "crcfloor (mmap)": [a.crcfloor] + pfiles,
        "crcfloor --read --inline-header-crc": [a.crcfloor, "--read", "--inline-header-crc"] + pfiles,
        "zstd -dc": ["zstd", "-dc"] + zfiles,
    }
    bins = [("", a.walcut)] + ([("old ", a.old)] if a.old else [])
    for tag, b in bins:
        cmds[tag + "stats -j1"] = [b, "stats", "-j1", plain]
        cmds[tag + "verify -j1"] = [b, "verify", "-j1", plain]
        cmds[tag + "stats -j2"] = [b, "stats", "-j2", plain]
        cmds[tag + "dump -j1"] = [b, "dump", "-j1", plain]
        cmds[tag + "zst: stats -j1"] = [b, "stats", "-j1", zst]
    rows, load = rounds(cmds, a.rounds)
    print_table(rows, a.rounds, load)
    pairs = [("stats -j1", "crcfloor --read"), ("verify -j1", "crcfloor --read"),
             ("stats -j1", "crcfloor --read --inline-header-crc"), ("verify -j1", "crcfloor --read --inline-header-crc"),
             ("stats -j1", "stats -j2"), ("zst: stats -j1", "zstd -dc")]
    if a.old:
        pairs += [(k, "old " + k) for k in ("stats -j1", "verify -j1", "stats -j2", "dump -j1", "zst: stats -j1")]
        pairs += [("old stats -j1", "crcfloor --read"), ("old zst: stats -j1", "zstd -dc")]
    print_ratios(rows, pairs)

if __name__ == "__main__":
    main()
