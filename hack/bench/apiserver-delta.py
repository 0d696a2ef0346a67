#!/usr/bin/env python3
"""What the API server did between two scrapes of its /metrics (hack/bench/fleet.sh's scenario 4).

    apiserver-delta.py BEFORE AFTER SECONDS TRANSITIONS

Prints CSV rows `figure,value,unit`:
  - requests a second and mean/p99 execution time by FlowSchema (API Priority and Fairness's
    apiserver_flowcontrol_* families: with stasis's FlowSchemas, that is by client), and the
    mean time queued;
  - writes (POST, PUT, PATCH, DELETE) by resource and subresource: each per transition (TRANSITIONS,
    the user's flips, which are themselves writes to actors), Leases a second.
"""
import re
import sys
from collections import defaultdict

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
WRITES = {"POST", "PUT", "PATCH", "DELETE", "APPLY"}


def samples(path):
    out = defaultdict(float)
    with open(path) as f:
        for line in f:
            m = SAMPLE.match(line)
            if not m or line.startswith("#"):
                continue
            labels = tuple(sorted(LABEL.findall(m.group(2) or "")))
            out[(m.group(1), labels)] += float(m.group(3))
    return out


def delta(before, after, name):
    """{labels dict as a tuple: increase} for the family `name`."""
    return {labels: v - before.get((n, labels), 0.0) for (n, labels), v in after.items() if n == name}


def by(d, *keys, where=lambda l: True):
    out = defaultdict(float)
    for labels, v in d.items():
        l = dict(labels)
        if where(l):
            out[tuple(l.get(k, "") for k in keys)] += v
    return out


def quantile(buckets, q):
    """Histogram quantile from {le: cumulative count}, linear within the bucket."""
    bounds = sorted((float(le), c) for le, c in buckets.items() if le != "+Inf")
    total = buckets.get("+Inf", bounds[-1][1] if bounds else 0)
    if total <= 0:
        return 0.0
    rank, lo, below = q * total, 0.0, 0.0
    for le, c in bounds:
        if c >= rank:
            return lo + (le - lo) * ((rank - below) / (c - below) if c > below else 1)
        lo, below = le, c
    return bounds[-1][0] if bounds else 0.0


def main():
    before, after = samples(sys.argv[1]), samples(sys.argv[2])
    seconds, transitions = float(sys.argv[3]), max(1.0, float(sys.argv[4]))
    rows = []
    dispatched = by(delta(before, after, "apiserver_flowcontrol_dispatched_requests_total"), "flow_schema")
    execution = delta(before, after, "apiserver_flowcontrol_request_execution_seconds_bucket")
    exec_sum = by(delta(before, after, "apiserver_flowcontrol_request_execution_seconds_sum"), "flow_schema")
    wait_sum = by(delta(before, after, "apiserver_flowcontrol_request_wait_duration_seconds_sum"), "flow_schema")
    wait_count = by(delta(before, after, "apiserver_flowcontrol_request_wait_duration_seconds_count"), "flow_schema")
    for (fs,), n in sorted(dispatched.items(), key=lambda kv: -kv[1]):
        if n <= 0:
            continue
        buckets = {le: v for (f, le), v in by(execution, "flow_schema", "le").items() if f == fs}
        rows.append((f"requests by FlowSchema {fs}", f"{n / seconds:.1f}", "req/s"))
        rows.append((f"  {fs}: execution mean / p99", f"{1000 * exec_sum[(fs,)] / n:.1f} / {1000 * quantile(buckets, 0.99):.0f}", "ms"))
        if wait_count[(fs,)] > 0:
            rows.append((f"  {fs}: time queued mean", f"{1000 * wait_sum[(fs,)] / wait_count[(fs,)]:.2f}", "ms"))
    writes = by(delta(before, after, "apiserver_request_total"), "resource", "subresource",
                where=lambda l: l.get("verb") in WRITES)
    total = sum(v for v in writes.values() if v > 0)
    rows.append(("writes (all resources)", f"{total / seconds:.1f}", "writes/s"))
    for (resource, sub), n in sorted(writes.items(), key=lambda kv: -kv[1]):
        if n <= 0:
            continue
        name = resource + ("/" + sub if sub else "")
        if resource == "leases":  # heartbeats and leader election: periodic, not per transition
            rows.append((f"  writes to {name}", f"{n / seconds:.1f}", "writes/s"))
        elif name == "actors":  # the flips are the user's writes
            rows.append((f"  writes to {name} per transition (less the flip itself)", f"{(n - transitions) / transitions:.2f}", "writes"))
        else:
            rows.append((f"  writes to {name} per transition", f"{n / transitions:.2f}", "writes"))
    for figure, value, unit in rows:
        print(f"{figure},{value},{unit}")


if __name__ == "__main__":
    main()
