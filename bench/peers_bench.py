#!/usr/bin/env python3
"""peers_bench.py: walcut and its peers timed side by side, round by round.

    bench/peers_bench.py --data DIR [--rounds N] [--walcut BIN] [--crcfloor BIN] [--pgbin DIR]

DIR is what bench/peers.sh makes: pg/ (PostgreSQL WAL segments, the LSN
range in pg.range), rocks/ (a RocksDB directory with one WAL, the number of
writes in rocks.writes) and walgen/ (a walcut cluster). Every command runs
once per round in a fixed order, output to /dev/null; restores write to a
directory under /dev/shm (or TMPDIR) that is removed after each run, outside
the timing. Prints the median wall and CPU time (user + sys, all threads) of
each command, the threads that did work (sampled from /proc), records/s and
bytes/s, and the ratios the issue's targets name, per wall second and per CPU
second, each with the threads of both sides. walcut runs both as it runs by
default and on one thread (stats and verify -j1 are; dump and restore -j1
with --io-threads 0), beside the single-threaded peers. The RocksDB replay
runs with the vector memtable (rocks/) and with the default skip list
(rocks-skiplist/, the same WAL).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from benchlib import median, print_table, rounds, run_threads


def size(files):
    return sum(os.path.getsize(f) for f in files)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", required=True)
    ap.add_argument("--walcut", default="build/cli/walcut")
    ap.add_argument("--crcfloor", default="build/bench/crcfloor")
    ap.add_argument("--pgbin", default="/usr/lib/postgresql/15/bin")
    a = ap.parse_args()

    pgdir = os.path.join(a.data, "pg")
    pgfiles = sorted(glob.glob(os.path.join(pgdir, "0*")))
    start, end = open(os.path.join(a.data, "pg.range")).read().split()
    rocksdir = os.path.join(a.data, "rocks")
    skipdir = os.path.join(a.data, "rocks-skiplist")
    rlogs = sorted(glob.glob(os.path.join(rocksdir, "*.log")))
    walgen = os.path.join(a.data, "walgen")
    wfiles = sorted(glob.glob(os.path.join(walgen, "*", "wal", "*.wal")))
    if not pgfiles or len(rlogs) != 1 or not wfiles or not os.path.isdir(skipdir):
        sys.exit("peers_bench: the data sets are incomplete; run bench/peers.sh")
    rlog = rlogs[0]
    waldump = os.path.join(a.pgbin, "pg_waldump")
    scratch = tempfile.mkdtemp(prefix="walcut-peers-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    secondary = os.path.join(scratch, "secondary")
    restored = os.path.join(scratch, "restore")

    # What each data set holds, counted once.
    pg_stats = subprocess.run([waldump, "-p", pgdir, "-s", start, "-e", end, "--stats"],
                              capture_output=True, text=True, check=True).stdout
    m = re.search(r"^Total\s+(\d+)", pg_stats, re.M)
    pg_records = int(m.group(1))
    hi, lo = (int(x, 16) for x in start.split("/"))
    ehi, elo = (int(x, 16) for x in end.split("/"))
    pg_bytes = ((ehi << 32) + elo) - ((hi << 32) + lo)
    r_batches = sum(1 for _ in subprocess.run(["ldb", "dump_wal", f"--walfile={rlog}"], capture_output=True,
                                              text=True, check=True).stdout.splitlines() if _[:1].isdigit())
    r_writes = int(open(os.path.join(a.data, "rocks.writes")).read())
    r_bytes = os.path.getsize(rlog)
    st = json.loads(subprocess.run([a.walcut, "stats", "--format", "json", walgen], capture_output=True,
                                   text=True, check=True).stdout)
    w_records = st["records"]
    w_bytes = size(wfiles)
    rj = json.loads(subprocess.run([a.walcut, "restore", walgen, "--latest", "--dry-run", "--format", "json",
                                    "-j1"], capture_output=True, text=True, check=True).stdout)
    w_writes = sum(n["writes_applied"] for n in rj["nodes"])

    # The order of a round: each ratio below compares commands that run
    # next to each other (a skip-list replay takes over a minute, and this
    # machine's speed drifts within that: with the replays between them,
    # `stats` and `cat walgen` once came out 1.29x and 2.00x at the same
    # commit). The pg_waldump --stats and cat pair, then walgen's readers
    # after their floors, the text dumps, then the vector replay right
    # before the restores, and the skip list last.
    cmds = {
        "cat pg": ["cat"] + pgfiles,
        "pg_waldump --stats": [waldump, "-p", pgdir, "-s", start, "-e", end, "--stats"],
        "cat walgen": ["cat"] + wfiles,
        "crcfloor --read": [a.crcfloor, "--read"] + wfiles,
        "walcut stats -j1": [a.walcut, "stats", "-j1", walgen],
        "walcut verify -j1": [a.walcut, "verify", "-j1", walgen],
        "walcut dump -j1 --io-threads 0": [a.walcut, "dump", "-j1", "--io-threads", "0", walgen],
        "walcut dump -j1": [a.walcut, "dump", "-j1", walgen],
        "pg_waldump": [waldump, "-p", pgdir, "-s", start, "-e", end],
        "cat rocks": ["cat", rlog],
        "ldb dump_wal": ["ldb", "dump_wal", f"--walfile={rlog}"],
        "rocksdb replay": ["ldb", f"--db={os.path.abspath(rocksdir)}", f"--secondary_path={secondary}",
                           "scan", "--max_keys=1"],
        "walcut restore -j1 --io-threads 0": [a.walcut, "restore", walgen, "--latest", "-j1", "--io-threads", "0",
                                              "--out", restored, "-q"],
        "walcut restore -j1": [a.walcut, "restore", walgen, "--latest", "-j1", "--out", restored, "-q"],
        "walcut restore -j2": [a.walcut, "restore", walgen, "--latest", "-j2", "--out", restored, "-q"],
        "rocksdb replay (skip list)": ["ldb", f"--db={os.path.abspath(skipdir)}", f"--secondary_path={secondary}",
                                       "scan", "--max_keys=1"],
    }
    work = {  # name -> (records or writes, bytes, unit)
        "cat pg": (pg_records, pg_bytes, "records"), "pg_waldump --stats": (pg_records, pg_bytes, "records"),
        "pg_waldump": (pg_records, pg_bytes, "records"),
        "cat rocks": (r_batches, r_bytes, "records"), "ldb dump_wal": (r_batches, r_bytes, "records"),
        "rocksdb replay": (r_writes, r_bytes, "writes"), "rocksdb replay (skip list)": (r_writes, r_bytes, "writes"),
        "cat walgen": (w_records, w_bytes, "records"), "crcfloor --read": (w_records, w_bytes, "records"),
        "walcut stats -j1": (w_records, w_bytes, "records"), "walcut verify -j1": (w_records, w_bytes, "records"),
        "walcut dump -j1": (w_records, w_bytes, "records"), "walcut restore -j1": (w_writes, w_bytes, "writes"),
        "walcut dump -j1 --io-threads 0": (w_records, w_bytes, "records"),
        "walcut restore -j1 --io-threads 0": (w_writes, w_bytes, "writes"),
        "walcut restore -j2": (w_writes, w_bytes, "writes"),
    }

    # Before each command its data set is read once more, untimed: on this
    # VM a command that follows one that used a lot of memory (the replay
    # holds 1 GB) found its files' page-cache pages slow to copy again (walcut
    # stats right after the replay: 0.80 s instead of 0.48 s, all of it in
    # the kernel's copy), which would charge one command for another's
    # memory.
    data_of = {}
    for name in cmds:
        data_of[name] = (pgfiles if "pg" in name else [rlog] if ("rocks" in name or "ldb" in name) else wfiles)
    order = list(cmds)

    def warm(files):
        subprocess.run(["cat"] + files, stdout=subprocess.DEVNULL, check=True)

    def cleanup(name):
        shutil.rmtree(restored, ignore_errors=True)
        shutil.rmtree(secondary, ignore_errors=True)
        warm(data_of[order[(order.index(name) + 1) % len(order)]])

    warm(data_of[order[0]])

    try:
        rows, load = rounds(cmds, a.rounds, between=cleanup, runner=run_threads)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print(f"data: PostgreSQL WAL {pg_bytes / 1e9:.2f} GB, {pg_records:,} records ({len(pgfiles)} segments); "
          f"RocksDB WAL {r_bytes / 1e9:.2f} GB, {r_batches:,} records, {r_writes:,} writes; "
          f"walcut WAL {w_bytes / 1e9:.2f} GB, {w_records:,} records, {w_writes:,} writes to the last cut")

    def threads(name):
        return max(x[3] for x in rows[name])

    def rates(name):
        n, b, unit = work[name]
        w, c = median(rows, name, 0), median(rows, name, 1)
        return (f"{threads(name):2d} thr {n / w / 1e6:7.2f} M {unit}/s {b / w / 1e9:6.2f} GB/s; "
                f"per CPU s {n / c / 1e6:7.2f} M {unit} {b / c / 1e9:6.2f} GB")

    print_table(rows, a.rounds, load, rates)

    def per_round(x, y, what, clock):  # x's rate / y's rate (clock: 0 wall, 1 CPU), median over the rounds
        per = [(work[x][what] / rx[clock]) / (work[y][what] / ry[clock]) for rx, ry in zip(rows[x], rows[y])
               if rx[clock] > 0 and ry[clock] > 0]
        if not per:
            return float("nan"), float("nan"), float("nan")
        per.sort()
        return per[len(per) // 2], per[0], per[-1]

    # Each peer is single-threaded; walcut's default -j1 of dump and restore
    # and its -j2 restore use more threads, so every ratio names the threads
    # of both sides and stands per wall second and per CPU second (user + sys,
    # all threads), and walcut on one thread has a row of its own.
    print("walcut / peer, median of the rounds (min-max): per wall second; per CPU second [threads]")
    pairs = [
        ("walcut stats -j1", "pg_waldump --stats", 1, "bytes/s"),
        ("walcut stats -j1", "pg_waldump --stats", 0, "records/s"),
        ("walcut dump -j1", "pg_waldump", 0, "records/s"),
        ("walcut dump -j1 --io-threads 0", "pg_waldump", 0, "records/s"),
        ("walcut dump -j1", "ldb dump_wal", 0, "records/s"),
        ("walcut dump -j1 --io-threads 0", "ldb dump_wal", 0, "records/s"),
    ]
    for replay in ("rocksdb replay", "rocksdb replay (skip list)"):
        for restore in ("walcut restore -j1 --io-threads 0", "walcut restore -j1", "walcut restore -j2"):
            pairs.append((restore, replay, 0, "writes/s"))
    for x, y, what, label in pairs:
        w, c = per_round(x, y, what, 0), per_round(x, y, what, 1)
        print(f"  {x} [{threads(x)}] / {y} [{threads(y)}], {label}: {w[0]:.2f}x ({w[1]:.2f}-{w[2]:.2f}); "
              f"CPU {c[0]:.2f}x ({c[1]:.2f}-{c[2]:.2f})")
    # The floors: walcut's reading against cat of the same files and the
    # bare checksum loop, time against time (lower is better).
    print("time / floor's time, median of the rounds (min-max): wall; CPU [threads]")
    for x, y in [("walcut stats -j1", "cat walgen"), ("walcut verify -j1", "cat walgen"),
                 ("walcut stats -j1", "crcfloor --read"), ("walcut verify -j1", "crcfloor --read"),
                 ("walcut dump -j1 --io-threads 0", "cat walgen"), ("pg_waldump --stats", "cat pg"),
                 ("ldb dump_wal", "cat rocks")]:
        w = sorted(rx[0] / ry[0] for rx, ry in zip(rows[x], rows[y]) if ry[0] > 0)
        c = sorted(rx[1] / ry[1] for rx, ry in zip(rows[x], rows[y]) if ry[1] > 0)
        fw = f"{w[len(w) // 2]:.2f}x ({w[0]:.2f}-{w[-1]:.2f})" if w else "nan"
        fc = f"{c[len(c) // 2]:.2f}x ({c[0]:.2f}-{c[-1]:.2f})" if c else "nan"
        print(f"  {x} [{threads(x)}] / {y} [{threads(y)}]: {fw}; CPU {fc}")

if __name__ == "__main__":
    main()
