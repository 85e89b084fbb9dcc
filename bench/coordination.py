#!/usr/bin/env python3
"""The counter, barrier and id benchmark's runner (bench/coordination.sh builds and calls it).

Starts one ZooKeeper server (zkr-testkit) and a delay proxy (D = 1 ms) in front of it, then runs
every case for zkr (bench/coordination_bench.cpp) and Curator 5.4 (bench/java/CoordinationBench.java),
alternating which goes first, for --rounds rounds; prints the medians, the ratio zkr/Curator of
each metric and the issue's goals, and writes coordination-latest.json and coordination-latest.md
into --out-dir. A driver that fails, or whose counter does not hold exactly its successful
increments, is reported and makes the exit status 1."""
import argparse
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

INC1 = ["ops_per_s", "requests_per_op", "rtt_per_op", "p50_op_ms", "p99_op_ms"]
INC8 = ["ops_per_s", "attempts_per_op", "requests_per_op", "failed_ops", "fewest_by_one_client", "clients_incrementing",
        "p50_op_ms", "p99_op_ms",
        "max_op_ms"]
BARRIER = ["p50_ms", "max_ms", "p50_rtt", "max_rtt"]
IDS = ["ids_per_s", "requests_per_1000_ids"]
CASES_FULL = [
    dict(id="inc 1 client D=0", scenario="inc", d=0, args=["--clients", "1", "--seconds", "3", "--warmup", "1"], metrics=INC1),
    dict(id="inc 1 client D=1ms", scenario="inc", d=1, args=["--clients", "1", "--seconds", "3", "--warmup", "1"], metrics=INC1),
    dict(id="inc 8 clients D=0", scenario="inc", d=0, args=["--clients", "8", "--seconds", "3", "--warmup", "1"], metrics=INC8),
    dict(id="inc 8 clients D=1ms", scenario="inc", d=1, args=["--clients", "8", "--seconds", "3", "--warmup", "1"], metrics=INC8),
    dict(id="barrier 8 waiters D=0", scenario="barrier", d=0, args=["--clients", "8", "--releases", "20"], metrics=BARRIER),
    dict(id="barrier 8 waiters D=1ms", scenario="barrier", d=1, args=["--clients", "8", "--releases", "20"], metrics=BARRIER),
    dict(id="ids D=0", scenario="ids", d=0, args=["--block", "1000", "--seconds", "2", "--warmup", "1"], metrics=IDS),
    dict(id="ids D=1ms", scenario="ids", d=1, args=["--block", "1000", "--seconds", "2", "--warmup", "1"], metrics=IDS),
]
CASES_SMOKE = [
    dict(id="inc 1 client D=0", scenario="inc", d=0, args=["--clients", "1", "--seconds", "0.3", "--warmup", "0.1"], metrics=INC1),
    dict(id="inc 8 clients D=1ms", scenario="inc", d=1, args=["--clients", "8", "--seconds", "0.3", "--warmup", "0.1"], metrics=INC8),
    dict(id="barrier 8 waiters D=1ms", scenario="barrier", d=1, args=["--clients", "8", "--releases", "3"], metrics=BARRIER),
    dict(id="ids D=0", scenario="ids", d=0, args=["--block", "1000", "--seconds", "0.3", "--warmup", "0.1"], metrics=IDS),
]
# The goals: (case, metric, on what, test, text).
GOALS = [
    ("inc 1 client D=1ms", "requests_per_op", "zkr", lambda v: v <= 1.05, "1 request per uncontended increment"),
    ("inc 1 client D=1ms", "rtt_per_op", "zkr", lambda v: v <= 1.2, "1 RTT per uncontended increment (time / RTT)"),
    ("inc 8 clients D=0", "ops_per_s", "ratio", lambda v: v >= 1.5, ">= 1.5x Curator contended (D = 0)"),
    ("inc 8 clients D=1ms", "ops_per_s", "ratio", lambda v: v >= 1.5, ">= 1.5x Curator contended (D = 1 ms)"),
    ("barrier 8 waiters D=1ms", "p50_rtt", "zkr", lambda v: v <= 1.2, "barrier release p50 <= 1.2 RTT"),
    ("barrier 8 waiters D=1ms", "max_rtt", "zkr", lambda v: v <= 1.2, "barrier release max <= 1.2 RTT"),
    ("ids D=0", "ids_per_s", "ratio", lambda v: v >= 100, "ids >= 100x the counter (D = 0)"),
    ("ids D=1ms", "ids_per_s", "ratio", lambda v: v >= 100, "ids >= 100x the counter (D = 1 ms)"),
]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def start_proxy(proxy_bin, target, delay_ms):
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
    """zkr's commit, with "+dirty" when the library's sources (outside bench/) differ from it."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fmt(v):
    if v is None:
        return "-"
    if float(v).is_integer() or abs(v) >= 1000:
        return "{:,.0f}".format(v)
    if abs(v) >= 100:
        return "%.0f" % v
    return "%.2f" % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zkr-bin", required=True)
    ap.add_argument("--proxy-bin", required=True)
    ap.add_argument("--testkit-bin", required=True)
    ap.add_argument("--java-prefix", required=True, help="the command that runs CoordinationBench")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    o = ap.parse_args()
    cases = CASES_SMOKE if o.smoke else CASES_FULL
    rounds = 1 if o.smoke else o.rounds
    started = time.time()
    rev = revision()
    load_start = os.getloadavg()
    work = tempfile.mkdtemp(prefix="zkr-coordination-bench-")
    server_dir = os.path.join(work, "zk")
    out = subprocess.run([o.testkit_bin, "start", server_dir, "1"], capture_output=True, text=True, check=True)
    connect = out.stdout.strip().splitlines()[-1]
    proxy, proxied = start_proxy(o.proxy_bin, connect, 1)
    log("bench/coordination: server %s, D=1 ms proxy %s" % (connect, proxied))
    results = []  # (case id, driver, round, json)
    failed = 0
    try:
        for r in range(rounds):
            for ci, case in enumerate(cases):
                drivers = case.get("drivers", ["zkr", "curator"])
                if (r + ci) % 2:
                    drivers = list(reversed(drivers))
                for driver in drivers:
                    cs = proxied if case["d"] else connect
                    path = "/bench-coordination/%s-%s-%d" % (re.sub(r"[^a-z0-9]+", "-", case["id"].lower()), driver, r)
                    cmd = ([o.zkr_bin] if driver == "zkr" else shlex.split(o.java_prefix))
                    cmd += [case["scenario"], cs, path] + case["args"] + ["--direct", connect]
                    t0 = time.monotonic()
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
                    res = json.loads(line) if line.startswith("{") else None
                    if res is not None and res.get("counter_ok") is False:
                        log("bench/coordination: %s %s: COUNTER MISMATCH: holds %s after %s successful increments" % (
                            driver, case["id"], res.get("final_value"), res.get("total_ok")))
                    if p.returncode != 0 or res is None:
                        failed += 1
                        log("bench/coordination: %s %s failed (exit %d): %s" % (driver, case["id"], p.returncode,
                                                                                 p.stderr.strip()[-800:]))
                        continue
                    missing = [m for m in case["metrics"] if m not in res]
                    if missing:
                        failed += 1
                        log("bench/coordination: %s %s printed no %s" % (driver, case["id"], missing))
                        continue
                    results.append((case["id"], driver, r, res))
                    log("bench/coordination: round %d %-24s %-8s %5.1f s  %s" % (
                        r + 1, case["id"], driver, time.monotonic() - t0,
                        " ".join("%s=%s" % (m, fmt(res[m])) for m in case["metrics"])))
    finally:
        proxy.kill()
        proxy.wait()
        subprocess.run([o.testkit_bin, "destroy", server_dir], capture_output=True)
        try:
            os.rmdir(work)
        except OSError:
            pass

    rows = []
    for case in cases:
        for m in case["metrics"] + ["rtt_ms"]:
            med = {}
            for driver in ("zkr", "curator"):
                xs = [res[m] for cid, d, r, res in results if cid == case["id"] and d == driver and m in res]
                if xs:
                    med[driver] = statistics.median(xs)
            ratio = med["zkr"] / med["curator"] if "zkr" in med and med.get("curator") else None
            rows.append(dict(case=case["id"], metric=m, zkr=med.get("zkr"), curator=med.get("curator"), ratio=ratio))
    lines = ["| case | metric | zkr | Curator 5.4 | zkr/Curator |", "|---|---|---:|---:|---:|"]
    for row in rows:
        lines.append("| %s | %s | %s | %s | %s |" % (row["case"], row["metric"], fmt(row["zkr"]), fmt(row["curator"]),
                                                     "-" if row["ratio"] is None else "%.2f" % row["ratio"]))
    table = "\n".join(lines)
    goal_lines = ["| goal | case | measured | met |", "|---|---|---:|:-:|"]
    goals = []
    for cid, metric, on, test, text in GOALS:
        row = next((x for x in rows if x["case"] == cid and x["metric"] == metric), None)
        v = None if row is None else row[on]
        met = None if v is None else bool(test(v))
        goals.append(dict(goal=text, case=cid, metric=metric, on=on, value=v, met=met))
        if row is not None:
            goal_lines.append("| %s | %s | %s%s | %s |" % (text, cid, fmt(v), "x" if on == "ratio" and v is not None else "",
                                                         "-" if met is None else ("yes" if met else "**no**")))
    goal_table = "\n".join(goal_lines)
    elapsed = time.time() - started
    load_end = os.getloadavg()
    summary = ("Medians of %d round(s), zkr %s and Curator interleaved (bench/coordination.sh), %.0f s; "
               "load average %.2f at the start, %.2f at the end." % (rounds, rev, elapsed, load_start[0], load_end[0]))
    print(summary + "\n\n" + table + "\n\n" + goal_table)
    if not o.smoke:
        os.makedirs(o.out_dir, exist_ok=True)
        with open(os.path.join(o.out_dir, "coordination-latest.json"), "w") as f:
            json.dump(dict(rounds=rounds, revision=rev, seconds=elapsed, load_start=load_start, load_end=load_end, rows=rows, goals=goals,
                           failed=failed, runs=[dict(case=c, driver=d, round=r, result=res) for c, d, r, res in results]),
                      f, indent=1)
        with open(os.path.join(o.out_dir, "coordination-latest.md"), "w") as f:
            f.write("%s\n\n%s\n\n%s\n" % (summary, table, goal_table))
    if failed:
        log("bench/coordination: %d run(s) failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
