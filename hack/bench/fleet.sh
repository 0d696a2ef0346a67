#!/usr/bin/env bash
# Fleet benchmark: many node agents and one `stasis controller` on one real kube-apiserver and
# etcd, by simulation (docs/scaling.md). A program that prints figures and writes a CSV, not a
# timed test.
#
#   hack/bench/fleet.sh [--nodes 1000] [--workers-per-node 8] [--actors 100000] [--run 10000]
#                       [--dead 50] [--heartbeat-lease 40] [--threads 16] [--churn-minutes 3]
#                       [--apf with|without|off] [--start-per-second 100] [--csv FILE] [--keep]
#
# The nodes are bench_fleet_sim processes (tests/bench/fleet_sim.cc): each node the production
# node agent (its informers, Workers, heartbeat Lease and status writes) over the no-op runtime
# driver, many to a process; the last --dead nodes in a process of their own. The controller is
# the real `stasis controller`, its own process. Both authenticate as their ServiceAccounts
# (tokens from `kubectl create token`) under the shipped RBAC; with --apf with (the default) the
# API server runs API Priority and Fairness with the shipped FlowSchemas
# (manifests/base/flowcontrol.yaml), --apf without runs it with the built-in ones only (stasis's
# requests in `service-accounts`), --apf off without APF.
#
# --start-per-second is how many agents each simulator process starts a second (a fleet's
# nodes boot over minutes; every agent's first LISTs walk all actors).
#
#   1. at rest: --actors suspended actors spread over the nodes (bench_fleet populate); etcd's
#      database size; the controller started on them: ready (its caches synced) and settled (its
#      queue empty), against the API server's own paged LIST of the same objects; then the
#      fleet started; peak RSS of the controller, the API server and etcd, and the fleet's
#      memory per node;
#   2. a burst: --run unpinned actors asked to run at once (created while the controller is
#      stopped with SIGSTOP, then continued); the binder places them (as many as there are free
#      workers): actors bound per second, and the time until every placed one is RUNNING;
#      against the API server's own ceiling for the binder's two writes per actor (bench_fleet
#      bind-ceiling, --threads clients as the controller's ServiceAccount, on actors of its own,
#      in the same run); and what the burst costs a client unrelated to stasis (its own
#      ServiceAccount, one GET every 50 ms: bench_fleet probe), at rest and during the burst;
#   4. steady churn: 1 % of all actors flipped per minute, for --churn-minutes (0: skipped),
#      among the burst's RUNNING actors (suspends and resumes; bench_fleet churn); the API
#      server's requests a second and latency by FlowSchema (with --apf with: by client), its
#      writes per transition by resource (status writes, Events, Workers), the controller's CPU
#      (run before 3, which ends nodes);
#   3. node loss: the --dead nodes' process killed (kill -9: no agent says goodbye); the time
#      until every actor they ran is cleaned (`Stuck=True NodeLost`) and every worker of theirs
#      Free, against the heartbeat lease (--heartbeat-lease; target: within it + 30 s).
#
# Builds `stasis`, `bench_fleet` and `bench_fleet_sim` in the non-sanitized
# ${STASIS_BENCH_BUILD_DIR:-build}/, brings up its own control plane in a temporary directory and
# tears everything down at exit. The last line is `RESULT k=v …`. STASIS_FLEET_CONTROLLER names
# another `stasis` binary for the controller (a before/after of a controller change on the same
# fleet); STASIS_FLEET_CONTROLLER_FLAGS adds flags to it (e.g. "--kube-api-qps 500").
source "$(dirname "$0")/../lib.sh"
source "${HACK_DIR}/bench/lib.sh"

nodes=1000 per_node=8 actors=100000 run=10000 dead=50 lease=40 threads=16 churn_minutes=3 apf=with csv="" keep=0
start_rate=100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --workers-per-node) per_node="$2"; shift 2 ;;
    --actors) actors="$2"; shift 2 ;;
    --run) run="$2"; shift 2 ;;
    --dead) dead="$2"; shift 2 ;;
    --heartbeat-lease) lease="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --churn-minutes) churn_minutes="$2"; shift 2 ;;
    --apf) apf="$2"; shift 2 ;;
    --start-per-second) start_rate="$2"; shift 2 ;;
    --csv) csv="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
((dead < nodes)) || die "--dead (${dead}) must be fewer than --nodes (${nodes})"
[[ "${apf}" == with || "${apf}" == without || "${apf}" == off ]] || die "--apf: with, without or off, not ${apf}"

bench_build stasis bench_fleet bench_fleet_sim
"${HACK_DIR}/build-control-plane.sh" >/dev/null
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"

work="$(mktemp -d /tmp/stasis-bench-fleet.XXXXXX)"
export STASIS_CONTROL_PLANE_DIR="${work}/control-plane"
csv="${csv:-${work}/fleet.csv}"
ctl_pid="" live_pid="" dead_pid="" probe_pid=""
teardown() {
  local rc=$?
  set +e
  stop_process "${probe_pid}"; stop_process "${ctl_pid}"; stop_process "${live_pid}"; stop_process "${dead_pid}"
  bench_teardown "${work}" "${keep}"
  exit "${rc}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# (hack/control-plane.sh turns APF off for the tests; a later flag wins.)
[[ "${apf}" == off ]] || export STASIS_APISERVER_EXTRA_FLAGS="${STASIS_APISERVER_EXTRA_FLAGS:-} --enable-priority-and-fairness=true"
bench_control_plane_up stasis-system fleet fleet-burst fleet-ceiling fleet-probe
cp_dir="${STASIS_CONTROL_PLANE_DIR}"
api_pid="$(cat "${cp_dir}/kube-apiserver.pid")" etcd_pid="$(cat "${cp_dir}/etcd.pid")"
mkdir -p "${work}/bundles/noop/rootfs" && echo '{}' >"${work}/bundles/noop/config.json"
bundle="${work}/bundles/noop"

# sa_kubeconfig NS SA FILE: this control plane's server and CA with a token of the ServiceAccount.
sa_kubeconfig() {
  local token user
  token="$(kubectl -n "$1" create token "$2" --duration 24h)" || die "no token for $1/$2"
  kubectl config view --raw --minify >"$3"
  user="$(KUBECONFIG="$3" kubectl config view -o jsonpath='{.contexts[0].context.user}')"
  KUBECONFIG="$3" kubectl config unset "users.${user}" >/dev/null
  KUBECONFIG="$3" kubectl config set-credentials "${user}" --token="${token}" >/dev/null
}
# The roles as deployed: their ServiceAccounts and RBAC, and with --apf with the FlowSchemas.
# The probe: a ServiceAccount that may read one ConfigMap.
kubectl apply -n stasis-system -f "${REPO_ROOT}/manifests/base/node-rbac.yaml" \
  -f "${REPO_ROOT}/manifests/base/controller-rbac.yaml" >/dev/null
[[ "${apf}" == with ]] && kubectl apply -f "${REPO_ROOT}/manifests/base/flowcontrol.yaml" >/dev/null
kubectl -n fleet-probe create serviceaccount probe >/dev/null
kubectl -n fleet-probe create configmap probe --from-literal=probe=1 >/dev/null
kubectl -n fleet-probe create role probe --verb=get --resource=configmaps >/dev/null
kubectl -n fleet-probe create rolebinding probe --role=probe --serviceaccount=fleet-probe:probe >/dev/null
sa_kubeconfig stasis-system stasis-node "${work}/node.kubeconfig"
sa_kubeconfig stasis-system stasis-controller "${work}/controller.kubeconfig"
sa_kubeconfig fleet-probe probe "${work}/probe.kubeconfig"
probe=("${build}/tests/bench_fleet" probe --kubeconfig "${work}/probe.kubeconfig" --namespace fleet-probe --configmap probe)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
ctl_port="$(free_port)"
now() { date +%s.%N; }
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
metric() { curl -fs "127.0.0.1:$1/metrics" | awk -v m="$2" -v f="${3:-}" \
  'index($0, m) == 1 && (f == "" || index($0, f)) && substr($0, length(m) + 1, 1) ~ /[{ ]/ {s += $NF} END {printf "%d", s}'; }
echo "scenario,figure,value,unit" >"${csv}"
record() { echo "$1,$2,$3,$4" >>"${csv}"; printf '  %-64s %12s %s\n' "$2" "$3" "$4"; }
# etcd's database file: what it holds on disk (its backend quota counts this).
etcd_db_bytes() { stat -c %s "$(find "${cp_dir}" -path '*member/snap/db' | head -1)"; }

start_fleet() {  # start_fleet FIRST COUNT LOG: one bench_fleet_sim process, its pid in fleet_pid
  "${build}/tests/bench_fleet_sim" --kubeconfig "${work}/node.kubeconfig" --root "${work}/nodes" --bundle-root "${work}/bundles" \
    --first "$1" --nodes "$2" --workers-per-node "${per_node}" --heartbeat-lease "${lease}" \
    --start-per-second "${start_rate}" >>"${work}/$3.log" 2>&1 &
  fleet_pid=$!
}
# kubectl_rows ARGS…: `kubectl get ARGS…`'s output; when the LIST itself fails, as it does on an
# overloaded API server, "unknown (kubectl: …)" and status 1: a failed LIST must not count as 0.
kubectl_rows() {
  local listed
  if ! listed="$(kubectl get "$@" 2>&1)"; then
    echo "unknown (kubectl: $(tail -1 <<<"${listed}"))"
    return 1
  fi
  printf '%s\n' "${listed}"
}
# count_workers NODE_REGEX [PHASE]: how many Workers of the matching nodes there are (in PHASE),
# or kubectl_rows's "unknown (…)".
count_workers() {
  local rows
  rows="$(kubectl_rows workers -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.phase}{"\n"}{end}')" ||
    { echo "${rows}"; return; }
  awk -v re="$1" -v phase="$2" '$1 ~ re && (phase == "" || $2 == phase) { n++ } END { print n + 0 }' <<<"${rows}"
}
wait_settled() {  # wait_settled PORT PID: until the controller's queue is empty twice 0.5 s apart
  local quiet=0
  for _ in $(seq 2400); do
    require_alive controller "$2"
    if [[ "$(metric "$1" workqueue_depth)" == 0 && "$(metric "$1" workqueue_unfinished_work_seconds)" == 0 ]]; then
      ((++quiet >= 2)) && return 0
    else quiet=0; fi
    sleep 0.5
  done
  die "the controller's queue did not settle in 20 min"
}

echo "controller: ${STASIS_FLEET_CONTROLLER:-${build}/stasis} ${STASIS_FLEET_CONTROLLER_FLAGS:-}"
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); stasis $(git -C "${REPO_ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown), kube-apiserver ${KUBERNETES_VERSION}, etcd ${ETCD_VERSION}"
echo "fleet: ${nodes} nodes × ${per_node} workers, ${actors} actors at rest, a burst of ${run}, ${churn_minutes} min of churn, ${dead} nodes lost"
echo "API Priority and Fairness: ${apf}$([[ "${apf}" == with ]] && echo " (manifests/base/flowcontrol.yaml)")"

# ---- 1. at rest ------------------------------------------------------------------------------
echo "scenario 1: ${actors} actors at rest on ${nodes} nodes"
"${build}/tests/bench_fleet" populate --kubeconfig "${KUBECONFIG}" --namespace fleet --nodes "${nodes}" \
  --actors "${actors}" --threads "${threads}" --bundle "${bundle}" | sed 's/^/  /'
list_s="$("${build}/tests/bench_fleet" list --kubeconfig "${KUBECONFIG}" --repeat 2 | sed -n 's/^RESULT list_s=//p')"
record 1 "etcd database after populating" "$(($(etcd_db_bytes) / 1048576))" MiB
t0="$(now)"
# STASIS_FLEET_CONTROLLER_FLAGS is split into words on purpose (several flags).
# shellcheck disable=SC2086
"${STASIS_FLEET_CONTROLLER:-${build}/stasis}" controller --leader-elect=false --namespace stasis-system \
  --kubeconfig "${work}/controller.kubeconfig" --metrics-addr "127.0.0.1:${ctl_port}" ${STASIS_FLEET_CONTROLLER_FLAGS:-} >>"${work}/controller.log" 2>&1 &
ctl_pid=$!
until curl -fs "127.0.0.1:${ctl_port}/readyz" >/dev/null 2>&1; do require_alive controller "${ctl_pid}"; sleep 0.05; done
ready_s="$(calc "$(now) - ${t0}")"
wait_settled "${ctl_port}" "${ctl_pid}"
settled_s="$(calc "$(now) - ${t0} - 0.5")"
record 1 "controller initial sync (start → /readyz 200)" "${ready_s}" s
record 1 "  the API server's paged LIST of every actor and worker" "${list_s}" s
record 1 "controller settled (every actor reconciled once)" "${settled_s}" s
t0="$(now)"
start_fleet 0 $((nodes - dead)) fleet-live; live_pid="${fleet_pid}"
start_fleet $((nodes - dead)) "${dead}" fleet-dead; dead_pid="${fleet_pid}"
want=$((nodes * per_node)) deadline=$((SECONDS + 1800))
until [[ "$(count_workers . Free)" == "${want}" ]]; do
  require_alive "the fleet" "${live_pid}"; require_alive "the fleet's last ${dead} nodes" "${dead_pid}"
  ((SECONDS < deadline)) || refuse "after 30 min $(count_workers . Free) of ${want} workers are Free (the agents' errors: ${work}/fleet-*.log)"
  sleep 1
done
record 1 "fleet up (every agent started, ${want} workers Free)" "$(calc "$(now) - ${t0}")" s
wait_settled "${ctl_port}" "${ctl_pid}"
sleep 10  # a heartbeat round with everything running
record 1 "controller peak RSS" "$(mb "$(kb "${ctl_pid}" VmHWM)")" MiB
record 1 "kube-apiserver peak RSS" "$(mb "$(kb "${api_pid}" VmHWM)")" MiB
record 1 "etcd peak RSS" "$(mb "$(kb "${etcd_pid}" VmHWM)")" MiB
record 1 "fleet RSS per node (agents in one process)" \
  "$(calc "($(kb "${live_pid}" VmRSS) + $(kb "${dead_pid}" VmRSS)) / 1024 / ${nodes}")" MiB
record 1 "etcd database with the fleet running" "$(($(etcd_db_bytes) / 1048576))" MiB

# ---- 2. a burst ------------------------------------------------------------------------------
placed=$((run < want ? run : want))
echo "scenario 2: ${run} actors asked to run at once (${placed} can be placed)"
count_status() {
  kubectl get actors -n fleet-burst -o jsonpath='{range .items[*]}{.status.nodeName} {.status.status}{"\n"}{end}' 2>/dev/null \
    | awk -v want="$1" '($1 != "" && want == "bound") || $2 == want { n++ } END { print n + 0 }'
}
quiet_probe="$("${probe[@]}" --seconds 10 | sed -n 's/^RESULT //p')"
"${probe[@]}" >"${work}/probe-burst.txt" 2>>"${work}/probe.log" &
probe_pid=$!
# The controller stopped (SIGSTOP) while the burst is created, so that binding is measured on its
# own, not at the pace of the creations: every actor is there, wanting to run, when it goes on.
kill -STOP "${ctl_pid}"
t0="$(now)"
"${build}/tests/bench_fleet" populate --kubeconfig "${KUBECONFIG}" --namespace fleet-burst --nodes "${nodes}" \
  --actors "${run}" --threads "${threads}" --bundle "${bundle}" --desired Running --unpinned 1 --prefix burst | sed 's/^/  /'
created_s="$(calc "$(now) - ${t0}")"
kill -CONT "${ctl_pid}"
t0="$(now)"
bound_s="" deadline=$((SECONDS + 1200))
while ((SECONDS < deadline)); do
  b="$(count_status bound)"
  [[ -z "${bound_s}" ]] && ((b >= placed)) && bound_s="$(calc "$(now) - ${t0}")"
  [[ -n "${bound_s}" && "$(count_status STATUS_RUNNING)" -ge "${placed}" ]] && break
  require_alive controller "${ctl_pid}"
  sleep 1
done
running_s="$(calc "$(now) - ${t0}")"
kill -INT "${probe_pid}"; wait "${probe_pid}"; probe_pid=""
burst_probe="$(sed -n 's/^RESULT //p' "${work}/probe-burst.txt")"
[[ -n "${bound_s}" ]] || refuse "only $(count_status bound) of ${placed} actors were bound in 20 min"
record 2 "created (${run} actors, ${threads} clients)" "${created_s}" s
record 2 "the controller continued → every placeable actor bound" "${bound_s}" s
record 2 "binding throughput" "$(calc "${placed} / ${bound_s}")" "actors/s"
record 2 "the controller continued → every placed actor RUNNING" "${running_s}" s
ceiling="$("${build}/tests/bench_fleet" bind-ceiling --kubeconfig "${work}/controller.kubeconfig" --namespace fleet-ceiling \
  --actors "${placed}" --threads "${threads}" | sed -n 's/^RESULT bind_ceiling_per_s=\([0-9.]*\).*/\1/p')"
require_positive "the bind ceiling" "${ceiling}"
record 2 "  the API server's ceiling for the binder's writes (${threads} clients)" "${ceiling}" "binds/s"
bind_ratio="$(calc "${placed} / ${bound_s} / ${ceiling}")"
record 2 "binding throughput ÷ that ceiling" "${bind_ratio}" ratio
field() { sed -n "s/.*\b$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
record 2 "unrelated client's GET at rest: p50 / p99" "$(field probe_p50_ms "${quiet_probe}") / $(field probe_p99_ms "${quiet_probe}")" ms
record 2 "unrelated client's GET during the burst: p50 / p99 / max" \
  "$(field probe_p50_ms "${burst_probe}") / $(field probe_p99_ms "${burst_probe}") / $(field probe_max_ms "${burst_probe}")" ms

# ---- 4. steady churn -------------------------------------------------------------------------
if ((churn_minutes > 0)); then
  per_minute=$(((actors + run + 99) / 100))
  echo "scenario 4: ${per_minute} flips a minute (1 % of $((actors + run)) actors) for ${churn_minutes} min"
  kubectl get --raw /metrics >"${work}/apiserver-before.txt"
  ticks0="$(awk '{print $14 + $15}' "/proc/${ctl_pid}/stat")" t0="$(now)"
  "${build}/tests/bench_fleet" churn --kubeconfig "${KUBECONFIG}" --namespace fleet-burst --per-minute "${per_minute}" \
    --minutes "${churn_minutes}" >"${work}/churn.txt" 2>>"${work}/churn.log" || refuse "churn: $(cat "${work}/churn.txt" "${work}/churn.log")"
  churn_s="$(calc "$(now) - ${t0}")"
  ticks1="$(awk '{print $14 + $15}' "/proc/${ctl_pid}/stat")"
  kubectl get --raw /metrics >"${work}/apiserver-after.txt"
  churn="$(sed -n 's/^RESULT //p' "${work}/churn.txt")"
  record 4 "flips made / actors settled" "$(field flips "${churn}") / $(field settled "${churn}")" ""
  record 4 "window (the flips, then until every flipped actor settled)" "${churn_s}" s
  record 4 "controller CPU" "$(calc "100 * (${ticks1} - ${ticks0}) / $(getconf CLK_TCK) / ${churn_s}")" "% of a core"
  while IFS=, read -r figure value unit; do record 4 "${figure}" "${value}" "${unit}"; done < <(
    python3 "${HACK_DIR}/bench/apiserver-delta.py" "${work}/apiserver-before.txt" "${work}/apiserver-after.txt" \
      "${churn_s}" "$(field flips "${churn}")")
fi

# ---- 3. node loss ----------------------------------------------------------------------------
doomed_re="^fleet-node-($(seq -f '%04g' $((nodes - dead)) $((nodes - 1)) | paste -sd'|'))\$"
on_doomed() {  # a count, or kubectl_rows's "unknown (…)"
  local rows
  rows="$(kubectl_rows actors -n fleet-burst -o jsonpath='{range .items[*]}{.status.nodeName} {.status.status} {.status.conditions[?(@.type=="Stuck")].reason}{"\n"}{end}')" ||
    { echo "${rows}"; return; }
  awk -v re="${doomed_re}" -v want="$1" '$1 ~ re && ((want == "live" && $2 != "STATUS_SUSPENDED") || $3 == want) { n++ } END { print n + 0 }' <<<"${rows}"
}
# The actors there that are not at rest (the churn suspended some, and a suspended actor on a
# lost node has nothing to clean).
doomed_actors="$(on_doomed live)"
[[ "${doomed_actors}" =~ ^[0-9]+$ ]] || refuse "the burst's actors on the nodes to lose: ${doomed_actors}"
echo "scenario 3: ${dead} nodes lost at once, running ${doomed_actors} actors"
t0="$(now)"
kill -KILL "${dead_pid}"; wait "${dead_pid}" 2>/dev/null || true; dead_pid=""
cleaned_s="" freed_s="" deadline=$((SECONDS + lease + 300))
while ((SECONDS < deadline)); do
  cleaned="$(on_doomed NodeLost)"  # a failed LIST (not a number) is tried again
  [[ -z "${cleaned_s}" && "${cleaned}" =~ ^[0-9]+$ ]] && ((cleaned >= doomed_actors)) && cleaned_s="$(calc "$(now) - ${t0}")"
  [[ -z "${freed_s}" && "$(count_workers "${doomed_re}" Free)" == $((dead * per_node)) ]] && freed_s="$(calc "$(now) - ${t0}")"
  [[ -n "${cleaned_s}" && -n "${freed_s}" ]] && break
  require_alive controller "${ctl_pid}"
  sleep 0.5
done
[[ -n "${cleaned_s}" && -n "${freed_s}" ]] || refuse "after $((lease + 300)) s: $(on_doomed NodeLost) of ${doomed_actors} actors cleaned, $(count_workers "${doomed_re}" Free) of $((dead * per_node)) workers Free"
record 3 "every actor of the lost nodes cleaned (Stuck=True NodeLost)" "${cleaned_s}" s
record 3 "every worker of the lost nodes Free" "${freed_s}" s
record 3 "  the heartbeat lease" "${lease}" s
echo
worst="$(max_of "${cleaned_s}" "${freed_s}")"
echo "target controller peak RSS < 1 GiB: $(verdict "$(kb "${ctl_pid}" VmHWM)" '<' $((1024 * 1024)))"
echo "target initial sync < 60 s: $(verdict "${ready_s}" '<' 60) (${ready_s} s)"
echo "target binding ≥ 0.7 of the API server's ceiling: $(verdict "${bind_ratio}" '>=' 0.7) (${bind_ratio})"
echo "target lost nodes cleaned within the lease + 30 s: $(verdict "${worst}" '<=' $((lease + 30))) (${worst} s)"
echo "CSV: ${csv}"
echo "RESULT nodes=${nodes} actors=${actors} ctl_ready_s=${ready_s} ctl_settled_s=${settled_s} ctl_hwm_kb=$(kb "${ctl_pid}" VmHWM) api_hwm_kb=$(kb "${api_pid}" VmHWM) bound_per_s=$(calc "${placed} / ${bound_s}") running_s=${running_s} lost_cleaned_s=${cleaned_s} lost_freed_s=${freed_s}"
