#!/usr/bin/env python3
"""restore_bench.py: issue 18's restore rows on the bench cluster, round by
round (every command once per round, in a fixed order).

    bench/restore_bench.py [--rounds N] [--data DIR] [--walcut BIN] [--first K] [--last K]
    bench/restore_bench.py --partial [--keys PREFIX] [--partition P] [--rounds N] [--data DIR] [--walcut BIN] [--last K]

DIR is the bench cluster bench/run_cuts.sh makes (default bench/data-cuts).
Once, untimed: the restore of cut LAST-1 (the base). Each round, output to a
directory under /dev/shm (removed after each run, outside the timing):
  restore --cut FIRST                   the first cut
  restore --cut LAST                    the last consistent cut, from genesis
  restore --cut LAST --base (LAST-1)    from the restore of the cut before
  restore --cut LAST -j1 --format json  one node at a time: the apply pass
                                        (writes_applied / apply_cpu_seconds)
Prints the median wall, CPU and peak RSS of each, the ratios first/last and
from-base/from-genesis (median of the per-round ratios), the apply pass per
round and per node, the whole process's writes per CPU second (issue 31:
the writes applied over the CPU seconds, user + sys, of `restore --cut LAST
-j1 --io-threads 0`, which runs on one thread), and checks that the restore
from the base wrote the same node files as the one from genesis.

--old BIN adds BIN's `restore --cut LAST -j1 --io-threads 0` to every round
(an earlier walcut, for a side-by-side ratio), and checks that it writes the
same node files.

--partial (issue 32, partial restore): each round, whole restore of cut
LAST, then the same with --keys PREFIX (default acct/01: 10,000 of the
200,000 accounts), then with --partition P (default 0: one of the cluster's
partitions), all from genesis on both cores. Prints the medians and the
ratios partial / whole (wall and CPU, median of the per-round ratios), and
checks with `walcut diff` that each partial output is the whole one without
the other keys (nothing only in the partial one, nothing changed).
"""
import argparse
import filecmp
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchlib import print_ratios, print_table, rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--data", default="bench/data-cuts")
    ap.add_argument("--walcut", default="build/cli/walcut")
    ap.add_argument("--first", type=int, default=1)
    ap.add_argument("--last", type=int, default=19)
    ap.add_argument("--partial", action="store_true")
    ap.add_argument("--keys", default="acct/01")
    ap.add_argument("--partition", type=int, default=0)
    ap.add_argument("--old", help="an earlier walcut: its one-thread restore of LAST in the same rounds")
    a = ap.parse_args()
    if not os.path.isfile(os.path.join(a.data, "cluster.json")):
        sys.exit(f"restore_bench: {a.data} holds no cluster; bench/run_cuts.sh makes it")
    if a.partial:
        partial(a)
        return
    scratch = tempfile.mkdtemp(prefix="walcut-restore-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    base = os.path.join(scratch, "base")
    out = os.path.join(scratch, "out")
    keep = {name: os.path.join(scratch, "keep-" + name) for name in ("genesis", "base")}
    w = a.walcut
    try:
        subprocess.run([w, "restore", a.data, "--cut", str(a.last - 1), "--out", base, "-q"], check=True)
        cmds = {
            f"restore --cut {a.first}": [w, "restore", a.data, "--cut", str(a.first), "--out", out, "-q"],
            f"restore --cut {a.last}": [w, "restore", a.data, "--cut", str(a.last), "--out", out, "-q"],
            f"restore --cut {a.last} --base": [w, "restore", a.data, "--cut", str(a.last), "--base", base,
                                               "--out", out, "-q"],
            f"restore --cut {a.last} -j1 (json)": [w, "restore", a.data, "--cut", str(a.last), "-j1", "--out", out,
                                                   "--format", "json", "-q"],
            f"restore --cut {a.last} -j1 --io-threads 0": [w, "restore", a.data, "--cut", str(a.last), "-j1",
                                                           "--io-threads", "0", "--out", out, "-q"],
        }
        one = f"restore --cut {a.last} -j1 --io-threads 0"
        if a.old:
            cmds[one + " (old)"] = [a.old] + cmds[one][1:]
            keep["old"] = os.path.join(scratch, "keep-old")
        apply = []  # per round: [(node, writes, cpu seconds)]

        def between(name):
            for tag, suffix in (("genesis", f"--cut {a.last}"), ("base", f"--cut {a.last} --base"),
                                ("old", f"--cut {a.last} -j1 --io-threads 0 (old)")):
                if name == f"restore {suffix}" and not os.path.exists(keep[tag]):
                    shutil.copytree(out, keep[tag])
            shutil.rmtree(out, ignore_errors=True)

        rows, load = rounds(cmds, a.rounds, between=between)
        for _ in range(a.rounds):
            r = subprocess.run(cmds[f"restore --cut {a.last} -j1 (json)"], capture_output=True, text=True, check=True)
            shutil.rmtree(out, ignore_errors=True)
            apply.append([(n["node"], n["writes_applied"], n["apply_cpu_seconds"]) for n in json.loads(r.stdout)["nodes"]])
        def same_files(x, y):
            return all(filecmp.cmp(os.path.join(keep[x], f), os.path.join(keep[y], f), shallow=False)
                       for f in sorted(os.listdir(keep[x])) if f.endswith(".snap"))

        same = same_files("genesis", "base")
        same_old = same_files("genesis", "old") if a.old else True
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    print_table(rows, a.rounds, load)
    print_ratios(rows, [(f"restore --cut {a.first}", f"restore --cut {a.last}"),
                        (f"restore --cut {a.last} --base", f"restore --cut {a.last}")])
    per_round = [sum(x[1] for x in r) / sum(x[2] for x in r) / 1e6 for r in apply]
    per_node = [x[1] / x[2] / 1e6 for r in apply for x in r]
    print(f"apply pass, cut {a.last}, -j1, M writes per CPU second: rounds "
          + " / ".join(f"{v:.2f}" for v in per_round)
          + f" (median {statistics.median(per_round):.2f}); per node {min(per_node):.2f}-{max(per_node):.2f}")
    writes = sum(x[1] for x in apply[0])
    pairs = [one] + ([one + " (old)"] if a.old else [])
    for name in pairs:
        rates = [writes / r[1] / 1e6 for r in rows[name]]
        print(f"whole process, {name}: M writes per CPU second {statistics.median(rates):.2f} "
              f"({min(rates):.2f}-{max(rates):.2f}; {writes} writes)")
    if a.old:
        print_ratios(rows, [(one, one + " (old)")])
        print(f"node files of cut {a.last} from the old walcut equal the new one's: {'yes' if same_old else 'NO'}")
    print(f"node files of cut {a.last} from the base equal those from genesis: {'yes' if same else 'NO'}")
    if not same or not same_old:
        sys.exit(1)


def partial(a):
    scratch = tempfile.mkdtemp(prefix="walcut-partial-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None)
    out = os.path.join(scratch, "out")
    w = a.walcut
    base = [w, "restore", a.data, "--cut", str(a.last), "--base", "genesis", "--out", out, "-q"]
    cmds = {
        f"restore --cut {a.last}": base,
        f"restore --cut {a.last} --keys {a.keys}": base + ["--keys", a.keys],
        f"restore --cut {a.last} --partition {a.partition}": base + ["--partition", str(a.partition)],
    }
    keep = {name: os.path.join(scratch, f"keep-{i}") for i, name in enumerate(cmds)}
    try:
        def between(name):
            if not os.path.exists(keep[name]):
                shutil.copytree(out, keep[name])
            shutil.rmtree(out, ignore_errors=True)

        rows, load = rounds(cmds, a.rounds, between=between)
        whole = keep[f"restore --cut {a.last}"]
        facts = {}
        for name in list(cmds)[1:]:
            r = subprocess.run([w, "diff", whole, keep[name], "--format", "json", "-n", "1"], capture_output=True,
                               text=True)
            d = json.loads(r.stdout)["summary"]
            ok = d["only_b"] == 0 and d["changed"] == 0
            entries = sum(n["entries"] for n in json.load(open(os.path.join(keep[name], "manifest.json")))["nodes"])
            all_entries = sum(n["entries"] for n in json.load(open(os.path.join(whole, "manifest.json")))["nodes"])
            facts[name] = (ok, entries, all_entries)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print_table(rows, a.rounds, load)
    whole_name = f"restore --cut {a.last}"
    print_ratios(rows, [(name, whole_name) for name in list(cmds)[1:]])
    for name, (ok, entries, all_entries) in facts.items():
        print(f"{name}: {entries} of {all_entries} entries ({100.0 * entries / all_entries:.1f}%); "
              f"the whole restore filtered: {'yes' if ok else 'NO'}")
        if not ok:
            sys.exit(1)


if __name__ == "__main__":
    main()
