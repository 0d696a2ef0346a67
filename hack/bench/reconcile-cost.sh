#!/usr/bin/env bash
# Instruction counts of single reconciles (issue 10), stable across machine noise so that
# regressions show: bench_reconcile_cost under `valgrind --tool=callgrind`, against a real
# kube-apiserver, with the benchmark-only no-op runtime driver. Each case's median over --repeat
# runs is compared with hack/bench/callgrind-baseline.txt; a case more than --threshold percent
# above its baseline is flagged REGRESSION (exit 1 with --check).
#
#   hack/bench/reconcile-cost.sh [--repeat 5] [--threshold 10] [--check] [--update-baseline] [--keep]
#
# What is counted: every instruction of the bench process between the start and the stop of
# the reconcile (all its threads: the reconcile logic, JSON, the HTTP client and TLS), not the
# API server's. The server's answers differ a little from run to run (timestamps, resource
# versions, uids), which moves the counts by well under a percent. Last line: RESULT k=v ….
source "$(dirname "$0")/../lib.sh"
source "${HACK_DIR}/bench/lib.sh"

repeat=5 threshold=10 check=0 update=0 keep=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --threshold) threshold="$2"; shift 2 ;;
    --check) check=1; shift ;;
    --update-baseline) update=1; shift ;;
    --keep) keep=1; shift ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
command -v valgrind >/dev/null || die "valgrind is not installed (apt-get install valgrind)"
baseline="${HACK_DIR}/bench/callgrind-baseline.txt"

build="${STASIS_BENCH_BUILD_DIR:-${REPO_ROOT}/build}"
[[ -f "${build}/build.ninja" ]] || cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
grep -q '^STASIS_SANITIZE:BOOL=ON' "${build}/CMakeCache.txt" \
  && die "${build} is a sanitized build; set STASIS_BENCH_BUILD_DIR to a non-sanitized one"
# The baseline counts an optimized build (RelWithDebInfo, the default); -O0 counts ~4x more.
grep -q -E '^CMAKE_BUILD_TYPE:STRING=(Debug|MinSizeRel)$' "${build}/CMakeCache.txt" \
  && die "${build} is not a RelWithDebInfo/Release build: its counts do not compare with the baseline"
cmake --build "${build}" --target bench_reconcile_cost -j"${STASIS_BUILD_JOBS:-2}" >/dev/null \
  || die "building bench_reconcile_cost failed"
"${HACK_DIR}/build-control-plane.sh" >/dev/null
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"

work="$(mktemp -d /tmp/stasis-bench-cost.XXXXXX)"
export STASIS_CONTROL_PLANE_DIR="${work}/control-plane"
teardown() {
  local rc=$?
  set +e
  bench_teardown "${work}" "${keep}"
  exit "${rc}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

bench_control_plane_up cost
mkdir -p "${work}/bundle/rootfs" "${work}/node" && echo '{}' >"${work}/bundle/config.json"

valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="${work}/cg.out" \
  "${build}/tests/bench_reconcile_cost" --kubeconfig "${KUBECONFIG}" --namespace cost \
  --root "${work}/node" --bundle "${work}/bundle" --repeat "${repeat}" 2>"${work}/valgrind.log" \
  || { tail -20 "${work}/valgrind.log" >&2; die "bench_reconcile_cost failed under valgrind"; }

# One line per dump: case instructions.
for f in "${work}"/cg.out.*; do
  awk '/^desc: Trigger: Client Request: / {name = $NF} /^(summary|totals):/ {n = $2} END {if (name != "") print name, n}' "${f}"
done | sort >"${work}/counts.txt"
cases="$(cut -d' ' -f1 "${work}/counts.txt" | sort -u)"
# No verdict from a partial run: every case of the baseline, each measured --repeat times (a
# missing case would otherwise count as no regression). --update-baseline writes what ran.
((update)) || require_cases "$(awk '!/^#/ && NF {print $1}' "${baseline}")" "$(echo ${cases})"
for c in ${cases}; do
  n="$(awk -v c="${c}" '$1 == c && $2 ~ /^[0-9]+$/' "${work}/counts.txt" | wc -l)"
  ((n == repeat)) || refuse "case ${c}: ${n} of ${repeat} measurements"
done
declare -A median
printf '%-18s %14s %14s %14s %14s %9s\n' "case" "median" "min" "max" "baseline" "vs base"
regressions=0 result="RESULT"
for c in ${cases}; do
  mapfile -t v < <(awk -v c="${c}" '$1 == c {print $2}' "${work}/counts.txt" | sort -n)
  m="${v[$(( ${#v[@]} / 2 ))]}"
  median[${c}]="${m}"
  base="$(awk -v c="${c}" '$1 == c {print $2}' "${baseline}" 2>/dev/null || true)"
  verdict="-"
  if [[ -n "${base}" ]]; then
    pct="$(printf '%.1f' "$(echo "scale=3; 100 * (${m} - ${base}) / ${base}" | bc)")"
    verdict="${pct}%"
    if [[ "$(echo "${pct} > ${threshold}" | bc)" == 1 ]]; then verdict+=" REGRESSION"; regressions=$((regressions + 1)); fi
  fi
  printf '%-18s %14s %14s %14s %14s %9s\n' "${c}" "${m}" "${v[0]}" "${v[-1]}" "${base:--}" "${verdict}"
  result+=" ${c}_ir=${m}"
done
if ((update)); then
  {
    echo "# Instructions (callgrind Ir) of one reconcile, median of ${repeat}: hack/bench/reconcile-cost.sh"
    echo "# --update-baseline wrote this at $(git -C "${REPO_ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown)."
    for c in ${cases}; do echo "${c} ${median[${c}]}"; done
  } >"${baseline}"
  log "baseline written: ${baseline}"
fi
echo "${result} regressions=${regressions}"
((check && regressions > 0)) && exit 1
exit 0
