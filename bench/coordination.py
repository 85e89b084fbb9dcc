#!/usr/bin/env python3
"""The counter, barrier and id benchmark's runner (bench/coordination.sh builds and calls it).

Starts one ZooKeeper server (zkr-testkit) and a delay proxy (D = 1 ms) in front of it, then runs
every case for zkr (bench/coordination_bench.cpp) and Curator 5.4 (bench/java/CoordinationBench.java),
alternating which goes first, for --rounds rounds; prints the medians, the ratio zkr/Curator of
each metric and the issue's goals, and writes coordination-latest.json and coordination-latest.md
into --out-dir. A driver that fails, or whose counter does not hold exactly its successful
increments, is reported and makes the exit status 1."""
import json
import os
import sys
import time

from bench_common import fmt, log, median_rows, peer_arguments, ratio_table, revision, run_peers, server_with_proxy

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


def main():
    o = peer_arguments("the command that runs CoordinationBench").parse_args()
    cases = CASES_SMOKE if o.smoke else CASES_FULL
    rounds = 1 if o.smoke else o.rounds
    started = time.time()
    rev = revision()
    load_start = os.getloadavg()

    def counter_check(driver, case, res):
        if res.get("counter_ok") is False:
            log("bench/coordination: %s %s: COUNTER MISMATCH: holds %s after %s successful increments" % (
                driver, case["id"], res.get("final_value"), res.get("total_ok")))

    with server_with_proxy(o.testkit_bin, o.proxy_bin, "zkr-coordination-bench-") as (connect, proxied):
        log("bench/coordination: server %s, D=1 ms proxy %s" % (connect, proxied))
        results, failed = run_peers("coordination", cases, rounds, o.zkr_bin, o.java_prefix, connect, proxied,
                                    ["--direct", connect], timeout=300, check=counter_check)
    rows = median_rows(cases, results, extra_metrics=["rtt_ms"])
    table = ratio_table(rows)
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
