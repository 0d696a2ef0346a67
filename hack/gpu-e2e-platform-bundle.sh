#!/usr/bin/env bash
# Prepares what STASIS_GPU_E2E_MODE=platform of hack/gpu-e2e.sh needs beyond the main archive
# (hack/gpu-e2e-bundle.sh): the services and tools that mode starts on the GPU machine, which
# has no network and none of them. One archive, .gpu-carry/platform/platform.tar.xz, holding
#
#   cache/bin/seaweedfs-<v>/weed   the S3-compatible store (hack/object-store.sh's cache layout,
#                                  hack/build-object-store.sh's build)
#   bin/docker-registry            Debian's registry (hack/registry.sh, STASIS_REGISTRY_BIN)
#   bin/umoci, bin/skopeo          build the workload's image there (as hack/image.sh builds
#                                  stasis's) and push it to the registry (as the tests do)
#   lib/                           skopeo's shared libraries beyond glibc
#   bin/bench_object_store_transfer  hack/bench/object-store.sh's program (stasis's libraries are
#                                  the main archive's), for the transfer benchmark there
#
# The main archive and this one together pass the device tool's 64 MiB: they travel in two
# calls (the machine keeps a copy made under build/ between calls while it stays warm).
#
#   hack/gpu-e2e-platform-bundle.sh [BUILD_DIR]   (default build: the benchmark's Release build)
source "$(dirname "$0")/lib.sh"

build_dir="${1:-${REPO_ROOT}/build}"
cmake -S "${REPO_ROOT}" -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTASIS_SANITIZE=OFF \
  -DSTASIS_BUILD_TESTS=ON >/dev/null
cmake --build "${build_dir}" --target bench_object_store_transfer

out_dir="${REPO_ROOT}/.gpu-carry/platform"
archive="${out_dir}/platform.tar.xz"
weed="$("${HACK_DIR}/build-object-store.sh")"
for tool in /usr/bin/docker-registry /usr/bin/umoci /usr/bin/skopeo; do
  [[ -x "${tool}" ]] || die "${tool} missing: run hack/install-deps.sh"
done

stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
mkdir -p "${stage}/bin" "${stage}/lib" "${stage}/cache/bin/seaweedfs-${SEAWEEDFS_VERSION}"
strip -o "${stage}/cache/bin/seaweedfs-${SEAWEEDFS_VERSION}/weed" "${weed}"
for tool in docker-registry umoci skopeo; do strip -o "${stage}/bin/${tool}" "/usr/bin/${tool}"; done
strip -o "${stage}/bin/bench_object_store_transfer" "${build_dir}/tests/bench_object_store_transfer"
# skopeo's libraries (glibc comes from the GPU machine, as for the main archive).
copy_shared_libs "${stage}/lib" /usr/bin/skopeo

pack_carry_archive "${stage}" "${archive}" 256MiB
echo "${archive}"
