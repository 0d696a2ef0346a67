#!/usr/bin/env bash
# Packs what the fleet benchmarks (hack/bench/fleet.sh, hack/bench/transitions.sh) need on a
# machine with more cores and no compiler or network (the device tool's machines: 16 cores),
# as one archive, .gpu-carry/fleet/fleet.tar.xz, under the device tool's 64 MiB:
#
#   cache/bin/kubernetes-<v>/{kube-apiserver,kubectl}, cache/bin/etcd-<v>/etcd
#                                 hack/control-plane.sh's cache layout
#   build/stasis, build/tests/{bench_fleet,bench_fleet_sim,bench_node_noop,bench_transitions}
#                                 a Release build, each a wrapper that sets LD_LIBRARY_PATH for
#                                 itself only (kubectl, openssl and python3 keep the machine's)
#   build/real/                   the executables themselves
#   lib/                          their shared libraries beyond glibc
#   glibc-version                 the oldest glibc that runs them (this machine's)
#
# There: hack/bench/fleet-from-bundle.sh ARCHIVE fleet.sh|transitions.sh [ARGS…].
#
#   hack/fleet-bundle.sh [BUILD_DIR]   (default build-gpu: a Release build with the benchmarks)
source "$(dirname "$0")/lib.sh"

build_dir="${1:-${REPO_ROOT}/build-gpu}"
out_dir="${REPO_ROOT}/.gpu-carry/fleet"
archive="${out_dir}/fleet.tar.xz"
tests=(bench_fleet bench_fleet_sim bench_node_noop bench_transitions)

mapfile -t cp_bins < <("${HACK_DIR}/build-control-plane.sh")
kubectl="$(command -v kubectl || true)"
[[ -n "${kubectl}" ]] || kubectl="${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}/kubectl"
[[ -x "${kubectl}" ]] || die "no kubectl (hack/build-control-plane.sh builds one where the machine has none)"
cmake -S "${REPO_ROOT}" -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTASIS_SANITIZE=OFF \
  -DSTASIS_BUILD_TESTS=ON >/dev/null
grep -q '^CMAKE_BUILD_TYPE:STRING=Release' "${build_dir}/CMakeCache.txt" || die "${build_dir} is not a Release build"
cmake --build "${build_dir}" --target stasis "${tests[@]}"

stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
k8s="cache/bin/kubernetes-${KUBERNETES_VERSION}"
mkdir -p "${stage}/${k8s}" "${stage}/cache/bin/etcd-${ETCD_VERSION}" "${stage}/build/real" \
  "${stage}/build/tests" "${stage}/lib"
strip -o "${stage}/${k8s}/kube-apiserver" "${cp_bins[0]}"
strip -o "${stage}/cache/bin/etcd-${ETCD_VERSION}/etcd" "${cp_bins[1]}"
strip -o "${stage}/${k8s}/kubectl" "$(readlink -f "${kubectl}")"

# wrap NAME RELATIVE_PATH: build/RELATIVE_PATH runs build/real/NAME with lib/ first. `exec`
# keeps the process id, which the benchmarks read /proc by.
wrap() {
  cat >"${stage}/build/$2" <<EOF
#!/bin/sh
here="\$(cd "\$(dirname "\$0")" && pwd)"
root="\${here%/build*}"
LD_LIBRARY_PATH="\${root}/lib\${LD_LIBRARY_PATH:+:\${LD_LIBRARY_PATH}}" exec "\${root}/build/real/$1" "\$@"
EOF
  chmod +x "${stage}/build/$2"
}
strip -o "${stage}/build/real/stasis" "${build_dir}/stasis"
wrap stasis stasis
bins=("${build_dir}/stasis")
for t in "${tests[@]}"; do
  strip -o "${stage}/build/real/${t}" "${build_dir}/tests/${t}"
  wrap "${t}" "tests/${t}"
  bins+=("${build_dir}/tests/${t}")
done
copy_shared_libs "${stage}/lib" "${bins[@]}"
ldd --version | sed -n 1p | awk '{ print $NF }' >"${stage}/glibc-version"

pack_carry_archive "${stage}" "${archive}"
echo "${archive}"
