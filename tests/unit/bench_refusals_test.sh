#!/usr/bin/env bash
# The benchmarks' refusals (hack/bench/lib.sh): no target verdict from a process that died or
# exited, an empty sample, or a missing case — each refused with its reason and exit 1 — a
# carried build (STASIS_BENCH_PREBUILT=1) used as it is, and a
# verdict from sound figures. And hack/bench/request_mix.py, which cuts the audit log of a
# recorded flip into the transitions the transitions ceiling replays: the right requests of the
# right actor in the right order, and a refusal when a direction was never recorded. And
# hack/bench/apiserver-delta.py, fleet scenario 4's reading of the API server's metrics.
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
tmp="$(mktemp -d)"
zombie_parent=""
trap '[[ -n "${zombie_parent}" ]] && kill "${zombie_parent}" 2>/dev/null; rm -rf "${tmp}"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# refused 'REASON' CODE…: CODE, run in a subshell with the lib sourced, exits 1 and says REASON.
refused() {
  local want="$1" out rc=0
  shift
  out="$(bash -c "source '${root}/hack/bench/lib.sh'; $*" 2>&1)" || rc=$?
  ((rc == 1)) || fail "'$*' exited ${rc}, not 1 (output: ${out})"
  [[ "${out}" == *"no verdict: "*"${want}"* ]] || fail "'$*' did not refuse with '${want}': ${out}"
}
# accepted 'OUTPUT' CODE…: CODE exits 0 and prints OUTPUT.
accepted() {
  local want="$1" out rc=0
  shift
  out="$(bash -c "source '${root}/hack/bench/lib.sh'; $*" 2>&1)" || rc=$?
  ((rc == 0)) || fail "'$*' exited ${rc}: ${out}"
  [[ "${out}" == "${want}" ]] || fail "'$*' printed '${out}', not '${want}'"
}

# Carried binaries (hack/bench/fleet-from-bundle.sh): with STASIS_BENCH_PREBUILT=1 nothing is
# built; a target that is not there is a clear error, not a build.
prebuilt() {
  bash -c "source '${root}/hack/lib.sh'; source '${root}/hack/bench/lib.sh'
    STASIS_BENCH_BUILD_DIR='${tmp}/carried' STASIS_BENCH_PREBUILT=1 bench_build $*; echo \"built in \${build}\"" 2>&1
}
mkdir -p "${tmp}/carried/tests"
out="$(prebuilt stasis bench_fleet)" && fail "a missing carried binary was accepted: ${out}"
[[ "${out}" == *"has no stasis"* ]] || fail "a missing carried binary was not named: ${out}"
touch "${tmp}/carried/stasis" "${tmp}/carried/tests/bench_fleet"
chmod +x "${tmp}/carried/stasis" "${tmp}/carried/tests/bench_fleet"
out="$(prebuilt stasis bench_fleet)" || fail "carried binaries were refused: ${out}"
[[ "${out}" == "built in ${tmp}/carried" ]] || fail "carried binaries: ${out}"

# A process that has exited, and one that died but was not reaped (a zombie: its /proc entry
# is still there, and reads as 0 kB and 0 CPU).
sleep 0 & gone=$!
wait "${gone}"
refused "has exited" require_alive agent "${gone}"
python3 -c 'import os, sys, time
pid = os.fork()
if pid == 0:
    os._exit(0)
print(pid, flush=True)
time.sleep(60)' >"${tmp}/zombie" &
zombie_parent=$!
for _ in $(seq 100); do [[ -s "${tmp}/zombie" ]] && break; sleep 0.05; done
zombie="$(cat "${tmp}/zombie")"
for _ in $(seq 100); do [[ "$(awk '/^State:/ {print $2}' "/proc/${zombie}/status")" == Z ]] && break; sleep 0.05; done
refused "has died (state Z)" require_alive agent "${zombie}"
refused "no process id" require_alive agent "''"
accepted "" require_alive agent "$$"

# Empty or blank samples, and a rate of zero.
refused "peak RSS: no figure (got '')" require_number "'peak RSS'" "''"
refused "ceiling: no figure (got 'n/a')" require_number ceiling n/a
refused "ceiling is 0" require_positive ceiling 0
accepted "" require_positive ceiling 12.5

# A case missing from a run, named; all present passes.
refused "case(s) missing from the run: node_resume" \
  require_cases "'cluster_at_rest node_pause node_resume'" "'cluster_at_rest node_pause'"
accepted "" require_cases "'cluster_at_rest node_pause'" "'node_pause cluster_at_rest extra'"

# Verdicts from sound numbers; none from a blank one.
accepted "met" verdict 0.81 "'>='" 0.70
accepted "missed" verdict 0.52 "'>='" 0.70
accepted "met" verdict 140000 "'<'" 204800
refused "value: no figure" verdict "''" "'>='" 0.70
accepted "met" verdict 0.18 "'<='" 70
refused "no operator" verdict 1 "'=='" 2
accepted "0.18" max_of 0.10 0.18
accepted "12.5" max_of 12.5 9.18
accepted "met" 'verdict "$(max_of 0.10 0.18)" "<=" 70'

# request_mix.py on an audit log written here: actor a is paused (spec PATCH, two status
# PATCHes, its worker freed by a JSON patch, an Event) and resumed (its worker claimed by a
# merge patch); b's requests interleave; a boot write before the first flip,
# a LIST and a refused PATCH are left out.
ev() {  # ev TIME VERB RESOURCE SUBRESOURCE NAME CODE BODY
  printf '{"stage":"ResponseComplete","requestReceivedTimestamp":"2026-01-01T00:00:%s.000000Z","verb":"%s","objectRef":{"resource":"%s","subresource":"%s","name":"%s","namespace":"record"},"responseStatus":{"code":%s},"requestObject":%s}\n' "$@"
}
{
  ev 00 patch actors "" a 200 '{"metadata":{"finalizers":["stasis.dev/sandbox"]}}'
  ev 01 list actors "" "" 200 'null'
  ev 02 patch actors "" a 200 '{"spec":{"desiredState":"Paused"}}'
  ev 03 patch actors "" b 200 '{"spec":{"desiredState":"Paused"}}'
  ev 04 patch actors status a 200 '{"metadata":{"resourceVersion":"7"},"status":{"status":"STATUS_PAUSING"}}'
  ev 05 patch actors status a 409 '{"status":{"status":"STATUS_PAUSING"}}'
  ev 06 patch actors status a 200 '{"metadata":{"resourceVersion":"8"},"status":{"status":"STATUS_PAUSED","latestSnapshot":{"id":"s1"}}}'
  ev 07 patch workers status slot0 200 '[{"op":"test","path":"/status/actorRef/name","value":"a"},{"op":"remove","path":"/status/actorRef"}]'
  ev 07 create events "" a.1 201 '{"metadata":{"name":"a.1"},"involvedObject":{"name":"a"},"reason":"Paused"}'
  ev 08 patch actors "" a 200 '{"spec":{"desiredState":"Running"}}'
  ev 09 patch workers status slot0 200 '{"metadata":{"resourceVersion":"3"},"status":{"actorRef":{"name":"a"},"phase":"Held"}}'
  ev 09 patch actors status a 200 '{"metadata":{"resourceVersion":"10"},"status":{"status":"STATUS_RUNNING"}}'
} >"${tmp}/audit.log"
if python3 "${root}/hack/bench/request_mix.py" "${tmp}/audit.log" "${tmp}/mix.json" >"${tmp}/mix.out" 2>&1; then
  got="$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))
for d in ("Paused", "Running"):
    print(d, m[d]["transitions"], m[d]["same_shape"], " ".join(r["verb"] + ":" + r["resource"] + "/" + r["subresource"] for r in m[d]["requests"]))' "${tmp}/mix.json")"
  # (Paused: a's four requests and b's lone spec PATCH tie; the next recording settles it.)
  want_running="Running 1 1 patch:actors/ patch:workers/status patch:actors/status"
  [[ "${got}" == *"${want_running}"* ]] || fail "request_mix.py's Running mix: ${got}"
  grep -q "refused while recording (not replayed): patch actors/status 409 ×1" "${tmp}/mix.out" \
    || fail "request_mix.py did not report the refused request: $(cat "${tmp}/mix.out")"
else
  fail "request_mix.py failed on a complete recording: $(cat "${tmp}/mix.out")"
fi
# The Paused mix is the most common sequence: c paused the way a was outnumbers b.
{
  ev 03 patch actors "" c 200 '{"spec":{"desiredState":"Paused"}}'
  ev 10 patch actors status c 200 '{"metadata":{"resourceVersion":"9"},"status":{"status":"STATUS_PAUSING"}}'
  ev 11 patch actors status c 200 '{"metadata":{"resourceVersion":"11"},"status":{"status":"STATUS_PAUSED"}}'
  ev 12 patch workers status slot1 200 '[{"op":"test","path":"/status/actorRef/name","value":"c"},{"op":"remove","path":"/status/actorRef"}]'
  ev 12 create events "" c.1 201 '{"metadata":{"name":"c.1"},"involvedObject":{"name":"c"},"reason":"Paused"}'
} >>"${tmp}/audit.log"
python3 "${root}/hack/bench/request_mix.py" "${tmp}/audit.log" "${tmp}/mix.json" >"${tmp}/mix.out" 2>&1 \
  || fail "request_mix.py failed: $(cat "${tmp}/mix.out")"
paused="$(python3 -c 'import json, sys
m = json.load(open(sys.argv[1]))["Paused"]
print(" ".join(r["verb"] + ":" + r["resource"] + "/" + r["subresource"] for r in m["requests"]), m["requests"][0]["body"])' "${tmp}/mix.json")"
[[ "${paused}" == "patch:actors/ patch:actors/status patch:actors/status patch:workers/status create:events/ {'spec': {'desiredState': 'Paused'}}" ]] \
  || fail "request_mix.py's Paused mix: ${paused}"
# No resume recorded: no mix, and why.
grep -v '"Running"' "${tmp}/audit.log" >"${tmp}/paused-only.log"
if python3 "${root}/hack/bench/request_mix.py" "${tmp}/paused-only.log" "${tmp}/mix2.json" >"${tmp}/mix2.out" 2>&1; then
  fail "request_mix.py made a mix without a Running transition"
fi
grep -q "no Running transition" "${tmp}/mix2.out" || fail "request_mix.py did not say why: $(cat "${tmp}/mix2.out")"

# hack/bench/apiserver-delta.py (fleet scenario 4): what the API server did between two scrapes —
# requests a second and execution mean/p99 by FlowSchema (idle ones left out), writes by
# resource per transition (reads and the flips themselves not counted), Leases a second.
fs='flow_schema="stasis-node-agents",priority_level="stasis-node-agents"'
req() { echo "apiserver_request_total{code=\"$1\",group=\"g\",resource=\"$2\",subresource=\"$3\",verb=\"$4\"} $5"; }
{
  echo "apiserver_flowcontrol_dispatched_requests_total{${fs}} 100"
  echo 'apiserver_flowcontrol_dispatched_requests_total{flow_schema="stasis-leases",priority_level="stasis-leases"} 50'
  echo "apiserver_flowcontrol_request_execution_seconds_bucket{${fs},type=\"regular\",le=\"0.01\"} 90"
  echo "apiserver_flowcontrol_request_execution_seconds_bucket{${fs},type=\"regular\",le=\"0.1\"} 100"
  echo "apiserver_flowcontrol_request_execution_seconds_bucket{${fs},type=\"regular\",le=\"+Inf\"} 100"
  echo "apiserver_flowcontrol_request_execution_seconds_sum{${fs},type=\"regular\"} 1"
  req 200 actors status PATCH 10; req 200 actors "" GET 500; req 200 leases "" PUT 20
} >"${tmp}/before.txt"
{
  echo "apiserver_flowcontrol_dispatched_requests_total{${fs}} 300"
  echo 'apiserver_flowcontrol_dispatched_requests_total{flow_schema="stasis-leases",priority_level="stasis-leases"} 50'
  echo "apiserver_flowcontrol_request_execution_seconds_bucket{${fs},type=\"regular\",le=\"0.01\"} 190"
  echo "apiserver_flowcontrol_request_execution_seconds_bucket{${fs},type=\"regular\",le=\"0.1\"} 300"
  echo "apiserver_flowcontrol_request_execution_seconds_bucket{${fs},type=\"regular\",le=\"+Inf\"} 300"
  echo "apiserver_flowcontrol_request_execution_seconds_sum{${fs},type=\"regular\"} 5"
  req 200 actors status PATCH 50; req 409 actors "" PATCH 20; req 200 actors "" GET 900; req 200 leases "" PUT 120
} >"${tmp}/after.txt"
delta="$(python3 "${root}/hack/bench/apiserver-delta.py" "${tmp}/before.txt" "${tmp}/after.txt" 100 20 2>&1)" \
  || fail "apiserver-delta.py failed: ${delta}"
expected="requests by FlowSchema stasis-node-agents,2.0,req/s
  stasis-node-agents: execution mean / p99,20.0 / 98,ms
writes (all resources),1.6,writes/s
  writes to leases,1.0,writes/s
  writes to actors/status per transition,2.00,writes
  writes to actors per transition (less the flip itself),0.00,writes"
[[ "${delta}" == "${expected}" ]] || fail "apiserver-delta.py printed:
${delta}
not:
${expected}"

if ((failures > 0)); then
  echo "${failures} failure(s)" >&2
  exit 1
fi
echo "ok: every refusal refused with its reason; verdicts, the request mix and the metrics delta as expected"
