#!/usr/bin/env python3
"""Renders the key panels of the stasis dashboard as PNG images, from a real Prometheus.

The panels' own queries are read from the dashboard JSON (manifests/monitoring/dashboards/),
Grafana's variables are expanded as Grafana would for the chosen range, each query goes to the
Prometheus /api/v1/query_range API, and gnuplot (Debian's gnuplot-nox, pngcairo terminal) draws
one PNG per panel with one line per series, named by the panel's legend format. So the images
show what the dashboard shows, for readers without a Grafana.

  hack/plot-snapshot-health.py --prometheus http://127.0.0.1:9090 --start T0 --end T1 --out docs/img

T0 and T1 are Unix seconds. Exit status 1 when a panel has no data at all in the range (an
empty image would say nothing), 2 for bad arguments or an unreachable Prometheus.
tests/e2e/monitoring_test.cc runs it against the Prometheus of its end-to-end run.
"""
import argparse
import math
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dashboard  # noqa: E402  (hack/dashboard.py, beside this script)

# (file name, dashboard panel title): the panels a reader most needs to see.
KEY_PANELS = [
    ("snapshot-size.png", "Snapshot size p50 / p95 / p99 by trigger, scope, gpu"),
    ("checkpoint-latency.png", "Checkpoint latency p50 / p99"),
    ("restore-latency.png", "Restore latency p50 / p99"),
    ("commit-latency.png", "Commit latency p50 / p99"),
    ("checkpoint-throughput.png", "Checkpoint throughput p50 / p10"),
    ("operations.png", "Snapshot operations / s"),
    ("actors-by-status.png", "Actors by status"),
]

# Grafana unit -> (scales from the largest value down, as (divisor, axis label)).
UNITS = {
    "bytes": [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"), (1, "bytes")],
    "Bps": [(1 << 30, "GiB/s"), (1 << 20, "MiB/s"), (1 << 10, "KiB/s"), (1, "bytes/s")],
    "s": [(1, "seconds"), (1e-3, "milliseconds")],
    "ops": [(1, "operations / s")],
    "short": [(1, "count")],
    "percentunit": [(0.01, "%")],
}


def fail(code, msg):
    print("plot-snapshot-health: " + msg, file=sys.stderr)
    sys.exit(code)


def query_range(url, expr, start, end, step):
    try:
        return dashboard.query(url, "query_range", {"query": expr, "start": start, "end": end, "step": step})
    except dashboard.QueryError as e:
        fail(2, str(e))


def legend(fmt, metric):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt or "") or \
        ",".join("%s=%s" % kv for kv in sorted(metric.items()))


def gp_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(args, url_values, fname, panel):
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
    series = []  # (legend, [(t, v)])
    for t in panel.get("targets", []):
        try:
            expr = dashboard.expand(t["expr"], url_values)
        except KeyError as e:
            fail(2, str(e))
        for s in query_range(args.prometheus, expr, args.start, args.end, args.step):
            pts = []
            for ts, v in s.get("values", []):
                v = float(v)
                if math.isfinite(v):
                    pts.append((float(ts) - args.start, v))
            if pts:
                series.append((legend(t.get("legendFormat"), s.get("metric", {})), pts))
    if not series:
        return False
    biggest = max(abs(v) for _, pts in series for _, v in pts) or 1
    divisor, label = UNITS.get(unit, [(1, unit)])[-1]
    for d, l in UNITS.get(unit, [(1, unit)]):
        if biggest >= d:
            divisor, label = d, l
            break
    base = os.path.join(args.out, fname)
    data = base[:-4] + ".dat"
    with open(data, "w") as f:
        for name, pts in series:
            f.write("# %s\n" % name)
            prev = None
            for ts, v in pts:
                # No data between two points (a quantile over a window without operations):
                # a blank line, so gnuplot draws a gap as Grafana does, not a line across it.
                if prev is not None and ts - prev > 1.5 * args.step:
                    f.write("\n")
                f.write("%.3f %.9g\n" % (ts, v / divisor))
                prev = ts
            f.write("\n\n")
    style = "linespoints pt 7 ps 0.6 lw 2" if unit != "short" else "steps lw 2"
    plots = ", ".join("%s index %d using 1:2 with %s title %s" % (gp_string(data), i, style, gp_string(name))
                      for i, (name, _) in enumerate(series))
    script = "\n".join([
        "set terminal pngcairo size 1000,460 enhanced font 'DejaVu Sans,10'",
        "set output %s" % gp_string(base),
        "set title %s" % gp_string(panel["title"]),
        "set xlabel 'seconds into the run'",
        "set ylabel %s" % gp_string(label),
        "set grid",
        "set key outside right top vertical Left reverse noenhanced",
        "set yrange [0:*]",
        "set xrange [0:%g]" % (args.end - args.start),
        "plot " + plots,
        "",
    ])
    r = subprocess.run([args.gnuplot], input=script, text=True, capture_output=True, timeout=60)
    os.remove(data)
    if r.returncode != 0:
        fail(2, "gnuplot failed for %s: %s" % (fname, r.stderr.strip()))
    print("plot-snapshot-health: %s: %d series (%s)" % (base, len(series), label))
    return True


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    p.add_argument("--start", type=float, required=True, help="Unix seconds")
    p.add_argument("--end", type=float, required=True, help="Unix seconds")
    p.add_argument("--step", type=float, default=2, help="seconds between points (default 2)")
    p.add_argument("--rate-interval", default="15s",
                   help="what $__rate_interval expands to (default 15s; Grafana's is "
                        "max(step + scrape interval, 4 x scrape interval))")
    p.add_argument("--node", default=".*", help="the $node variable, a regex (default all)")
    p.add_argument("--out", required=True, help="directory for the PNGs")
    p.add_argument("--dashboard", default=dashboard.DEFAULT_DASHBOARD)
    p.add_argument("--gnuplot", default="gnuplot")
    args = p.parse_args()
    if args.end <= args.start or args.step <= 0:
        fail(2, "need --start < --end and --step > 0")
    by_title = dashboard.panels_by_title(args.dashboard)
    os.makedirs(args.out, exist_ok=True)
    values = {"node": args.node, "__rate_interval": args.rate_interval,
              "__interval": "%gs" % args.step, "__range": "%ds" % int(args.end - args.start),
              "datasource": ""}
    empty = []
    for fname, title in KEY_PANELS:
        if title not in by_title:
            fail(2, "the dashboard has no panel %r" % title)
        if not render(args, values, fname, by_title[title]):
            empty.append(title)
    if empty:
        fail(1, "no data in the range for: " + "; ".join(empty))


if __name__ == "__main__":
    main()
