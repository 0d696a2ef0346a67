#!/usr/bin/env bash
# Snapshot upload and download to a real S3-compatible store (SeaweedFS on loopback, started
# here by hack/object-store.sh in a temporary directory) against curl's own SigV4 client moving
# the same bytes to the same store, interleaved in one run (tests/bench/object_store_transfer.cc).
# Prints the medians, MB/s, the stasis/curl throughput ratios and the target verdicts (≥ 0.9).
# The store is stopped and everything removed at the end.
#
#   hack/bench/object-store.sh [--mb N] [--rounds N]
source "$(dirname "$0")/../lib.sh"
source "${HACK_DIR}/bench/lib.sh"

mb=1024 rounds=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
build="${REPO_ROOT}/build"
cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
cmake --build "${build}" --target bench_object_store_transfer -j2 >/dev/null
work="$(mktemp -d /var/tmp/stasis-bench-object-store.XXXXXX)"
trap '"${HACK_DIR}/object-store.sh" down --dir "${work}/store" >/dev/null 2>&1 || true; rm -rf "${work}"' EXIT
eval "$("${HACK_DIR}/object-store.sh" up --dir "${work}/store")"
log "load: $(cut -d' ' -f1-3 /proc/loadavg)"
report="$("${build}/tests/bench_object_store_transfer" --mb "${mb}" --rounds "${rounds}" --dir "${work}/bench")"
echo "${report}"
read -r up down < <(sed -n 's/^ratio stasis\/curl throughput: upload \([0-9.]*\), download \([0-9.]*\)$/\1 \2/p' <<<"${report}")
require_positive "upload ratio" "${up}"
require_positive "download ratio" "${down}"
echo "target upload ≥ 0.9 of curl: $(verdict "${up}" '>=' 0.9); download ≥ 0.9 of curl: $(verdict "${down}" '>=' 0.9)"
