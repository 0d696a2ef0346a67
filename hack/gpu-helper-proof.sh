#!/usr/bin/env bash
# The proof that stasis-cuda-checkpoint checkpoints and restores a real CUDA process. Runs ON
# a GPU machine (root, CUDA toolkit with nvcc, NVIDIA driver R570+, no network needed):
#
#   1. builds the helper with plain cc and the CUDA programs in tests/gpu/ with nvcc;
#   2. measures pinned host<->device copy bandwidth (the PCIe ceiling of this machine);
#   3. for each size N GiB (default 1 8 32): starts tests/gpu/workload.cu holding N GiB
#      with a known pattern and ticking every 50 ms, then `--toggle`s it to checkpointed
#      (timed; nvidia-smi must show ~0 GPU memory for it; its ticks must stop) and back
#      (timed; the pattern must verify; the ticks must continue from the device counter);
#   4. on the first size: `--action lock/checkpoint/restore/unlock`, `--get-restore-tid`,
#      an illegal transition, `--get-state` of a non-CUDA process, and `--timeout`: a lock
#      with 1 s against a 5 s kernel must exit 3 after ~1 s leaving the process running,
#      and a toggle with the default timeout must wait for the kernel and succeed;
#   5. writes a Markdown report and a log to $OUT (when set) or build/gpu-proof/.
#
# Exit status: 0 when every check passed. Never changes the GPU's settings.
# Env: STASIS_GPU_PROOF_SIZES="1 8 32" (GiB per run), STASIS_GPU_PROOF_CYCLES=1 (toggle
# round trips per size), STASIS_GPU_PROOF_HELPER_LIMIT_S=300.
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${REPO_ROOT}/build/gpu-proof"
RESULTS="${OUT:-${WORK}}"
SIZES="${STASIS_GPU_PROOF_SIZES:-1 8 32}"
CYCLES="${STASIS_GPU_PROOF_CYCLES:-1}"
# A last-resort guard so a hung driver call cannot eat the machine's lease. Killing a call
# mid-way can leave the driver out of sync (reference/cuda-checkpoint.md §7): acceptable on
# a throwaway test machine, never in production.
HELPER_LIMIT_S="${STASIS_GPU_PROOF_HELPER_LIMIT_S:-300}"
mkdir -p "${WORK}" "${RESULTS}"
LOG="${RESULTS}/gpu-helper-proof.log"
REPORT="${RESULTS}/gpu-helper-results.md"
: > "${LOG}"
exec > >(tee -a "${LOG}") 2>&1

say() { printf '[gpu-proof %s] %s\n' "$(date +%T)" "$*" >&2; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
gbps() { awk -v mib="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.2f", mib * 1048576 / 1e9 / s; else print "-" }'; }

CHECK_ROWS=()
FAILED=0
# check NAME OK(0|1) DETAIL
check() {
  local verdict=PASS
  if [[ "$2" != 0 ]]; then verdict=FAIL; FAILED=$((FAILED + 1)); fi
  CHECK_ROWS+=("| $1 | ${verdict} | $3 |")
  say "${verdict}: $1 — $3"
}

H="${WORK}/stasis-cuda-checkpoint"
# helper ARGS... : runs the helper; sets RC, OUT_TEXT (stdout), ERR_TEXT (stderr), DUR (s).
helper() {
  local t0 t1
  t0=$(now)
  timeout -s KILL "${HELPER_LIMIT_S}" "${H}" "$@" > "${WORK}/helper.out" 2> "${WORK}/helper.err"
  RC=$?
  t1=$(now)
  DUR=$(secs "${t0}" "${t1}")
  OUT_TEXT=$(cat "${WORK}/helper.out")
  ERR_TEXT=$(cat "${WORK}/helper.err")
  say "helper $* -> rc=${RC} in ${DUR}s out='${OUT_TEXT}' err='${ERR_TEXT}'"
}
# get_state PID: sets STATE (the word, or empty on failure) and DUR.
get_state() { helper --get-state --pid "$1"; STATE=${OUT_TEXT}; }

# GPU memory (MiB) nvidia-smi attributes to a pid; 0 when it lists no such process.
gpu_mib() {
  local v
  v=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null |
    awk -F', *' -v p="$1" '$1 == p { print $2 }')
  echo "${v:-0}"
}
gpu_used_total_mib() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
rss_gib() { awk '/VmRSS/ { printf "%.2f", $2 / 1048576 }' "/proc/$1/status" 2>/dev/null; }
last_tick() { grep '^tick ' "$1" | tail -1 | awk '{ print $2 }'; }
# The device counter printed 1, 2, 3, ... with no gap or reset: device memory came back intact.
ticks_consecutive() { grep '^tick ' "$1" | awk '$2 != NR { bad = 1 } END { exit bad }'; }
# verify_now PID LOG: asks the workload to verify its pattern; sets v to its answer line.
verify_now() {
  local before
  before=$(grep -c '^verify' "$2")
  kill -USR1 "$1"
  wait_count_above '^verify' "$2" "${before}" 60
  v=$(grep '^verify' "$2" | tail -1)
}
# stop_workload PID LOG: SIGTERM (clean exit after cudaFree), SIGKILL after 10 s.
stop_workload() {
  kill -TERM "$1" 2>/dev/null
  for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$1" 2>/dev/null; then kill -9 "$1"; fi
  wait "$1" 2>/dev/null
}
# wait_for REGEX FILE SECONDS
wait_for() {
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    grep -qE "$1" "$2" && return 0
    sleep 0.05
  done
  return 1
}
# wait_count_above REGEX FILE COUNT SECONDS: until more than COUNT lines match.
wait_count_above() {
  local deadline=$((SECONDS + $4))
  while ((SECONDS < deadline)); do
    (($(grep -cE "$1" "$2") > $3)) && return 0
    sleep 0.05
  done
  return 1
}
# wait_tick_above N FILE SECONDS
wait_tick_above() {
  local deadline=$((SECONDS + $3)) t
  while ((SECONDS < deadline)); do
    t=$(last_tick "$2")
    [[ -n "${t}" && "${t}" -gt "$1" ]] && return 0
    sleep 0.05
  done
  return 1
}

# ---- machine and toolchain ----------------------------------------------------------------
say "repo ${REPO_ROOT}; results ${RESULTS}; sizes ${SIZES}; cycles ${CYCLES}"
GPU_INFO=$(nvidia-smi --query-gpu=name,driver_version,memory.total,persistence_mode,pcie.link.gen.current,pcie.link.width.current --format=csv,noheader)
say "GPU: ${GPU_INFO}"
NVCC_VERSION=$(nvcc --version | grep -o 'release [0-9.]*' | head -1)
say "nvcc ${NVCC_VERSION}; kernel $(uname -r); $(nproc) CPUs"
# The helper finds libcuda.so.1 the way any program does; add the driver's usual folder in
# case this image keeps it out of the ld.so cache.
if ! ldconfig -p | grep -q 'libcuda.so.1 '; then
  export LD_LIBRARY_PATH="/usr/local/nvidia/lib64:/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
  say "libcuda.so.1 is not in the ld.so cache; LD_LIBRARY_PATH=${LD_LIBRARY_PATH}"
fi

# ---- build ----------------------------------------------------------------------------------
say "building"
cc -std=c11 -O2 -Wall -Wextra -Werror -o "${H}" "${REPO_ROOT}"/cmd/stasis-cuda-checkpoint/*.c -ldl \
  > "${WORK}/build-helper.log" 2>&1 &
b1=$!
nvcc -O2 -arch=sm_90 -o "${WORK}/workload" "${REPO_ROOT}/tests/gpu/workload.cu" \
  > "${WORK}/build-workload.log" 2>&1 &
b2=$!
nvcc -O2 -arch=sm_90 -o "${WORK}/copy_bandwidth" "${REPO_ROOT}/tests/gpu/copy_bandwidth.cu" \
  > "${WORK}/build-bandwidth.log" 2>&1 &
b3=$!
build_ok=0
for b in ${b1} ${b2} ${b3}; do wait "${b}" || build_ok=1; done
cat "${WORK}"/build-*.log
check "helper and CUDA programs build on the GPU machine" "${build_ok}" "cc (C11) + nvcc -arch=sm_90"
if [[ "${build_ok}" != 0 ]]; then exit 1; fi

helper --help
check "--help" "$([[ ${RC} == 0 && "${OUT_TEXT}" == *"--toggle --pid"* ]]; echo $?)" "exit ${RC}"

# ---- pinned copy bandwidth --------------------------------------------------------------------
BW=$("${WORK}/copy_bandwidth" --gib 4 --reps 5)
say "bandwidth: ${BW}"
bw_field() { echo "${BW}" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k { print $2 }'; }
H2D=$(bw_field h2d_median)
D2H=$(bw_field d2h_median)

# ---- a process that is not a CUDA process -----------------------------------------------------
sleep 60 &
PLAIN_PID=$!
helper --get-state --pid "${PLAIN_PID}"
check "--get-state of a process without CUDA fails (runsc then skips it)" \
  "$([[ ${RC} != 0 ]]; echo $?)" "exit ${RC}: ${ERR_TEXT}"
kill "${PLAIN_PID}" 2>/dev/null
GETSTATE_S=""

# ---- per size ---------------------------------------------------------------------------------
SIZE_ROWS=()
ACTION_ROWS=()
first=1
for N in ${SIZES}; do
  wlog="${WORK}/workload-${N}.log"
  "${WORK}/workload" --gib "${N}" --spin-ms 5000 > "${wlog}" 2>&1 &
  W=$!
  if ! wait_for '^ready' "${wlog}" 120 || ! wait_tick_above 5 "${wlog}" 30; then
    check "workload ${N} GiB starts" 1 "$(tail -3 "${wlog}" | tr '\n' ' ')"
    kill -9 "${W}" 2>/dev/null
    continue
  fi
  say "workload ${N} GiB: pid ${W}"
  mib_before=$(gpu_mib "${W}")

  used_before=$(gpu_used_total_mib)
  get_state "${W}"; s=${STATE}
  [[ -z "${GETSTATE_S}" ]] && GETSTATE_S="${DUR}"
  check "${N} GiB: state before" "$([[ "${s}" == running ]]; echo $?)" "${s}"

  # Each cycle: toggle out, look, toggle back, look. Later cycles show whether the first
  # paid for something one-off (host memory faulted in for the first time, say).
  for cycle in $(seq 1 "${CYCLES}"); do
    helper --toggle --pid "${W}"
    ck_rc=${RC}; ck_s=${DUR}
    check "${N} GiB #${cycle}: --toggle to checkpointed" "$([[ ${ck_rc} == 0 ]]; echo $?)" "exit ${ck_rc} in ${ck_s}s ${ERR_TEXT}"
    if [[ ${ck_rc} != 0 ]]; then
      stop_workload "${W}"
      continue 2
    fi
    get_state "${W}"; s=${STATE}
    check "${N} GiB #${cycle}: state after checkpoint" "$([[ "${s}" == checkpointed ]]; echo $?)" "${s}"
    sleep 0.5
    mib_after=$(gpu_mib "${W}")
    used_after=$(gpu_used_total_mib)
    rss=$(rss_gib "${W}")
    # mib_before must show the N GiB first, or an unlisted process would pass as "0 after".
    check "${N} GiB #${cycle}: GPU memory of the process after checkpoint ~0" \
      "$([[ "${mib_before}" =~ ^[0-9]+$ && "${mib_after}" =~ ^[0-9]+$ && ${mib_before} -ge $((N * 1024)) && ${mib_after} -lt 64 ]]; echo $?)" \
      "process ${mib_before} -> ${mib_after} MiB, whole GPU ${used_before} -> ${used_after} MiB (nvidia-smi); process RSS ${rss} GiB"
    t_a=$(last_tick "${wlog}")
    sleep 1
    t_b=$(last_tick "${wlog}")
    check "${N} GiB #${cycle}: ticks stop while checkpointed" "$([[ "${t_a}" == "${t_b}" ]]; echo $?)" "tick ${t_a} -> ${t_b} over 1 s"

    helper --toggle --pid "${W}"
    rs_rc=${RC}; rs_s=${DUR}
    check "${N} GiB #${cycle}: --toggle to running" "$([[ ${rs_rc} == 0 ]]; echo $?)" "exit ${rs_rc} in ${rs_s}s ${ERR_TEXT}"
    get_state "${W}"; s=${STATE}
    check "${N} GiB #${cycle}: state after restore" "$([[ "${s}" == running ]]; echo $?)" "${s}"
    wait_tick_above "$((t_b + 5))" "${wlog}" 20 && ticks_consecutive "${wlog}"
    ticks_ok=$?
    t_c=$(last_tick "${wlog}")
    check "${N} GiB #${cycle}: ticks continue from the device counter" "${ticks_ok}" \
      "tick ${t_b} -> ${t_c}, every tick since start consecutive"
    verify_now "${W}" "${wlog}"
    check "${N} GiB #${cycle}: pattern verifies after restore" "$([[ "${v}" == "verify ok"* ]]; echo $?)" "${v}"
    mib_restored=$(gpu_mib "${W}")

    SIZE_ROWS+=("| ${N} | ${cycle} | ${mib_before} | ${mib_after} | ${rss} | ${ck_s} | $(gbps "${mib_before}" "${ck_s}") | ${rs_s} | $(gbps "${mib_before}" "${rs_s}") | ${mib_restored} | $([[ ${ticks_ok} == 0 && "${t_a}" == "${t_b}" ]] && echo "stopped, then ${t_b}→${t_c}" || echo FAIL) | ${v:-none} |")
  done

  if [[ "${first}" == 1 ]]; then
    first=0
    # The four steps one by one, with the state after each.
    for step in "lock locked" "checkpoint checkpointed" "restore locked" "unlock running"; do
      # shellcheck disable=SC2086 # split "action state" on purpose
      set -- ${step}
      helper --action "$1" --pid "${W}"
      a_rc=${RC}; a_s=${DUR}; a_err=${ERR_TEXT}
      extra=""
      if [[ "$1" == checkpoint ]]; then
        sleep 0.5
        extra="; GPU memory $(gpu_mib "${W}") MiB"
        helper --get-restore-tid --pid "${W}"
        tid=${OUT_TEXT}
        comm=$(cat "/proc/${W}/task/${tid}/comm" 2>/dev/null)
        check "--get-restore-tid names a thread of the process" \
          "$([[ ${RC} == 0 && -n "${comm}" ]]; echo $?)" "tid ${tid}, comm '${comm}'"
      fi
      get_state "${W}"; s=${STATE}
      check "--action $1" "$([[ ${a_rc} == 0 && "${s}" == "$2" ]]; echo $?)" \
        "exit ${a_rc} in ${a_s}s, state ${s}${extra} ${a_err}"
      ACTION_ROWS+=("| --action $1 | ${a_rc} | ${a_s} | ${s}${extra} |")
    done
    # Illegal transitions come back from the driver as 401 and change nothing.
    helper --action unlock --pid "${W}"
    u_rc=${RC}; u_s=${DUR}; u_err=${ERR_TEXT}
    get_state "${W}"; s=${STATE}
    check "--action unlock of a running process is refused" \
      "$([[ ${u_rc} == 1 && "${u_err}" == *"CUresult 401"* && "${s}" == running ]]; echo $?)" \
      "exit ${u_rc}: ${u_err}; state ${s}"
    ACTION_ROWS+=("| --action unlock of a running process (must fail) | ${u_rc} | ${u_s} | ${s}: ${u_err} |")

    # --timeout: a 5 s kernel in flight; a 1 s lock must give up and leave it running.
    kill -USR2 "${W}"
    wait_for '^spin launched' "${wlog}" 10
    sleep 0.3
    helper --action lock --pid "${W}" --timeout 1000
    l_rc=${RC}; l_s=${DUR}; l_err=${ERR_TEXT}
    get_state "${W}"; s=${STATE}
    check "--action lock --timeout 1000 against a 5 s kernel" \
      "$([[ ${l_rc} == 3 && "${s}" == running ]] && awk -v d="${l_s}" 'BEGIN { exit !(d >= 0.9 && d < 3) }'; echo $?)" \
      "exit ${l_rc} after ${l_s}s, state ${s}: ${l_err}"
    ACTION_ROWS+=("| --action lock --timeout 1000 (5 s kernel in flight) | ${l_rc} | ${l_s} | ${s}: ${l_err} |")
    # The default timeout (30 s) waits for the rest of the kernel, then checkpoints.
    helper --toggle --pid "${W}"
    d_rc=${RC}; d_s=${DUR}
    get_state "${W}"; s=${STATE}
    check "--toggle with the default timeout waits for the kernel" \
      "$([[ ${d_rc} == 0 && "${s}" == checkpointed ]]; echo $?)" "exit ${d_rc} after ${d_s}s, state ${s}"
    ACTION_ROWS+=("| --toggle, default timeout (rest of the 5 s kernel in flight) | ${d_rc} | ${d_s} | ${s} |")
    helper --toggle --pid "${W}"
    t0=$(last_tick "${wlog}")
    wait_tick_above "$((t0 + 3))" "${wlog}" 20
    tk=$?
    verify_now "${W}" "${wlog}"
    ticks_consecutive "${wlog}"
    tc=$?
    check "after the action sequence: running, ticks continue, pattern verifies" \
      "$([[ ${RC} == 0 && ${tk} == 0 && ${tc} == 0 && "${v}" == "verify ok"* ]]; echo $?)" \
      "toggle exit ${RC}; ticks to $(last_tick "${wlog}"), consecutive: $([[ ${tc} == 0 ]] && echo yes || echo no); ${v}"
    back_rc=${RC}; back_s=${DUR}
    get_state "${W}"
    ACTION_ROWS+=("| --toggle back | ${back_rc} | ${back_s} | ${STATE} |")
  fi

  stop_workload "${W}"
  check "${N} GiB: workload exits cleanly" "$(grep -q '^exit clean' "${wlog}"; echo $?)" "$(tail -1 "${wlog}")"
done

# ---- report -----------------------------------------------------------------------------------
{
  echo "# stasis-cuda-checkpoint on a real GPU"
  echo
  echo "Produced by \`hack/gpu-helper-proof.sh\` on $(date -u +%Y-%m-%dT%H:%M:%SZ)."
  echo
  echo "- GPU: ${GPU_INFO} (name, driver, memory, persistence mode, PCIe gen, width)"
  echo "- nvcc ${NVCC_VERSION}; kernel $(uname -r); $(nproc) CPUs"
  echo "- pinned copy, 4 GiB, median of 5: **H2D ${H2D} GB/s, D2H ${D2H} GB/s** (\`${BW}\`)"
  echo "- \`--get-state\` wall time (process start, dlopen, cuInit, query): ${GETSTATE_S} s"
  echo
  echo "## Toggle per size"
  echo
  echo "Times are the helper's wall time (includes its start and cuInit). GB/s = the process's"
  echo "GPU memory before checkpoint (nvidia-smi) / time; GB = 1e9 bytes."
  echo
  echo "| GiB filled | cycle | GPU MiB before | GPU MiB after checkpoint | RSS after checkpoint (GiB) | checkpoint s | checkpoint GB/s | restore s | restore GB/s | GPU MiB after restore | ticks | pattern |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${SIZE_ROWS[@]}"
  echo
  echo "## Actions and timeout (first size)"
  echo
  echo "| command | exit | seconds | state after |"
  echo "|---|---|---|---|"
  printf '%s\n' "${ACTION_ROWS[@]}"
  echo
  echo "## Every check"
  echo
  echo "| check | result | detail |"
  echo "|---|---|---|"
  printf '%s\n' "${CHECK_ROWS[@]}"
  echo
  echo "${FAILED} check(s) failed."
} > "${REPORT}"
cat "${REPORT}"
exit $((FAILED > 0))
