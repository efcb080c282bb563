#!/usr/bin/env python3
"""What a consistent cut costs a running real cluster, and how fast the
real runtime is.

Modes (each prints a Markdown table for bench/RESULTS.md):

  overhead  `walcut load` throughput and p99 latency with cuts every 1 s and
            every 100 ms against no cuts, on 3 and 5 nodes, --sync group.
            The configurations of one node count alternate round by round
            (each once per round, in an order that rotates; a fresh cluster
            each time); the ratio of a
            round is against that round's no-cut run; the table gives the
            median ratio (min-max). Also each cut's duration under load:
            from the initiator's CUT_START to the last CUT_FINISH; and the
            node processes' CPU time per committed transaction (user + sys
            from /proc, read before the cluster stops), which what else
            runs on the machine sways less than the throughput.
  paired    the same question with less noise: one cluster and one load,
            windows with cuts every 1 s alternating with windows without
            (see paired()).
  speed     committed transactions per second on 3 nodes, --sync off
            against --sync group, alternating.
  snapshot  `walcut load` throughput and p99 latency with a full snapshot
            every 2 s and every 500 ms against none, on 3 nodes, --sync
            group, alternating as in `overhead`; and each snapshot's pause
            (from the initiator's pause to its resume, as it logs it).
  recovery  a node killed after loads of growing length, and the time
            `walcut cluster restart` takes until it is ready again, against
            the size of its WAL; and after the longest load followed by a
            full snapshot with WAL retention (the node recovers from it).

Every cluster binds 127.0.0.1, runs for a bounded time and is stopped
(`walcut cluster down`) even when the script fails.

Usage: bench/cut_overhead.py WALCUT MODE [--rounds N] [--duration S]
       [--clients C] [--nodes 3,5]
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
import time

RUNNING = []


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def up(walcut, d, nodes, sync, accounts=1000, extra=()):
    args = [walcut, "cluster", "up", d, "--nodes", str(nodes), "--accounts", str(accounts), "--sync", sync, "-q"]
    args += list(extra)
    RUNNING.append(d)
    sh(*args)


def down(walcut, d):
    sh(walcut, "cluster", "down", d, "-q", check=False)
    if d in RUNNING:
        RUNNING.remove(d)


def load(walcut, d, clients, duration):
    r = sh(walcut, "load", d, "--clients", str(clients), "--duration", f"{duration}s", "--format", "json", "-q")
    return json.loads(r.stdout)


def cut_durations_ms(walcut, d):
    r = sh(walcut, "cuts", d, "--format", "json", check=False)
    out = []
    for c in json.loads(r.stdout)["cuts"]:
        if c["status"] != "consistent":
            continue
        starts = [n["start_time_us"] for n in c["nodes"] if n.get("start_time_us") is not None]
        finishes = [n["finish_time_us"] for n in c["nodes"] if n.get("finish_time_us") is not None]
        if starts and finishes:
            out.append((max(finishes) - min(starts)) / 1000.0)
    return out


def node_cpu_seconds(d):
    """user + sys CPU seconds of the cluster's node processes so far (from
    /proc; runtime.json names their pids). Read before `cluster down`."""
    with open(os.path.join(d, "runtime.json")) as f:
        pids = json.load(f)["pids"]
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def alternate(a, work, label, nodes, configs, extra_of, measure_of):
    """Runs every configuration once per round, in an order that rotates
    round by round, each on a fresh cluster of `nodes` nodes; a round's
    ratios are against its own first configuration (the baseline). Returns
    per configuration: throughputs, p99s, their ratios, and what
    `measure_of(dir)` collected (cut durations, snapshot pauses)."""
    names = [c for c, _ in configs]
    out = {c: {"t": [], "p": [], "rt": [], "rp": [], "m": [], "c": [], "rc": []} for c in names}
    for rnd in range(a.rounds):
        order = configs[rnd % len(configs):] + configs[:rnd % len(configs)]
        got = {}
        for name, value in order:
            d = os.path.join(work, f"{label}-n{nodes}-r{rnd}-{name.replace(' ', '')}")
            up(a.walcut, d, nodes, "group", extra=extra_of(value))
            res = load(a.walcut, d, a.clients, a.duration)
            # Node CPU per committed transaction: less swayed than the
            # throughput by what else the machine runs.
            cpu_ms = 1000.0 * node_cpu_seconds(d) / max(1, res["committed"])
            down(a.walcut, d)
            out[name]["m"] += measure_of(d)
            shutil.rmtree(d, ignore_errors=True)
            got[name] = (res["committed_per_second"], res["latency_us"]["p99"], cpu_ms)
            print(f"  round {rnd} {nodes} nodes {name}: {got[name][0]:.0f}/s p99 {got[name][1]} us, "
                  f"{cpu_ms:.3f} CPU ms/tx", file=sys.stderr)
        base = got[names[0]]
        for name in names:
            t, p, c = got[name]
            o = out[name]
            o["t"].append(t)
            o["p"].append(p)
            o["c"].append(c)
            o["rt"].append(t / base[0])
            o["rp"].append(p / base[1])
            o["rc"].append(c / base[2])
    return out


def row(o):
    """The columns a configuration's results fill: throughput, its ratio,
    p99, its ratio, how many measures, and their p50 / p99 / max."""
    rt, rp, ms = o["rt"], o["rp"], sorted(o["m"])
    mtext = "-" if not ms else f"{med(ms):.1f} / {ms[min(len(ms) - 1, int(len(ms) * 0.99))]:.1f} / {ms[-1]:.1f}"
    return (f"{med(o['t']):.0f} | {med(rt):.3f} ({min(rt):.3f}-{max(rt):.3f}) | {med(o['p']):.0f} | "
            f"{med(rp):.3f} ({min(rp):.3f}-{max(rp):.3f}) | {len(ms)} | {mtext}")


def overhead(a, work):
    configs = [("no cuts", None), ("every 1 s", "1s"), ("every 100 ms", "100ms")]
    print("| nodes | cuts | committed/s (median) | throughput vs no cuts | p99 us (median) | p99 vs no cuts | "
          "cuts taken | cut duration ms p50 / p99 / max |")
    print("|---|---|---|---|---|---|---|---|")
    cpu = {}
    for nodes in a.nodes:
        out = alternate(a, work, "cuts", nodes, configs, lambda v: ["--cut-every", v] if v else [],
                        lambda d: cut_durations_ms(a.walcut, d))
        for name, _ in configs:
            print(f"| {nodes} | {name} | {row(out[name])} |")
        cpu[nodes] = out
    print()
    print("| nodes | cuts | node CPU ms per committed transaction (median) | vs no cuts (median, min-max) |")
    print("|---|---|---|---|")
    for nodes, out in cpu.items():
        for name, _ in configs:
            rc = out[name]["rc"]
            print(f"| {nodes} | {name} | {med(out[name]['c']):.3f} | {med(rc):.3f} ({min(rc):.3f}-{max(rc):.3f}) |")


def speed(a, work):
    res = {"off": [], "group": []}
    for rnd in range(a.rounds):
        for sync in ("off", "group"):
            d = os.path.join(work, f"speed-{sync}-{rnd}")
            up(a.walcut, d, 3, sync)
            r = load(a.walcut, d, a.clients, a.duration)
            down(a.walcut, d)
            shutil.rmtree(d, ignore_errors=True)
            res[sync].append((r["committed_per_second"], r["latency_us"]["p50"], r["latency_us"]["p99"]))
            print(f"  round {rnd} sync {sync}: {r['committed_per_second']:.0f}/s", file=sys.stderr)
    print("| --sync | committed/s (median, min-max) | p50 us | p99 us |")
    print("|---|---|---|---|")
    for sync in ("off", "group"):
        t = [x[0] for x in res[sync]]
        print(f"| {sync} | {med(t):.0f} ({min(t):.0f}-{max(t):.0f}) | {med([x[1] for x in res[sync]]):.0f} | "
              f"{med([x[2] for x in res[sync]]):.0f} |")


def snapshot_pauses_ms(d, nodes):
    out = []
    for n in range(nodes):
        try:
            with open(os.path.join(d, f"node-{n}", "node.log")) as f:
                for line in f:
                    m = re.search(r"taken and listed in cluster.json after ([0-9.]+) ms of pause", line)
                    if m:
                        out.append(float(m.group(1)))
        except OSError:
            pass
    return out


def snapshot(a, work):
    configs = [("no snapshots", None), ("every 2 s", "2s"), ("every 500 ms", "500ms")]
    out = alternate(a, work, "snap", 3, configs, lambda v: ["--full-snapshot-every", v] if v else [],
                    lambda d: snapshot_pauses_ms(d, 3))
    print("| full snapshots | committed/s (median) | throughput vs none | p99 us (median) | p99 vs none | "
          "snapshots taken | pause ms p50 / p99 / max |")
    print("|---|---|---|---|---|---|---|")
    for name, _ in configs:
        print(f"| {name} | {row(out[name])} |")


def recovery(a, work):
    print("| load before the kill | node 1's WAL | restart until ready, s (median of rounds) |")
    print("|---|---|---|")
    for secs, snap in ((2, False), (8, False), (24, False), (24, True)):
        times, sizes = [], []
        for rnd in range(a.rounds):
            d = os.path.join(work, f"rec-{secs}-{snap}-{rnd}")
            # With `snap`: WAL retention on, and a full snapshot after the
            # load: the node recovers from it and the little WAL after it.
            up(a.walcut, d, 3, "off", extra=["--wal-retention", "after-snapshot"] if snap else [])
            load(a.walcut, d, a.clients, secs)
            if snap:
                sh(a.walcut, "cluster", "snapshot", d, "-q")
            sh(a.walcut, "cluster", "kill", d, "--node", "1", "-q")
            wal = os.path.join(d, "node-1", "wal")
            sizes.append(sum(os.path.getsize(os.path.join(wal, f)) for f in os.listdir(wal)))
            t0 = time.monotonic()
            sh(a.walcut, "cluster", "restart", d, "--node", "1", "-q")
            times.append(time.monotonic() - t0)
            down(a.walcut, d)
            shutil.rmtree(d, ignore_errors=True)
        what = f"{secs} s, --sync off" + (", then a full snapshot (WAL retention on)" if snap else "")
        print(f"| {what} | {med(sizes) / 2**20:.1f} MiB | {med(times):.2f} |")


def window_stats(history, ws, we):
    """Committed transactions acknowledged in [ws, we) (wall seconds) per
    second, and their p99 latency in us."""
    lat = sorted(r["ack_us"] - r["start_us"] for r in history
                 if r.get("outcome") == "committed" and ws * 1e6 <= r["ack_us"] < we * 1e6)
    if not lat:
        return 0.0, float("nan")
    return len(lat) / (we - ws), lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def paired(a, work):
    """One cluster and one long load per node count; the load's time is cut
    into windows of --window seconds, with cuts every 1 s (`walcut cut
    start`) in every other window and none in the others, in ABBA order
    (on-off, off-on, ...) so that a slow drift of the machine's speed
    cancels. Each pair of adjacent windows gives a ratio; the table gives
    their median (min-max). Adjacent windows see the same machine, which a
    fresh cluster per run (mode overhead) does not. The `cut start`
    processes themselves run in the windows with cuts (a few ms of CPU each),
    which counts against the cuts."""
    print("| nodes | window pairs | committed/s, no cuts / cuts every 1 s (median) | throughput with cuts vs without | "
          "p99 us, no cuts / cuts (median) | p99 with cuts vs without | cuts taken | cut duration ms p50 / max |")
    print("|---|---|---|---|---|---|---|---|")
    for nodes in a.nodes:
        d = os.path.join(work, f"paired-n{nodes}")
        hist = os.path.join(work, f"paired-n{nodes}.history")
        up(a.walcut, d, nodes, "group")
        total = 2 * a.pairs * a.window
        loader = subprocess.Popen([a.walcut, "load", d, "--clients", str(a.clients), "--duration", f"{total + 3}s",
                                   "--history", hist, "--format", "json", "-q"], stdout=subprocess.DEVNULL)
        try:
            time.sleep(1.5)  # the clients connect and reach a steady state
            windows = []
            for i in range(2 * a.pairs):
                on = (i % 2 == 0) == ((i // 2) % 2 == 0)  # ABBA: on, off, off, on, on, off, ...
                ws = time.time()
                while time.time() < ws + a.window:
                    tick = time.time()
                    if on:
                        sh(a.walcut, "cut", "start", d, "-q", check=False)
                    time.sleep(max(0.0, min(tick + 1.0, ws + a.window) - time.time()))
                windows.append((on, ws, time.time()))
        finally:
            loader.wait(timeout=total + 120)
        durations = cut_durations_ms(a.walcut, d)
        down(a.walcut, d)
        with open(hist) as f:
            history = [json.loads(line) for line in f if line.strip()]
        t_on, t_off, p_on, p_off, rt, rp = [], [], [], [], [], []
        for i in range(0, len(windows), 2):
            st = {w[0]: window_stats(history, w[1], w[2]) for w in windows[i:i + 2]}
            t_on.append(st[True][0])
            t_off.append(st[False][0])
            p_on.append(st[True][1])
            p_off.append(st[False][1])
            rt.append(st[True][0] / st[False][0] if st[False][0] else float("nan"))
            rp.append(st[True][1] / st[False][1])
            print(f"  {nodes} nodes pair {i // 2}: {st[False][0]:.0f}/s -> {st[True][0]:.0f}/s, "
                  f"p99 {st[False][1]} -> {st[True][1]} us", file=sys.stderr)
        ds = sorted(durations)
        dtext = "-" if not ds else f"{med(ds):.1f} / {ds[-1]:.1f}"
        print(f"| {nodes} | {len(rt)} of {a.window} s | {med(t_off):.0f} / {med(t_on):.0f} | {med(rt):.3f} "
              f"({min(rt):.3f}-{max(rt):.3f}) | {med(p_off):.0f} / {med(p_on):.0f} | {med(rp):.3f} "
              f"({min(rp):.3f}-{max(rp):.3f}) | {len(ds)} | {dtext} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("walcut")
    p.add_argument("mode", choices=["overhead", "paired", "speed", "snapshot", "recovery"])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--nodes", default="3,5")
    p.add_argument("--pairs", type=int, default=12, help="paired: window pairs")
    p.add_argument("--window", type=int, default=5, help="paired: seconds per window")
    a = p.parse_args()
    a.nodes = [int(x) for x in a.nodes.split(",")]
    work = tempfile.mkdtemp(prefix="walcut-overhead-")
    try:
        {"overhead": overhead, "paired": paired, "speed": speed, "snapshot": snapshot, "recovery": recovery}[a.mode](a, work)
    finally:
        for d in list(RUNNING):
            down(a.walcut, d)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
