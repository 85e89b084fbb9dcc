#!/usr/bin/env python3
"""Issue 32's server-cost table: every recipe's common path, zkr beside Curator 5.4, in one run
(bench/server_cost.sh builds the drivers and calls this).

Starts its own ZooKeeper servers (zkr-testkit: one standalone forceSync=no server, or with
--servers 3 a 3-server ensemble on loopback), then runs every case for zkr (bench/zkr_bench.cpp)
and Curator (bench/java/CuratorBench.java + RecipeBench.java), alternating which goes first, for
--rounds rounds. Each driver reports, over its measured window, the servers' requests per cycle
(mntr zk_packets_received summed over every server), the requests its own harness sent (polls,
its own watches: subtracted here, so the table shows the recipe's), the server processes' CPU
(/proc/PID/stat utime + stime, summed over the servers) and its own CPU, per 1000 cycles.

With --servers 3 each round's clients (zkr's and Curator's alike) connect to one follower (the
rounds alternate between the two), so every write is forwarded to the leader: the case users run.

Round trips (unless --no-rtt): the single-threaded cases again through a delay proxy adding 1 ms
each way in front of the same server; p50 / the p50 of one raw request's round trip through it.

--by-op: after the rounds, every case once more per driver through zkr_op_count_proxy (a
zkr::testkit::proxy counting requests by op code; --warmup 0, so the whole run is counted: its
set-up and clean-up add a few requests), per cycle: which requests make up the count.

Prints the medians with ratios zkr/Curator and writes server-cost-<N>-latest.{json,md} into
--out-dir. A driver that fails is reported and makes the exit status 1."""
import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench_common import fmt, log, revision, start_proxy

HERE = os.path.dirname(os.path.abspath(__file__))

# id, label, scenario arguments (both drivers), rtt: also run at D = 1 ms for round trips.
CASES = [
    dict(id="mutex-uncontended", label="mutex, uncontended (1 thread)", args=["uncontended"], rtt=True),
    dict(id="mutex-contended-8", label="mutex, 8 threads contending", args=["contended", "--threads", "8"]),
    dict(id="rw-shared-reads-4", label="read/write lock, 4 threads reading", args=["shared-reads", "--threads", "4"]),
    dict(id="rw-mix-8", label="read/write lock, 8 threads, 10 % writes",
         args=["rw-mix", "--threads", "8", "--write-percent", "10"]),
    dict(id="latch-join", label="leader latch join + close (uncontended)", args=["latch-join"], rtt=True),
    dict(id="latch-handoff-2", label="leader latch hand-off (2 latches; per round: 2 joins, hand-off, 2 closes)",
         args=["latch-handoff", "--waiters", "2", "--settle-ms", "2"], rtt=True),
    dict(id="sem-uncontended", label="semaphore acquire + release, uncontended (max 3)",
         args=["sem-uncontended", "--max", "3"], rtt=True),
    dict(id="sem-contended-8x3", label="semaphore, 8 threads on max 3", args=["sem-contended", "--threads", "8", "--max", "3"]),
    dict(id="multi-lock-2", label="multi-lock over 2 mutexes, uncontended", args=["multi-lock"], rtt=True),
]
DRIVERS = ["zkr", "curator"]


class Ensemble:
    """The servers (zkr-testkit), their processes and client ports."""

    def __init__(self, testkit, n):
        self.testkit = testkit
        self.n = n
        self.work = tempfile.mkdtemp(prefix="zkr-server-cost-")
        self.dir = os.path.join(self.work, "zk")
        env = dict(os.environ)
        env.update(ZK_CONTAINER_CHECK_MS="60000", ZK_LOG_LEVEL="WARN", ZK_FORCE_SYNC="no",
                   ZKR_TESTKIT_OWNER_PID=str(os.getpid()), JAVA=os.path.join(HERE, "zk-server-java.sh"),
                   ZKR_BENCH_REAL_JAVA=subprocess.run(["sh", "-c", "command -v java"], capture_output=True,
                                                      text=True).stdout.strip() or "java")
        r = subprocess.run([testkit, "start", self.dir, str(n)], env=env, capture_output=True, text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError("could not start %d server(s):\n%s" % (n, r.stderr))
        self.connect = r.stdout.strip().splitlines()[-1]
        self.ports = [int(self.tk("port", str(i))) for i in range(n)]
        self.pids = []
        for i in range(n):
            with open(os.path.join(self.dir, "s%d" % i, "pid")) as f:
                pid = int(f.read().strip())
            # The pid file's process is this server's JVM (its command line names its directory).
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                if self.dir.encode() not in f.read():
                    raise RuntimeError("pid %d is not server %d's process" % (pid, i))
            self.pids.append(pid)

    def tk(self, *args):
        return subprocess.run([self.testkit, args[0], self.dir] + list(args[1:]), capture_output=True, text=True,
                              check=True, timeout=60).stdout.strip()

    def address(self, i):
        return "127.0.0.1:%d" % self.ports[i]

    def leader(self):
        return int(self.tk("leader")) if self.n > 1 else 0

    def state(self, i):
        m = re.search(r"zk_server_state\s+(\S+)", self.tk("4lw", str(i), "mntr"))
        return m.group(1) if m else "?"

    def destroy(self):
        subprocess.run([self.testkit, "destroy", self.dir], capture_output=True, timeout=120)
        try:
            os.rmdir(self.work)
        except OSError:
            pass


def metrics_of(case, res):
    """The table's figures from one driver's JSON line."""
    handoff = case["args"][0] == "latch-handoff"
    out = {}
    if handoff:
        secs = res.get("seconds") or 0
        out["cycles_per_s"] = res["handoffs"] / secs if secs else None
        out["p50_us"] = res.get("handoff_p50_us")
        cpu = res.get("cpu_ms_per_handoff")
        out["client_cpu_ms_per_1000"] = None if cpu is None else cpu * 1000
    else:
        out["cycles_per_s"] = res.get("cycles_per_s")
        out["p50_us"] = res.get("p50_us")
        out["client_cpu_ms_per_1000"] = res.get("cpu_ms_per_1000")
    total, harness = res.get("server_requests_per_cycle"), res.get("harness_requests_per_cycle") or 0
    out["server_requests_per_cycle"] = total
    out["harness_requests_per_cycle"] = harness
    out["requests_per_cycle"] = None if total is None else total - harness
    out["server_cpu_ms_per_1000"] = res.get("server_cpu_ms_per_1000")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zkr-bin", required=True)
    ap.add_argument("--java-prefix", required=True, help="the command that runs CuratorBench")
    ap.add_argument("--testkit-bin", required=True)
    ap.add_argument("--proxy-bin", required=True)
    ap.add_argument("--op-proxy-bin", help="zkr_op_count_proxy (for --by-op)")
    ap.add_argument("--by-op", action="store_true", help="also count each case's requests by op code (a proxy)")
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--servers", type=int, choices=(1, 3), default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--warmup", type=float, default=2, help="seconds of cycles before each window (the JIT's)")
    ap.add_argument("--only", help="comma-separated case ids")
    ap.add_argument("--no-rtt", action="store_true", help="skip the D = 1 ms pass (round trips)")
    ap.add_argument("--smoke", action="store_true", help="1 round, tiny windows, no server warm-up")
    o = ap.parse_args()
    cases = [c for c in CASES if not o.only or c["id"] in o.only.split(",")]
    if o.smoke:
        o.rounds, o.seconds, o.warmup = 1, 0.5, 0.3
    java = shlex.split(o.java_prefix)
    started = time.time()
    rev = revision()
    load_start = os.getloadavg()
    # SIGTERM/SIGINT: end through the finally below (servers and proxies stopped).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    ens = Ensemble(o.testkit_bin, o.servers)
    proxies = {}
    results = []  # dict(case, driver, round, d, target, res, m)
    rtts = []     # dict(round, target, p50_us)
    by_op = {}    # (case, driver) -> {op: requests per cycle}
    failed = 0
    try:
        leader = ens.leader()
        followers = [i for i in range(o.servers) if i != leader]
        states = {i: ens.state(i) for i in range(o.servers)}
        log("bench/server_cost: %d server(s) %s, pids %s, states %s" % (
            o.servers, ens.connect, ",".join(map(str, ens.pids)), states))
        if o.servers > 1 and any(states[i] != "follower" for i in followers):
            raise RuntimeError("server states %s: expected the others to follow %d" % (states, leader))
        pids = ",".join(map(str, ens.pids))
        cost_args = ["--server-pids", pids, "--mntr-servers", ens.connect]

        def run(case, driver, target, rnd, d, seconds, warmup, record=True, via=None):
            nonlocal failed
            path = "/bench-server-cost/%s-%s-%d-d%d-%d" % (case["id"], driver, rnd, d, int(time.time() * 1000) % 100000)
            connect = via or (ens.address(target) if d == 0 else proxies[target][1])
            cmd = ([o.zkr_bin] if driver == "zkr" else list(java)) + [driver, case["args"][0], connect, path]
            cmd += case["args"][1:] + ["--seconds", "%g" % seconds, "--warmup", "%g" % warmup] + cost_args
            t0 = time.monotonic()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
                out, rc, err = p.stdout, p.returncode, p.stderr
            except subprocess.TimeoutExpired as e:
                out, rc, err = e.stdout or "", -1, "timed out"
                out = out.decode() if isinstance(out, bytes) else out
            line = out.strip().splitlines()[-1] if out.strip() else ""
            res = json.loads(line) if line.startswith("{") else None
            if rc != 0 or res is None or res.get("errors"):
                failed += 1
                log("bench/server_cost: %s %s (D=%d) failed (exit %s): %s %s" % (
                    driver, case["id"], d, rc, (res or {}).get("error", ""), (err or "").strip()[-600:]))
                return None
            m = metrics_of(case, res)
            m["res"] = res
            if record:
                results.append(dict(case=case["id"], driver=driver, round=rnd, d=d, target=target, res=res, m=m))
                log("bench/server_cost: round %d %-18s %-7s D=%d server %d %5.1f s  req/cycle %s (harness %s) "
                    "server CPU %s ms/1000  %s/s  p50 %s µs" % (
                        rnd + 1, case["id"], driver, d, target, time.monotonic() - t0, fmt(m["requests_per_cycle"], 2),
                        fmt(m["harness_requests_per_cycle"], 2), fmt(m["server_cpu_ms_per_1000"]), fmt(m["cycles_per_s"]),
                        fmt(m["p50_us"])))
            return m

        targets = followers if o.servers > 1 else [0]
        if not o.no_rtt:
            for t in targets:
                proxies[t] = start_proxy(o.proxy_bin, ens.address(t), 1)
        if not o.smoke:
            # Warm the servers (their JIT) and the page cache: every case once, short, not recorded.
            log("bench/server_cost: warming the server(s) up")
            for case in cases:
                for driver in DRIVERS:
                    run(case, driver, targets[0], -1, 0, 0.5, 0.5, record=False)
        for rnd in range(o.rounds):
            target = targets[rnd % len(targets)]
            for ci, case in enumerate(cases):
                order = DRIVERS if (rnd + ci) % 2 == 0 else list(reversed(DRIVERS))
                for driver in order:
                    run(case, driver, target, rnd, 0, o.seconds, o.warmup)
            if o.no_rtt:
                continue
            # The round trip of one request through the proxy (the C client, synchronous exists).
            p = subprocess.run([o.zkr_bin, "raw-sync", "rtt", proxies[target][1], "/x", "--seconds", "%g" % min(o.seconds, 2),
                                "--warmup", "0.3", "--resolve-delay", "-1"], capture_output=True, text=True, timeout=60)
            try:
                rtt = json.loads(p.stdout.strip().splitlines()[-1])["p50_us"]
                rtts.append(dict(round=rnd, target=target, p50_us=rtt))
                log("bench/server_cost: round %d RTT through the D=1 ms proxy: p50 %.0f µs" % (rnd + 1, rtt))
            except (ValueError, IndexError, KeyError):
                failed += 1
                log("bench/server_cost: the rtt run failed: %s" % p.stderr.strip()[-400:])
                continue
            for ci, case in enumerate(c for c in cases if c.get("rtt")):
                order = DRIVERS if (rnd + ci) % 2 == 0 else list(reversed(DRIVERS))
                for driver in order:
                    m = run(case, driver, target, rnd, 1, max(1.0, min(o.seconds, 2)), o.warmup)
                    if m is not None:
                        m["rtts"] = m["p50_us"] / rtt if m["p50_us"] else None
        if o.by_op:
            # Which requests: each case once per driver through a counting proxy, the whole run counted.
            ops = subprocess.Popen([o.op_proxy_bin, ens.address(targets[0])], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   text=True, start_new_session=True)
            proxies["ops"] = (ops, None)
            line = ops.stdout.readline().strip()
            if not line.startswith("listening "):
                raise RuntimeError("zkr_op_count_proxy did not start (%r)" % line)
            via = line.split()[1]

            def counts():
                ops.stdin.write("count\n")
                ops.stdin.flush()
                return json.loads(ops.stdout.readline())

            for case in cases:
                for driver in DRIVERS:
                    c0 = counts()
                    m = run(case, driver, targets[0], 0, 0, o.seconds, 0, record=False, via=via)
                    c1 = counts()
                    if m is None:
                        continue
                    res = m["res"]
                    cycles = res.get("handoffs") if case["args"][0] == "latch-handoff" else res.get("cycles")
                    if not cycles:
                        continue
                    by_op[(case["id"], driver)] = {k: (c1.get(k, 0) - c0.get(k, 0)) / cycles for k in c1
                                                   if c1.get(k, 0) - c0.get(k, 0) > 0}
                    log("bench/server_cost: by op %-18s %-7s %s" % (case["id"], driver, " ".join(
                        "%s=%.2f" % kv for kv in sorted(by_op[(case["id"], driver)].items()))))
    finally:
        for proc, _ in proxies.values():
            try:
                if proc.stdin:
                    proc.stdin.close()
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            proc.wait()
        ens.destroy()

    keys = ["requests_per_cycle", "harness_requests_per_cycle", "server_cpu_ms_per_1000", "cycles_per_s", "p50_us",
            "client_cpu_ms_per_1000"]
    rows = []
    for case in cases:
        med = {}
        spread = {}
        for driver in DRIVERS:
            runs0 = [x["m"] for x in results if x["case"] == case["id"] and x["driver"] == driver and x["d"] == 0]
            runs1 = [x["m"] for x in results if x["case"] == case["id"] and x["driver"] == driver and x["d"] == 1]
            med[driver] = {}
            for k in keys:
                xs = [r[k] for r in runs0 if r.get(k) is not None]
                med[driver][k] = statistics.median(xs) if xs else None
                if k == "requests_per_cycle" and xs:
                    spread[driver] = (min(xs), max(xs))
            xs = [r["rtts"] for r in runs1 if r.get("rtts") is not None]
            med[driver]["rtts"] = statistics.median(xs) if xs else None
            med[driver]["rounds"] = len(runs0)

        def ratio(k):
            z, c = med["zkr"].get(k), med["curator"].get(k)
            return z / c if z is not None and c else None

        rows.append(dict(case=case["id"], label=case["label"], zkr=med["zkr"], curator=med["curator"],
                         requests_range=spread, ratio_requests=ratio("requests_per_cycle"),
                         ratio_server_cpu=ratio("server_cpu_ms_per_1000"), ratio_cycles=ratio("cycles_per_s")))

    def ms(us):
        return None if us is None else us / 1e3

    def cell(row, k, digits=None, scale=None):
        z, c = row["zkr"].get(k), row["curator"].get(k)
        if scale:
            z, c = scale(z), scale(c)
        return "%s | %s" % (fmt(z, digits), fmt(c, digits))

    lines = [
        "| recipe path | requests/cycle zkr | Curator | zkr/C | server CPU ms/1000 zkr | Curator | zkr/C "
        "| cycles/s zkr | Curator | zkr/C | p50 ms zkr | Curator | client CPU ms/1000 zkr | Curator | RTTs zkr | Curator |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        rr = row["ratio_requests"]
        worse = rr is not None and rr > 1.005  # more requests than Curator: in bold
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["label"], cell(row, "requests_per_cycle", 2), ("**%s**" if worse else "%s") % fmt(rr, 2),
            cell(row, "server_cpu_ms_per_1000"), fmt(row["ratio_server_cpu"], 2), cell(row, "cycles_per_s"),
            fmt(row["ratio_cycles"], 2), cell(row, "p50_us", 3, ms), cell(row, "client_cpu_ms_per_1000"),
            cell(row, "rtts", 2)))
    table = "\n".join(lines)
    harness = ["Harness requests per cycle subtracted (the benchmark's own polls and watches, counted by the drivers):"]
    for row in rows:
        hz, hc = row["zkr"].get("harness_requests_per_cycle"), row["curator"].get("harness_requests_per_cycle")
        if (hz or 0) > 0.001 or (hc or 0) > 0.001:
            harness.append("%s: zkr %s, Curator %s." % (row["case"], fmt(hz, 2), fmt(hc, 2)))
    rng = ["Requests per cycle, lowest and highest round:"]
    for row in rows:
        parts = ["%s %s–%s" % (d, fmt(a, 2), fmt(b, 2)) for d, (a, b) in sorted(row["requests_range"].items())]
        rng.append("%s: %s." % (row["case"], ", ".join(parts)))
    op_lines = []
    if by_op:
        names = sorted({k for v in by_op.values() for k in v if k != "ping"})
        op_lines = ["| case | driver | " + " | ".join(names) + " | all |", "|---|---|" + "--:|" * (len(names) + 1)]
        for case in cases:
            for driver in DRIVERS:
                v = by_op.get((case["id"], driver))
                if v is None:
                    continue
                op_lines.append("| %s | %s | %s | %.2f |" % (case["id"], driver, " | ".join(
                    "%.2f" % v[k] if k in v else "" for k in names), sum(x for k, x in v.items() if k != "ping")))
    # A cycle of a second or more is no recipe's cost but a stall (a connection timed out, ...): named.
    stalls = []
    for x in results:
        p99 = x["res"].get("handoff_p99_us" if x["res"].get("scenario") == "latch-handoff" else "p99_us")
        if p99 is not None and p99 >= 1e6:
            stalls.append("%s %s round %d D=%d (server %d): p99 %.1f s, %s/s" % (
                x["case"], x["driver"], x["round"] + 1, x["d"], x["target"], p99 / 1e6, fmt(x["m"]["cycles_per_s"])))
    elapsed = time.time() - started
    load_end = os.getloadavg()
    rtt_text = ""
    if rtts:
        rtt_text = " Round trips: p50 at D = 1 ms / the p50 of one raw request's round trip through the same proxy " \
                   "(median %.0f µs)." % statistics.median(r["p50_us"] for r in rtts)
    where = ("one standalone forceSync=no server" if o.servers == 1 else
             "a 3-server ensemble (leader %d; each round's clients on one follower, alternating)" % leader)
    summary = ("Medians of %d round(s), zkr %s and Curator 5.4 interleaved (bench/server_cost.sh --servers %d), %s, "
               "%g s windows after %g s warm-up, %.0f s in all; load average %.2f at the start, %.2f at the end. "
               "Requests: the servers' mntr zk_packets_received over the window less the harness's, per cycle; server "
               "CPU: utime + stime of the server process(es) over the window.%s" % (
                   o.rounds, rev, o.servers, where, o.seconds, o.warmup, elapsed, load_start[0], load_end[0], rtt_text))
    text = "%s\n\n%s\n\n%s\n\n%s\n" % (summary, table, " ".join(harness), " ".join(rng))
    if stalls:
        text += "\nRuns with a cycle of a second or more (p99 >= 1 s): %s.\n" % "; ".join(stalls)
    if op_lines:
        text += ("\nRequests by op code per cycle (--by-op: one run per driver through a counting proxy, "
                 "set-up, clean-up and the harness's polls included; pings left out):\n\n%s\n" % "\n".join(op_lines))
    print(text)
    if not o.smoke:
        os.makedirs(o.out_dir, exist_ok=True)
        base = os.path.join(o.out_dir, "server-cost-%d-latest" % o.servers)
        with open(base + ".json", "w") as f:
            json.dump(dict(rounds=o.rounds, servers=o.servers, revision=rev, seconds=elapsed, load_start=load_start,
                           load_end=load_end, rows=rows, rtts=rtts, failed=failed,
                           by_op={"%s %s" % k: v for k, v in by_op.items()}, stalls=stalls,
                           runs=[dict(case=x["case"], driver=x["driver"], round=x["round"], d=x["d"], server=x["target"],
                                      result=x["res"]) for x in results]), f, indent=1)
        with open(base + ".md", "w") as f:
            f.write(text)
    if failed:
        log("bench/server_cost: %d run(s) failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
