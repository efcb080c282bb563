#!/usr/bin/env python3
"""Every Catch2 test case runs under CTest.

    python3 scripts/check-test-count.py BUILD_DIR

For each Catch2 executable that CTest runs, the number of test cases the
executable lists must equal the number of CTest entries that run it with one
test name each, and every such entry must name a test case that exists. A name
CTest splits (a ';' in it, for one) shows up as a difference. Prints one line
per executable; exits 1 on any difference.
"""
import json
import os
import subprocess
import sys


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    info = json.loads(subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True,
                                     capture_output=True, text=True).stdout)
    runs = {}  # executable -> list of test names CTest passes it
    for t in info["tests"]:
        cmd = t.get("command") or []
        if len(cmd) >= 2 and os.path.basename(cmd[0]).endswith("_tests"):
            runs.setdefault(cmd[0], []).append(cmd[1])
    status = 0
    total_catch = total_ctest = 0
    if not runs:
        print("check-test-count: CTest runs no Catch2 executable", file=sys.stderr)
        return 1
    for exe in sorted(runs):
        listed = subprocess.run([exe, "--list-test-names-only"], capture_output=True,  # exits with the count
                                text=True).stdout.splitlines()
        names = {n for n in listed if n.strip()}
        # CTest passes the name with Catch's spec characters escaped.
        passed = [p.replace("\\,", ",").replace("\\[", "[").replace("\\]", "]") for p in runs[exe]]
        # Catch2 reads a backslash in a test spec as an escape: a name holding
        # one cannot be selected by its name, and its CTest entry runs nothing.
        unknown = [p for p in passed if p not in names or "\\" in p]
        total_catch += len(names)
        total_ctest += len(passed)
        line = f"{os.path.basename(exe)}: Catch2 lists {len(names)} test cases, CTest runs {len(passed)}"
        if len(names) != len(passed) or unknown:
            status = 1
            print("check-test-count: " + line, file=sys.stderr)
            for p in unknown[:10]:
                print(f"check-test-count:   CTest runs a name that matches no test case: {p!r}", file=sys.stderr)
        else:
            print(line)
    print(f"check-test-count: {total_catch} Catch2 test cases, {total_ctest} CTest entries for them")
    return status


if __name__ == "__main__":
    sys.exit(main())
