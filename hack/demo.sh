#!/usr/bin/env bash
# The README's first command: on a fresh machine, as root, it installs the dependencies, builds
# stasis, brings up a real local control plane (kube-apiserver + etcd), starts
# `stasis controller` and `stasis node` with one worker and the pinned runsc, and walks through
# the story with real sandboxes (the actors are not pinned: the controller binds them):
#
#   actor A running → A suspended (snapshot committed, worker freed) → actor B runs on that
#   worker → B paused → A resumed, its counter continued → sizes and latencies from /metrics.
#
#   hack/demo.sh          run the story and leave everything running
#   hack/demo.sh --once   run the story, check every step, tear down; non-zero on any failure
#   hack/demo.sh --down   tear down what a previous run left running
#
# STASIS_DEMO_BUILD_DIR: the CMake build directory whose `stasis` runs (default build/). CI
# names build-image/, the Release build hack/test.sh just made for the image, so that the
# demo does not compile stasis a second time.
source "$(dirname "$0")/lib.sh"

mode="${1:-}"
demo="${STASIS_DEMO_DIR:-/tmp/stasis-demo}"
build="${STASIS_DEMO_BUILD_DIR:-${REPO_ROOT}/build}"
export STASIS_CONTROL_PLANE_DIR="${demo}/control-plane"

teardown() {
  for p in node controller; do
    [[ -f "${demo}/${p}.pid" ]] || continue
    kill -TERM "$(cat "${demo}/${p}.pid")" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$(cat "${demo}/${p}.pid")" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$(cat "${demo}/${p}.pid")" 2>/dev/null || true
    rm -f "${demo}/${p}.pid"
  done
  local runsc
  runsc="$(cat "${demo}/runsc.path" 2>/dev/null || true)"
  if [[ -n "${runsc}" && -d "${demo}/node/run" ]]; then
    for root in "${demo}"/node/run/*/; do
      [[ -d "${root}" ]] || continue
      "${runsc}" -root "${root}" delete -force "$(basename "${root}")" >/dev/null 2>&1 || true
      umount -l "${root}/null-netns" 2>/dev/null || true
    done
  fi
  "${HACK_DIR}/control-plane.sh" down >/dev/null 2>&1 || true
}

if [[ "${mode}" == "--down" ]]; then
  teardown
  rm -rf "${demo}"
  log "demo torn down"
  exit 0
fi
[[ $(id -u) == 0 ]] || die "run as root: stasis drives runsc sandboxes"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

"${HACK_DIR}/install-deps.sh"
cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja >/dev/null
cmake --build "${build}" --target stasis
RUNSC="$("${HACK_DIR}/runsc.sh")"
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"

teardown
rm -rf "${demo}"
mkdir -p "${demo}"
echo "${RUNSC}" > "${demo}/runsc.path"
if [[ "${mode}" == "--once" ]]; then trap teardown EXIT; fi

step "control plane"
"${HACK_DIR}/control-plane.sh" up >/dev/null
export KUBECONFIG="${STASIS_CONTROL_PLANE_DIR}/kubeconfig"
kubectl apply -f "${REPO_ROOT}/manifests/crd/" >/dev/null
kubectl wait --for condition=established --timeout=60s crd/actors.stasis.dev crd/actortemplates.stasis.dev crd/workers.stasis.dev >/dev/null
kubectl create namespace stasis-system >/dev/null

step "stasis controller (leader-elected)"
"${build}/stasis" controller --metrics-addr 127.0.0.1:19091 >"${demo}/controller.log" 2>&1 &
echo $! > "${demo}/controller.pid"

step "stasis node (one worker, runsc $("${RUNSC}" --version | head -1 | awk '{print $3}'))"
"${HACK_DIR}/make-bundle.sh" "${demo}/bundles/counter" >/dev/null
"${build}/stasis" node --node-name demo-node --runsc "${RUNSC}" --root "${demo}/node" \
  --snapshot-store "${demo}/store" --workers 1 --metrics-addr 127.0.0.1:19090 \
  --bundle-root "${demo}/bundles" >"${demo}/node.log" 2>&1 &
echo $! > "${demo}/node.pid"
for _ in $(seq 100); do curl -fs 127.0.0.1:19090/readyz >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs 127.0.0.1:19090/readyz >/dev/null || { tail -20 "${demo}/node.log" >&2; die "the node agent is not ready"; }
kubectl get workers

actor() {  # actor NAME DESIRED
  kubectl apply -f - >/dev/null <<YAML
apiVersion: stasis.dev/v1alpha1
kind: Actor
metadata: {name: $1, namespace: default}
spec:
  bundle: ${demo}/bundles/counter
  desiredState: $2
YAML
}
wait_status() {  # wait_status NAME STATUS
  for _ in $(seq 600); do
    [[ "$(kubectl get actor "$1" -o jsonpath='{.status.status}')" == "$2" ]] && return 0
    sleep 0.1
  done
  kubectl get actor "$1" -o yaml >&2
  tail -20 "${demo}/node.log" "${demo}/controller.log" >&2
  die "actor $1 did not reach $2"
}
counter() {  # counter NAME → the workload's counter, read inside its sandbox
  local id
  id="$(kubectl get actor "$1" -o jsonpath='{.status.sandboxID}')"  # the runsc id it runs under
  "${RUNSC}" -root "${demo}/node/run/${id}" exec "${id}" cat /tmp/counter
}

step "actor A: Running"
actor a Running
wait_status a STATUS_RUNNING
sleep 2
a_before="$(counter a)"
echo "A's counter: ${a_before}"

step "actor A: Suspended (checkpoint, commit to the store, worker freed)"
actor a Suspended
wait_status a STATUS_SUSPENDED
kubectl get actor a -o jsonpath='snapshot {.status.latestSnapshot.id}: {.status.latestSnapshot.sizeBytes} bytes at {.status.latestSnapshot.location}{"\n"}'
[[ "$(kubectl get worker demo-node-slot0 -o jsonpath='{.status.phase}')" == Free ]] || die "the worker was not freed"

step "actor B: Running on the freed worker"
actor b Running
wait_status b STATUS_RUNNING
kubectl get workers

step "actor B: Paused (snapshot kept on the node)"
actor b Paused
wait_status b STATUS_PAUSED

step "actor A: Running again, restored from its snapshot"
actor a Running
wait_status a STATUS_RUNNING
sleep 0.5
a_after="$(counter a)"
echo "A's counter: ${a_before} before the suspend, ${a_after} after the resume"
(( a_after >= a_before )) || die "A's counter restarted (${a_after} < ${a_before})"

step "kubectl get actors,workers"
kubectl get actors,workers

step "actors by status (controller, every 5 s) and snapshot sizes and latencies (node agent), from /metrics"
curl -fs 127.0.0.1:19091/metrics | awk '/^stasis_actors\{/ && $2 > 0 { print "  " $0 }'
# Series the agent pre-creates at zero (docs/metrics.md) are left out.
curl -fs 127.0.0.1:19090/metrics | awk '
  (/^stasis_snapshot_size_bytes_(sum|count)/ || /^stasis_snapshot_duration_seconds_(sum|count)/ ||
   /^stasis_snapshot_operations_total/) && $NF > 0 || /^stasis_workers/ { print "  " $0 }'

if [[ "${mode}" == "--once" ]]; then
  step "done: every step checked"
  exit 0
fi
cat <<MSG

Everything is still running:
  export KUBECONFIG=${KUBECONFIG}
  kubectl get actors,workers
  kubectl patch actor b --type merge -p '{"spec":{"desiredState":"Running"}}'   # B waits for a free worker
  kubectl get events --sort-by=.lastTimestamp
  curl -s 127.0.0.1:19090/metrics | grep ^stasis_
  tail -f ${demo}/node.log ${demo}/controller.log
Tear down with: hack/demo.sh --down
MSG
