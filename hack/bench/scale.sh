#!/usr/bin/env bash
# Scale benchmark of issue 10: `stasis controller` and `stasis node` over a fleet of suspended
# Actors and free Workers on a real kube-apiserver — peak RSS, initial sync time, the settling
# of the first reconcile of every actor, idle CPU, and the cost of a full resync (a restart of
# both: relist and reconcile everything), against the API server's own paged LIST of the same
# objects measured in the same run. A program that prints figures, not a timed test.
#
#   hack/bench/scale.sh [--actors 10000] [--workers 1000] [--idle-seconds 30] [--threads 16]
#                       [--keep]
#
# The worst case for one agent: every actor is pinned to its node (fleet-node) and the node has
# all the workers, so the agent caches and reconciles the whole fleet, as the controller does.
# Builds `stasis` and `bench_fleet` in the non-sanitized ${STASIS_BENCH_BUILD_DIR:-build}/,
# brings up its own control plane in a temporary directory and tears everything down at exit.
# The last line is `RESULT k=v …` (hack/bench/all.sh reads it).
source "$(dirname "$0")/../lib.sh"
source "${HACK_DIR}/bench/lib.sh"

actors=10000 workers=1000 idle_s=30 threads=16 keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --actors) actors="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --idle-seconds) idle_s="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done

bench_build stasis bench_fleet
"${HACK_DIR}/build-control-plane.sh" >/dev/null
RUNSC="$("${HACK_DIR}/runsc.sh")"  # the agent only asks it for its version: no sandbox runs here
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"

work="$(mktemp -d /tmp/stasis-bench-scale.XXXXXX)"
export STASIS_CONTROL_PLANE_DIR="${work}/control-plane"
ctl_pid="" node_pid=""
node=fleet-node ns=fleet

teardown() {
  local rc=$?
  set +e
  stop_process "${ctl_pid}"
  stop_process "${node_pid}"
  bench_teardown "${work}" "${keep}"  # no sandboxes: the agent only asks runsc its version
  exit "${rc}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

bench_control_plane_up stasis-system "${ns}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
ctl_port="$(free_port)" node_port="$(free_port)"
tck="$(getconf CLK_TCK)"
now() { date +%s.%N; }
# bc arithmetic, printed with two decimals.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# The sum of a metric's samples (all label sets) on a /metrics endpoint; $3 filters the labels.
metric() { curl -fs "127.0.0.1:$1/metrics" | awk -v m="$2" -v f="${3:-}" \
  'index($0, m) == 1 && (f == "" || index($0, f)) && substr($0, length(m) + 1, 1) ~ /[{ ]/ {s += $NF} END {printf "%d", s}'; }

start_ctl() {
  "${build}/stasis" controller --leader-elect=false --namespace stasis-system \
    --metrics-addr "127.0.0.1:${ctl_port}" >>"${work}/controller.log" 2>&1 &
  ctl_pid=$!
}
start_node() {
  "${build}/stasis" node --node-name "${node}" --workers "${workers}" --runsc "${RUNSC}" \
    --root "${work}/node" --metrics-addr "127.0.0.1:${node_port}" >>"${work}/node.log" 2>&1 &
  node_pid=$!
}
# Seconds until $2's /readyz answers 200 (polled every 20 ms), counted from $1.
wait_ready() {
  local t0="$1" port="$2" pid="$3"
  for _ in $(seq 6000); do
    require_alive "the process on port ${port}" "${pid}"
    curl -fs "127.0.0.1:${port}/readyz" >/dev/null 2>&1 && { calc "$(now) - ${t0}"; return 0; }
    sleep 0.02
  done
  die "not ready after 120 s (port ${port})"
}
# Seconds (from $1) until the work queue on $2 is empty with nothing in flight, twice 0.5 s apart.
# A process that died answers no /metrics, which would read as an empty queue: it is checked.
wait_settled() {
  local t0="$1" port="$2" pid="$3" quiet=0
  for _ in $(seq 2400); do
    require_alive "the process on port ${port}" "${pid}"
    if [[ "$(metric "${port}" workqueue_depth)" == 0 && \
          "$(metric "${port}" workqueue_unfinished_work_seconds)" == 0 ]]; then
      ((++quiet >= 2)) && { calc "$(now) - ${t0} - 0.5"; return 0; }
    else
      quiet=0
    fi
    sleep 0.5
  done
  die "the work queue on port ${port} did not settle in 20 min"
}

# One start of both processes: ready and settled times, CPU used until settled, requests made.
declare -A R
run_phase() {
  local phase="$1" t0
  t0="$(now)"
  start_ctl
  start_node
  R[${phase}_ctl_ready]="$(wait_ready "${t0}" "${ctl_port}" "${ctl_pid}")"
  R[${phase}_node_ready]="$(wait_ready "${t0}" "${node_port}" "${node_pid}")"
  R[${phase}_ctl_settled]="$(wait_settled "${t0}" "${ctl_port}" "${ctl_pid}")"
  R[${phase}_node_settled]="$(wait_settled "${t0}" "${node_port}" "${node_pid}")"
  require_alive controller "${ctl_pid}"
  require_alive "node agent" "${node_pid}"
  R[${phase}_ctl_cpu]="$(calc "$(cpu_ticks "${ctl_pid}") / ${tck}")"
  R[${phase}_node_cpu]="$(calc "$(cpu_ticks "${node_pid}") / ${tck}")"
  R[${phase}_ctl_gets]="$(metric "${ctl_port}" rest_client_requests_total 'method="GET"')"
  R[${phase}_node_gets]="$(metric "${node_port}" rest_client_requests_total 'method="GET"')"
  # Writes: every request but GET (gets and lists) and WATCH.
  R[${phase}_ctl_writes]="$(( $(metric "${ctl_port}" rest_client_requests_total) - R[${phase}_ctl_gets] - $(metric "${ctl_port}" rest_client_requests_total 'method="WATCH"') ))"
  R[${phase}_node_writes]="$(( $(metric "${node_port}" rest_client_requests_total) - R[${phase}_node_gets] - $(metric "${node_port}" rest_client_requests_total 'method="WATCH"') ))"
}

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "stasis $(git -C "${REPO_ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown), kube-apiserver ${KUBERNETES_VERSION}, etcd ${ETCD_VERSION}, on the same machine"
"${build}/tests/bench_fleet" populate --kubeconfig "${KUBECONFIG}" --namespace "${ns}" --node "${node}" \
  --actors "${actors}" --workers "${workers}" --threads "${threads}"
list_line="$("${build}/tests/bench_fleet" list --kubeconfig "${KUBECONFIG}" --repeat 3)"
echo "${list_line}" | head -1
list_s="$(echo "${list_line}" | sed -n 's/^RESULT list_s=//p')"
listed="$(echo "${list_line}" | sed -n 's/^baseline: paged LIST of \([0-9]*\) actors + \([0-9]*\) workers.*/\1 \2/p')"
[[ "${listed}" == "${actors} ${workers}" ]] || refuse "the baseline LIST saw '${listed}' actors and workers, not ${actors} ${workers}"

run_phase first
# Both saw the whole fleet: fewer objects would flatter every figure. The controller counts its
# actors by status in a gauge set every 5 s; the agent counts its workers, and reconciled each actor.
seen_actors=0
for _ in $(seq 60); do
  seen_actors="$(metric "${ctl_port}" stasis_actors)"
  ((seen_actors >= actors)) && break
  sleep 0.5
done
((seen_actors == actors)) || refuse "the controller counts ${seen_actors} actors, not ${actors}"
seen_workers="$(metric "${node_port}" stasis_workers)"
((seen_workers == workers)) || refuse "the node agent counts ${seen_workers} workers, not ${workers}"
node_reconciles="$(metric "${node_port}" controller_runtime_reconcile_total)"
((node_reconciles >= actors)) || refuse "the node agent reconciled ${node_reconciles} times, fewer than the ${actors} actors"
# Idle: both settled; CPU over the window as a share of one core.
c0="$(cpu_ticks "${ctl_pid}")" n0="$(cpu_ticks "${node_pid}")"
sleep "${idle_s}"
# Both alive through the window: a dead one reads as 0 % CPU and 0 MB.
require_alive controller "${ctl_pid}"
require_alive "node agent" "${node_pid}"
idle_ctl="$(calc "100 * ($(cpu_ticks "${ctl_pid}") - ${c0}) / ${tck} / ${idle_s}")"
idle_node="$(calc "100 * ($(cpu_ticks "${node_pid}") - ${n0}) / ${tck} / ${idle_s}")"
hwm_ctl="$(kb "${ctl_pid}" VmHWM)" hwm_node="$(kb "${node_pid}" VmHWM)"
rss_ctl="$(kb "${ctl_pid}" VmRSS)" rss_node="$(kb "${node_pid}" VmRSS)"
stop_process "${ctl_pid}"; ctl_pid=""
stop_process "${node_pid}"; node_pid=""

# A full resync: both restarted on the same fleet (everything listed and reconciled again).
run_phase resync
require_alive controller "${ctl_pid}"
require_alive "node agent" "${node_pid}"
hwm2_ctl="$(kb "${ctl_pid}" VmHWM)" hwm2_node="$(kb "${node_pid}" VmHWM)"

ratio() { calc "$1 / $2"; }
echo
echo "fleet: ${actors} suspended actors pinned to ${node}, ${workers} free workers"
printf '%-58s %12s %12s\n' "figure" "controller" "node agent"
printf '%-58s %12s %12s\n' "peak RSS (VmHWM), first start, MB" "$(mb "${hwm_ctl}")" "$(mb "${hwm_node}")"
printf '%-58s %12s %12s\n' "RSS when idle, MB" "$(mb "${rss_ctl}")" "$(mb "${rss_node}")"
printf '%-58s %12s %12s\n' "initial sync (start → /readyz 200), s" "${R[first_ctl_ready]}" "${R[first_node_ready]}"
printf '%-58s %12s %12s\n' "  ÷ the API server's paged LIST (${list_s} s)" \
  "$(ratio "${R[first_ctl_ready]}" "${list_s}")" "$(ratio "${R[first_node_ready]}" "${list_s}")"
printf '%-58s %12s %12s\n' "first reconcile of every actor done (queue empty), s" "${R[first_ctl_settled]}" "${R[first_node_settled]}"
printf '%-58s %12s %12s\n' "CPU from start to settled, s" "${R[first_ctl_cpu]}" "${R[first_node_cpu]}"
printf '%-58s %12s %12s\n' "API requests until settled: GET+LIST / writes" \
  "${R[first_ctl_gets]}/${R[first_ctl_writes]}" "${R[first_node_gets]}/${R[first_node_writes]}"
printf '%-58s %12s %12s\n' "idle CPU over ${idle_s} s, % of a core" "${idle_ctl}" "${idle_node}"
printf '%-58s %12s %12s\n' "full resync (restart): ready, s" "${R[resync_ctl_ready]}" "${R[resync_node_ready]}"
printf '%-58s %12s %12s\n' "full resync: settled, s" "${R[resync_ctl_settled]}" "${R[resync_node_settled]}"
printf '%-58s %12s %12s\n' "full resync: CPU, s" "${R[resync_ctl_cpu]}" "${R[resync_node_cpu]}"
printf '%-58s %12s %12s\n' "full resync: API requests GET+LIST / writes" \
  "${R[resync_ctl_gets]}/${R[resync_ctl_writes]}" "${R[resync_node_gets]}/${R[resync_node_writes]}"
printf '%-58s %12s %12s\n' "full resync: peak RSS, MB" "$(mb "${hwm2_ctl}")" "$(mb "${hwm2_node}")"
for v in hwm_ctl hwm_node rss_ctl rss_node hwm2_ctl hwm2_node; do require_positive "${v} (kB)" "${!v}"; done
for v in first_ctl_ready first_node_ready first_ctl_settled first_node_settled; do require_number "${v}" "${R[${v}]}"; done
require_positive "the paged LIST (s)" "${list_s}"
max_hwm=$(( hwm_ctl > hwm_node ? hwm_ctl : hwm_node ))
max_ready="$(max_of "${R[first_ctl_ready]}" "${R[first_node_ready]}")"
echo "target peak RSS < 200 MB: $(verdict "${max_hwm}" '<' $((200 * 1024))) ($(mb "${max_hwm}") MB)"
echo "target synced < 10 s: $(verdict "${max_ready}" '<' 10) (${max_ready} s)"
result="RESULT actors=${actors} workers=${workers} list_s=${list_s} ctl_rss_mb=$(mb "${hwm_ctl}") node_rss_mb=$(mb "${hwm_node}")"
result+=" ctl_ready_s=${R[first_ctl_ready]} node_ready_s=${R[first_node_ready]}"
result+=" ctl_settled_s=${R[first_ctl_settled]} node_settled_s=${R[first_node_settled]}"
result+=" ctl_idle_pct=${idle_ctl} node_idle_pct=${idle_node}"
result+=" ctl_resync_s=${R[resync_ctl_settled]} node_resync_s=${R[resync_node_settled]}"
result+=" ctl_resync_cpu_s=${R[resync_ctl_cpu]} node_resync_cpu_s=${R[resync_node_cpu]}"
echo "${result}"
