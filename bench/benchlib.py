"""benchlib: the side-by-side timing every bench/*.py script shares.

Each round runs every command once, in a fixed order, so a slow spell of a
shared machine hits all of them alike; ratios are the median of the
per-round ratios, not a ratio of medians.
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(cmd, stdout=subprocess.DEVNULL, env=None, check=True):
    """Wall seconds, CPU seconds (user + sys, children included) and peak RSS (MiB) of one run, from GNU time."""
    with tempfile.NamedTemporaryFile("r") as f:
        t0 = time.monotonic()
        rc = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", f.name] + cmd,
                            stdout=stdout, env=env).returncode
        wall = time.monotonic() - t0
        if check and rc != 0:
            sys.exit(f"{os.path.basename(sys.argv[0])}: {' '.join(cmd)} exited with {rc}")
        user, sys_s, kib = f.read().split()[-3:]
    return wall, float(user) + float(sys_s), int(kib) / 1024.0


def run_threads(cmd, stdout=subprocess.DEVNULL, check=True, every=0.005, window=0.05):
    """As run(), plus the most threads that worked at once.

    The command runs under GNU time, as in run() (CPU time, user + sys of all
    threads, and peak RSS of the command alone). Meanwhile its threads' CPU
    times are sampled from /proc/PID/task every `every` seconds; at each
    sample, the threads whose CPU time grew over the last `window` seconds
    worked at once. The result is the most of them at any sample, or CPU
    time / wall time rounded when that is more (at least 1): an idle
    signal-handling thread never counts, a helper thread counts while it
    works."""
    tick = os.sysconf("SC_CLK_TCK")
    with tempfile.NamedTemporaryFile("r") as f:
        t0 = time.monotonic()
        proc = subprocess.Popen(["/usr/bin/time", "-f", "%U %S %M", "-o", f.name] + cmd, stdout=stdout)
        child = None
        history = []  # (time, {tid: cpu seconds})
        most = 1
        while proc.poll() is None:
            try:
                if child is None:
                    with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as c:
                        kids = c.read().split()
                    child = kids[0] if kids else None
                if child is not None:
                    now = {}
                    for tid in os.listdir(f"/proc/{child}/task"):
                        try:
                            with open(f"/proc/{child}/task/{tid}/stat") as st:
                                fields = st.read().rsplit(")", 1)[1].split()
                            now[tid] = (int(fields[11]) + int(fields[12])) / tick
                        except (OSError, IndexError, ValueError):
                            pass
                    t = time.monotonic()
                    history.append((t, now))
                    while len(history) > 1 and history[1][0] <= t - window:
                        history.pop(0)
                    then = history[0][1]
                    most = max(most, sum(1 for tid, c in now.items() if c > then.get(tid, 0.0)))
            except (OSError, IndexError, ValueError):
                pass
            time.sleep(every)
        wall = time.monotonic() - t0
        if check and proc.returncode != 0:
            sys.exit(f"{os.path.basename(sys.argv[0])}: {' '.join(cmd)} exited with {proc.returncode}")
        user, sys_s, kib = f.read().split()[-3:]
    cpu = float(user) + float(sys_s)
    # A thread that lives less than a clock tick (dump's read-ahead, one per
    # segment) can escape the samples: CPU / wall, rounded, when it is more.
    if wall > 0:
        most = max(most, round(cpu / wall))
    return wall, cpu, int(kib) / 1024.0, most


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def rounds(cmds, n, warm=True, between=None, runner=None):
    """Runs every command of `cmds` (name -> argv) once per round, n rounds.

    With warm, one unmeasured run of each first (page cache). `between(name)`
    runs after each measured command (cleanup, not timed). Returns
    (rows, load): rows maps each name to a list of (wall, cpu, rss_mib), load
    is the load average before and after. `runner` replaces run() (e.g.
    run_threads, whose rows add the busy threads)."""
    runner = runner or run
    if warm:
        for k, c in cmds.items():
            runner(c)
            if between:
                between(k)
    rows = {k: [] for k in cmds}
    load = [loadavg()]
    for _ in range(n):
        for k, c in cmds.items():
            rows[k].append(runner(c))
            if between:
                between(k)
    load.append(loadavg())
    return rows, load


def median(rows, name, what=0):
    return statistics.median(r[what] for r in rows[name])


def ratio(rows, x, y, what=0):
    """Median, min and max over the rounds of x's time / y's time (what: 0 wall, 1 CPU).

    A round where y took no measurable time (CPU times are in 10 ms steps)
    is left out; nan when every round is."""
    per = [rx[what] / ry[what] for rx, ry in zip(rows[x], rows[y]) if ry[what] > 0]
    if not per:
        return float("nan"), float("nan"), float("nan")
    return statistics.median(per), min(per), max(per)


def print_table(rows, n, load, extra=None):
    """The per-command medians; `extra(name)` adds a text column (rates)."""
    print(f"{n} rounds; load average before {load[0]}, after {load[1]}")
    print(f"{'command':40s} {'wall s':>8s} {'CPU s':>8s} {'RSS MiB':>8s}")
    for k, r in rows.items():
        line = (f"{k:40s} {median(rows, k, 0):8.3f} {median(rows, k, 1):8.3f} "
                f"{max(x[2] for x in r):8.1f}")
        if extra:
            line += "  " + extra(k)
        print(line)


def print_ratios(rows, pairs):
    print("ratios, median of the rounds' ratios (min-max): wall; CPU")
    for x, y in pairs:
        w, c = ratio(rows, x, y, 0), ratio(rows, x, y, 1)
        print(f"  {x} / {y}: {w[0]:.2f}x ({w[1]:.2f}-{w[2]:.2f}); CPU {c[0]:.2f}x ({c[1]:.2f}-{c[2]:.2f})")
