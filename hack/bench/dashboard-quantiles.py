#!/usr/bin/env python3
"""Checks the dashboard's quantile panels against a benchmark's own percentiles of the same run.

A quantile panel draws histogram_quantile over the node agent's histogram buckets; the
benchmark knows every sample exactly. For the same samples, the panel's estimate must lie in
the bucket that holds the true percentile, so the two may differ by at most that bucket's
width: more says the panel queries the wrong series, labels or buckets.

  hack/bench/dashboard-quantiles.py --prometheus URL --since T0 --samples FILE [--wait S]

FILE is JSON: {"checkpoint_seconds": [...], "restore_seconds": [...], "snapshot_bytes": [...],
"throughput_bytes_per_second": [...]}, every sample the node agent recorded in the run (each
list optional, but each given list is checked). Each panel's queries are read from the dashboard
JSON, with $node = .* and $__rate_interval = a window from before T0 (Unix seconds, before the
first sample) to now, evaluated now. The agent's counter of that histogram must equal the
number of samples, else the run is not the same population: the check is tried again until the
last scrapes arrive (--wait, default 20 s), then no verdict is printed.

Exit status: 0 when every quantile is within one bucket, 1 when one is not, 2 when no verdict
can be given (no data, more than one series, counts that differ, bad arguments).
hack/bench/pause-overhead.sh --prometheus runs it after its cycles.
"""
import argparse
import json
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import dashboard  # noqa: E402  (hack/dashboard.py)

# (samples key, dashboard panel title)
PANELS = [
    ("checkpoint_seconds", "Checkpoint latency p50 / p99"),
    ("restore_seconds", "Restore latency p50 / p99"),
    ("snapshot_bytes", "Snapshot size p50 / p95 / p99 by trigger, scope, gpu"),
    ("throughput_bytes_per_second", "Checkpoint throughput p50 / p10"),
]

QUANTILE = re.compile(r"histogram_quantile\(\s*([0-9.]+)\s*,")
BUCKETS = re.compile(r"(\w+)_bucket(\{[^}]*\})")


class NoVerdict(Exception):
    pass


class NotScrapedYet(NoVerdict):
    pass


def nearest_rank(samples, q):
    """The sample of rank ceil(q N): the one whose bucket histogram_quantile interpolates in."""
    s = sorted(samples)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def bucket_of(value, edges):
    """(lower, upper) edges of the Prometheus bucket (lower, upper] that holds value."""
    lower = 0.0
    for upper in edges:
        if value <= upper:
            return lower, upper
        lower = upper
    return lower, math.inf


def instant(args, expr):
    return dashboard.query(args.prometheus, "query", {"query": expr, "time": args.at})


def histogram_of(args, expr):
    """The bucket edges and the total count of the histogram a panel query reads."""
    m = BUCKETS.search(expr)
    if not m:
        raise NoVerdict("no <histogram>_bucket{...} selector in: " + expr)
    name, selector = m.group(1), m.group(2)
    edges = sorted({float(s["metric"]["le"]) for s in instant(args, "%s_bucket%s" % (name, selector))})
    counts = instant(args, "sum(%s_count%s)" % (name, selector))
    total = float(counts[0]["value"][1]) if counts else 0.0
    return [e for e in edges if math.isfinite(e)], total


def check_panel(args, title, panel, samples):
    window = "%ds" % (math.ceil(args.at - args.since) + 30)
    values = {"node": ".*", "__rate_interval": window, "datasource": ""}
    rows, failed = [], False
    for target in panel.get("targets", []):
        expr = dashboard.expand(target["expr"], values)
        q = QUANTILE.search(expr)
        if not q:
            continue
        edges, total = histogram_of(args, expr)
        if round(total) != len(samples):
            raise NotScrapedYet("%s: the agent counted %d, the benchmark has %d samples: not the same run"
                            % (title, round(total), len(samples)))
        # The agent registers every label set at start, so sets never observed are series
        # too; their quantile is NaN (no rate), as the dashboard draws nothing for them.
        shown = [float(s["value"][1]) for s in instant(args, expr)]
        shown = [v for v in shown if math.isfinite(v)]
        if len(shown) != 1:
            raise NoVerdict("%s: %d series with data for %s (one population expected)"
                            % (title, len(shown), expr))
        shown = shown[0]
        quantile = float(q.group(1))
        true = nearest_rank(samples, quantile)
        lower, upper = bucket_of(true, edges)
        width = upper - lower
        ok = abs(shown - true) <= width
        failed |= not ok
        rows.append((title, "p%g" % (quantile * 100), true, shown, lower, upper, ok))
    if not rows:
        raise NoVerdict("%s: no histogram_quantile query" % title)
    return rows, failed


def check_all(args, samples, by_title):
    rows, failed = [], False
    for key, title in PANELS:
        if key not in samples:
            continue
        if not samples[key]:
            raise NoVerdict("%s: the benchmark has no samples" % key)
        if title not in by_title:
            raise NoVerdict("the dashboard has no panel %r" % title)
        r, f = check_panel(args, title, by_title[title], samples[key])
        rows += r
        failed |= f
    return rows, failed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--prometheus", required=True)
    p.add_argument("--since", type=float, required=True, help="Unix seconds before the first sample")
    p.add_argument("--wait", type=float, default=20, help="seconds to wait for the last scrapes")
    p.add_argument("--samples", required=True)
    p.add_argument("--dashboard", default=dashboard.DEFAULT_DASHBOARD)
    args = p.parse_args()
    with open(args.samples) as f:
        samples = json.load(f)
    by_title = dashboard.panels_by_title(args.dashboard)
    deadline = time.time() + args.wait
    while True:
        args.at = time.time()
        try:
            rows, failed = check_all(args, samples, by_title)
            break
        except NotScrapedYet as e:
            if time.time() < deadline:
                time.sleep(1)
                continue
            print("dashboard quantiles: no verdict: %s" % e)
            return 2
        except (NoVerdict, dashboard.QueryError, KeyError) as e:
            print("dashboard quantiles: no verdict: %s" % e)
            return 2
    if not rows:
        print("dashboard quantiles: no verdict: no samples given")
        return 2
    print("\n  dashboard quantile panels against the benchmark's own percentiles (same samples):")
    print("  %-52s %5s %12s %12s %25s  %s" % ("panel", "q", "benchmark", "dashboard", "bucket of the benchmark", ""))
    for title, q, true, shown, lower, upper, ok in rows:
        print("  %-52s %5s %12.6g %12.6g %12.6g..%-12.6g  %s"
              % (title[:52], q, true, shown, lower, upper, "within one bucket" if ok else "OFF BY MORE"))
    verdict = "MISSED" if failed else "MET"
    print("\n  target: every panel quantile within one bucket's width of the benchmark's: %s" % verdict)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
