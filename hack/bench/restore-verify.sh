#!/usr/bin/env bash
# What verifying a committed snapshot's checksums costs a restore: builds bench_restore_verify
# in the non-sanitized build/ directory and runs it on a snapshot of --mb MiB (default 1024)
# in a directory on the disk (default under /var/tmp: not a tmpfs, so that the cold rows evict
# for real). It prints verify (SnapshotStore::CheckForRestore of the committed snapshot: every
# chunk's sha256, on every CPU) against a plain read of the same bytes in the same run, page
# cache warm and cold (pages evicted per file with posix_fadvise; no global drop_caches), as
# medians and a ratio. Nothing is left behind.
#
#   hack/bench/restore-verify.sh [--mb N] [--rounds N] [--dir DIR]
source "$(dirname "$0")/../lib.sh"

mb=1024 rounds=5 dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mb) mb="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
build="${REPO_ROOT}/build"
cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
cmake --build "${build}" --target bench_restore_verify -j2 >/dev/null
work="${dir:-$(mktemp -d /var/tmp/stasis-bench-verify.XXXXXX)}"
trap 'rm -rf "${work}"' EXIT
log "snapshot of ${mb} MiB under ${work} ($(df -T "$(dirname "${work}")" | awk 'NR==2{print $2}'))"
"${build}/tests/bench_restore_verify" --mb "${mb}" --rounds "${rounds}" --dir "${work}/snap"
