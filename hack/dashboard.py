"""What hack/plot-snapshot-health.py and hack/bench/dashboard-quantiles.py share: the stasis
dashboard's panels, Grafana's variable expansion, and Prometheus's HTTP query API.

Both read the queries from the dashboard JSON itself, so what they draw or check is what the
dashboard shows, not a copy of its queries that could drift from it.
"""
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DASHBOARD = os.path.join(HERE, "..", "manifests", "monitoring", "dashboards",
                                 "stasis-snapshot-health.json")


class QueryError(Exception):
    """Prometheus refused a query or could not be reached."""


def panels_by_title(path):
    with open(path) as f:
        dashboard = json.load(f)
    out = {}

    def walk(ps):
        for p in ps:
            if p.get("type") == "row":
                walk(p.get("panels", []))
            else:
                out[p.get("title", "")] = p
    walk(dashboard.get("panels", []))
    return out


def expand(expr, values):
    """Grafana's $var, ${var} and [[var]]; a variable without a value is an error."""
    def repl(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in values:
            raise KeyError("no value for Grafana variable $%s in: %s" % (name, expr))
        return values[name]
    return re.sub(r"\$\{(\w+)\}|\[\[(\w+)\]\]|\$(\w+)", repl, expr)


def query(url, api, params):
    """GET /api/v1/<api> with params; the result list of a successful answer."""
    q = urllib.parse.urlencode(params)
    expr = params.get("query", "")
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/api/v1/" + api + "?" + q, timeout=60) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        raise QueryError("query failed (%s): %s: %s" % (e.code, expr, e.read().decode(errors="replace")[:300]))
    except (urllib.error.URLError, OSError) as e:
        raise QueryError("cannot reach %s: %s" % (url, e))
    if body.get("status") != "success":
        raise QueryError("query failed: %s: %s" % (expr, body.get("error")))
    return body["data"]["result"]
