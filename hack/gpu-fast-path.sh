# shellcheck shell=bash
# Sourced by hack/gpu-runsc-proof.sh when STASIS_GPU_RUNSC_MODE=fast-path, once the bundle's
# rootfs exists: the fast snapshot path (libstasis-fastsnap.so preloaded into the workload, the
# helper staging through it; docs/gpu-fast-snapshot.md) against the plain path, on the same GPU
# in the same run. The library and the helper are built here from the checkout with cc, as the
# helper is for the other modes. For each size of STASIS_GPU_FAST_GIB (default "1 8"):
#
#   P1. sandbox fast-<N>: tests/gpu/workload.cu (the CUDA runtime API; cudaMalloc of N GiB)
#       with LD_PRELOAD=libstasis-fastsnap.so: `runsc checkpoint -cuda-checkpoint-path` (the
#       helper stages the device memory into the library's pinned arena, then the driver's
#       toggle), `runsc restore`, `runsc wait -restore` (the toggle back, then the unstage);
#       then the pattern verified in device memory and the ticks continued;
#   P2. sandbox plain-<N>: the same workload without the library, the same cycle;
#   P3. (first size only) sandbox graph-<N>: the workload with --graph 1 (each tick a CUDA
#       graph launch, the graph holding the addresses it was captured with), preloaded;
#   P4. (first size only) sandbox vmm-<N>: tests/gpu/fast_snapshot_probe.cu (the driver API's
#       VMM calls: cuMemAddressReserve/cuMemCreate/cuMemMap), preloaded, never staged by itself:
#       after the cycle, the same address and the pattern verified in place.
#
# What the library did (staged/unstaged bytes and ms, or a fallback and why) is read from the
# workload's log (and the helper's lines, where the sentries' debug logs keep them), the toggle
# and save times from the sentries' logs. Uses gpu-runsc-proof.sh's helpers.
# STASIS_GPU_FAST_P34=0 leaves P3 and P4 out (a large size alone in one call).
FAST_GIB="${STASIS_GPU_FAST_GIB:-1 8}"
FAST_P34="${STASIS_GPU_FAST_P34:-1}"
PATH_ROWS=()
HOST_LIB=/usr/lib/stasis/libstasis-fastsnap.so
SANDBOX_LIB=/opt/stasis/fastsnap/libstasis-fastsnap.so
# shellcheck source=gpu-runsc-cycle.sh
source "${REPO_ROOT}/hack/gpu-runsc-cycle.sh"

if [[ "${CPU_ONLY}" == 1 ]]; then
  check "P0. the fast path needs a GPU" 1 "STASIS_RUNSC_PROOF_CPU=1: nothing to measure"
  finish
fi
lib_src="${REPO_ROOT}/cmd/stasis-cuda-checkpoint"
(cd "${lib_src}" && cc -std=c11 -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden \
  -include fastsnap/glibc_versions.h -o "${WORK}/bin/libstasis-fastsnap.so" fastsnap/*.c \
  -Wl,--no-undefined -Wl,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0) > "${WORK}/build-fastsnap.log" 2>&1
lib_built=$?
nvcc -O2 -arch=sm_90 -o "${WORK}/bin/fast_snapshot_probe" "${REPO_ROOT}/tests/gpu/fast_snapshot_probe.cu" \
  -L"$(dirname "$(command -v nvcc)")/../lib64/stubs" -lcuda > "${WORK}/build-probe.log" 2>&1
probe_built=$?
nvcc -O2 -arch=sm_90 -o "${WORK}/bin/copy_bandwidth" "${REPO_ROOT}/tests/gpu/copy_bandwidth.cu" >> "${WORK}/build-probe.log" 2>&1
probe_built=$((probe_built || $?))
check "P0. libstasis-fastsnap.so (cc), the VMM probe and the copy benchmark (nvcc) build" "$((lib_built || probe_built))" \
  "$(tail -5 "${WORK}/build-fastsnap.log" "${WORK}/build-probe.log" | one_line)"
[[ ${lib_built} == 0 && ${probe_built} == 0 ]] || finish
[[ -e "${HOST_LIB}" ]] || MADE+=("${HOST_LIB}")
install -D -m 0644 "${WORK}/bin/libstasis-fastsnap.so" "${HOST_LIB}"
mkdir -p "${ROOTFS}/opt/stasis/fastsnap"
: > "${ROOTFS}${SANDBOX_LIB}"  # the mount point of the library's bind mount
PLAIN_ENV="${ENV}" PLAIN_MOUNTS="${MOUNTS}"
FAST_ENV="${ENV},\"LD_PRELOAD=${SANDBOX_LIB}\""
FAST_MOUNTS="${MOUNTS},
 {\"destination\":\"${SANDBOX_LIB}\",\"type\":\"bind\",\"source\":\"${HOST_LIB}\",\"options\":[\"bind\",\"ro\",\"nosuid\",\"nodev\"]}"

# helper_lines ID: what the helper said in the sandbox's sentry logs (stage, unstage, fallback).
# The library logs each request it served to the workload's stderr (libstasis-fastsnap: …);
# its lines about the runtime's lookups are ungated_names's.
helper_lines() {
  { grep -l "$1" "${WORK}"/dbg/*boot* 2>/dev/null | xargs -r grep -hoE 'fast-snapshot: [^"\\]*'
    wlog "$1" | grep '^libstasis-fastsnap' | grep -v ': cuGetProcAddress('; } | sort -u | one_line | head -c 400
}
# ungated_names ID: the entry points the runtime looked up that the library handed out behind a
# trampoline (a call takes the process to the plain path): what a newer table has to wrap.
ungated_names() {
  wlog "$1" | sed -n 's/^libstasis-fastsnap: cuGetProcAddress(\([^,]*\), version \([0-9]*\).*/\1@\2/p' |
    sort -u | tr '\n' ' '
}
# start_with ID GIB fast|plain COMMAND: a sandbox running COMMAND, its workload ready.
start_with() {
  if [[ "$3" == fast ]]; then ENV="${FAST_ENV}" MOUNTS="${FAST_MOUNTS}"; else ENV="${PLAIN_ENV}" MOUNTS="${PLAIN_MOUNTS}"; fi
  write_config "${WORK}/bundle-$1" "$2" "$4"
  ENV="${PLAIN_ENV}" MOUNTS="${PLAIN_MOUNTS}"
  rs "run-$1" 120 run -detach -bundle "${WORK}/bundle-$1" "$1"
  step "P. start $1" "$1"
  [[ ${RC} == 0 ]] && wait_ready "$1" 180
}
# workload_checks ID: after the cycle, the pattern in device memory and the ticks going on.
workload_checks() {
  local before
  before=$(last_tick "$1")
  verify "$1"
  [[ "${v}" == "verify ok"* ]] && wait_tick_above "$1" "${before:-0}" 30
}
end_sandbox() {
  rs "end-$1" 60 delete -force "$1"
  rm -rf "${WORK}/images/$1"
}
# run_path ID GIB fast|plain COMMAND LABEL
run_path() {
  CYCLE_ROW=""
  if ! start_with "$1" "$2" "$3" "$4"; then
    check "$5: ${2} GiB starts in runsc" 1 "$(wlog "$1" | tail -3 | one_line); ${ERR_TEXT}"
    return
  fi
  local ok=1
  cycle "$1" "$2" && workload_checks "$1" && ok=0
  check "$5: ${2} GiB checkpointed and restored, pattern verified, ticks continue" "${ok}" \
    "${CYCLE_ROW}; ${v:-}; ${CYCLE_CK_ERR:-}; helper: $(helper_lines "$1"); sentry: $(sentry_times "$1"); log: $(wlog "$1" | grep -vE '^tick' | tail -3 | one_line)"
  PATH_ROWS+=("| ${2} | $5 | ${CYCLE_ROW:-— | — | — | —} | $(helper_lines "$1") | $(sentry_times "$1") |")
  if [[ "$3" == fast && -z "${UNGATED_LISTED:-}" ]]; then
    UNGATED_LISTED=1
    FIGURES+=("- entry points the runtime looked up that the library does not gate (name@version; behind trampolines): $(ungated_names "$1")")
  fi
  end_sandbox "$1"
}

FIGURES+=("- fast-path mode, sizes ${FAST_GIB} GiB; pinned copy bandwidth in this run: $(timeout 120 "${WORK}/bin/copy_bandwidth" --gib 4 --reps 5 2>&1 | tail -1)")
first=1
for g in ${FAST_GIB}; do
  run_path "fast-${g}" "${g}" fast "exec /w/workload --gib ${g} --spin-ms 5000" "P1. fast path, runtime API"
  run_path "plain-${g}" "${g}" plain "exec /w/workload --gib ${g} --spin-ms 5000" "P2. plain path, runtime API"
  if [[ ${first} == 1 && ${FAST_P34} == 1 ]]; then
    run_path "graph-${g}" "${g}" fast "exec /w/workload --gib ${g} --spin-ms 5000 --graph 1" "P3. fast path, CUDA graph ticks"
    id="vmm-${g}"
    CYCLE_ROW=""
    if start_with "${id}" "${g}" fast "exec /w/fast_snapshot_probe --gib ${g}"; then
      cycle "${id}" "${g}"
      timeout 30 "${RUNSC}" "${FLAGS[@]}" kill "${id}" USR2 > /dev/null 2>&1
      sleep 2
      pc=$(wlog "${id}" | grep '^check' | tail -1)
      check "P4. fast path, VMM allocation (driver API): ${g} GiB at the same address, pattern verified" \
        "$([[ "${pc}" == *"same_va=yes"*"verify ok"* ]]; echo $?)" "${CYCLE_ROW}; ${pc}; helper: $(helper_lines "${id}")"
      PATH_ROWS+=("| ${g} | P4. fast path, VMM (driver API) | ${CYCLE_ROW:-— | — | — | —} | $(helper_lines "${id}") | $(sentry_times "${id}") |")
      end_sandbox "${id}"
    fi
    first=0
  fi
done

FIGURES+=("" "### The fast path against the plain path" "" \
  "runsc checkpoint, restore, wait -restore (s), image GiB; what the helper said; the sentries' toggle, save, load." "" \
  "| GiB | path | checkpoint s | restore s | wait -restore s | image GiB | helper | sentry: toggle, save, load |" \
  "|---|---|---|---|---|---|---|---|" "${PATH_ROWS[@]}")
finish
