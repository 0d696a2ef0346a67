#!/usr/bin/env bash
# Installs everything stasis needs on a fresh Debian 12 machine, from Debian's packages.
# Idempotent: packages already present are not reinstalled, and apt is only updated when
# something is missing. Go (for building kube-apiserver, etcd and runsc once) is expected on
# the machine; everything else comes from here.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config git ca-certificates curl xz-utils python3
  # libraries
  libcpprest-dev libboost-dev libssl-dev nlohmann-json3-dev prometheus-cpp-dev libspdlog-dev
  libfmt-dev libyaml-cpp-dev libgtest-dev libgmock-dev
  # Data snapshots are unpacked in process (snapshots/tar_extract.h)
  libarchive-dev
  # the test sandboxes' root filesystem (and the micro-VM test guest's initramfs)
  busybox-static
  # the micro-VM runtime (QEMU's microvm machine; docs/microvm.md)
  qemu-system-x86
  # a real Prometheus and promtool, for dashboards and alert rules; gnuplot for their plots
  prometheus gnuplot-nox
  # certificates for the local control plane
  openssl
  # arm64 cross compiler for the GPU helper
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross
  # hack/check-layout.sh: function extents from a real C/C++ parser run as a tool on the files
  # (a library such as libclang would need a compile database, i.e. a configured build, before
  # a check meant to fail fast), and jq to read its JSON
  universal-ctags jq
  # the S3 client of snapshots in object storage (snapshots/s3_http.cc: libcurl's own SigV4;
  # snapshots/s3_xml.cc: libexpat for S3's XML)
  libcurl4-openssl-dev libexpat1-dev
  # object-store chunks compressed before upload (snapshots/chunk_codec.cc)
  libzstd-dev
  # actors from OCI images: a real registry for the tests (hack/registry.sh, with htpasswd for
  # its basic auth), skopeo to push the tests' images to it, and skopeo + umoci as the
  # baseline the pull benchmark is measured against
  docker-registry apache2-utils skopeo umoci
  # the GPU helper's tests run it in roots of every C library: Debian 11 and 12 roots built
  # from the archive (hack/debian-rootfs.sh) and a musl root with a program built by musl-gcc
  mmdebstrap gpg musl-tools
  # the one-node cluster (hack/cluster.sh): the OCI runtime under containerd, the pods' network
  # (bridge, host-local, portmap), kube-proxy's iptables
  runc containernetworking-plugins iptables
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q "install ok installed" || missing+=("${p}")
done
if ((${#missing[@]})); then
  echo "[install-deps] installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "[install-deps] all packages present" >&2
fi

command -v go >/dev/null || { echo "[install-deps] ERROR: go is required (to build kube-apiserver, etcd, runsc once)" >&2; exit 1; }
# kubectl is on this kind of machine already; where it is not, hack/build-control-plane.sh
# builds it from the same k8s.io/kubernetes module and hack/kubectl.sh finds it.
