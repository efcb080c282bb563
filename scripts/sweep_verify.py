#!/usr/bin/env python3
"""The checks of one crash-sweep run (scripts/crash-sweep.sh): every cut is
consistent without a finding, or inconsistent with its reason; at least one
cut is consistent; and `walcut history check` passes when walcut has it.
Usage: sweep_verify.py WALCUT DIR HISTORY. Exit 0 when all hold."""
import json
import re
import subprocess
import sys


def main():
    walcut, d, hist = sys.argv[1:4]
    r = subprocess.run([walcut, "cuts", d, "--format", "json"], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        print(f"sweep_verify: walcut cuts {d}: exit {r.returncode}: {r.stderr.strip()}", file=sys.stderr)
        return 1
    cuts = json.loads(r.stdout)["cuts"]
    bad = []
    for c in cuts:
        if c["status"] == "consistent" and c["findings"]:
            bad.append(f"cut {c['cut']} is consistent but has {len(c['findings'])} findings")
        if c["status"] != "consistent" and not c.get("reason"):
            bad.append(f"cut {c['cut']} is {c['status']} without a reason")
    consistent = sum(1 for c in cuts if c["status"] == "consistent")
    if consistent == 0:
        bad.append("no consistent cut")
    help_text = subprocess.run([walcut, "help"], capture_output=True, text=True).stdout
    if re.search(r"^\s*history\b", help_text, re.M):
        h = subprocess.run([walcut, "history", "check", d, hist], capture_output=True, text=True)
        if h.returncode != 0:
            bad.append(f"walcut history check: exit {h.returncode}: {(h.stdout + h.stderr).strip()[-2000:]}")
    for b in bad:
        print(f"sweep_verify: {d}: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
