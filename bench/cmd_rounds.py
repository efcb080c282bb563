#!/usr/bin/env python3
"""cmd_rounds.py: any commands timed side by side, round by round (each once
per round, in the order given, after one warm-up run each), for the one-off
comparisons bench/RESULTS.md quotes that no other script makes.

    bench/cmd_rounds.py [--rounds N] NAME=COMMAND...

COMMAND is a shell command line (output to /dev/null). Prints each
command's median wall and CPU (user + sys of the finished process, as
benchlib measures it) and every command's ratio to the first one.
"""
import argparse
import sys

from benchlib import print_ratios, print_table, rounds


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("commands", nargs="+", metavar="NAME=COMMAND")
    a = ap.parse_args()
    cmds = {}
    for spec in a.commands:
        name, eq, cmd = spec.partition("=")
        if not eq or not name or not cmd:
            sys.exit(f"cmd_rounds.py: '{spec}' is not NAME=COMMAND")
        if name in cmds:
            sys.exit(f"cmd_rounds.py: two commands named '{name}'")
        cmds[name] = ["sh", "-c", cmd]
    if a.rounds < 1:
        sys.exit("cmd_rounds.py: --rounds wants at least 1")
    rows, load = rounds(cmds, a.rounds)
    print_table(rows, a.rounds, load)
    first = next(iter(cmds))
    print_ratios(rows, [(k, first) for k in cmds if k != first])


if __name__ == "__main__":
    main()
