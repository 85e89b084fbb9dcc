"""What the benchmark runners share (cache.py, coordination.py, server_cost.py; bench.py keeps
its own proxies, which it checks before each run): logging, the delay proxy, the revision a
result was measured at, number formatting, and the zkr-beside-Curator loop of the peer
benchmarks with its table of medians and ratios. The drivers' C++ side is bench_support.hpp."""

import argparse
import contextlib
import json
import os
import re
import select
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def start_proxy(proxy_bin, target, delay_ms):
    """A zkr_delay_proxy in front of `target`, `delay_ms` each way: (its process, its address)."""
    p = subprocess.Popen([proxy_bin, "--listen", "127.0.0.1:0", "--target", target, "--delay-ms", "%g" % delay_ms],
                         stdout=subprocess.PIPE, text=True, start_new_session=True)
    ready, _, _ = select.select([p.stdout], [], [], 10)
    line = p.stdout.readline().strip() if ready else ""
    m = re.match(r"listening (\S+)$", line)
    if not m:
        p.kill()
        raise RuntimeError("zkr_delay_proxy did not start (%r)" % line)
    return p, m.group(1)


def revision():
    """zkr's commit, with "+dirty" when the library's sources (outside bench/) differ from it
    ($ZKR_BENCH_REVISION instead, for a copy of a commit that is no git checkout)."""
    if os.environ.get("ZKR_BENCH_REVISION"):
        return os.environ["ZKR_BENCH_REVISION"]
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fmt(v, digits=None):
    """A table's number: `digits` decimals if given; else whole numbers and thousands with
    separators, hundreds without decimals, tens with one, the rest with two."""
    if v is None:
        return "-"
    if digits is not None:
        return "%.*f" % (digits, v)
    if float(v).is_integer() or abs(v) >= 1000:
        return "{:,.0f}".format(v)
    if abs(v) >= 100:
        return "%.0f" % v
    if abs(v) >= 10:
        return "%.1f" % v
    return "%.2f" % v


def peer_arguments(java_help):
    """The command line of a peer benchmark's runner (cache.py, coordination.py)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--zkr-bin", required=True, help="zkr's driver")
    ap.add_argument("--proxy-bin", required=True, help="zkr_delay_proxy")
    ap.add_argument("--testkit-bin", required=True, help="zkr-testkit, which starts the server")
    ap.add_argument("--java-prefix", required=True, help=java_help)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="one round of the small cases; nothing written")
    return ap


@contextlib.contextmanager
def server_with_proxy(testkit_bin, proxy_bin, prefix, delay_ms=1):
    """One zkr-testkit server of its own and a delay proxy in front of it: yields (the server's
    connect string, the proxy's); both are gone afterwards."""
    work = tempfile.mkdtemp(prefix=prefix)
    server_dir = os.path.join(work, "zk")
    out = subprocess.run([testkit_bin, "start", server_dir, "1"], capture_output=True, text=True, check=True)
    connect = out.stdout.strip().splitlines()[-1]
    proxy = None
    try:
        proxy, proxied = start_proxy(proxy_bin, connect, delay_ms)
        yield connect, proxied
    finally:
        if proxy is not None:
            proxy.kill()
            proxy.wait()
        subprocess.run([testkit_bin, "destroy", server_dir], capture_output=True)
        with contextlib.suppress(OSError):
            os.rmdir(work)


def run_peers(name, cases, rounds, zkr_bin, java_prefix, connect, proxied, extra_args, timeout, check=None):
    """Every case's drivers (its "drivers", default zkr and Curator) once a round, which goes first
    alternating from one case and round to the next; a case with "rounds" runs only that many.
    A driver gets SCENARIO CONNECT PATH, the case's "args", then `extra_args`; CONNECT is the proxy's
    for a case with "d", else the server's; PATH is /bench-<name>/<case>-<driver>-<round>.

    Returns (results, failed): results a list of (case id, driver, round, the driver's JSON line),
    failed the number of runs that failed, printed no JSON, or left out a metric the case names.
    `check(driver, case, res)` may log what a driver's JSON says went wrong."""
    results = []
    failed = 0
    for r in range(rounds):
        for ci, case in enumerate(cases):
            if r >= case.get("rounds", rounds):
                continue
            drivers = case.get("drivers", ["zkr", "curator"])
            if (r + ci) % 2:
                drivers = list(reversed(drivers))
            for driver in drivers:
                cs = proxied if case["d"] else connect
                path = "/bench-%s/%s-%s-%d" % (name, re.sub(r"[^a-z0-9]+", "-", case["id"].lower()), driver, r)
                cmd = [zkr_bin] if driver == "zkr" else shlex.split(java_prefix)
                cmd += [case["scenario"], cs, path] + case["args"] + extra_args
                t0 = time.monotonic()
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
                line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
                res = json.loads(line) if line.startswith("{") else None
                if res is not None and check is not None:
                    check(driver, case, res)
                if p.returncode != 0 or res is None:
                    failed += 1
                    log("bench/%s: %s %s failed (exit %d): %s" % (name, driver, case["id"], p.returncode,
                                                               p.stderr.strip()[-800:]))
                    continue
                missing = [m for m in case["metrics"] if m not in res]
                if missing:
                    failed += 1
                    log("bench/%s: %s %s printed no %s" % (name, driver, case["id"], missing))
                    continue
                results.append((case["id"], driver, r, res))
                log("bench/%s: round %d %-24s %-8s %5.1f s  %s" % (
                    name, r + 1, case["id"], driver, time.monotonic() - t0,
                    " ".join("%s=%s" % (m, fmt(res[m])) for m in case["metrics"])))
    return results, failed


def median_rows(cases, results, extra_metrics=()):
    """Per case and metric: each driver's median over the rounds, and zkr / Curator."""
    rows = []
    for case in cases:
        for m in case["metrics"] + list(extra_metrics):
            med = {}
            for driver in ("zkr", "curator"):
                xs = [res[m] for cid, d, _, res in results if cid == case["id"] and d == driver and m in res]
                if xs:
                    med[driver] = statistics.median(xs)
            ratio = med["zkr"] / med["curator"] if "zkr" in med and med.get("curator") else None
            rows.append(dict(case=case["id"], metric=m, zkr=med.get("zkr"), curator=med.get("curator"), ratio=ratio))
    return rows


def ratio_table(rows):
    """median_rows as a Markdown table."""
    lines = ["| case | metric | zkr | Curator 5.4 | zkr/Curator |", "|---|---|---:|---:|---:|"]
    for row in rows:
        lines.append("| %s | %s | %s | %s | %s |" % (row["case"], row["metric"], fmt(row["zkr"]), fmt(row["curator"]),
                                                     "-" if row["ratio"] is None else "%.2f" % row["ratio"]))
    return "\n".join(lines)
