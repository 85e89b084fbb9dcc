#!/usr/bin/env python3
"""The cache and persistent-node benchmark's runner (bench/cache.sh builds and calls it).

No 100k-node case: neither side caches 100,000 nodes on one client. zkr refuses the watches past
what one client can set again after a reconnection (too_many_watches: about 1 MB of paths, some
20,000 nodes of this layout) and its cache stays uninitialized; Curator 5.4's CuratorCache loads
66,535 of them and stops (CURATOR-690, its Phaser's limit).

Starts one ZooKeeper server (zkr-testkit) and a delay proxy (D = 1 ms) in front of it, then runs
every case for zkr (bench/cache_bench.cpp) and Curator (bench/java/CacheBench.java), alternating
which goes first, for --rounds rounds; prints the medians and the ratio zkr/Curator of each
metric and writes cache-latest.json and cache-latest.md into --out-dir."""
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

CASES_FULL = [
    dict(id="event-latency D=0", scenario="event-latency", d=0, args=["--nodes", "100", "--events", "400"],
         metrics=["p50_us", "p99_us"]),
    dict(id="event-latency D=1ms", scenario="event-latency", d=1, args=["--nodes", "100", "--events", "200"],
         metrics=["p50_us", "p99_us"]),
    dict(id="init 1k", scenario="init", d=0, args=["--nodes", "1000"], metrics=["init_ms", "bytes_per_node"]),
    dict(id="init 10k", scenario="init", d=0, args=["--nodes", "10000"], metrics=["init_ms", "bytes_per_node"]),
    dict(id="resync 10k", scenario="resync", d=0, args=["--nodes", "10000"], metrics=["resync_ms", "resync_requests"],
         drivers=["zkr"]),
    dict(id="node-back", scenario="node-back", d=0, args=[], metrics=["back_ms"]),
]
CASES_SMOKE = [
    dict(id="event-latency D=0", scenario="event-latency", d=0, args=["--nodes", "10", "--events", "20"],
         metrics=["p50_us", "p99_us"]),
    dict(id="event-latency D=1ms", scenario="event-latency", d=1, args=["--nodes", "10", "--events", "10"],
         metrics=["p50_us", "p99_us"]),
    dict(id="init 1k", scenario="init", d=0, args=["--nodes", "1000"], metrics=["init_ms", "bytes_per_node"]),
    dict(id="resync 1k", scenario="resync", d=0, args=["--nodes", "1000"], metrics=["resync_ms", "resync_requests"],
         drivers=["zkr"]),
    dict(id="node-back", scenario="node-back", d=0, args=[], metrics=["back_ms"]),
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zkr-bin", required=True)
    ap.add_argument("--proxy-bin", required=True)
    ap.add_argument("--testkit-bin", required=True)
    ap.add_argument("--java-prefix", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--smoke", action="store_true")
    o = ap.parse_args()
    cases = CASES_SMOKE if o.smoke else CASES_FULL
    rounds = 1 if o.smoke else o.rounds
    work = tempfile.mkdtemp(prefix="zkr-cache-bench-")
    server_dir = os.path.join(work, "zk")
    out = subprocess.run([o.testkit_bin, "start", server_dir, "1"], capture_output=True, text=True, check=True)
    connect = out.stdout.strip().splitlines()[-1]
    proxy, proxied = start_proxy(o.proxy_bin, connect, 1)
    log("bench/cache: server %s, D=1 ms proxy %s" % (connect, proxied))
    results = []  # (case id, driver, round, json)
    failed = 0
    try:
        for r in range(rounds):
            for ci, case in enumerate(cases):
                if r >= case.get("rounds", rounds):
                    continue
                drivers = case.get("drivers", ["zkr", "curator"])
                if (r + ci) % 2:
                    drivers = list(reversed(drivers))
                for driver in drivers:
                    cs = proxied if case["d"] else connect
                    path = "/bench-cache/%s-%s-%d" % (re.sub(r"[^a-z0-9]+", "-", case["id"].lower()), driver, r)
                    cmd = ([o.zkr_bin] if driver == "zkr" else shlex.split(o.java_prefix))
                    cmd += [case["scenario"], cs, path] + case["args"] + ["--expire-via", connect]
                    t0 = time.monotonic()
                    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
                    line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
                    if p.returncode != 0 or not line.startswith("{"):
                        failed += 1
                        log("bench/cache: %s %s failed (exit %d): %s" % (driver, case["id"], p.returncode,
                                                                          p.stderr.strip()[-500:]))
                        continue
                    res = json.loads(line)
                    missing = [m for m in case["metrics"] if m not in res]
                    if missing:
                        failed += 1
                        log("bench/cache: %s %s printed no %s" % (driver, case["id"], missing))
                        continue
                    results.append((case["id"], driver, r, res))
                    log("bench/cache: round %d %-20s %-8s %5.1f s  %s" % (
                        r + 1, case["id"], driver, time.monotonic() - t0,
                        " ".join("%s=%.1f" % (m, res[m]) for m in case["metrics"])))
    finally:
        proxy.kill()
        subprocess.run([o.testkit_bin, "destroy", server_dir], capture_output=True)

    rows = []
    for case in cases:
        for m in case["metrics"]:
            med = {}
            for driver in ("zkr", "curator"):
                xs = [res[m] for cid, d, r, res in results if cid == case["id"] and d == driver]
                if xs:
                    med[driver] = statistics.median(xs)
            ratio = med["zkr"] / med["curator"] if "zkr" in med and med.get("curator") else None
            rows.append(dict(case=case["id"], metric=m, zkr=med.get("zkr"), curator=med.get("curator"), ratio=ratio))
    lines = ["| case | metric | zkr | Curator 5.4 | zkr/Curator |", "|---|---|---:|---:|---:|"]
    fmt = lambda v: "-" if v is None else ("%.0f" % v if v >= 100 else "%.2f" % v)
    for row in rows:
        lines.append("| %s | %s | %s | %s | %s |" % (row["case"], row["metric"], fmt(row["zkr"]), fmt(row["curator"]),
                                                     "-" if row["ratio"] is None else "%.2f" % row["ratio"]))
    table = "\n".join(lines)
    print(table)
    if not o.smoke:
        os.makedirs(o.out_dir, exist_ok=True)
        with open(os.path.join(o.out_dir, "cache-latest.json"), "w") as f:
            json.dump(dict(rounds=rounds, rows=rows, runs=[dict(case=c, driver=d, round=r, result=res)
                                                          for c, d, r, res in results]), f, indent=1)
        with open(os.path.join(o.out_dir, "cache-latest.md"), "w") as f:
            f.write("Medians of %d round(s), zkr and Curator interleaved (bench/cache.sh).\n\n%s\n" % (rounds, table))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
