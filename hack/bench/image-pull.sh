#!/usr/bin/env bash
# Actors from images, measured: builds bench_image_pull in the non-sanitized build/ directory and
# runs it as root (runsc, a registry of its own on loopback). It prints, interleaved in one run,
# a cold pull and unpack by the node agent's image cache against `skopeo copy` + `umoci unpack`
# of the same image (target: ratio ≤ 1.1), and a sandbox's start from the cached image against
# a start from an ordinary bundle (target: ≤ 50 ms more at p50). Nothing is left behind.
#
#   hack/bench/image-pull.sh [--mb N] [--rounds N] [--warm-rounds N]
source "$(dirname "$0")/../lib.sh"

args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mb | --rounds | --warm-rounds) args+=("$1" "$2"); shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
for tool in skopeo umoci docker-registry htpasswd; do
  command -v "${tool}" >/dev/null || die "${tool} missing: run hack/install-deps.sh"
done
build="${REPO_ROOT}/build"
cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
cmake --build "${build}" --target bench_image_pull -j2 >/dev/null
"${build}/tests/bench_image_pull" "${args[@]}"
