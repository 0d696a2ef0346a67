#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules once per machine, cached by version
# outside the repo, and prints their paths (kube-apiserver, then etcd).
source "$(dirname "$0")/lib.sh"

k8s_dir="${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"
etcd_dir="${STASIS_CACHE}/bin/etcd-${ETCD_VERSION}"
staging_version="v0${KUBERNETES_VERSION#v1}"

staging_replaces() {
  # k8s.io/kubernetes refers to its staging modules as v0.0.0 => ./staging/...; a module
  # consumer must replace each with the published v0.X.Y.
  k8s_mod="$(curl -fsS "${GO_PROXY_BASE}/k8s.io/kubernetes/@v/${KUBERNETES_VERSION}.mod")" \
    || die "cannot read k8s.io/kubernetes ${KUBERNETES_VERSION} go.mod from ${GO_PROXY_BASE}"
  awk '/=> .\/staging\//{print "replace " $1 " => " $1 " '"${staging_version}"'"}' <<<"${k8s_mod}" \
    | grep -v -E 'sample-(cli-plugin|controller) '
}

if [[ ! -x "${k8s_dir}/kube-apiserver" ]]; then
  replaces="$(staging_replaces)"
  GO_MODULE_FILE="module stasis.dev/build/kube-apiserver
go 1.26
require k8s.io/kubernetes ${KUBERNETES_VERSION}
${replaces}"
  go_build_cached "${k8s_dir}/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver \
    "-X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"${KUBERNETES_VERSION}")"
fi

if [[ ! -x "${etcd_dir}/etcd" ]]; then
  GO_MODULE_FILE="module stasis.dev/build/etcd
go 1.26
require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}"
  go_build_cached "${etcd_dir}/etcd" go.etcd.io/etcd/server/v3 \
    "-X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD_VERSION}"
fi

# kubectl comes with the machine; build the matching one only where it is missing.
if ! command -v kubectl >/dev/null && [[ ! -x "${k8s_dir}/kubectl" ]]; then
  replaces="$(staging_replaces)"
  GO_MODULE_FILE="module stasis.dev/build/kubectl
go 1.26
require k8s.io/kubernetes ${KUBERNETES_VERSION}
${replaces:-}"
  go_build_cached "${k8s_dir}/kubectl" k8s.io/kubernetes/cmd/kubectl
fi

echo "${k8s_dir}/kube-apiserver"
echo "${etcd_dir}/etcd"
