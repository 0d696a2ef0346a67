#!/usr/bin/env bash
# The controller-runtime benchmark of issue 3 (a program, not a timed test): an informer over
# 10,000 Actors on a real kube-apiserver — initial sync time and peak RSS, watch events/s
# against the writers' own rate, and work-queue adds/s with a no-op reconcile. Figures and
# targets are printed; docs/benchmarks.md ("Controller runtime") records a run.
#
#   hack/bench/informer-scale.sh [--objects 10000] [--patches 5000] [--queue-keys 100000]
#                                [--create-threads 8] [--patch-threads 4] [--workers 4]
#
# Builds bench_informer_scale in the non-sanitized build directory (${STASIS_BENCH_BUILD_DIR:-build}),
# brings up its own control plane in a temporary directory and takes it down at exit.
source "$(dirname "$0")/../lib.sh"

objects=10000 patches=5000 queue_keys=100000 create_threads=8 patch_threads=4 workers=4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --objects) objects="$2"; shift 2 ;;
    --patches) patches="$2"; shift 2 ;;
    --queue-keys) queue_keys="$2"; shift 2 ;;
    --create-threads) create_threads="$2"; shift 2 ;;
    --patch-threads) patch_threads="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    *) die "unknown argument: $1" ;;
  esac
done

build_dir="${STASIS_BENCH_BUILD_DIR:-${REPO_ROOT}/build}"
if [[ ! -f "${build_dir}/build.ninja" ]]; then
  cmake -S "${REPO_ROOT}" -B "${build_dir}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
fi
# Sanitizers would measure themselves, not the code.
grep -q '^STASIS_SANITIZE:BOOL=ON' "${build_dir}/CMakeCache.txt" \
  && die "${build_dir} is a sanitized build; set STASIS_BENCH_BUILD_DIR to a non-sanitized one"
cmake --build "${build_dir}" --target bench_informer_scale -j"${STASIS_BUILD_JOBS:-2}" >/dev/null \
  || die "building bench_informer_scale failed"
bench="${build_dir}/tests/bench_informer_scale"

export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"
cp_dir="$(mktemp -d /tmp/stasis-bench-cp-XXXXXX)"
trap '"${HACK_DIR}/control-plane.sh" down --dir "${cp_dir}" >/dev/null 2>&1 || true; rm -rf "${cp_dir}"' EXIT
"${HACK_DIR}/control-plane.sh" up --dir "${cp_dir}" >/dev/null
export KUBECONFIG="${cp_dir}/kubeconfig"
ns=bench

kubectl apply -f "${REPO_ROOT}/manifests/crd/" >/dev/null
kubectl wait --for condition=established --timeout=60s crd/actors.stasis.dev >/dev/null
kubectl create namespace "${ns}" >/dev/null
# Established is not yet served by every handler: wait until a list succeeds.
for _ in $(seq 100); do kubectl get actors -n "${ns}" >/dev/null 2>&1 && break; sleep 0.2; done

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "kube-apiserver ${KUBERNETES_VERSION}, etcd ${ETCD_VERSION}, on the same machine"
"${bench}" create --kubeconfig "${KUBECONFIG}" --namespace "${ns}" --count "${objects}" \
  --threads "${create_threads}"
"${bench}" run --kubeconfig "${KUBECONFIG}" --namespace "${ns}" --expect "${objects}" \
  --patches "${patches}" --patch-threads "${patch_threads}" --queue-keys "${queue_keys}" \
  --workers "${workers}"
