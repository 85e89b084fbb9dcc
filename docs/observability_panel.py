#!/usr/bin/env python3
"""Draws docs/observability-panel.svg from a real run: examples/metrics_service scraped once a
second, each point computed as Prometheus would from the scrapes (rate over a 5 s window,
histogram_quantile by linear interpolation inside the bucket).

    docs/observability_panel.py METRICS_SERVICE_BIN CONNECT [--seconds 30] [--out docs/observability-panel.svg]
"""
import argparse
import re
import subprocess
import sys
import time
import urllib.request

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    out = {}
    for line in text.splitlines():
        if not line or line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        labels = tuple(sorted(LABEL.findall(m.group(3) or '')))
        out[(m.group(1), labels)] = float(m.group(4))
    return out


def acquired_buckets(sample):
    """{le: cumulative count} of zkr_lock_acquire_seconds{recipe="mutex",outcome="acquired"}."""
    out = {}
    for (name, labels), v in sample.items():
        d = dict(labels)
        if name == 'zkr_lock_acquire_seconds_bucket' and d.get('recipe') == 'mutex' and d.get('outcome') == 'acquired':
            out[float('inf') if d['le'] == '+Inf' else float(d['le'])] = v
    return out


def quantile(q, buckets):
    """histogram_quantile: linear interpolation inside the bucket that holds the q-th sample."""
    les = sorted(buckets)
    total = buckets[les[-1]]
    if total <= 0:
        return None
    rank = q * total
    lower_le, lower_count = 0.0, 0.0
    for le in les:
        if buckets[le] >= rank:
            if le == float('inf'):
                return lower_le
            return lower_le + (le - lower_le) * (rank - lower_count) / max(buckets[le] - lower_count, 1e-12)
        lower_le, lower_count = le, buckets[le]
    return None


def svg(points, seconds):
    w, h, left, right, top, bottom = 720, 300, 60, 70, 40, 40
    pw, ph = w - left - right, h - top - bottom
    ts = [p[0] for p in points]
    t0, t1 = min(ts), max(ts)
    max_ms = max(max(p[2] for p in points), 0.001) * 1000 * 1.1
    max_rate = max(p[3] for p in points) * 1.1 or 1

    def x(t):
        return left + pw * (t - t0) / max(t1 - t0, 1e-9)

    def y_ms(s):
        return top + ph * (1 - (s * 1000) / max_ms)

    def y_rate(r):
        return top + ph * (1 - r / max_rate)

    def line(values, colour, dash=''):
        pts = ' '.join(f'{x(t):.1f},{y:.1f}' for t, y in values)
        return f'<polyline fill="none" stroke="{colour}" stroke-width="2" {dash} points="{pts}"/>'

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="#181b1f"/>',
             f'<text x="{left}" y="22" fill="#d8d9da" font-size="14">Lock wait p50 / p99 and acquisitions/s '
             f'(metrics_service: 4 workers, one zkr::mutex)</text>']
    for i in range(5):
        gy = top + ph * i / 4
        parts.append(f'<line x1="{left}" y1="{gy:.1f}" x2="{left + pw}" y2="{gy:.1f}" stroke="#2c3235"/>')
        parts.append(f'<text x="{left - 6}" y="{gy + 4:.1f}" fill="#8e8e8e" text-anchor="end">{max_ms * (1 - i / 4):.1f} ms</text>')
        parts.append(f'<text x="{left + pw + 6}" y="{gy + 4:.1f}" fill="#8e8e8e">{max_rate * (1 - i / 4):.0f}/s</text>')
    for i in range(7):
        t = t0 + (t1 - t0) * i / 6
        parts.append(f'<text x="{x(t):.1f}" y="{top + ph + 18}" fill="#8e8e8e" text-anchor="middle">{t - t0:.0f} s</text>')
    parts.append(line([(p[0], y_rate(p[3])) for p in points], '#5794f2', 'stroke-dasharray="4 3"'))
    parts.append(line([(p[0], y_ms(p[1])) for p in points], '#73bf69'))
    parts.append(line([(p[0], y_ms(p[2])) for p in points], '#f2495c'))
    legend = [('#73bf69', 'p50 wait (left axis)'), ('#f2495c', 'p99 wait (left axis)'), ('#5794f2', 'acquisitions/s (right axis)')]
    for i, (colour, text) in enumerate(legend):
        lx = left + i * 200
        parts.append(f'<rect x="{lx}" y="{h - 14}" width="14" height="4" fill="{colour}"/>')
        parts.append(f'<text x="{lx + 20}" y="{h - 8}" fill="#d8d9da">{text}</text>')
    parts.append('</svg>')
    return '\n'.join(parts) + '\n'


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('service')
    ap.add_argument('connect')
    ap.add_argument('--seconds', type=float, default=30)
    ap.add_argument('--out', default='docs/observability-panel.svg')
    a = ap.parse_args()
    proc = subprocess.Popen([a.service, a.connect, '--port', '0', '--seconds', str(a.seconds + 3)],
                            stdout=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        m = re.search(r'http://\S+/metrics', first)
        if not m:
            sys.exit(f'metrics_service said: {first!r}')
        url = m.group(0)
        scrapes = []
        start = time.monotonic()
        while time.monotonic() - start < a.seconds:
            t = time.monotonic()
            with urllib.request.urlopen(url, timeout=10) as r:
                scrapes.append((t, parse(r.read().decode())))
            time.sleep(max(0.0, 1.0 - (time.monotonic() - t)))  # the scrape interval
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    window = 5
    points = []
    for i in range(window, len(scrapes)):
        (ta, a_s), (tb, b_s) = scrapes[i - window], scrapes[i]
        ba, bb = acquired_buckets(a_s), acquired_buckets(b_s)
        delta = {le: bb[le] - ba.get(le, 0) for le in bb}
        p50, p99 = quantile(0.5, delta), quantile(0.99, delta)
        rate = delta.get(float('inf'), 0) / (tb - ta)
        if p50 is not None:
            points.append((tb, p50, p99, rate))
    if len(points) < 5:
        sys.exit('too few points: did the service run?')
    with open(a.out, 'w') as f:
        f.write(svg(points, a.seconds))
    p50s = sorted(p[1] for p in points)
    print(f'{len(points)} points; median p50 {p50s[len(p50s) // 2] * 1000:.2f} ms; '
          f'median rate {sorted(p[3] for p in points)[len(points) // 2]:.0f}/s -> {a.out}')


if __name__ == '__main__':
    main()
