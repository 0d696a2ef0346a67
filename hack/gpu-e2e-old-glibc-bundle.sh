#!/usr/bin/env bash
# Prepares what STASIS_GPU_E2E_MODE=old-glibc of hack/gpu-e2e.sh needs beyond the main archive
# (hack/gpu-e2e-bundle.sh): .gpu-carry/old-glibc/old-glibc.tar.xz, holding
#
#   rootfs/   a Debian 11 minbase root (hack/debian-rootfs.sh bullseye; glibc 2.31), without its
#             documentation, manual pages, locales and apt lists
#   w/workload_driver_api            tests/gpu/workload_driver_api.c, compiled inside a Debian 11
#                                    root with gcc (bullseye+gcc+libc6-dev), so it asks for
#                                    nothing newer than glibc 2.31 has
#   w/stasis-cuda-checkpoint-dynamic the ordinary helper of BUILD_DIR, for the contrast
#
#   hack/gpu-e2e-old-glibc-bundle.sh [BUILD_DIR]   (default build-gpu)
source "$(dirname "$0")/lib.sh"

build_dir="${1:-${REPO_ROOT}/build-gpu}"
out_dir="${REPO_ROOT}/.gpu-carry/old-glibc"
[[ -x "${build_dir}/stasis-cuda-checkpoint" ]] || die "no ${build_dir}/stasis-cuda-checkpoint: run hack/gpu-e2e-bundle.sh first"
root="$("${HACK_DIR}/debian-rootfs.sh" bullseye)"
compiler_root="$("${HACK_DIR}/debian-rootfs.sh" bullseye gcc libc6-dev)"

stage="$(mktemp -d)"
trap 'rm -rf "${stage}"' EXIT
mkdir -p "${stage}/w" "${stage}/src"
cp "${REPO_ROOT}/tests/gpu/workload_driver_api.c" "${stage}/src/"
# The compiler root's /mnt is where the sources and the output are bound, in a mount namespace
# of this command only: nothing is written into the cached root.
unshare --mount --fork sh -c 'mount --bind "$1" "$2/mnt" && chroot "$2" gcc -std=c11 -O2 -Wall -Wextra -Werror \
    -o /mnt/w/workload_driver_api /mnt/src/workload_driver_api.c -ldl' sh "${stage}" "${compiler_root}" \
  || die "building the workload in the Debian 11 root failed"
newest=$(objdump -T "${stage}/w/workload_driver_api" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
[[ "$(printf '%s\n%s\n' "${newest#GLIBC_}" 2.31 | sort -V | tail -1)" == 2.31 ]] \
  || die "the workload asks for ${newest}, newer than Debian 11's glibc 2.31"
cp "${build_dir}/stasis-cuda-checkpoint" "${stage}/w/stasis-cuda-checkpoint-dynamic"

mkdir -p "${out_dir}"
tar -C "${root}" --exclude=./usr/share/doc --exclude=./usr/share/man --exclude=./usr/share/locale \
    --exclude=./var/cache/apt --exclude=./var/lib/apt/lists --transform 's,^\./,rootfs/,' -cf "${stage}/a.tar" .
tar -C "${stage}" -rf "${stage}/a.tar" w
xz -T0 -6 -c "${stage}/a.tar" > "${out_dir}/old-glibc.tar.xz.tmp"
mv "${out_dir}/old-glibc.tar.xz.tmp" "${out_dir}/old-glibc.tar.xz"
log "wrote ${out_dir}/old-glibc.tar.xz ($(du -h "${out_dir}/old-glibc.tar.xz" | cut -f1); the workload needs ${newest} at most)"
