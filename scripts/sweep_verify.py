#!/usr/bin/env python3
"""The checks of one crash-sweep run (scripts/crash-sweep.sh): every cut is
consistent without a finding, or inconsistent with its reason; at least one
cut is consistent; `walcut check --level restore` restores every consistent
cut (from the previous one, or from the oldest full snapshot the WAL still
holds) with its fingerprints and the workload's invariants, and finds
nothing outside the inconsistent cuts; and `walcut history check` passes, unless the
cluster deletes old WAL segments (it needs every node's whole WAL).
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
    inconsistent = {f"cut-{c['cut']}" for c in cuts if c["status"] != "consistent"}
    r = subprocess.run([walcut, "check", d, "--level", "restore", "--format", "json", "-q"], capture_output=True,
                       text=True)
    if r.returncode not in (0, 1):
        bad.append(f"walcut check --level restore: exit {r.returncode}: {r.stderr.strip()}")
    else:
        checks = json.loads(r.stdout)["checks"]
        restored = sum(1 for c in checks if c["level"] == "restore" and c["outcome"] == "pass")
        for c in checks:
            if c["outcome"] == "pass":
                continue
            # An inconsistent cut (with its reason, checked above) may have
            # more findings: the evidence a crash left is contradictory.
            expected = c["level"] == "cuts" and c["group"] in inconsistent
            if not expected:
                bad.append(f"walcut check --level restore: {c['group']}: {c['name']}: "
                           f"{'; '.join(f['message'] for f in c['findings'])[:500]}")
        if restored == 0:
            bad.append("walcut check --level restore restored no cut")
    with open(f"{d}/cluster.json") as f:
        retention = json.load(f).get("wal_retention")
    help_text = subprocess.run([walcut, "help"], capture_output=True, text=True).stdout
    if not retention and re.search(r"^\s*history\b", help_text, re.M):
        h = subprocess.run([walcut, "history", "check", d, hist], capture_output=True, text=True)
        if h.returncode != 0:
            bad.append(f"walcut history check: exit {h.returncode}: {(h.stdout + h.stderr).strip()[-2000:]}")
    for b in bad:
        print(f"sweep_verify: {d}: {b}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
