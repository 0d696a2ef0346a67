#!/usr/bin/env bash
# Compressed snapshot transfers to a real S3-compatible store (SeaweedFS on loopback, started
# here by hack/object-store.sh in a temporary directory): a 1 GiB image of checkpoint-like
# content (tests/bench/object_store_compression.cc says what and why) put and fetched through
# ObjectStoreBackend with compression off, zstd at levels 1 and 3, and AES-256-GCM with and
# without zstd, each codec's one-core
# throughput measured on the same bytes, and the link speed above which compression costs more
# than it saves. Loopback moves bytes far faster than any real link, so its put/get times show
# the CPU cost, not what a slow link gains: the crossover line is the figure to act on.
# The store is stopped and everything removed at the end.
#
#   hack/bench/object-store-compression.sh [--mb N] [--rounds N] [--settings none,zstd:1,zstd:3,aes,zstd:1+aes]
source "$(dirname "$0")/../lib.sh"
source "${HACK_DIR}/bench/lib.sh"

mb=1024 rounds=1 settings=none,zstd:1,zstd:3,aes,zstd:1+aes
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --settings) settings="$2"; shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
build="${REPO_ROOT}/build"
cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
cmake --build "${build}" --target bench_object_store_compression -j2 >/dev/null
work="$(mktemp -d /var/tmp/stasis-bench-object-store-compression.XXXXXX)"
trap '"${HACK_DIR}/object-store.sh" down --dir "${work}/store" >/dev/null 2>&1 || true; rm -rf "${work}"' EXIT
eval "$("${HACK_DIR}/object-store.sh" up --dir "${work}/store")"
log "load: $(cut -d' ' -f1-3 /proc/loadavg); build type: $(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "${build}/CMakeCache.txt")"
"${build}/tests/bench_object_store_compression" --mb "${mb}" --rounds "${rounds}" --settings "${settings}" \
  --dir "${work}/bench"
