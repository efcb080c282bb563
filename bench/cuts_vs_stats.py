#!/usr/bin/env python3
"""cuts_vs_stats.py: `walcut cuts` against `walcut stats` on the same files,
round by round, so that a slow spell of a shared machine hits both.

    bench/cuts_vs_stats.py [--rounds N] [--data DIR] STATS_WALCUT CUTS_WALCUT...

STATS_WALCUT runs `stats DIR`, then each CUTS_WALCUT runs `cuts DIR`, in that
order every round, after one unmeasured run of each (page cache). Prints
the median and minimum wall time and the median CPU time of each, and for each
cuts binary the wall-time ratio to the stats run of the same round. Several
cuts binaries compare builds side by side. Run from the repository root after
bench/run_cuts.sh has made bench/data-cuts.
"""
import argparse
import statistics

from benchlib import rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--data", default="bench/data-cuts")
    ap.add_argument("stats_walcut")
    ap.add_argument("cuts_walcut", nargs="+")
    a = ap.parse_args()
    cmds = {"stats": [a.stats_walcut, "stats", a.data]}
    for i, c in enumerate(a.cuts_walcut):
        cmds[i] = [c, "cuts", a.data]
    rows, _ = rounds(cmds, a.rounds)
    stats = rows["stats"]
    cuts = {c: rows[i] for i, c in enumerate(a.cuts_walcut)}

    def line(name, rows):
        walls = [w for w, _, _ in rows]
        cpus = [c for _, c, _ in rows]
        return (f"{name:28s} wall median {statistics.median(walls):.3f} s, min {min(walls):.3f} s; "
                f"CPU median {statistics.median(cpus):.2f} s")

    print(line("stats " + a.stats_walcut, stats))
    for c, rows in cuts.items():
        print(line("cuts " + c, rows))
    for c, rows in cuts.items():
        ratios = [w / s[0] for (w, _, _), s in zip(rows, stats)]
        print(f"cuts/stats per round ({c}): {' '.join(f'{r:.2f}' for r in ratios)}; "
              f"median {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
