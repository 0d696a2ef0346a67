#!/usr/bin/env bash
# Benchmark of issue 11: a micro-VM actor's snapshot (QEMU driver: stop + migrate to a file +
# quit; restore: -incoming + cont) against a gVisor actor's (runsc checkpoint / restore), both
# through their RuntimeDriver, interleaved in the same run. Prints p50/p90 of checkpoint time,
# restore time and image size per side, and the micro-VM / gVisor ratios.
#
#   hack/bench/microvm-snapshot.sh [--cycles N] [--accel tcg|kvm] [--build-dir DIR] [--out FILE]
#
#   --cycles N      measured checkpoint/restore cycles of each side (default 10)
#   --accel A       QEMU accelerator (default tcg: see docs/microvm.md, "KVM and TCG")
#   --build-dir DIR where to build (default build/, non-sanitized)
#   --out FILE      also write the report there (and FILE.csv: every cycle)
source "$(dirname "$0")/../lib.sh"

cycles=10 accel=tcg build="${REPO_ROOT}/build" out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cycles) cycles="$2"; shift 2 ;;
    --accel) accel="$2"; shift 2 ;;
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
[[ $(id -u) == 0 ]] || die "run as root: the benchmark drives runsc sandboxes"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 is missing (hack/install-deps.sh)"

cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
cmake --build "${build}" --target bench_microvm_snapshot -j2
export STASIS_RUNSC="$("${HACK_DIR}/runsc.sh")"
export STASIS_MICROVM_BUNDLE="$("${HACK_DIR}/make-microvm-bundle.sh")"

csv="$(mktemp /tmp/stasis-microvm-bench.XXXXXX.csv)"
trap 'rm -f "${csv}"' EXIT
log "commit $(git -C "${REPO_ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown)"
"${build}/tests/bench_microvm_snapshot" --cycles "${cycles}" --accel "${accel}" --csv "${csv}" \
  | tee "${csv}.report"
if [[ -n "${out}" ]]; then
  cp "${csv}.report" "${out}"
  cp "${csv}" "${out}.csv"
fi
rm -f "${csv}.report"
