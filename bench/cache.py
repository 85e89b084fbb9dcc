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
import json
import os
import sys

from bench_common import log, median_rows, peer_arguments, ratio_table, run_peers, server_with_proxy

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


def main():
    o = peer_arguments("the command that runs CacheBench").parse_args()
    cases = CASES_SMOKE if o.smoke else CASES_FULL
    rounds = 1 if o.smoke else o.rounds
    with server_with_proxy(o.testkit_bin, o.proxy_bin, "zkr-cache-bench-") as (connect, proxied):
        log("bench/cache: server %s, D=1 ms proxy %s" % (connect, proxied))
        results, failed = run_peers("cache", cases, rounds, o.zkr_bin, o.java_prefix, connect, proxied,
                                    ["--expire-via", connect], timeout=900)
    rows = median_rows(cases, results)
    table = ratio_table(rows)
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
