#!/usr/bin/python3
"""kazoo's side of zkr's benchmark: kazoo 2.8 Lock, ReadLock and WriteLock on one KazooClient,
with the same command line and the same one-line JSON output as bench/zkr_bench.cpp:

  kazoo_bench.py kazoo SCENARIO CONNECT PATH [--threads T] [--seconds S] [--warmup W]
      [--start-at MS] [--emit-latencies] [--write-percent P] [--waiters N] [--seed N]

Scenarios: uncontended, contended, distinct, shared-reads, rw-mix, herd (see zkr_bench.cpp).
Run it with Debian's /usr/bin/python3 (python3-kazoo). CPU: getrusage(RUSAGE_SELF) user+sys over
the measured window; RSS: ru_maxrss.
"""
import argparse
import json
import logging
import os
import random
import resource
import socket
import sys
import threading
import time
import traceback

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.recipe.lock import Lock, ReadLock, WriteLock
from kazoo.retry import ForceRetryError


class FixedReadLock(ReadLock):
    """kazoo 2.8's ReadLock with the fix of python-zk/kazoo#650 (kazoo 2.9): a reader waits only
    for a writer queued BEFORE it. Unpatched, a reader may wait for a writer queued after it while
    that writer waits for the reader: a deadlock (python-zk/kazoo#649), which the rw-mix scenario
    hits within seconds. Used only with --kazoo-fix-649."""

    def _get_predecessor(self, node):
        children = self.client.get_children(self.path)
        if node not in children:
            raise ForceRetryError()
        mine = int(node[-10:])
        best, best_seq = None, None
        for child in children:
            match = self._contenders_re.search(child)
            if match is None:
                continue
            seq = int(match.group(1))
            if seq < mine and (best_seq is None or seq > best_seq):
                best, best_seq = child, seq
        return best


def parse(argv):
    p = argparse.ArgumentParser(prog="kazoo_bench.py")
    p.add_argument("driver", choices=["kazoo"])
    p.add_argument("scenario", choices=["uncontended", "contended", "distinct", "shared-reads", "rw-mix", "herd"])
    p.add_argument("connect")
    p.add_argument("path")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--start-at", type=int, default=None)
    p.add_argument("--emit-latencies", action="store_true")
    p.add_argument("--write-percent", type=int, default=10)
    p.add_argument("--waiters", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kazoo-fix-649", action="store_true",
                   help="use FixedReadLock (kazoo#650) instead of kazoo 2.8's ReadLock, which deadlocks in rw-mix")
    o = p.parse_args(argv)
    if o.threads < 1 or o.seconds <= 0 or o.warmup < 0 or o.waiters < 1 or not 0 <= o.write_percent <= 100:
        p.error("out-of-range option")
    if o.scenario == "uncontended" and o.threads != 1:
        p.error("uncontended runs 1 thread")
    return o


def cpu_seconds():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def peak_rss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def percentile_us(sorted_ns, q):
    if not sorted_ns:
        return 0.0
    i = min(len(sorted_ns) - 1, int(q * (len(sorted_ns) - 1) + 0.5))
    return sorted_ns[i] / 1e3


def window(o):
    now = time.monotonic_ns()
    if o.start_at is not None:
        wall = time.time_ns() // 1_000_000
        t0 = now + (o.start_at - wall) * 1_000_000
        if t0 < now:
            raise RuntimeError("ready %d ms after --start-at" % (wall - o.start_at))
    else:
        t0 = now + int(o.warmup * 1e9)
    return t0, t0 + int(o.seconds * 1e9)


def sleep_until(t_ns):
    while True:
        d = t_ns - time.monotonic_ns()
        if d <= 0:
            return
        time.sleep(d / 1e9)


class Exclusion:
    def __init__(self):
        self.mutex = threading.Lock()
        self.writers = 0
        self.readers = 0

    def write_in(self):
        with self.mutex:
            self.writers += 1
            if self.writers != 1 or self.readers:
                raise RuntimeError("mutual exclusion violated (write)")

    def write_out(self):
        with self.mutex:
            self.writers -= 1

    def read_in(self):
        with self.mutex:
            self.readers += 1
            if self.writers:
                raise RuntimeError("mutual exclusion violated (read)")

    def read_out(self):
        with self.mutex:
            self.readers -= 1


def run_threads(o, prepare, cycle):
    t0, t1 = window(o)
    lat = [[] for _ in range(o.threads)]
    stop = threading.Event()
    errors = []

    def worker(i):
        rng = random.Random(o.seed * 1000003 + i)
        mine = lat[i]
        try:
            state = prepare(i)
            while not stop.is_set():
                s = time.monotonic_ns()
                if s >= t1:
                    break
                cycle(state, rng)
                e = time.monotonic_ns()
                if t0 <= e <= t1:
                    mine.append(e - s)
        except Exception as e:  # noqa: BLE001 - reported in the output
            errors.append(repr(e))
            stop.set()
            traceback.print_exc(file=sys.stderr)

    pool = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(o.threads)]
    for t in pool:
        t.start()
    sleep_until(t0)
    cpu0 = cpu_seconds()
    sleep_until(t1)
    cpu1 = cpu_seconds()
    for t in pool:
        t.join(max(0.0, (t1 - time.monotonic_ns()) / 1e9) + 20)
        if t.is_alive():
            errors.append("stuck: a thread did not finish its cycle within 20 s of the window's end")
            break
    return [x for l in lat for x in l], cpu1 - cpu0, errors


def child_count(client, path):
    try:
        return len(client.get_children(path))
    except NoNodeError:
        return 0


def delete_quietly(client, path):
    try:
        client.delete(path)
    except Exception:  # noqa: BLE001 - already gone or not empty: fine
        pass


def timed(o, client):
    check = Exclusion()
    if o.scenario in ("uncontended", "contended", "distinct"):
        distinct = o.scenario == "distinct"
        paths = ["%s/t%d" % (o.path, i) for i in range(o.threads)] if distinct else [o.path]

        def prepare(i):
            # One check per lock path (distinct: each thread its own).
            return Lock(client, paths[i] if distinct else paths[0]), (Exclusion() if distinct else check)

        def cycle(state, rng):
            lock, mine = state
            lock.acquire()
            mine.write_in()
            mine.write_out()
            lock.release()
    else:
        paths = [o.path]
        writes = o.write_percent if o.scenario == "rw-mix" else 0

        read_lock = FixedReadLock if o.kazoo_fix_649 else ReadLock

        def prepare(i):
            return (read_lock(client, o.path), WriteLock(client, o.path))

        def cycle(locks, rng):
            if writes and rng.randrange(100) < writes:
                locks[1].acquire()
                check.write_in()
                check.write_out()
                locks[1].release()
            else:
                locks[0].acquire()
                check.read_in()
                check.read_out()
                locks[0].release()

    lat, cpu, errors = run_threads(o, prepare, cycle)
    if not errors and o.start_at is None:
        for p in paths:
            left = child_count(client, p)
            if left:
                errors.append("%d node(s) left under %s after the run" % (left, p))
    lat.sort()
    cycles = len(lat)
    out = {
        "driver": o.driver, "scenario": o.scenario, "threads": o.threads, "procs": 1, "seconds": o.seconds,
        "cycles": cycles, "cycles_per_s": cycles / o.seconds,
        "p50_us": percentile_us(lat, 0.5), "p99_us": percentile_us(lat, 0.99),
        "cpu_s": cpu, "cpu_ms_per_1000": (cpu * 1e3 / cycles * 1000.0) if cycles else None,
        "rss_kb": peak_rss_kb(), "errors": len(errors),
    }
    if o.kazoo_fix_649:
        out["patched"] = "kazoo#650"
    if errors:
        out["error"] = errors[0]
    if o.emit_latencies:
        out["latencies_us"] = [(x + 500) // 1000 for x in lat]
    print(json.dumps(out), flush=True)
    if o.start_at is None:
        for p in paths:
            delete_quietly(client, p)
    return 1 if errors else 0


def four_letter(connect, word):
    first = connect.split("/")[0].split(",")[0]
    host, _, port = first.rpartition(":")
    with socket.create_connection((host or first, int(port or 2181)), timeout=10) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            b = s.recv(65536)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode()


def server_notifications(connect):
    total = 0
    for line in four_letter(connect, "mntr").splitlines():
        k, _, v = line.partition("\t")
        if k.startswith("zk_sum_node_") and "_watch_count" in k:
            total += int(v)
    return total


def server_watches(connect):
    r = four_letter(connect, "wchs")
    at = r.find("Total watches:")
    return int(r[at + 14:].split()[0]) if at >= 0 else -1


def herd(o, client):
    wakeups = [0]
    wake_mutex = threading.Lock()

    class CountingLock(Lock):
        def _watch_predecessor(self, event):
            with wake_mutex:
                wakeups[0] += 1
            super()._watch_predecessor(event)

    holder = CountingLock(client, o.path)
    holder.acquire()
    release_ns = [0]
    handoff = []
    order_mutex = threading.Lock()
    failed = []

    def waiter():
        try:
            m = CountingLock(client, o.path)
            m.acquire()
            got = time.monotonic_ns()
            with order_mutex:
                handoff.append(got - release_ns[0])
            release_ns[0] = time.monotonic_ns()
            m.release()
        except Exception as e:  # noqa: BLE001
            print("kazoo_bench: herd waiter: %r" % (e,), file=sys.stderr)
            failed.append(e)

    q0 = time.monotonic()
    pool = [threading.Thread(target=waiter, daemon=True) for _ in range(o.waiters)]
    for t in pool:
        t.start()
    deadline = time.monotonic() + 300
    while child_count(client, o.path) < o.waiters + 1:
        if time.monotonic() > deadline or failed:
            raise RuntimeError("the waiters did not queue")
        time.sleep(0.02)
    queue_s = time.monotonic() - q0
    # The last waiters' watches are set (or 10 s passed: a recipe may set fewer).
    watch_deadline = time.monotonic() + 10
    while True:
        watches = server_watches(o.connect)
        if watches >= o.waiters or time.monotonic() > watch_deadline:
            break
        time.sleep(0.02)
    n0 = server_notifications(o.connect)
    w0 = wakeups[0]
    c0 = time.monotonic_ns()
    release_ns[0] = c0
    holder.release()
    for t in pool:
        t.join()
    chain_s = (time.monotonic_ns() - c0) / 1e9
    if failed:
        raise RuntimeError("a herd waiter failed")
    left = child_count(client, o.path)
    if left:
        raise RuntimeError("%d node(s) left under %s" % (left, o.path))
    notifications = server_notifications(o.connect) - n0
    n = len(handoff)
    s = sorted(handoff)
    tenth = max(1, n // 10)
    out = {
        "driver": o.driver, "scenario": "herd", "threads": o.waiters + 1, "procs": 1,
        "waiters": o.waiters, "handoffs": n,
        "handoff_p50_us": percentile_us(s, 0.5), "handoff_p99_us": percentile_us(s, 0.99),
        "handoff_max_us": percentile_us(s, 1.0),
        "handoff_first_tenth_us": sum(handoff[:tenth]) / tenth / 1e3,
        "handoff_last_tenth_us": sum(handoff[n - tenth:]) / tenth / 1e3,
        "queue_s": queue_s, "chain_s": chain_s,
        "server_watches_queued": watches,
        "notifications_per_release": notifications / max(1, n),
        "wakeups_per_release": (wakeups[0] - w0) / max(1, n),
        "rss_kb": peak_rss_kb(), "errors": 0,
    }
    print(json.dumps(out), flush=True)
    delete_quietly(client, o.path)
    return 0


def main(argv):
    o = parse(argv)
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    client = KazooClient(hosts=o.connect, timeout=10.0)
    try:
        client.start(timeout=15)
        return herd(o, client) if o.scenario == "herd" else timed(o, client)
    finally:
        try:
            client.stop()
            client.close()
        except Exception:  # noqa: BLE001
            pass


if __name__ == "__main__":
    try:
        rc = main(sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001
        print("kazoo_bench: %r" % (e,), file=sys.stderr)
        rc = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # stuck daemon threads must not keep the process alive
