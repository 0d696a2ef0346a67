#!/usr/bin/env bash
# Builds kube-apiserver and etcd from their Go modules once per machine, cached by version
# outside the repo, and prints their paths (kube-apiserver, then etcd).
source "$(dirname "$0")/lib.sh"

k8s_dir="${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"
etcd_dir="${STASIS_CACHE}/bin/etcd-${ETCD_VERSION}"
if [[ ! -x "${k8s_dir}/kube-apiserver" ]]; then
  replaces="$(k8s_staging_replaces)"
  GO_MODULE_FILE="module stasis.dev/build/kube-apiserver
go 1.26
require k8s.io/kubernetes ${KUBERNETES_VERSION}
${replaces}"
  go_build_cached "${k8s_dir}/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver \
    "$(k8s_version_ldflags)"
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
  replaces="$(k8s_staging_replaces)"
  GO_MODULE_FILE="module stasis.dev/build/kubectl
go 1.26
require k8s.io/kubernetes ${KUBERNETES_VERSION}
${replaces:-}"
  go_build_cached "${k8s_dir}/kubectl" k8s.io/kubernetes/cmd/kubectl
fi

echo "${k8s_dir}/kube-apiserver"
echo "${etcd_dir}/etcd"
