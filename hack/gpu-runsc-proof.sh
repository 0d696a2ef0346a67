#!/usr/bin/env bash
# runsc on the GPU: checkpoint and restore of a CUDA process inside a gVisor sandbox with
# nvproxy, with and without `-cuda-checkpoint-path` (issue 8, last part). Runs ON the GPU
# machine as root (CUDA toolkit with nvcc, NVIDIA driver R570+, no network needed):
#
#   1. unpacks the carried runsc (.gpu-carry/runsc.xz, the build of hack/runsc.sh, xz -9),
#      checks that its nvproxy supports the host driver, builds stasis-cuda-checkpoint with
#      cc and tests/gpu/workload.cu with nvcc;
#   2. builds an OCI bundle from the host's own files: /usr and /etc bind-mounted read-only
#      (the host's glibc, ld.so cache and driver libraries), the NVIDIA devices in
#      linux.devices (which turns nvproxy on), the helper bind-mounted read-only at
#      /usr/local/bin/cuda-checkpoint as manifests/cdi/ does, /tmp a sandbox tmpfs;
#   3. starts two sandboxes running the workload (N GiB pattern, a tick every 50 ms; its log
#      is /tmp/w.log inside the sandbox, read with `runsc exec … cat`);
#   4. sandbox gpu2 (the path stasis uses, first, while the most time is left):
#      `runsc checkpoint -cuda-checkpoint-path /usr/local/bin/cuda-checkpoint` (timed, image
#      size), `runsc restore -detach` from that image and `runsc wait -restore` (timed), then
#      the ticks must continue from the device counter and the pattern must verify; SIGTERM
#      must end it cleanly (exit 0 after cudaFree);
#   5. sandbox gpu1: `runsc checkpoint -leave-running` WITHOUT -cuda-checkpoint-path, then
#      WITH it (-leave-running: the workload must keep ticking and verify), then without it
#      and without -leave-running (the sandbox dies), then once more (state stopped);
#   6. if step 5's checkpoint without the flag produced an image, tries to restore it too;
#   7. writes a Markdown report, a log and the runsc debug logs to $OUT (when set) or
#      build/gpu-runsc/results/.
#
# Before the device call, here: mkdir -p .gpu-carry && xz -9 -c "$(hack/runsc.sh)" >
# .gpu-carry/runsc.xz (~15 MB; .gpu-carry/ is ignored), then name .gpu-carry in the call's
# carry. Results of the runs on an H200: docs/gpu-runsc-results.md.
#
# Every exact command, exit status, stderr and `runsc state` goes into the report: a step the
# machine prevents is a result. Exit status: 0 when every check passed.
#
# STASIS_RUNSC_PROOF_CPU=1 runs the same flow without a GPU (a shell stand-in that speaks the
# workload's protocol, no devices): a check of the script and the bundle, not of nvproxy.
# Env: STASIS_GPU_RUNSC_GIB=1 (gpu1's workload), STASIS_GPU_RUNSC_GIB_MAIN (gpu2's; default
# the same), STASIS_GPU_RUNSC_BUDGET_S=420 (the optional step 6 is skipped
# after this many seconds), STASIS_GPU_RUNSC_HARD_S=540 (a step that could run past this is
# skipped and the skip recorded), STASIS_RUNSC_XZ (default .gpu-carry/runsc.xz), STASIS_RUNSC
# (an unpacked runsc instead), STASIS_GPU_RUNSC_MODE=deadline (instead of steps 2-6, what a
# checkpoint killed at its deadline leaves: hack/gpu-runsc-deadline.sh) or =fast-snapshot
# (instead of steps 1-6, the steps of a copy-speed GPU snapshot timed on the host and in runsc:
# hack/gpu-fast-snapshot.sh, STASIS_GPU_FAST_GIB) or =fast-path (instead of steps 1-6, the fast
# snapshot path through libstasis-fastsnap.so against the plain path: hack/gpu-fast-path.sh).
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${REPO_ROOT}/build/gpu-runsc"
RESULTS="${OUT:-${WORK}/results}"
GIB="${STASIS_GPU_RUNSC_GIB:-1}"             # sandbox gpu1
GIB_MAIN="${STASIS_GPU_RUNSC_GIB_MAIN:-${GIB}}" # sandbox gpu2, the checkpoint/restore path
BUDGET_S="${STASIS_GPU_RUNSC_BUDGET_S:-420}"
HARD_S="${STASIS_GPU_RUNSC_HARD_S:-540}"
CPU_ONLY="${STASIS_RUNSC_PROOF_CPU:-0}"
RUNSC_XZ="${STASIS_RUNSC_XZ:-${REPO_ROOT}/.gpu-carry/runsc.xz}"
CKPT_PATH=/usr/local/bin/cuda-checkpoint          # api::kDefaultCudaCheckpointPath
HOST_HELPER=/usr/lib/stasis/stasis-cuda-checkpoint # its own bundle mounts it (the ordinary build: the host root has glibc)

# Sandboxes of an earlier run in this folder would keep files open: end them first.
if [[ -x "${WORK}/runsc" && -d "${WORK}/root" ]]; then
  for id in $("${WORK}/runsc" -root "${WORK}/root" list -quiet 2>/dev/null); do
    "${WORK}/runsc" -root "${WORK}/root" delete -force "${id}" >/dev/null 2>&1
  done
fi
umount "${WORK}/root/null-netns" 2>/dev/null
rm -rf "${WORK}"
mkdir -p "${WORK}/bin" "${WORK}/images" "${WORK}/dbg" "${WORK}/root" "${RESULTS}"
LOG="${RESULTS}/gpu-runsc-proof.log"
REPORT="${RESULTS}/gpu-runsc-results.md"
: > "${LOG}"
exec > >(tee -a "${LOG}") 2>&1

say() { printf '[gpu-runsc %s +%ss] %s\n' "$(date +%T)" "${SECONDS}" "$*" >&2; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
one_line() { tr '\n' ' ' | sed -e 's/|/\\|/g' -e 's/ *$//'; }
# no_stack: the error without the Go stack trace that follows a recovered panic (the log
# keeps the whole text).
no_stack() { sed -e 's/: goroutine [0-9]* \[running\]:.*/ [+ Go stack trace, in the log]/'; }
over_budget() { ((SECONDS > BUDGET_S)); }
# fits LIMIT_S NAME: whether a step that may take LIMIT_S still ends before HARD_S; records a
# skip otherwise (the device machine's call limit is 600 s).
fits() {
  ((SECONDS + $1 < HARD_S)) && return 0
  FIGURES+=("- step $2 skipped: ${SECONDS} s elapsed, it may take $1 s, the limit is ${HARD_S} s")
  say "skipping $2: out of time"
  return 1
}

CHECK_ROWS=()
STEP_ROWS=()
FAILED=0
# check NAME OK(0|1) DETAIL
check() {
  local verdict=PASS
  if [[ "$2" != 0 ]]; then verdict=FAIL; FAILED=$((FAILED + 1)); fi
  CHECK_ROWS+=("| $1 | ${verdict} | $(printf '%s' "$3" | one_line | no_stack) |")
  say "${verdict}: $1 — $3"
}

RUNSC="${WORK}/runsc"
FLAGS=(-root "${WORK}/root" -network=none -overlay2=root:memory -debug -debug-log="${WORK}/dbg/")
[[ "${CPU_ONLY}" == 1 ]] || FLAGS+=(-nvproxy)
flags_text() { echo "runsc ${FLAGS[*]}" | sed -e "s#${WORK}#\$W#g"; }
# rs NAME LIMIT_S ARGS...: runs runsc with the global flags; its stdout/stderr go to
# $WORK/NAME.out/.err (a detached sandbox keeps them open: never a pipe). Sets RC, DUR,
# OUT_TEXT, ERR_TEXT and CMD_TEXT (the command as the report shows it).
rs() {
  local name=$1 limit=$2 t0 t1
  shift 2
  CMD_TEXT="$(flags_text) $*"
  CMD_TEXT=${CMD_TEXT//${WORK}/\$W}
  t0=$(now)
  timeout -s KILL "${limit}" "${RUNSC}" "${FLAGS[@]}" "$@" > "${WORK}/${name}.out" 2> "${WORK}/${name}.err" < /dev/null
  RC=$?
  t1=$(now)
  DUR=$(secs "${t0}" "${t1}")
  OUT_TEXT=$(head -c 4000 "${WORK}/${name}.out")
  ERR_TEXT=$(head -c 4000 "${WORK}/${name}.err")
  say "\$ ${CMD_TEXT}"
  say "  -> exit ${RC} in ${DUR}s; stdout: $(printf '%s' "${OUT_TEXT}" | head -c 600 | one_line); stderr: $(printf '%s' "${ERR_TEXT}" | one_line)"
}
state_of() {
  timeout 30 "${RUNSC}" "${FLAGS[@]}" state "$1" 2>&1 | awk -F'"' '/"status"/ { print $4; f = 1 } END { if (!f) print "(no state)" }'
}
# wait_state ID STATE SECONDS: a sandbox takes a moment to exit after a save without
# -leave-running; runsc notices only when it loads the container again.
wait_state() {
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    [[ "$(state_of "$1")" == "$2" ]] && return 0
    sleep 0.5
  done
  return 1
}
# step NAME: one row of the step table from the last rs call plus the state of ID.
step() {
  local id=$2 st
  st=$(state_of "${id}")
  STEP_ROWS+=("| $1 | \`$(printf '%s' "${CMD_TEXT}" | one_line)\` | ${RC} | ${DUR} | $(printf '%s' "${ERR_TEXT:-(empty)}" | one_line | no_stack) | ${st} |")
}
# wlog ID: the workload's log inside the sandbox.
wlog() { timeout 30 "${RUNSC}" "${FLAGS[@]}" exec "$1" /bin/cat /tmp/w.log 2>/dev/null; }
last_tick() { wlog "$1" | grep '^tick ' | tail -1 | awk '{ print $2 }'; }
# Every tick 1, 2, 3, ... with no gap or reset: the device counter came through intact.
ticks_consecutive() { wlog "$1" | grep '^tick ' | awk '$2 != NR { bad = 1 } END { exit bad || NR == 0 }'; }
wait_tick_above() {
  local deadline=$((SECONDS + $3)) t
  while ((SECONDS < deadline)); do
    t=$(last_tick "$1")
    [[ -n "${t}" && "${t}" -gt "$2" ]] && return 0
    sleep 0.3
  done
  return 1
}
wait_ready() {
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    wlog "$1" | grep -q '^ready' && return 0
    wlog "$1" | grep -q 'failed' && return 1
    sleep 0.5
  done
  return 1
}
# verify ID: SIGUSR1 to the workload (PID 1 of the container); sets v to its answer.
verify() {
  local before deadline
  before=$(wlog "$1" | grep -c '^verify')
  timeout 30 "${RUNSC}" "${FLAGS[@]}" kill "$1" USR1 >/dev/null 2>&1
  deadline=$((SECONDS + 60))
  v="no answer"
  while ((SECONDS < deadline)); do
    if (($(wlog "$1" | grep -c '^verify') > before)); then
      v=$(wlog "$1" | grep '^verify' | tail -1)
      return
    fi
    sleep 0.3
  done
}
gpu_used() {
  [[ "${CPU_ONLY}" == 1 ]] && { echo "-"; return; }
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1
}
gpu_apps() {
  [[ "${CPU_ONLY}" == 1 ]] && { echo "-"; return; }
  nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader | one_line
}
image_bytes() { find "$1" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
image_files() { (cd "$1" 2>/dev/null && find . -type f -printf '%f=%s ' | sort); }
gib_of() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1073741824 }'; }

finish() {
  for id in $(timeout 30 "${RUNSC}" "${FLAGS[@]}" list -quiet 2>/dev/null); do
    timeout 60 "${RUNSC}" "${FLAGS[@]}" delete -force "${id}" >/dev/null 2>&1
  done
  # What this script put on the host, it takes away again.
  # runsc keeps the gofers' empty network namespace bind-mounted under -root.
  umount "${WORK}/root/null-netns" 2>/dev/null
  for f in "${MADE[@]}"; do rm -f "${f}"; done
  [[ -n "${MADE_DIR}" ]] && rmdir "${MADE_DIR}" 2>/dev/null
  # Debug logs: keep the start and the end of each, in one archive.
  mkdir -p "${WORK}/dbg-cut"
  for f in "${WORK}"/dbg/*; do
    [[ -f "${f}" ]] || continue
    if (($(stat -c %s "${f}") > 3000000)); then
      { head -c 1000000 "${f}"; echo; echo "[… cut by gpu-runsc-proof.sh …]"; tail -c 2000000 "${f}"; } > "${WORK}/dbg-cut/$(basename "${f}")"
    else
      cp "${f}" "${WORK}/dbg-cut/"
    fi
  done
  # What the sentries themselves timed: toggles, save, page I/O, load (boot logs, in order).
  SENTRY=$(grep -hE 'cuda-checkpoint on [0-9]+ processes took|cuda-checkpoint --(get-state|toggle) for PID|Overall save took|Kernel save took|Async page saving completed|save scanning took|Save (succeeded|failed)|Async page loading completed|Kernel load took|Overall load took|Restore successful|post restore work failed|Killing the sandbox' \
    "${WORK}"/dbg/*boot* 2>/dev/null | sort -k2,2 | cut -c1-400)
  tar -C "${WORK}" -cJf "${RESULTS}/runsc-debug-logs.tar.xz" dbg-cut 2>/dev/null
  {
    echo "# runsc with nvproxy on a real GPU: checkpoint and restore"
    echo
    echo "Produced by \`hack/gpu-runsc-proof.sh\` on $(date -u +%Y-%m-%dT%H:%M:%SZ)$([[ "${CPU_ONLY}" == 1 ]] && echo ' in CPU-only mode (a shell stand-in, no GPU: not a GPU result)')."
    echo
    printf '%s\n' "${MACHINE_LINES[@]}"
    echo
    echo "\`\$W\` is \`build/gpu-runsc\` in the repo on the GPU machine. Global flags on every"
    echo "command: \`$(flags_text)\`. The workload holds ${GIB} GiB in gpu1 and ${GIB_MAIN} GiB in gpu2; its log is \`/tmp/w.log\` in the"
    echo "sandbox (a sandbox tmpfs, so it is part of the checkpoint)."
    echo
    echo "## Steps"
    echo
    echo "| step | command | exit | seconds | stderr | runsc state after |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${STEP_ROWS[@]}"
    echo
    echo "## Key figures"
    echo
    printf '%s\n' "${FIGURES[@]}"
    echo
    echo "## What the sentries logged (runsc -debug boot logs, all sandboxes, by time)"
    echo
    echo '```'
    printf '%s\n' "${SENTRY}"
    echo '```'
    echo
    echo "## Every check"
    echo
    echo "| check | result | detail |"
    echo "|---|---|---|"
    printf '%s\n' "${CHECK_ROWS[@]}"
    echo
    echo "${FAILED} check(s) failed. Elapsed ${SECONDS} s."
  } > "${REPORT}"
  cat "${REPORT}"
  exit $((FAILED > 0))
}
MACHINE_LINES=()
FIGURES=()
MADE=()
MADE_DIR=""

# ---- machine ------------------------------------------------------------------------------
say "repo ${REPO_ROOT}; results ${RESULTS}; ${GIB} / ${GIB_MAIN} GiB; cpu-only ${CPU_ONLY}"
MACHINE_LINES+=("- kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) MemTotal at start, uid $(id -u)")
MACHINE_LINES+=("- disk free where the images go: $(df -h --output=avail "${WORK}" | tail -1 | tr -d ' ')")
if [[ "${CPU_ONLY}" != 1 ]]; then
  GPU_INFO=$(nvidia-smi --query-gpu=name,driver_version,memory.total,persistence_mode --format=csv,noheader)
  DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
  MACHINE_LINES+=("- GPU: ${GPU_INFO} (name, driver, memory, persistence mode); nvcc $(nvcc --version | grep -o 'release [0-9.]*' | head -1)")
  MACHINE_LINES+=("- devices: $(ls -l /dev/nvidia* 2>&1 | awk '{ print $NF "=" $5 $6 }' | one_line)")
fi
say "${MACHINE_LINES[*]}"

# ---- runsc ----------------------------------------------------------------------------------
if [[ -n "${STASIS_RUNSC:-}" ]]; then
  cp "${STASIS_RUNSC}" "${RUNSC}"
elif command -v xz >/dev/null; then
  xz -dc "${RUNSC_XZ}" > "${RUNSC}"
else
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "${RUNSC_XZ}" "${RUNSC}"
fi
chmod 0755 "${RUNSC}"
RUNSC_VERSION=$("${RUNSC}" --version 2>&1 | head -1)
MACHINE_LINES+=("- ${RUNSC_VERSION} (sha256 $(sha256sum "${RUNSC}" | cut -c1-16)…), platform systrap (default)")
check "carried runsc unpacks and runs" "$([[ "${RUNSC_VERSION}" == "runsc version"* ]]; echo $?)" "${RUNSC_VERSION}"
if [[ "${CPU_ONLY}" != 1 ]]; then
  SUPPORTED=$("${RUNSC}" nvproxy list-supported-drivers 2>&1 | one_line)
  check "this runsc's nvproxy supports driver ${DRIVER}" \
    "$([[ " ${SUPPORTED} " == *" ${DRIVER} "* ]]; echo $?)" "runsc nvproxy list-supported-drivers: ${SUPPORTED}"
fi

# ---- build ----------------------------------------------------------------------------------
say "building"
cc -std=c11 -O2 -Wall -Wextra -Werror -o "${WORK}/bin/stasis-cuda-checkpoint" \
  "${REPO_ROOT}"/cmd/stasis-cuda-checkpoint/*.c -ldl > "${WORK}/build-helper.log" 2>&1 &
b1=$!
if [[ "${CPU_ONLY}" == 1 ]]; then
  # Speaks the workload's protocol (ready, tick, verify on USR1, exit clean on TERM).
  cat > "${WORK}/bin/workload" <<'EOF'
#!/bin/sh
trap 'echo "verify ok mismatches=0 gib=0 (cpu stand-in)"' USR1
trap 'echo "exit clean"; exit 0' TERM
echo "ready pid=$$ gib=0"
i=0
while :; do i=$((i + 1)); echo "tick $i"; sleep 0.05; done
EOF
  chmod 0755 "${WORK}/bin/workload"
  b2=""
else
  nvcc -O2 -arch=sm_90 -o "${WORK}/bin/workload" "${REPO_ROOT}/tests/gpu/workload.cu" \
    > "${WORK}/build-workload.log" 2>&1 &
  b2=$!
fi
build_ok=0
for b in ${b1} ${b2}; do wait "${b}" || build_ok=1; done
cat "${WORK}"/build-*.log
check "helper (cc) and workload (nvcc -arch=sm_90) build on this machine" "${build_ok}" "see the log"
[[ "${build_ok}" == 0 ]] || finish

# The helper where the CDI spec's hostPath puts it; the mount point it is bound over must
# exist in the read-only /usr mount, so an empty placeholder is made when the host has none.
[[ -e "${HOST_HELPER}" ]] || MADE+=("${HOST_HELPER}")
[[ -d "$(dirname "${HOST_HELPER}")" ]] || MADE_DIR="$(dirname "${HOST_HELPER}")"
install -D -m 0755 "${WORK}/bin/stasis-cuda-checkpoint" "${HOST_HELPER}"
mkdir -p "$(dirname "${CKPT_PATH}")"
if [[ ! -e "${CKPT_PATH}" ]]; then
  : > "${CKPT_PATH}"
  MADE+=("${CKPT_PATH}")
  say "made an empty mount point ${CKPT_PATH} on the host"
fi

# ---- bundle -----------------------------------------------------------------------------------
BUNDLE="${WORK}/bundle"
ROOTFS="${BUNDLE}/rootfs"
mkdir -p "${ROOTFS}"/{usr,etc,proc,dev,sys,tmp,w}
MOUNTS='{"destination":"/proc","type":"proc","source":"proc"},
 {"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","strictatime","mode=755","size=65536k"]},
 {"destination":"/sys","type":"sysfs","source":"sysfs","options":["nosuid","noexec","nodev","ro"]},
 {"destination":"/tmp","type":"tmpfs","source":"tmpfs","options":["nosuid","nodev","mode=1777"]},
 {"destination":"/usr","type":"bind","source":"/usr","options":["rbind","ro","nosuid","nodev"]},
 {"destination":"/etc","type":"bind","source":"/etc","options":["rbind","ro","nosuid","nodev"]},
 {"destination":"/w","type":"bind","source":"'"${WORK}/bin"'","options":["rbind","ro","nosuid","nodev"]},
 {"destination":"'"${CKPT_PATH}"'","type":"bind","source":"'"${HOST_HELPER}"'","options":["bind","ro","nosuid","nodev"]}'
# Merged-/usr hosts have /bin, /lib, ... as links into /usr; others get their own mounts.
for d in bin sbin lib lib32 lib64 libx32; do
  if [[ -L "/${d}" ]]; then
    ln -s "$(readlink "/${d}")" "${ROOTFS}/${d}"
  elif [[ -d "/${d}" ]]; then
    mkdir -p "${ROOTFS}/${d}"
    MOUNTS+=',
 {"destination":"/'"${d}"'","type":"bind","source":"/'"${d}"'","options":["rbind","ro","nosuid","nodev"]}'
  fi
done
ENV='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin","HOME=/tmp","NVIDIA_DRIVER_CAPABILITIES=compute,utility"'
DEVICES=""
if [[ "${CPU_ONLY}" != 1 ]]; then
  LIBCUDA=$(ldconfig -p | awk '/libcuda\.so\.1 / { print $NF; exit }')
  if [[ -z "${LIBCUDA}" ]]; then
    LIBCUDA=$(find /usr/local/nvidia /usr/lib /usr/lib64 /opt -name 'libcuda.so.1' 2>/dev/null | head -1)
    libdir=$(dirname "${LIBCUDA}")
    ENV+=',"LD_LIBRARY_PATH='"${libdir}"'"'
    case "${libdir}" in
      /usr/*) ;;
      *) mkdir -p "${ROOTFS}${libdir}"
         MOUNTS+=',
 {"destination":"'"${libdir}"'","type":"bind","source":"'"${libdir}"'","options":["rbind","ro","nosuid","nodev"]}' ;;
    esac
  fi
  MACHINE_LINES+=("- libcuda.so.1: ${LIBCUDA} -> $(readlink -f "${LIBCUDA}")")
  for dev in /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia[0-9]*; do
    [[ -c "${dev}" ]] || continue
    major=$((16#$(stat -c %t "${dev}")))
    minor=$((16#$(stat -c %T "${dev}")))
    DEVICES+="${DEVICES:+,}
 {\"path\":\"${dev}\",\"type\":\"c\",\"major\":${major},\"minor\":${minor},\"fileMode\":438,\"uid\":0,\"gid\":0}"
  done
fi
CAPS='"CAP_CHOWN","CAP_DAC_OVERRIDE","CAP_FOWNER","CAP_FSETID","CAP_KILL","CAP_SETGID","CAP_SETUID","CAP_SETPCAP","CAP_NET_BIND_SERVICE","CAP_SYS_CHROOT","CAP_SYS_PTRACE","CAP_SYS_ADMIN","CAP_SYS_NICE","CAP_SYS_RESOURCE","CAP_IPC_LOCK"'
# write_config DIR GIB [COMMAND]: one bundle per workload size, all on the same rootfs; COMMAND
# (default: the workload of GIB GiB) runs under /bin/sh -c with its output in /tmp/w.log.
write_config() {
local cmd="${3:-exec /w/workload --gib $2 --spin-ms 5000}"
mkdir -p "$1"
cat > "$1/config.json" <<EOF
{
 "ociVersion": "1.0.2",
 "process": {
  "terminal": false,
  "user": {"uid": 0, "gid": 0},
  "args": ["/bin/sh", "-c", "${cmd} >/tmp/w.log 2>&1"],
  "env": [${ENV}],
  "cwd": "/",
  "capabilities": {"bounding": [${CAPS}], "effective": [${CAPS}], "permitted": [${CAPS}]},
  "noNewPrivileges": true
 },
 "root": {"path": "${ROOTFS}", "readonly": false},
 "hostname": "stasis-gpu",
 "mounts": [${MOUNTS}],
 "linux": {
  "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
  "devices": [${DEVICES}]
 }
}
EOF
}
write_config "${BUNDLE}" "${GIB}"
BUNDLE_MAIN="${WORK}/bundle-main"
write_config "${BUNDLE_MAIN}" "${GIB_MAIN}"
if command -v python3 >/dev/null && ! python3 -m json.tool "${BUNDLE}/config.json" >/dev/null; then
  check "config.json is valid JSON" 1 "$(python3 -m json.tool "${BUNDLE}/config.json" 2>&1 | tail -1)"
  finish
fi
cp "${BUNDLE}/config.json" "${RESULTS}/config.json"
say "bundle ${BUNDLE}: $(one_line < "${BUNDLE}/config.json" | head -c 3000)"

# The steps of a copy-speed GPU snapshot (hack/gpu-fast-snapshot.sh) instead of the steps below.
# shellcheck source=gpu-fast-snapshot.sh
[[ "${STASIS_GPU_RUNSC_MODE:-}" == fast-snapshot ]] && source "${REPO_ROOT}/hack/gpu-fast-snapshot.sh"
# The fast snapshot path itself against the plain path (hack/gpu-fast-path.sh).
# shellcheck source=gpu-fast-path.sh
[[ "${STASIS_GPU_RUNSC_MODE:-}" == fast-path ]] && source "${REPO_ROOT}/hack/gpu-fast-path.sh"

# ---- step 1: the workload in sandboxes -----------------------------------------------------
# start ID: run -detach, then wait for the workload's "ready" and a few ticks.
start() {
  rs "run-$1" 120 run -detach -bundle "${2:-${BUNDLE}}" "$1"
  step "1. start $1" "$1"
  [[ ${RC} == 0 ]] || return 1
  if ! wait_ready "$1" 120 || ! wait_tick_above "$1" 5 30; then
    say "workload in $1 not ticking; its log: $(wlog "$1" | tail -5 | one_line)"
    return 1
  fi
}
started=1
for extra in "" "-ignore-cgroups" "-platform=ptrace"; do
  [[ -n "${extra}" ]] && FLAGS+=("${extra}")
  if start gpu1; then started=0; break; fi
  START_FAIL="exit ${RC}: ${ERR_TEXT}; workload log: $(wlog gpu1 | tail -5 | one_line); boot log: $(grep -hiE 'nvproxy|error|fatal|panic' "${WORK}"/dbg/*boot* 2>/dev/null | tail -8 | one_line)"
  check "sandbox gpu1 starts with $(flags_text | sed 's#.*-debug-log=[^ ]* ##')" 1 "${START_FAIL}"
  timeout 60 "${RUNSC}" "${FLAGS[@]}" delete -force gpu1 >/dev/null 2>&1
  # A workload that starts but fails in CUDA is not a matter of runsc flags.
  [[ ${RC} == 0 ]] && break
done
if [[ ${started} != 0 ]]; then
  FIGURES+=("- The sandbox could not run the CUDA workload; nothing further was possible. Last failure: ${START_FAIL}")
  finish
fi
check "workload runs and ticks in sandbox gpu1 (nvproxy)" 0 "$(wlog gpu1 | head -1); last tick $(last_tick gpu1)"
start gpu2 "${BUNDLE_MAIN}" && ok2=0 || ok2=1
check "workload runs and ticks in sandbox gpu2 (nvproxy)" "${ok2}" "$(wlog gpu2 | head -1); last tick $(last_tick gpu2)"
FIGURES+=("- GPU memory used with both sandboxes running: $(gpu_used) MiB; compute apps (host PIDs are the sandboxes): $(gpu_apps)")
FIGURES+=("- workload log head in gpu1: \`$(wlog gpu1 | head -3 | one_line)\`")
# What a checkpoint deadline leaves (hack/gpu-runsc-deadline.sh) instead of the steps below.
# shellcheck source=gpu-runsc-deadline.sh
[[ "${STASIS_GPU_RUNSC_MODE:-}" == deadline ]] && source "${REPO_ROOT}/hack/gpu-runsc-deadline.sh"

# ---- step 3b: checkpoint with -cuda-checkpoint-path (the real path) ------------------------------
if [[ ${ok2} == 0 ]] && fits 120 3b; then
  D2="${WORK}/images/d2-cuda"
  used_before=$(gpu_used)
  t_ckpt=$(last_tick gpu2)
  rs ckpt-2 120 checkpoint -image-path "${D2}" -cuda-checkpoint-path "${CKPT_PATH}" gpu2
  RC_2=${RC}; DUR_2=${DUR}; ERR_2=${ERR_TEXT}
  wait_state gpu2 stopped 15
  step "3b. gpu2: checkpoint -cuda-checkpoint-path ${CKPT_PATH}" gpu2
  st=$(state_of gpu2)
  used_after=$(gpu_used)
  bytes=$(image_bytes "${D2}")
  META=$(timeout 30 "${RUNSC}" statefile -list "${D2}/checkpoint.img" 2>&1 | grep -vE 'container_specs' | head -c 1500 | one_line)
  FIGURES+=("- 3b (flag, no -leave-running): exit ${RC_2} in **${DUR_2} s**; image **$(gib_of "${bytes}") GiB** (${bytes} bytes: $(image_files "${D2}")); state after: ${st}; GPU memory used ${used_before} → ${used_after} MiB; last tick read before: ${t_ckpt}")
  FIGURES+=("- \`runsc statefile -list checkpoint.img\` (container_specs left out): \`${META}\`")
  check "3b. checkpoint -cuda-checkpoint-path succeeds" "$([[ ${RC_2} == 0 ]]; echo $?)" \
    "exit ${RC_2} in ${DUR_2}s, image ${bytes} bytes, state ${st}: ${ERR_2:-(empty stderr)}"

  # ---- step 4: restore from that image --------------------------------------------------------
  if [[ ${RC_2} == 0 ]] && fits 300 4; then
    timeout 60 "${RUNSC}" "${FLAGS[@]}" delete -force gpu2 >/dev/null 2>&1
    rs restore-2 100 restore -detach -bundle "${BUNDLE_MAIN}" -image-path "${D2}" gpu2
    RC_R=${RC}; DUR_R=${DUR}; ERR_R=${ERR_TEXT}
    step "4. gpu2: restore -detach" gpu2
    rs wait-restore-2 180 wait -restore gpu2
    RC_W=${RC}; DUR_W=${DUR}; ERR_W=${ERR_TEXT}
    step "4. gpu2: wait -restore (restore done, CUDA toggled back)" gpu2
    st=$(state_of gpu2)
    first_after=$(last_tick gpu2)
    wait_tick_above gpu2 "$((${first_after:-0} + 5))" 30
    ticking=$?
    ticks_consecutive gpu2
    consec=$?
    verify gpu2
    used_restored=$(gpu_used)
    FIGURES+=("- 4 restore: \`restore -detach\` exit ${RC_R} in **${DUR_R} s**, then \`wait -restore\` exit ${RC_W} in **${DUR_W} s** (stdout \`${OUT_TEXT}\`, stderr \`$(printf '%s' "${ERR_W:-(empty)}" | one_line)\`); state ${st}; GPU memory used after restore ${used_restored} MiB; compute apps: $(gpu_apps)")
    FIGURES+=("- after restore: first tick read ${first_after} (last read before the checkpoint: ${t_ckpt}), then $(last_tick gpu2); every tick since the start consecutive: $([[ ${consec} == 0 ]] && echo yes || echo no); ${v}")
    check "4. restore -detach succeeds" "$([[ ${RC_R} == 0 ]]; echo $?)" "exit ${RC_R} in ${DUR_R}s: ${ERR_R:-(empty stderr)}"
    check "4. wait -restore reports success (CUDA restored in the sandbox)" "$([[ ${RC_W} == 0 ]]; echo $?)" \
      "exit ${RC_W} in ${DUR_W}s: ${OUT_TEXT} ${ERR_W}"
    check "4. ticks continue from the device counter after restore" \
      "$([[ ${ticking} == 0 && ${consec} == 0 && -n "${first_after}" && ${first_after} -ge ${t_ckpt:-0} ]]; echo $?)" \
      "tick ${t_ckpt} before checkpoint, ${first_after} just after restore, $(last_tick gpu2) now; every tick consecutive: $([[ ${consec} == 0 ]] && echo yes || echo no)"
    check "4. pattern verifies after restore" "$([[ "${v}" == "verify ok"* ]]; echo $?)" "${v}"
    # `runsc wait` must be waiting before the workload exits: once the sandbox is gone its
    # exit status is too.
    timeout 60 "${RUNSC}" "${FLAGS[@]}" wait gpu2 > "${WORK}/wait-exit-2.out" 2>&1 &
    wpid=$!
    sleep 1
    timeout 30 "${RUNSC}" "${FLAGS[@]}" kill gpu2 TERM >/dev/null 2>&1
    wait "${wpid}"
    w_rc=$?
    w_out=$(one_line < "${WORK}/wait-exit-2.out")
    check "4. workload exits cleanly after SIGTERM (cudaFree ok, exit 0)" \
      "$([[ ${w_rc} == 0 && "${w_out}" == *'"exitStatus":0'* ]]; echo $?)" "runsc wait: exit ${w_rc}, ${w_out}"
  fi
fi

# ---- step 2a: checkpoint without -cuda-checkpoint-path, -leave-running ---------------------------
D1A="${WORK}/images/d1-nocuda-leave"
if fits 90 2a; then
t_before=$(last_tick gpu1)
rs ckpt-1a 90 checkpoint -image-path "${D1A}" -leave-running gpu1
RC_1A=${RC}
step "2a. gpu1: checkpoint, no -cuda-checkpoint-path, -leave-running" gpu1
sleep 1
wait_tick_above gpu1 "$(last_tick gpu1 || echo 0)" 10
alive=$?
FIGURES+=("- 2a (no flag, -leave-running): exit ${RC_1A} in ${DUR} s; stderr \`$(printf '%s' "${ERR_TEXT:-(empty)}" | one_line | no_stack)\`; image files: $(image_files "${D1A}"); state $(state_of gpu1); ticks after: $([[ ${alive} == 0 ]] && echo "continue (tick ${t_before} before, $(last_tick gpu1) after)" || echo "do not continue")")
check "2a. checkpoint without -cuda-checkpoint-path (-leave-running): outcome recorded, sandbox still running" \
  "$([[ "$(state_of gpu1)" == running ]]; echo $?)" "exit ${RC_1A}: ${ERR_TEXT:-(empty stderr)}"
fi

# ---- step 3a: checkpoint with -cuda-checkpoint-path, -leave-running ------------------------------
if [[ "$(state_of gpu1)" == running ]] && fits 90 3a; then
  rs getstate-gpu1 60 exec gpu1 "${CKPT_PATH}" --get-state --pid 1
  FIGURES+=("- \`runsc exec gpu1 ${CKPT_PATH} --get-state --pid 1\` (the helper inside the sandbox, PID 1 = the workload): exit ${RC}, stdout \`${OUT_TEXT}\`, stderr \`$(printf '%s' "${ERR_TEXT:-(empty)}" | one_line)\`")
  D1B="${WORK}/images/d1-cuda-leave"
  t_before=$(last_tick gpu1)
  rs ckpt-1b 90 checkpoint -image-path "${D1B}" -leave-running -cuda-checkpoint-path "${CKPT_PATH}" gpu1
  RC_1B=${RC}; DUR_1B=${DUR}; ERR_1B=${ERR_TEXT}
  step "3a. gpu1: checkpoint -cuda-checkpoint-path, -leave-running" gpu1
  wait_tick_above gpu1 "${t_before}" 20
  alive=$?
  if [[ ${alive} == 0 ]]; then verify gpu1; else v="(not asked: no ticks)"; fi
  FIGURES+=("- 3a (flag, -leave-running): exit ${RC_1B} in ${DUR_1B} s; image $(gib_of "$(image_bytes "${D1B}")") GiB ($(image_files "${D1B}")); ticks $([[ ${alive} == 0 ]] && echo "continue (${t_before} → $(last_tick gpu1))" || echo "do not continue"); ${v}")
  check "3a. checkpoint -cuda-checkpoint-path -leave-running succeeds, workload continues and verifies" \
    "$([[ ${RC_1B} == 0 && ${alive} == 0 && "${v}" == "verify ok"* ]]; echo $?)" "exit ${RC_1B} in ${DUR_1B}s: ${ERR_1B:-(empty stderr)}; ${v}"
fi

# ---- step 2b: checkpoint without the flag and without -leave-running: the sandbox dies -----------
if [[ "$(state_of gpu1)" == running ]] && fits 90 2b; then
  rs ckpt-1c 90 checkpoint -image-path "${WORK}/images/d1-nocuda-kill" gpu1
  RC_1C=${RC}; ERR_1C=${ERR_TEXT}
  wait_state gpu1 stopped 15
  step "2b. gpu1: checkpoint, no -cuda-checkpoint-path, no -leave-running" gpu1
  st=$(state_of gpu1)
  FIGURES+=("- 2b (no flag, no -leave-running): exit ${RC_1C} in ${DUR} s; stderr \`$(printf '%s' "${ERR_1C:-(empty)}" | one_line | no_stack)\`; state after: ${st}; image files: $(image_files "${WORK}/images/d1-nocuda-kill")")
  rs ckpt-1d 60 checkpoint -image-path "${WORK}/images/d1-retry" gpu1
  step "2c. gpu1: the same again" gpu1
  check "2b. without -leave-running the sandbox is gone afterwards (state stopped)" \
    "$([[ "${st}" == stopped ]]; echo $?)" "exit ${RC_1C}: ${ERR_1C:-(empty stderr)}; state ${st}; retry: exit ${RC}: ${ERR_TEXT}"
fi
timeout 60 "${RUNSC}" "${FLAGS[@]}" delete -force gpu1 >/dev/null 2>&1

# ---- optional: restore the image taken without the flag, if there is one ------------------------
if [[ "${RC_1A:-1}" == 0 ]] && ! over_budget && fits 100 6; then
  rs restore-1a 45 restore -detach -bundle "${BUNDLE}" -image-path "${D1A}" gpu1r
  RC_RA=${RC}; ERR_RA=${ERR_TEXT}
  step "6. gpu1r: restore -detach from 2a's image (saved without the flag)" gpu1r
  rs wait-restore-1a 45 wait -restore gpu1r
  step "6. gpu1r: wait -restore" gpu1r
  ok=1
  if [[ "$(state_of gpu1r)" == running ]] && wait_tick_above gpu1r "$(($(last_tick gpu1r || echo 0) + 3))" 20; then
    verify gpu1r
    [[ "${v}" == "verify ok"* ]] && ok=0
  else
    v="(no ticks)"
  fi
  FIGURES+=("- 6 restore of 2a's image: restore exit ${RC_RA} (${ERR_RA:-no stderr}); wait -restore exit ${RC} (${OUT_TEXT} ${ERR_TEXT}); ${v}")
  check "6. (informational) restore of the image saved without the flag: ticks and pattern" "${ok}" "${v}"
fi

finish
