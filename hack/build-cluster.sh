#!/usr/bin/env bash
# Builds what a one-node cluster needs beyond hack/build-control-plane.sh's etcd and
# kube-apiserver, once per machine, cached by version outside the repo:
#   - kubelet, kube-scheduler, kube-controller-manager, kube-proxy from the k8s.io/kubernetes
#     module (KUBERNETES_VERSION);
#   - containerd, its runc shim and ctr from the github.com/containerd/containerd/v2 module
#     (CONTAINERD_VERSION): Debian 12's containerd 1.6 predates the CRI API v1 only kubelets;
#   - the pause image's binary, compiled from the pause.c that the same Kubernetes module
#     carries (build/pause/linux), statically, as upstream builds it.
# runc and the CNI plugins are Debian's (hack/install-deps.sh). Prints nothing; the binaries are
# where hack/cluster.sh looks (its k8s_dir and containerd_dir).
source "$(dirname "$0")/lib.sh"

"${HACK_DIR}/build-control-plane.sh" >/dev/null

k8s_dir="${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"
containerd_dir="${STASIS_CACHE}/bin/containerd-${CONTAINERD_VERSION}"

replaces=""
for component in kubelet kube-scheduler kube-controller-manager kube-proxy; do
  [[ -x "${k8s_dir}/${component}" ]] && continue
  [[ -n "${replaces}" ]] || replaces="$(k8s_staging_replaces)"
  GO_MODULE_FILE="module stasis.dev/build/${component}
go 1.26
require k8s.io/kubernetes ${KUBERNETES_VERSION}
${replaces}"
  go_build_cached "${k8s_dir}/${component}" "k8s.io/kubernetes/cmd/${component}" \
    "$(k8s_version_ldflags)"
done

for component in containerd containerd-shim-runc-v2 ctr; do
  GO_MODULE_FILE="module stasis.dev/build/${component}
go 1.26
require github.com/containerd/containerd/v2 ${CONTAINERD_VERSION}"
  go_build_cached "${containerd_dir}/${component}" "github.com/containerd/containerd/v2/cmd/${component}" \
    "-X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION}"
done

pause="${k8s_dir}/pause"
if [[ ! -x "${pause}" ]]; then
  # The module is in Go's cache after the builds above (go_build_cached fetched it).
  src="$(go env GOMODCACHE)/k8s.io/kubernetes@${KUBERNETES_VERSION}/build/pause/linux/pause.c"
  [[ -f "${src}" ]] || die "no pause.c at ${src}"
  gcc -Os -Wall -Werror -static -DVERSION="${PAUSE_VERSION}" -o "${pause}.tmp" "${src}"
  mv "${pause}.tmp" "${pause}"
fi
