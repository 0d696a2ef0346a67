#!/usr/bin/env bash
# Prepares what hack/gpu-e2e.sh needs on the GPU machine, which has no network and nothing
# installed but the NVIDIA driver and the CUDA toolkit: one archive,
# .gpu-carry/stasis-gpu-e2e.tar.xz (the device tool carries at most 64 MiB), holding
#
#   cache/bin/kubernetes-<v>/kube-apiserver, cache/bin/etcd-<v>/etcd   (hack/control-plane.sh's
#                                                                      cache layout)
#   bin/kubectl, bin/runsc (hack/runsc.sh's build), bin/stasis,
#         cuda-checkpoint/ (the self-contained helper: the helper and lib/, its own glibc),
#         bin/bench_pause_overhead (issue 5's benchmark, for STASIS_GPU_E2E_MODE=pause-overhead)
#   lib/  the shared libraries `stasis` needs beyond glibc (cpprestsdk, prometheus-cpp, spdlog,
#         fmt, yaml-cpp, OpenSSL, libstdc++ …): the GPU machine may run another distribution;
#         its glibc must be at least this machine's (checked there).
#
# Go binaries are stripped, everything is compressed with xz -9. Run here (the developer
# machine) before the device call; then name .gpu-carry in the call's carry.
#
#   hack/gpu-e2e-bundle.sh [BUILD_DIR]   (default build-gpu: a plain Release build of stasis)
#
# STASIS_GPU_BUNDLE_BENCH=0 leaves the benchmark out (a few MiB): the device tool's 64 MiB
# count the repository's own files too, and only STASIS_GPU_E2E_MODE=pause-overhead runs it.
source "$(dirname "$0")/lib.sh"

build_dir="${1:-${REPO_ROOT}/build-gpu}"
out_dir="${REPO_ROOT}/.gpu-carry"
archive="${out_dir}/stasis-gpu-e2e.tar.xz"

"${HACK_DIR}/install-deps.sh"
mapfile -t cp_bins < <("${HACK_DIR}/build-control-plane.sh")
runsc="$("${HACK_DIR}/runsc.sh")"
kubectl="$(command -v kubectl || true)"
[[ -n "${kubectl}" ]] || kubectl="${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}/kubectl"
[[ -x "${kubectl}" ]] || die "no kubectl (hack/build-control-plane.sh builds one where the machine has none)"

# Tests on only for the benchmark's target (no test is built or carried).
cmake -S "${REPO_ROOT}" -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTASIS_SANITIZE=OFF \
  -DSTASIS_BUILD_TESTS=ON >/dev/null
cmake --build "${build_dir}" --target stasis stasis-cuda-checkpoint-private bench_pause_overhead

stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
mkdir -p "${stage}/bin" "${stage}/lib" \
  "${stage}/cache/bin/kubernetes-${KUBERNETES_VERSION}" "${stage}/cache/bin/etcd-${ETCD_VERSION}"
strip -o "${stage}/cache/bin/kubernetes-${KUBERNETES_VERSION}/kube-apiserver" "${cp_bins[0]}"
strip -o "${stage}/cache/bin/etcd-${ETCD_VERSION}/etcd" "${cp_bins[1]}"
strip -o "${stage}/bin/kubectl" "$(readlink -f "${kubectl}")"
strip -o "${stage}/bin/runsc" "${runsc}"
strip -o "${stage}/bin/stasis" "${build_dir}/stasis"
mkdir -p "${stage}/cuda-checkpoint"
cp -R "${build_dir}/cuda-checkpoint/lib" "${stage}/cuda-checkpoint/"
strip -o "${stage}/cuda-checkpoint/stasis-cuda-checkpoint" "${build_dir}/cuda-checkpoint/stasis-cuda-checkpoint"
bins=("${build_dir}/stasis")
if [[ "${STASIS_GPU_BUNDLE_BENCH:-1}" != 0 ]]; then
  strip -o "${stage}/bin/bench_pause_overhead" "${build_dir}/tests/bench_pause_overhead"
  bins+=("${build_dir}/tests/bench_pause_overhead")
fi

# stasis's libraries (the GPU machine may run another distribution).
copy_shared_libs "${stage}/lib" "${bins[@]}"
ldd --version | sed -n 1p | awk '{ print $NF }' > "${stage}/glibc-version"
"${stage}/bin/runsc" --version | sed -n 1p > "${stage}/runsc-version"

pack_carry_archive "${stage}" "${archive}"
echo "${archive}"
