#!/usr/bin/env bash
# The README's first command. Today it installs the dependencies, builds stasis, brings up
# the local control plane (a real kube-apiserver and etcd) and prints how to use it with
# kubectl; the node agent and controller join it as their issues land.
#
#   hack/demo.sh          bring everything up and leave it running
#   hack/demo.sh --once   bring it up, check it answers, tear it down (CI)
#   hack/demo.sh --down   tear it down
source "$(dirname "$0")/lib.sh"

mode="${1:-}"
export STASIS_CONTROL_PLANE_DIR="${STASIS_CONTROL_PLANE_DIR:-/tmp/stasis-demo}"
if [[ "${mode}" == "--down" ]]; then
  "${HACK_DIR}/control-plane.sh" down
  exit 0
fi
[[ $(id -u) == 0 ]] || die "run as root: stasis drives runsc sandboxes"

"${HACK_DIR}/install-deps.sh"
cmake -S "${REPO_ROOT}" -B "${REPO_ROOT}/build" -G Ninja -DSTASIS_BUILD_TESTS=OFF >/dev/null
cmake --build "${REPO_ROOT}/build"
"${HACK_DIR}/runsc.sh" >/dev/null
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"
"${HACK_DIR}/control-plane.sh" up >/dev/null
export KUBECONFIG="${STASIS_CONTROL_PLANE_DIR}/kubeconfig"

if [[ -d "${REPO_ROOT}/manifests/crd" ]] && compgen -G "${REPO_ROOT}/manifests/crd/*.yaml" >/dev/null; then
  kubectl apply -f "${REPO_ROOT}/manifests/crd/" >/dev/null
  kubectl wait --for condition=established --timeout=60s crd --all >/dev/null
fi

kubectl get --raw /readyz >/dev/null || die "the API server does not answer"
"${REPO_ROOT}/build/stasis" --version >/dev/null || die "build/stasis does not run"

if [[ "${mode}" == "--once" ]]; then
  kubectl api-resources --api-group=stasis.dev
  "${HACK_DIR}/control-plane.sh" down
  log "demo checks passed"
  exit 0
fi

cat <<MSG

The local control plane is up (kube-apiserver ${KUBERNETES_VERSION}, etcd ${ETCD_VERSION}).

  export KUBECONFIG=${KUBECONFIG}
  kubectl get --raw /version
  kubectl api-resources --api-group=stasis.dev
  kubectl apply -f manifests/samples/

Tear it down with: hack/demo.sh --down
MSG
