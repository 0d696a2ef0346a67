#!/usr/bin/env bash
# Template start benchmark: the time from `kubectl create` to RUNNING, seen from the client, of
# actors started three ways, interleaved in one run, one start at a time (latency, not
# throughput): booted from a bundle, restored from a template's golden snapshot, and claimed
# from a warm pool. Beside them, the baselines the targets name, measured in the same rounds:
# the node agent's resume of a local pause snapshot, and a direct `runsc restore` of the same
# golden image (RunscDriver, no API, no agent). A program that prints figures, not a timed test.
#
#   hack/bench/template-start.sh [--actors 100] [--warm 3] [--keep]
#
#   --actors N  rounds; each round starts one actor of each kind (default 100)
#   --warm N    warm-tpl's spec.warm: members kept restored and paused (default 3)
#   --keep      keep the work directory (logs, store) under /tmp
#
# One control plane, one `stasis node` (8 workers) and one `stasis controller`, sharing one
# directory snapshot store; a busybox counter bundle (hack/make-bundle.sh). Two ActorTemplates
# of it, no readiness gate and no hooks: warm-tpl (spec.warm = --warm) and cold-tpl (no pool).
# Once both goldens are recorded and the pool is full, tests/bench/template_start.cc runs the
# rounds (its header has the details). Per kind, p50 and p99 (nearest rank) in ms:
#   boot    an actor of the bundle pinned to the node: create POST → status RUNNING
#   golden  an actor with templateRef cold-tpl: the controller fills it in from the golden, the
#           agent verifies the committed image and restores it: POST → RUNNING
#   warm    an actor with templateRef warm-tpl: a claim of a paused member, the agent's resume of
#           its node-local snapshot: POST → RUNNING (hits only; misses are counted apart)
#   resume  a paused actor of the bundle: desiredState PATCH → RUNNING (then paused, unmeasured)
#   direct  runsc restore -detach of cold-tpl's golden image from the store into a sandbox of its
#           own, until runsc returns
# Each created actor is deleted, and the deletion seen, before the next start; after a warm
# claim the pool is let refill first, so no measured start runs beside a refill. Also printed:
# the agent's own part of each kind of first start (stasis_actor_start_seconds over the rounds:
# from its decision to start the actor to the RUNNING write; a pool member's own start counts as refill, not golden).
# Targets:
#   golden_ratio        = golden p50 ÷ direct p50        (≤ 1.1)
#   warm_over_resume_ms = warm p50 − resume p50          (≤ 100 ms)
# No verdict is printed — the script says why and exits 1 — when a start did not reach RUNNING
# within 60 s, a request failed, or the agent or the controller died. Root is needed (runsc).
# Everything is torn down at exit. Last line: RESULT k=v ….
source "$(dirname "$0")/../lib.sh"
source "${HACK_DIR}/bench/lib.sh"

actors=100 warm=3 keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --actors) actors="${2:-}"; shift $(($# >= 2 ? 2 : 1)) ;;
    --warm) warm="${2:-}"; shift $(($# >= 2 ? 2 : 1)) ;;
    --keep) keep=1; shift ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
[[ "${actors}" =~ ^[1-9][0-9]*$ ]] || die "--actors must be a positive number, not '${actors}'"
[[ "${warm}" =~ ^[1-9][0-9]*$ ]] && ((warm <= 64)) || die "--warm must be 1 to 64, not '${warm}'"
[[ $(id -u) == 0 ]] || die "run as root: the benchmark drives runsc sandboxes"

build="${STASIS_BENCH_BUILD_DIR:-${REPO_ROOT}/build}"
[[ -f "${build}/build.ninja" ]] || cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
grep -q '^STASIS_SANITIZE:BOOL=ON' "${build}/CMakeCache.txt" \
  && die "${build} is a sanitized build; set STASIS_BENCH_BUILD_DIR to a non-sanitized one"
cmake --build "${build}" --target stasis bench_template_start -j"${STASIS_BUILD_JOBS:-2}" >/dev/null \
  || die "building the benchmark failed"
"${HACK_DIR}/build-control-plane.sh" >/dev/null
RUNSC="$("${HACK_DIR}/runsc.sh")"
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"

work="$(mktemp -d /tmp/stasis-bench-template-start.XXXXXX)"
export STASIS_CONTROL_PLANE_DIR="${work}/control-plane"
agent_pid="" controller_pid=""
teardown() {
  local rc=$?
  set +e
  stop_process "${controller_pid}"
  stop_process "${agent_pid}"
  bench_teardown "${work}" "${keep}" "${work}"/node/run/*/ "${work}"/direct/run/*/
  exit "${rc}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

ns=bench node=bench-node
bench_control_plane_up stasis-system "${ns}"
"${HACK_DIR}/make-bundle.sh" "${work}/bundles/counter" >/dev/null
mkdir -p "${work}/store" "${work}/direct"

# wait_ready NAME PID PORT: until the process answers /readyz on PORT (it may not die meanwhile).
wait_ready() {
  for _ in $(seq 600); do
    require_alive "$1" "$2"
    curl -fs --max-time 2 "127.0.0.1:$3/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "$1 is not ready after 60 s (log: ${work}/$1.log)"
}
agent_port="$(free_port)"
"${build}/stasis" node --kubeconfig "${KUBECONFIG}" --node-name "${node}" --runsc "${RUNSC}" --root "${work}/node" \
  --bundle-root "${work}/bundles" --snapshot-store "${work}/store" --workers 8 --shutdown-grace 5 \
  --metrics-addr "127.0.0.1:${agent_port}" >"${work}/agent.log" 2>&1 &
agent_pid=$!
wait_ready agent "${agent_pid}" "${agent_port}"
controller_port="$(free_port)"
"${build}/stasis" controller --kubeconfig "${KUBECONFIG}" --leader-elect=false --snapshot-store "${work}/store" \
  --metrics-addr "127.0.0.1:${controller_port}" >"${work}/controller.log" 2>&1 &
controller_pid=$!
wait_ready controller "${controller_pid}" "${controller_port}"

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg); stasis $(git -C "${REPO_ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown); ${actors} rounds, warm pool ${warm}"
# The program's own deadlines bound each step (60 s a start, 300 s a template wait); this one
# bounds the whole run should something hang outside them.
timeout --signal=TERM $((900 + actors * 120)) "${build}/tests/bench_template_start" \
  --kubeconfig "${KUBECONFIG}" --namespace "${ns}" --node "${node}" --bundle "${work}/bundles/counter" \
  --store "${work}/store" --runsc "${RUNSC}" --direct-root "${work}/direct" \
  --agent-metrics "http://127.0.0.1:${agent_port}/metrics" --actors "${actors}" --warm "${warm}" --timeout-s 60 \
  | tee "${work}/bench.txt" | grep -v '^RESULT ' || {
  log "agent log tail:"; tail -20 "${work}/agent.log" >&2
  log "controller log tail:"; tail -20 "${work}/controller.log" >&2
  refuse "the benchmark program failed (above); logs in ${work} with --keep"
}
require_alive "the node agent" "${agent_pid}"
require_alive "the controller" "${controller_pid}"
out="$(cat "${work}/bench.txt")"

result() { sed -n "s/^RESULT .*[ ]$1=\([^ ]*\).*/\1/p" <<<"${out}"; }
for k in boot golden warm resume direct; do
  require_positive "${k} p50" "$(result "${k}_p50_ms")"
  require_positive "${k} p99" "$(result "${k}_p99_ms")"
done
ratio="$(result golden_ratio)" over="$(result warm_over_resume_ms)"
require_positive golden_ratio "${ratio}"
require_number warm_over_resume_ms "${over}"
golden_verdict="$(verdict "${ratio}" '<=' 1.1)"
warm_verdict="$(verdict "${over}" '<=' 100)"
echo
echo "target golden p50 <= 1.1 x direct runsc restore p50: ${golden_verdict} (${ratio})"
echo "target warm p50 <= resume p50 + 100 ms: ${warm_verdict} (${over} ms)"
echo "$(grep '^RESULT ' <<<"${out}") golden_target=${golden_verdict} warm_target=${warm_verdict}"
