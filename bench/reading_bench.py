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
peak RSS, then ratios: the median of the per-round ratios of wall times.
"""
import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd):
    """Wall seconds, CPU seconds (user + sys) and peak RSS (MiB) of one run, from GNU time."""
    with tempfile.NamedTemporaryFile("r") as f:
        t0 = time.monotonic()
        rc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", f.name] + cmd,
                            stdout=subprocess.DEVNULL).returncode
        wall = time.monotonic() - t0
        if rc != 0:
            sys.exit(f"reading_bench: {' '.join(cmd)} exited with {rc}")
        user, sys_s, kib = f.read().split()[-3:]
    return wall, float(user) + float(sys_s), int(kib) / 1024.0


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
    for c in cmds.values():  # page cache, and one unmeasured run of each
        run(c)
    rows = {k: [] for k in cmds}
    load = [open("/proc/loadavg").read().split()[:3]]
    for _ in range(a.rounds):
        for k, c in cmds.items():
            rows[k].append(run(c))
    load.append(open("/proc/loadavg").read().split()[:3])
    print(f"{a.rounds} rounds; load average before {' '.join(load[0])}, after {' '.join(load[1])}")
    print(f"{'command':40s} {'wall s':>8s} {'CPU s':>8s} {'RSS MiB':>8s}")
    for k, r in rows.items():
        print(f"{k:40s} {statistics.median(w for w, _, _ in r):8.3f} {statistics.median(c for _, c, _ in r):8.3f} "
              f"{max(m for _, _, m in r):8.1f}")

    def ratio(x, y, what=0):
        per = [rx[what] / ry[what] for rx, ry in zip(rows[x], rows[y])]
        return statistics.median(per), min(per), max(per)

    pairs = [("stats -j1", "crcfloor --read"), ("verify -j1", "crcfloor --read"),
             ("stats -j1", "crcfloor --read --inline-header-crc"), ("verify -j1", "crcfloor --read --inline-header-crc"),
             ("stats -j1", "stats -j2"), ("zst: stats -j1", "zstd -dc")]
    if a.old:
        pairs += [(k, "old " + k) for k in ("stats -j1", "verify -j1", "stats -j2", "dump -j1", "zst: stats -j1")]
        pairs += [("old stats -j1", "crcfloor --read"), ("old zst: stats -j1", "zstd -dc")]
    print("ratios, median of the rounds' ratios (min-max): wall; CPU")
    for x, y in pairs:
        w, c = ratio(x, y, 0), ratio(x, y, 1)
        print(f"  {x} / {y}: {w[0]:.2f}x ({w[1]:.2f}-{w[2]:.2f}); CPU {c[0]:.2f}x ({c[1]:.2f}-{c[2]:.2f})")


if __name__ == "__main__":
    main()
