#!/usr/bin/env bash
# Fleet benchmark: many node agents and one `stasis controller` on one real kube-apiserver and
# etcd, by simulation (docs/scaling.md). A program that prints figures and writes a CSV, not a
# timed test.
#
#   hack/bench/fleet.sh [--nodes 1000] [--workers-per-node 8] [--actors 100000] [--run 10000]
#                       [--dead 50] [--heartbeat-lease 40] [--threads 16] [--csv FILE] [--keep]
#
# The nodes are bench_fleet_sim processes (tests/bench/fleet_sim.cc): each node the production
# node agent (its informers, Workers, heartbeat Lease and status writes) over the no-op runtime
# driver, many to a process; the last --dead nodes in a process of their own. The controller is
# the real `stasis controller`, its own process.
#
#   1. at rest: --actors suspended actors spread over the nodes (bench_fleet populate); etcd's
#      database size; the controller started on them: ready (its caches synced) and settled (its
#      queue empty), against the API server's own paged LIST of the same objects; then the
#      fleet started; peak RSS of the controller, the API server and etcd, and the fleet's
#      memory per node;
#   2. a burst: --run unpinned actors asked to run at once; the binder places them (as many as
#      there are free workers): actors bound per second, and the time until every placed one is
#      RUNNING; against the API server's own ceiling for the binder's two writes per actor
#      (bench_fleet bind-ceiling, --threads clients, on actors of its own, in the same run);
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

nodes=1000 per_node=8 actors=100000 run=10000 dead=50 lease=40 threads=16 csv="" keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --nodes) nodes="$2"; shift 2 ;;
    --workers-per-node) per_node="$2"; shift 2 ;;
    --actors) actors="$2"; shift 2 ;;
    --run) run="$2"; shift 2 ;;
    --dead) dead="$2"; shift 2 ;;
    --heartbeat-lease) lease="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --csv) csv="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
((dead < nodes)) || die "--dead (${dead}) must be fewer than --nodes (${nodes})"

bench_build stasis bench_fleet bench_fleet_sim
"${HACK_DIR}/build-control-plane.sh" >/dev/null
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"

work="$(mktemp -d /tmp/stasis-bench-fleet.XXXXXX)"
export STASIS_CONTROL_PLANE_DIR="${work}/control-plane"
csv="${csv:-${work}/fleet.csv}"
ctl_pid="" live_pid="" dead_pid=""
teardown() {
  local rc=$?
  set +e
  stop_process "${ctl_pid}"; stop_process "${live_pid}"; stop_process "${dead_pid}"
  bench_teardown "${work}" "${keep}"
  exit "${rc}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

bench_control_plane_up stasis-system fleet fleet-burst fleet-ceiling
cp_dir="${STASIS_CONTROL_PLANE_DIR}"
api_pid="$(cat "${cp_dir}/kube-apiserver.pid")" etcd_pid="$(cat "${cp_dir}/etcd.pid")"
mkdir -p "${work}/bundles/noop/rootfs" && echo '{}' >"${work}/bundles/noop/config.json"
bundle="${work}/bundles/noop"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
ctl_port="$(free_port)"
now() { date +%s.%N; }
calc() { printf '%.2f' "$(echo "scale=4; $*" | bc)"; }
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
mb() { echo "scale=0; $1 / 1024" | bc; }
metric() { curl -fs "127.0.0.1:$1/metrics" | awk -v m="$2" -v f="${3:-}" \
  'index($0, m) == 1 && (f == "" || index($0, f)) && substr($0, length(m) + 1, 1) ~ /[{ ]/ {s += $NF} END {printf "%d", s}'; }
echo "scenario,figure,value,unit" >"${csv}"
record() { echo "$1,$2,$3,$4" >>"${csv}"; printf '  %-64s %12s %s\n' "$2" "$3" "$4"; }
# etcd's database file: what it holds on disk (its backend quota counts this).
etcd_db_bytes() { stat -c %s "$(find "${cp_dir}" -path '*member/snap/db' | head -1)"; }

start_fleet() {  # start_fleet FIRST COUNT LOG: one bench_fleet_sim process, its pid in fleet_pid
  "${build}/tests/bench_fleet_sim" --kubeconfig "${KUBECONFIG}" --root "${work}/nodes" --bundle-root "${work}/bundles" \
    --first "$1" --nodes "$2" --workers-per-node "${per_node}" --heartbeat-lease "${lease}" \
    --start-per-second 100 >>"${work}/$3.log" 2>&1 &
  fleet_pid=$!
}
# count_workers NODE_REGEX [PHASE]: how many Workers of the matching nodes there are (in PHASE).
count_workers() {
  kubectl get workers -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.phase}{"\n"}{end}' 2>/dev/null \
    | awk -v re="$1" -v phase="$2" '$1 ~ re && (phase == "" || $2 == phase) { n++ } END { print n + 0 }'
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
echo "fleet: ${nodes} nodes × ${per_node} workers, ${actors} actors at rest, a burst of ${run}, ${dead} nodes lost"

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
  --metrics-addr "127.0.0.1:${ctl_port}" ${STASIS_FLEET_CONTROLLER_FLAGS:-} >>"${work}/controller.log" 2>&1 &
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
t0="$(now)"
"${build}/tests/bench_fleet" populate --kubeconfig "${KUBECONFIG}" --namespace fleet-burst --nodes "${nodes}" \
  --actors "${run}" --threads "${threads}" --bundle "${bundle}" --desired Running --unpinned 1 --prefix burst | sed 's/^/  /'
created_s="$(calc "$(now) - ${t0}")"
bound_s="" deadline=$((SECONDS + 1200))
while ((SECONDS < deadline)); do
  b="$(count_status bound)"
  [[ -z "${bound_s}" ]] && ((b >= placed)) && bound_s="$(calc "$(now) - ${t0}")"
  [[ -n "${bound_s}" && "$(count_status STATUS_RUNNING)" -ge "${placed}" ]] && break
  require_alive controller "${ctl_pid}"
  sleep 1
done
running_s="$(calc "$(now) - ${t0}")"
[[ -n "${bound_s}" ]] || refuse "only $(count_status bound) of ${placed} actors were bound in 20 min"
record 2 "created (${run} actors, ${threads} clients)" "${created_s}" s
record 2 "every placeable actor bound" "${bound_s}" s
record 2 "binding throughput" "$(calc "${placed} / ${bound_s}")" "actors/s"
record 2 "every placed actor RUNNING" "${running_s}" s
ceiling="$("${build}/tests/bench_fleet" bind-ceiling --kubeconfig "${KUBECONFIG}" --namespace fleet-ceiling \
  --actors "${placed}" --threads "${threads}" | sed -n 's/^RESULT bind_ceiling_per_s=\([0-9.]*\).*/\1/p')"
require_positive "the bind ceiling" "${ceiling}"
record 2 "  the API server's ceiling for the binder's writes (${threads} clients)" "${ceiling}" "binds/s"
bind_ratio="$(calc "${placed} / ${bound_s} / ${ceiling}")"
record 2 "binding throughput ÷ that ceiling" "${bind_ratio}" ratio

# ---- 3. node loss ----------------------------------------------------------------------------
doomed_re="^fleet-node-($(seq -f '%04g' $((nodes - dead)) $((nodes - 1)) | paste -sd'|'))\$"
on_doomed() {
  kubectl get actors -n fleet-burst -o jsonpath='{range .items[*]}{.status.nodeName} {.status.status} {.status.conditions[?(@.type=="Stuck")].reason}{"\n"}{end}' 2>/dev/null \
    | awk -v re="${doomed_re}" -v want="$1" '$1 ~ re && (want == "all" || $3 == want) { n++ } END { print n + 0 }'
}
doomed_actors="$(on_doomed all)"
echo "scenario 3: ${dead} nodes lost at once, running ${doomed_actors} actors"
t0="$(now)"
kill -KILL "${dead_pid}"; wait "${dead_pid}" 2>/dev/null || true; dead_pid=""
cleaned_s="" freed_s="" deadline=$((SECONDS + lease + 300))
while ((SECONDS < deadline)); do
  [[ -z "${cleaned_s}" && "$(on_doomed NodeLost)" -ge "${doomed_actors}" ]] && cleaned_s="$(calc "$(now) - ${t0}")"
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
worst="$(echo "if (${cleaned_s} > ${freed_s}) ${cleaned_s} else ${freed_s}" | bc)"
echo "target controller peak RSS < 1 GiB: $(verdict "$(kb "${ctl_pid}" VmHWM)" '<' $((1024 * 1024)))"
echo "target initial sync < 60 s: $(verdict "${ready_s}" '<' 60) (${ready_s} s)"
echo "target binding ≥ 0.7 of the API server's ceiling: $(verdict "${bind_ratio}" '>=' 0.7) (${bind_ratio})"
echo "target lost nodes cleaned within the lease + 30 s: $(verdict "${worst}" '<=' $((lease + 30))) (${worst} s)"
echo "CSV: ${csv}"
echo "RESULT nodes=${nodes} actors=${actors} ctl_ready_s=${ready_s} ctl_settled_s=${settled_s} ctl_hwm_kb=$(kb "${ctl_pid}" VmHWM) api_hwm_kb=$(kb "${api_pid}" VmHWM) bound_per_s=$(calc "${placed} / ${bound_s}") running_s=${running_s} lost_cleaned_s=${cleaned_s} lost_freed_s=${freed_s}"
