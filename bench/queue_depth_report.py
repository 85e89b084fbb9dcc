#!/usr/bin/env python3
"""bench/queue_depth_report.py JSONL PNG — the queue-depth table (markdown, on stdout) and chart
(hand-off time and memory per waiter against N; gnuplot) from bench/queue_depth.sh's lines."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
png = sys.argv[2]
by = {}
for r in rows:
    kind, n = r["id"].rsplit("-", 1)
    by.setdefault(int(n), {})[kind] = r
kinds = [("zkr-1proc", "zkr, 1 process × 10 clients"), ("zkr-10proc", "zkr, 10 processes"), ("curator", "Curator 5.4, 1 client × N threads")]


def fmt(v, digits=0):
    return "—" if v is None else f"{v:,.{digits}f}"


print("| N | contender | per hand-off (ms) | first / last tenth (ms) | memory per waiter (KB) | server requests per hand-off | queued in (s) | errors |")
print("|--:|---|--:|--:|--:|--:|--:|--:|")
for n in sorted(by):
    for kind, label in kinds:
        row = by[n].get(kind)
        if not row:
            continue
        r = row["result"] or {}
        if row["exit"] != 0 and not r.get("handoffs"):
            print(f"| {n:,} | {label} | failed: {r.get('error', 'exit %d' % row['exit'])} | | | | | 1 |")
            continue
        per = r.get("per_handoff_us")
        tenth = f"{fmt(r.get('handoff_first_tenth_us', 0) / 1e3, 2)} / {fmt(r.get('handoff_last_tenth_us', 0) / 1e3, 2)}"
        if kind == "curator":
            mem = r["rss_kb"] / n  # peak RSS of the JVM over N: an upper bound (the JVM's own share included)
            mem_s = f"{fmt(mem, 0)} (peak RSS / N)"
        else:
            mem_s = fmt(r.get("rss_per_waiter_kb"), 1)
            if r.get("heap_per_waiter_kb") is not None:
                mem_s += f" ({fmt(r['heap_per_waiter_kb'], 1)} heap)"
        print(f"| {n:,} | {label} | {fmt(per / 1e3, 2)} | {tenth} | {mem_s} | {fmt(r.get('server_requests_per_handoff'), 2)} | "
              f"{fmt(r.get('queue_s'), 1)} | {r.get('errors', 0)} |")

gnuplot = shutil.which("gnuplot")
if not gnuplot:
    print("queue_depth_report.py: gnuplot not found (apt-get install gnuplot-nox): no chart", file=sys.stderr)
    sys.exit(0)
work = tempfile.mkdtemp(prefix="zkr-qd-chart-")
try:
    for kind, _ in kinds:
        with open(os.path.join(work, kind + ".dat"), "w") as f:
            for n in sorted(by):
                row = by[n].get(kind)
                if not row or not (row["result"] or {}).get("handoffs"):
                    continue
                r = row["result"]
                mem = r["rss_kb"] / n if kind == "curator" else r["rss_per_waiter_kb"]
                f.write(f"{n} {r['per_handoff_us'] / 1e3} {mem}\n")
    plot = lambda col: ", ".join(
        f"'{os.path.join(work, kind + '.dat')}' using 1:{col} with linespoints lw 2 title '{label}'" for kind, label in kinds)
    script = "\n".join([
        'set terminal pngcairo size 1400,520 font "DejaVu Sans,10"',
        f"set output '{png}'",
        "set multiplot layout 1,2",
        "set logscale x", "set grid", "set key top left", "set xlabel 'waiters queued on one lock path (N)'",
        "set title 'time per hand-off'", "set ylabel 'ms'", "set yrange [0:*]",
        "plot " + plot(2),
        "set title 'memory per queued waiter'", "set ylabel 'KB (log)'", "set logscale y", "set yrange [*:*]",
        "plot " + plot(3),
        "unset multiplot",
    ])
    subprocess.run([gnuplot], input=script, text=True, check=True)
finally:
    shutil.rmtree(work)
