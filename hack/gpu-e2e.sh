#!/usr/bin/env bash
# The mission on a real GPU, end to end (issue 12): stasis suspends and resumes a live CUDA
# actor, driven only by the Actor resource. Runs ON the GPU machine as root: no network,
# nothing installed but the NVIDIA driver (R570+) and the CUDA toolkit (nvcc), plus bash,
# openssl, curl, python3 and xz (or python3's lzma) that hack/control-plane.sh and this script use.
#
# Before the device call, on the developer machine: hack/gpu-e2e-bundle.sh (writes
# .gpu-carry/stasis-gpu-e2e.tar.xz: kube-apiserver, etcd, kubectl, runsc, stasis and its
# libraries, the helper; under 64 MiB), then run this with carry [".gpu-carry"].
#
# What it does:
#   1. unpacks the archive; builds the workload (tests/gpu/workload.cu: N GiB of device memory
#      with a known pattern, a kernel ticking a device counter) and the copy-bandwidth probe
#      with nvcc; installs the helper where manifests/cdi/ puts it;
#   2. writes the node's CDI specs: nvidia.com/gpu, one device per GPU named by its UUID (what
#      `nvidia-ctk cdi generate --device-name-strategy=uuid` writes; the tool is not on this
#      machine), and the project's manifests/cdi/stasis-cuda-checkpoint.yaml as shipped;
#   3. starts the real control plane (hack/control-plane.sh), `stasis controller` and
#      `stasis node --gpus=auto` (one Worker per GPU, from NVML, with its model and driver);
#   4. for each size N (STASIS_GPU_E2E_GIB, default "1 8"): creates a GPU Actor (unpinned: the
#      controller binds it) whose OCI bundle lists NO device — the node agent adds the GPU and
#      the helper from the CDI specs —, waits for RUNNING, then `kubectl patch` Paused (checks:
#      GPU memory released, worker Free, the snapshot's checksums follow the PAUSED write) and
#      Running again (the ticks go on), then `kubectl patch` Suspended
#      (checks: STATUS_SUSPENDED, GPU memory released in nvidia-smi, worker Free, snapshot
#      committed, metrics show size and latency), then Running (checks: RUNNING, the pattern
#      verifies, the ticks continue with no gap), then deletes it;
#   5. the seed's failure, for contrast: a running GPU actor whose cudaCheckpointPath is
#      changed to a path where no helper is — preflight refuses, it keeps running with
#      CudaCheckpointReady=False; then the node agent is restarted with a fault injector in
#      front of the real runsc that drops -cuda-checkpoint-path (tests/support/runsc-drop-cuda-flag.sh)
#      — runsc fails, the sandbox dies, and stasis cleans up and frees the worker within the
#      checkpoint deadline instead of leaving the actor in STATUS_SUSPENDING;
#   6. writes a Markdown report (and every log) to $OUT, or build/gpu-e2e/results.
#
# STASIS_GPU_E2E_MODE=pause-overhead runs the pause-overhead benchmark instead of steps 4 and 5:
# tests/bench/pause_overhead.cc (carried as bin/bench_pause_overhead) with one live CUDA actor
# of STASIS_GPU_E2E_GIB GiB (one size) against a direct `runsc checkpoint -cuda-checkpoint-path`
# and `runsc restore -detach` of a second sandbox of the same bundle on the same GPU,
# STASIS_GPU_E2E_CYCLES cycles (default 50) per mode, for each of STASIS_GPU_E2E_BENCH_MODES
# (default "pause suspend": the pause and the resume from its image; the suspend into the
# agent's filesystem store and the resume from it), each mode given an equal share of the time
# left; the reports are in the Markdown report and in $OUT/pause-overhead.txt (pause) and
# $OUT/pause-overhead-suspend.txt. STASIS_GPU_E2E_BENCH_STORE=s3 (with the mode suspend) commits
# to SeaweedFS on the GPU machine instead (the platform mode's archive, which carries it), and
# the direct side adds curl's upload and download of the same image (pause-overhead.sh --store s3).
# Before it, bench_object_store_transfer (hack/bench/object-store.sh's program) moves
# STASIS_GPU_E2E_TRANSFER_MB MiB (default 1024; 0 skips) against curl on the same store, into
# $OUT/object-store-transfer.txt. STASIS_GPU_E2E_WARMUP (default 1) unreported cycles come first;
# 0 where the disk holds one cycle's images only (8 GiB against the object store: ~45 GB).
#
# STASIS_GPU_E2E_AGENT_FLAGS adds flags to the agent's command line in this mode.
#
# STASIS_GPU_E2E_MODE=template runs hack/gpu-e2e-templates.sh instead of steps 4 and 5: a GPU
# ActorTemplate whose golden snapshot holds a CUDA context, and actors restored from it onto
# the GPU (STASIS_GPU_E2E_CLONES of them, default 2).
#
# STASIS_GPU_E2E_MODE=old-glibc runs steps 4 (not 5) with the actor in a Debian 11 root filesystem
# (glibc 2.31, older than the helper's build) and the workload built for it
# (hack/gpu-e2e-old-glibc.sh; its archive from hack/gpu-e2e-old-glibc-bundle.sh).
#
# STASIS_GPU_E2E_CPU=1 runs the same flow without a GPU (a shell stand-in workload, a CDI spec
# without device nodes): a check of this script, the archive and the wiring, not of the GPU.
# Exit status 0 when every check passed.
set -uo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WORK="${REPO_ROOT}/build/gpu-e2e"
RESULTS="${OUT:-${WORK}/results}"
SIZES="${STASIS_GPU_E2E_GIB:-1 8}"
CPU_ONLY="${STASIS_GPU_E2E_CPU:-0}"
ARCHIVE="${STASIS_GPU_E2E_ARCHIVE:-${REPO_ROOT}/.gpu-carry/stasis-gpu-e2e.tar.xz}"
HARD_S="${STASIS_GPU_E2E_HARD_S:-560}"   # the device tool's call limit is 600 s
MODE="${STASIS_GPU_E2E_MODE:-e2e}"
CYCLES="${STASIS_GPU_E2E_CYCLES:-50}"
BENCH_MODES="${STASIS_GPU_E2E_BENCH_MODES:-pause suspend}"
BENCH_STORE="${STASIS_GPU_E2E_BENCH_STORE:-dir}"
TRANSFER_MB="${STASIS_GPU_E2E_TRANSFER_MB:-1024}"
WARMUP="${STASIS_GPU_E2E_WARMUP:-1}"
NS=gpu-e2e
NODE=gpu-node
HELPER_HOST=/usr/lib/stasis/cuda-checkpoint          # manifests/cdi's hostPath (a directory)
CKPT_PATH=/opt/cuda/cuda-checkpoint                  # the actors' spec.gpu.cudaCheckpointPath

say() { printf '[gpu-e2e %s +%ss] %s\n' "$(date +%T)" "${SECONDS}" "$*" >&2; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
one_line() { tr '\n' ' ' | sed -e 's/|/\\|/g' -e 's/ *$//'; }

CHECK_ROWS=(); NOT_RUN=(); SIZE_ROWS=(); PAUSE_ROWS=(); FIGURES=(); MACHINE_LINES=(); CONTRAST=(); MADE=()
FAILED=0
check() {
  local verdict=PASS
  if [[ "$2" != 0 ]]; then verdict=FAIL; FAILED=$((FAILED + 1)); fi
  CHECK_ROWS+=("| $1 | ${verdict} | $(printf '%s' "$3" | one_line | cut -c1-600) |")
  say "${verdict}: $1 — $3"
}

# ---- cleanup and report (always) -----------------------------------------------------------
PIDS=()
finish() {
  trap - EXIT
  say "finishing"
  for p in "${PIDS[@]}"; do kill -TERM "${p}" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 100); do kill -0 "${p}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${p}" 2>/dev/null
  done
  if [[ -x "${RUNSC:-}" ]]; then
    for dir in "${WORK}"/root/run/* "${WORK}/bench/direct-root"; do
      [[ -d "${dir}" ]] || continue
      for id in $("${RUNSC}" -root "${dir}" list -quiet 2>/dev/null); do
        timeout 60 "${RUNSC}" -root "${dir}" delete -force "${id}" >/dev/null 2>&1
      done
      umount -l "${dir}/null-netns" 2>/dev/null
    done
  fi
  STASIS_CACHE="${WORK}/pkg/cache" "${REPO_ROOT}/hack/control-plane.sh" down --dir "${WORK}/cp" >/dev/null 2>&1
  if [[ -d "${WORK}/platform" ]]; then
    "${REPO_ROOT}/hack/registry.sh" down --dir "${WORK}/platform/registry" >/dev/null 2>&1
    "${REPO_ROOT}/hack/object-store.sh" down --dir "${WORK}/platform/s3" >/dev/null 2>&1
  fi
  for f in "${MADE[@]}"; do rm -rf "${f}"; done
  rmdir /usr/lib/stasis 2>/dev/null
  mkdir -p "${RESULTS}"
  # What the sentries timed themselves (runsc -debug boot logs): the CUDA toggles, save, load.
  SENTRY=$(grep -hE 'cuda-checkpoint on [0-9]+ processes took|Overall save took|Overall load took|Save (succeeded|failed)|Restore successful|Killing the sandbox' \
    "${WORK}"/dbg/*boot* 2>/dev/null | sort -k2,2 | cut -c1-300)
  # Few files come back from the device machine: the logs travel as one archive.
  tar -C "${WORK}" -cJf "${RESULTS}/gpu-e2e-logs.tar.xz" $(cd "${WORK}" && ls ./*.log 2>/dev/null) 2>/dev/null
  {
    echo "# stasis on a real GPU: suspend and resume of a live CUDA actor, end to end"
    echo
    echo "Produced by \`hack/gpu-e2e.sh\` on $(date -u +%Y-%m-%dT%H:%M:%SZ)$([[ "${CPU_ONLY}" == 1 ]] && echo ' in CPU-only mode (a shell stand-in, no GPU: not a GPU result)')."
    echo
    printf '%s\n' "${MACHINE_LINES[@]}"
    echo
    echo "## Suspend and resume, per size"
    echo
    echo "Wall times from \`kubectl patch\` to the status (the API as a user sees it); the parts from"
    echo "stasis's own histograms (\`stasis_snapshot_duration_seconds\`) and the sentry's log."
    echo
    echo "| GiB | suspend: patch → SUSPENDED s | runsc checkpoint s | of which CUDA toggle s | commit to store s | image bytes | GPU MiB used before → after | resume: patch → RUNNING s | patch → Ready s (CUDA state back) | runsc restore s | verify |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${SIZE_ROWS[@]}"
    echo
    echo "## Pause and resume, per size (before the suspend above)"
    echo
    echo "A Pause keeps the snapshot on the node: its sha256 and fsyncs run after the PAUSED write"
    echo "(docs/node-agent.md, durability of a pause snapshot), so the GPU and the worker are free"
    echo "without waiting for them. \"checksums in\": from the client seeing PAUSED until it saw the"
    echo "manifest without \`checksumsPending\` (the background job's hashing done), polled every 0.1 s"
    echo "after two kubectl reads (~0.4 s): an upper bound."
    echo
    echo "| GiB | pause: patch → PAUSED s | runsc checkpoint s | worker at PAUSED | GPU MiB used after | checksums in s | resume: patch → RUNNING s | ticks go on |"
    echo "|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${PAUSE_ROWS[@]}"
    echo
    echo "## Figures"
    echo
    printf '%s\n' "${FIGURES[@]}"
    for f in "${RESULTS}/pause-overhead.txt" "${RESULTS}/pause-overhead-suspend.txt"; do
      [[ -s "${f}" ]] || continue
      echo
      echo "## Pause overhead benchmark (STASIS_GPU_E2E_MODE=pause-overhead): $(basename "${f}")"
      echo
      echo '```'
      cat "${f}"
      echo '```'
    done
    echo
    echo "## What the sentries logged (runsc -debug boot logs, by time)"
    echo
    echo '```'
    printf '%s\n' "${SENTRY:-}"
    echo '```'
    echo
    echo "## Failure contrast (exact output)"
    echo
    printf '%s\n' "${CONTRAST[@]}"
    echo
    echo "## Every check"
    echo
    echo "| check | result | detail |"
    echo "|---|---|---|"
    printf '%s\n' "${CHECK_ROWS[@]}"
    echo
    if ((${#NOT_RUN[@]})); then
      echo "## Not run"
      echo
      printf -- '- %s\n' "${NOT_RUN[@]}"
      echo
    fi
    echo "${FAILED} check(s) failed. Elapsed ${SECONDS} s."
  } > "${RESULTS}/gpu-e2e-results.md"
  cat "${RESULTS}/gpu-e2e-results.md"
  exit $((FAILED > 0))
}
trap finish EXIT
fail_now() { check "$1" 1 "$2"; exit 1; }
over_time() { ((SECONDS + $1 > HARD_S)); }

# ---- 1. unpack, build, install ---------------------------------------------------------------
for id in $(ls "${WORK}/root/run" 2>/dev/null); do
  umount -l "${WORK}/root/run/${id}/null-netns" 2>/dev/null
done
rm -rf "${WORK}"
mkdir -p "${WORK}/pkg" "${WORK}/w" "${WORK}/cdi" "${WORK}/dbg" "${WORK}/bench" "${RESULTS}"
[[ -f "${ARCHIVE}" ]] || fail_now "archive present" "${ARCHIVE} is missing: run hack/gpu-e2e-bundle.sh on the developer machine"
if command -v xz >/dev/null; then
  xz -dc "${ARCHIVE}" | tar -C "${WORK}/pkg" -xf -
else
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' "${ARCHIVE}" | tar -C "${WORK}/pkg" -xf -
fi
PKG="${WORK}/pkg"
RUNSC="${PKG}/bin/runsc"
export PATH="${PKG}/bin:${PATH}"
export STASIS_CACHE="${PKG}/cache"
stasis() { LD_LIBRARY_PATH="${PKG}/lib" "${PKG}/bin/stasis" "$@"; }
need_glibc=$(cat "${PKG}/glibc-version"); have_glibc=$(ldd --version | head -1 | awk '{ print $NF }')
check "this glibc (${have_glibc}) runs the carried stasis (built against ${need_glibc})" \
  "$([[ "$(printf '%s\n%s\n' "${need_glibc}" "${have_glibc}" | sort -V | head -1)" == "${need_glibc}" ]]; echo $?)" \
  "$(stasis --help 2>&1 | head -1)"
MACHINE_LINES+=("- kernel $(uname -r), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(. /etc/os-release; echo "${PRETTY_NAME}"), glibc ${have_glibc}")
MACHINE_LINES+=("- $(cat "${PKG}/runsc-version"); kube-apiserver and etcd of hack/versions.env; stasis built with glibc ${need_glibc}")

if [[ "${CPU_ONLY}" == 1 ]]; then
  cat > "${WORK}/w/workload" <<'EOF'
#!/bin/sh
# CPU stand-in speaking the workload's protocol (ready, ticks, verify on USR1).
trap 'echo "verify ok mismatches=0 gib=0 (cpu stand-in)"' USR1
echo "ready pid=$$ gib=0"
i=0
while :; do i=$((i + 1)); echo "tick $i"; sleep 0.05; done
EOF
  chmod 0755 "${WORK}/w/workload"
else
  GPU_LINE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)
  MACHINE_LINES+=("- GPU: ${GPU_LINE}; nvcc $(nvcc --version | grep -o 'release [0-9.]*' | head -1)")
  nvcc -O2 -arch=sm_90 -o "${WORK}/w/workload" "${REPO_ROOT}/tests/gpu/workload.cu" > "${WORK}/build.log" 2>&1 &
  b1=$!
  nvcc -O2 -arch=sm_90 -o "${WORK}/copy_bandwidth" "${REPO_ROOT}/tests/gpu/copy_bandwidth.cu" >> "${WORK}/build.log" 2>&1 &
  b2=$!
  wait "${b1}" && wait "${b2}" || fail_now "nvcc builds the workload and the bandwidth probe" "$(cat "${WORK}/build.log")"
fi
[[ -e "${HELPER_HOST}" ]] || MADE+=("${HELPER_HOST}")
mkdir -p "$(dirname "${HELPER_HOST}")"
cp -R --preserve=mode --remove-destination -T "${PKG}/cuda-checkpoint" "${HELPER_HOST}"

# ---- 2. CDI specs ----------------------------------------------------------------------------
cp "${REPO_ROOT}/manifests/cdi/stasis-cuda-checkpoint.yaml" "${WORK}/cdi/"
# The GPU spec's kind and common edits up to its device nodes (none without a GPU); the caller
# adds its mounts (hack/gpu-e2e-old-glibc.sh writes its own).
gpu_cdi_common() {
  echo "cdiVersion: \"0.6.0\""
  echo "kind: nvidia.com/gpu"
  echo "containerEdits:"
  echo "  env: [\"NVIDIA_DRIVER_CAPABILITIES=compute,utility\"]"
  [[ "${CPU_ONLY}" == 1 ]] && return 0
  echo "  deviceNodes:"
  for dev in /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia-uvm-tools; do
    [[ -c "${dev}" ]] && echo "    - path: ${dev}"
  done
  return 0
}
{
  echo "# Written by hack/gpu-e2e.sh from this host, in the shape of nvidia-ctk's uuid strategy."
  gpu_cdi_common
  if [[ "${CPU_ONLY}" != 1 ]]; then
    libcuda=$(ldconfig -p | awk '/libcuda\.so\.1 / { print $NF; exit }')
    libdir=$(dirname "$(readlink -f "${libcuda}")")
    echo "  mounts:"
    echo "    - {hostPath: ${libdir}, containerPath: ${libdir}, options: [ro, nosuid, nodev, rbind]}"
    MACHINE_LINES+=("- libcuda.so.1: ${libcuda} → $(readlink -f "${libcuda}")")
  fi
  echo "devices:"
  if [[ "${CPU_ONLY}" == 1 ]]; then
    echo "  - name: GPU-cpu-stand-in-0"
    echo "    containerEdits: {env: [\"STASIS_GPU=GPU-cpu-stand-in-0\"]}"
  else
    nvidia-smi --query-gpu=uuid,pci.bus_id --format=csv,noheader | while IFS=', ' read -r uuid bus; do
      bus=$(echo "${bus}" | tr 'A-F' 'a-f' | sed 's/^0000\(....:\)/\1/')
      minor=$(awk -F: '/Device Minor/ { gsub(/[ \t]/, "", $2); print $2 }' /proc/driver/nvidia/gpus/*"${bus#*:}"/information 2>/dev/null | head -1)
      echo "  - name: ${uuid}"
      echo "    containerEdits: {deviceNodes: [{path: /dev/nvidia${minor:-0}}]}"
    done
  fi
} > "${WORK}/cdi/nvidia.yaml"
MACHINE_LINES+=("- the node's GPU CDI spec, as written: \`$(grep -v '^#' "${WORK}/cdi/nvidia.yaml" | one_line)\`")
# cdi_driver_libraries WRITER: rewrites the GPU's CDI spec with the driver's libraries mounted
# one by one at their sonames under the root's library directory (what nvidia-ctk's spec plus its
# create-symlinks hook give a container), for a root filesystem of its own: the host's whole
# library directory would bring the host's C library into it.
cdi_driver_libraries() {
  local lib host gpucomp
  {
    echo "# Written by $1: the driver's libraries one by one."
    gpu_cdi_common
    if [[ "${CPU_ONLY}" != 1 ]]; then
      echo "  mounts:"
      for lib in libcuda.so.1 libnvidia-ptxjitcompiler.so.1 libnvidia-ml.so.1 libnvidia-nvvm.so.4; do
        host=$(ldconfig -p | awk -v l="${lib}" '$1 == l && /x86-64/ { print $NF; exit }')
        [[ -n "${host}" ]] || continue
        echo "    - {hostPath: $(readlink -f "${host}"), containerPath: /usr/lib/x86_64-linux-gnu/${lib}, options: [ro, nosuid, nodev, bind]}"
      done
      # libcuda's own dependency of recent drivers, by its versioned name.
      for gpucomp in $(ldconfig -p | awk '$1 ~ /^libnvidia-gpucomp\.so\.[0-9]/ && /x86-64/ { print $NF; exit }'); do
        echo "    - {hostPath: $(readlink -f "${gpucomp}"), containerPath: /usr/lib/x86_64-linux-gnu/$(basename "${gpucomp}"), options: [ro, nosuid, nodev, bind]}"
      done
    fi
    sed -n '/^devices:/,$p' "${WORK}/cdi/nvidia.yaml"
  } > "${WORK}/cdi/nvidia.yaml.new"
  mv "${WORK}/cdi/nvidia.yaml.new" "${WORK}/cdi/nvidia.yaml"
  MACHINE_LINES+=("- the GPU's CDI spec for this mode: \`$(grep -v '^#' "${WORK}/cdi/nvidia.yaml" | one_line)\`")
}

# ---- actor bundles: the host's /usr and /etc, read-only; NO devices (CDI adds them) ----------
# Bundles and their root filesystem live under the agent's --bundle-root; the host directories
# they bind read-only are its --bundle-readonly-source list (docs/node-agent.md).
BUNDLES="${WORK}/bundles"
RO_SOURCES=(--bundle-readonly-source /usr --bundle-readonly-source /etc --bundle-readonly-source "${WORK}/w")
ROOTFS="${BUNDLES}/rootfs"
mkdir -p "${ROOTFS}"/{usr,etc,proc,dev,sys,tmp,w,opt}
MOUNTS='{"destination":"/proc","type":"proc","source":"proc"},
 {"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","strictatime","mode=755","size=65536k"]},
 {"destination":"/sys","type":"sysfs","source":"sysfs","options":["nosuid","noexec","nodev","ro"]},
 {"destination":"/tmp","type":"tmpfs","source":"tmpfs","options":["nosuid","nodev","mode=1777"]},
 {"destination":"/usr","type":"bind","source":"/usr","options":["rbind","ro","nosuid","nodev"]},
 {"destination":"/etc","type":"bind","source":"/etc","options":["rbind","ro","nosuid","nodev"]},
 {"destination":"/w","type":"bind","source":"'"${WORK}/w"'","options":["rbind","ro","nosuid","nodev"]}'
for d in bin sbin lib lib32 lib64 libx32; do
  if [[ -L "/${d}" ]]; then
    ln -s "$(readlink "/${d}")" "${ROOTFS}/${d}"
  elif [[ -d "/${d}" ]]; then
    mkdir -p "${ROOTFS}/${d}"
    MOUNTS+=', {"destination":"/'"${d}"'","type":"bind","source":"/'"${d}"'","options":["rbind","ro","nosuid","nodev"]}'
    RO_SOURCES+=(--bundle-readonly-source "/${d}")
  fi
done
make_bundle() {  # make_bundle GIB
  mkdir -p "${BUNDLES}/bundle-$1"
  cat > "${BUNDLES}/bundle-$1/config.json" <<EOF
{"ociVersion": "1.0.2",
 "process": {"terminal": false, "user": {"uid": 0, "gid": 0},
  "args": ["/bin/sh", "-c", "exec /w/workload --gib $1 --spin-ms 5000 >/tmp/w.log 2>&1"],
  "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"],
  "cwd": "/", "noNewPrivileges": true},
 "root": {"path": "${ROOTFS}", "readonly": false},
 "hostname": "stasis-gpu",
 "mounts": [${MOUNTS}],
 "linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]}}
EOF
}
# actor_source GIB INDENT: the spec's lines naming what the actor runs (a bundle of the host's
# /usr and /etc here; STASIS_GPU_E2E_MODE=platform names an image instead). Also the template's.
actor_source() { make_bundle "$1"; echo "$2bundle: ${BUNDLES}/bundle-$1"; }
# store_has_manifest ACTOR ID: the committed snapshot is in the store (its manifest written last).
store_has_manifest() { [[ -f "${STORE}/${NS}/$1/$2/manifest.json" ]]; }
STORE="${WORK}/store"

# ---- 3. control plane, controller, node agent -------------------------------------------------
cp_out=$("${REPO_ROOT}/hack/control-plane.sh" up --dir "${WORK}/cp" 2>"${WORK}/control-plane.log") \
  || fail_now "control plane up" "$(tail -5 "${WORK}/control-plane.log")"
export KUBECONFIG="${WORK}/cp/kubeconfig"
kubectl apply -f "${REPO_ROOT}/manifests/crd/" >/dev/null
kubectl wait --for condition=established --timeout=60s crd/actors.stasis.dev crd/actortemplates.stasis.dev crd/workers.stasis.dev >/dev/null
kubectl create namespace stasis-system >/dev/null
kubectl create namespace "${NS}" >/dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
CPORT=$(free_port); NPORT=$(free_port)
stasis controller --kubeconfig "${KUBECONFIG}" --metrics-addr "127.0.0.1:${CPORT}" > "${WORK}/controller.log" 2>&1 &
PIDS+=($!)
RUNSC_FLAGS="-network=none -overlay2=root:memory -debug -debug-log=${WORK}/dbg/"
AGENT_FLAGS=()
if [[ "${MODE}" == pause-overhead ]]; then
  # The benchmark calls runsc with the agent's global flags: no debug logs on either side, and
  # the agent's debug lines split each pause into its steps.
  RUNSC_FLAGS="-network=none -overlay2=root:memory"
  AGENT_FLAGS=(--log-level debug)
  # STASIS_GPU_E2E_AGENT_FLAGS: more of the agent's flags (e.g. --resume-writes serial), to
  # compare a setting against the default in runs on the same machine.
  read -ra extra_agent_flags <<< "${STASIS_GPU_E2E_AGENT_FLAGS:-}"
  AGENT_FLAGS+=("${extra_agent_flags[@]}")
fi
GPUS=auto
[[ "${CPU_ONLY}" == 1 ]] && GPUS=GPU-cpu-stand-in-0
if [[ "${MODE}" == platform ]]; then
  source "${REPO_ROOT}/hack/gpu-e2e-platform.sh"
  platform_services_up
  platform_cdi
elif [[ "${MODE}" == pause-overhead && "${BENCH_STORE}" == s3 ]]; then
  # The platform mode's services (its archive carries SeaweedFS): the agent commits to the
  # object store there, and the benchmark's direct side uploads and downloads with curl.
  source "${REPO_ROOT}/hack/gpu-e2e-platform.sh"
  platform_services_up
fi
AGENT_PID=""
start_agent() {  # start_agent RUNSC_PATH LOGNAME [ENV...]
  local runsc_path=$1 logname=$2
  shift 2
  env "$@" LD_LIBRARY_PATH="${PKG}/lib" "${PKG}/bin/stasis" node --kubeconfig "${KUBECONFIG}" \
    --node-name "${NODE}" --runsc "${runsc_path}" --runsc-flags "${RUNSC_FLAGS}" --root "${WORK}/root" \
    --snapshot-store "${STORE}" --gpus "${GPUS}" --cdi-spec-dirs "${WORK}/cdi" \
    --metrics-addr "127.0.0.1:${NPORT}" --heartbeat-period 2 --heartbeat-lease-duration 10 \
    --bundle-root "${BUNDLES}" "${RO_SOURCES[@]}" "${AGENT_FLAGS[@]}" > "${WORK}/${logname}.log" 2>&1 &
  AGENT_PID=$!
  PIDS+=("${AGENT_PID}")
  for _ in $(seq 300); do
    grep -q "node agent ready node=${NODE}" "${WORK}/${logname}.log" && return 0
    kill -0 "${AGENT_PID}" 2>/dev/null || break
    sleep 0.1
  done
  fail_now "node agent ready" "$(tail -5 "${WORK}/${logname}.log")"
}
start_agent "${RUNSC}" node-agent
WORKER="${NODE}-gpu0"
want_uuid=GPU-cpu-stand-in-0
[[ "${CPU_ONLY}" == 1 ]] || want_uuid=$(nvidia-smi -L | sed -n 's/.*(UUID: \(GPU-[^)]*\)).*/\1/p' | head -1)
got_uuid=$(kubectl get worker "${WORKER}" -o jsonpath='{.spec.devices[0]}')
check "--gpus=${GPUS} registered Worker ${WORKER} for the GPU" "$([[ "${got_uuid}" == "${want_uuid}" ]]; echo $?)" \
  "spec.devices[0]=${got_uuid}; nvidia-smi -L: ${want_uuid}"
if [[ "${CPU_ONLY}" != 1 ]]; then
  want_gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
  got_gpu=$(kubectl get worker "${WORKER}" -o jsonpath='{.spec.gpu.model}, {.spec.gpu.driverVersion}')
  check "Worker ${WORKER} publishes the GPU's model and driver" "$([[ "${got_gpu}" == "${want_gpu}" ]]; echo $?)" \
    "spec.gpu: ${got_gpu}; nvidia-smi: ${want_gpu}"
fi

# ---- helpers on actors ------------------------------------------------------------------------
jp() { kubectl get actor "$1" -n "${NS}" -o jsonpath="$2" 2>/dev/null; }
wait_status() {  # wait_status ACTOR STATUS SECONDS
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    [[ "$(jp "$1" '{.status.status}')" == "$2" ]] && return 0
    sleep 0.2
  done
  return 1
}
wait_ready() {  # wait_ready ACTOR SECONDS
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    [[ "$(jp "$1" '{.status.conditions[?(@.type=="Ready")].status}')" == True ]] && return 0
    sleep 0.2
  done
  return 1
}
create_actor() {  # create_actor NAME GIB [CHECKPOINT_SECONDS]
  kubectl apply -f - >/dev/null <<EOF
apiVersion: stasis.dev/v1alpha1
kind: Actor
metadata: {name: $1, namespace: ${NS}}
spec:
  runtime: gvisor
$(actor_source "$2" "  ")
  gpu: {count: 1, cudaCheckpointPath: ${CKPT_PATH}}
  desiredState: Running
  checkpointPolicy: Direct
  snapshots: {onPause: Full, onCommit: Full}
  timeouts: {checkpointSeconds: ${3:-300}, restoreSeconds: 300}
EOF
}
patch_desired() { kubectl patch actor "$1" -n "${NS}" --type merge -p "{\"spec\":{\"desiredState\":\"$2\"}}" >/dev/null; }
sb_id() { jp "$1" '{.status.sandboxID}'; }  # the runsc container id the agent started it with
sb_root() { echo "${WORK}/root/run/$(sb_id "$1")"; }
wlog() { timeout 30 "${RUNSC}" -root "$(sb_root "$1")" exec "$(sb_id "$1")" /bin/cat /tmp/w.log 2>/dev/null; }
last_tick() { wlog "$1" | grep '^tick ' | tail -1 | awk '{ print $2 }'; }
# tick_after ACTOR TICK SECONDS: the last tick once it is past TICK (polled), or TICK when none
# came within SECONDS. After a restore the CUDA context comes back asynchronously (~2 s at
# 8 GiB, docs/gpu-e2e-results.md), and the device counter ticks again only then.
tick_after() {
  local deadline=$((SECONDS + $3)) t="$2"
  while ((SECONDS < deadline)); do
    t=$(last_tick "$1")
    [[ -n "${t}" && -n "$2" ]] && ((t > $2)) && break
    sleep 0.5
  done
  echo "${t}"
}
ticks_consecutive() { wlog "$1" | grep '^tick ' | awk '$2 != NR { bad = 1 } END { exit bad || NR == 0 }'; }
wait_log() {  # wait_log ACTOR PATTERN SECONDS
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    wlog "$1" | grep -q "$2" && return 0
    sleep 0.3
  done
  return 1
}
gpu_used() { [[ "${CPU_ONLY}" == 1 ]] && { echo 0; return; }; nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1; }
gpu_apps() { [[ "${CPU_ONLY}" == 1 ]] && return; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; }
worker_phase() { kubectl get worker "${WORKER}" -o jsonpath='{.status.phase}'; }
# The worker is given back after the PAUSED/SUSPENDED write, once the stopped sandbox (and its
# hold on the GPU) is deleted: ~1 s later on an H200. Waits up to 15 s for it.
wait_worker_free() { for _ in $(seq 150); do [[ "$(worker_phase)" == Free ]] && return 0; sleep 0.1; done; return 1; }
# metric NAME LABEL…: the value of the node's /metrics series NAME{…} that has every LABEL
# (e.g. 'operation="checkpoint"'); 0 when there is none.
metric() {
  local name=$1; shift
  curl -fsS "http://127.0.0.1:${NPORT}/metrics" | awk -v n="${name}{" -v want="$*" '
    index($0, n) == 1 { ok = 1; k = split(want, w, " "); for (i = 1; i <= k; i++) if (!index($0, w[i])) ok = 0; if (ok) v = $NF }
    END { print v + 0 }'
}
# op_sum OPERATION [TRIGGER]: seconds summed so far by stasis_snapshot_duration_seconds for GPU
# actors' snapshots of that trigger (default Suspend).
op_sum() { metric stasis_snapshot_duration_seconds_sum "operation=\"$1\"" "trigger=\"${2:-Suspend}\"" 'gpu="true"' 'result="success"'; }
# checksums_pending DIR: "true" while a snapshot's manifest still waits for its checksums.
checksums_pending() { python3 -c 'import json, sys; print(str(json.load(open(sys.argv[1])).get("checksumsPending", False)).lower())' "$1/manifest.json" 2>/dev/null || echo "?"; }
delta() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
# sentry_toggle_s: the latest "cuda-checkpoint on N processes took [X]" of the sentry logs
# (pkg/sentry/control/state_cuda.go), in seconds: the CUDA toggle of the last checkpoint.
sentry_toggle_s() {
  grep -hE 'cuda-checkpoint on [0-9]+ processes took \[' "${WORK}"/dbg/*boot* 2>/dev/null | sort -k1,2 | tail -1 |
    sed -E 's/.*took \[([0-9.]+)(ms|s|µs)\].*/\1 \2/' |
    awk '{ v = $1; if ($2 == "ms") v /= 1000; else if ($2 == "µs") v /= 1e6; printf "%.2f", v }'
}
baseline_used=$(gpu_used)
# bandwidth_figure: the pinned copy's bandwidth on this GPU in this run, the yardstick for the
# CUDA toggle's times (skipped without a GPU or time).
bandwidth_figure() {
  [[ "${CPU_ONLY}" != 1 ]] && ! over_time 60 || return 0
  FIGURES+=("- pinned host↔device copy bandwidth in this run (tests/gpu/copy_bandwidth.cu, 4 GiB, 5 reps): $("${WORK}/copy_bandwidth" --gib 4 --reps 5 2>&1 | tail -1)")
}

# ---- issue 5's benchmark on the GPU, instead of steps 4 and 5 (STASIS_GPU_E2E_MODE) ------------
if [[ "${MODE}" == pause-overhead ]]; then
  [[ -x "${PKG}/bin/bench_pause_overhead" ]] ||
    fail_now "the archive has no benchmark" "built with STASIS_GPU_BUNDLE_BENCH=0; build it again without"
  gib="${SIZES%% *}"
  make_bundle "${gib}"
  read -ra modes <<<"${BENCH_MODES}"
  bench_store_flags=()
  [[ "${BENCH_STORE}" == s3 ]] && bench_store_flags=(--peer-object-store --agent-store-cache "${WORK}/root/store-cache")
  if [[ "${BENCH_STORE}" == s3 && "${TRANSFER_MB}" != 0 ]]; then
    # hack/bench/object-store.sh's measurement on this machine's cores, against the same store.
    say "=== object-store transfer, ${TRANSFER_MB} MiB, 3 rounds"
    LD_LIBRARY_PATH="${PKG}/lib" timeout 240 "${PKG}/bin/bench_object_store_transfer" --mb "${TRANSFER_MB}" \
      --rounds 3 --dir "${WORK}/transfer" > "${RESULTS}/object-store-transfer.txt" 2> "${WORK}/transfer.log"
    rc=$?
    rm -rf "${WORK}/transfer"
    check "object-store transfer, ${TRANSFER_MB} MiB, against curl" "${rc}" \
      "$(grep -E '^ratio' "${RESULTS}/object-store-transfer.txt" | one_line) $(tail -2 "${WORK}/transfer.log" | one_line)"
  fi
  for i in "${!modes[@]}"; do
    m="${modes[$i]}" suffix=""
    [[ "${m}" == pause ]] || suffix="-${m}"
    # Each mode its share of what is left. The benchmark starts no cycle that would end past its
    # share less 30 s (to delete its actors) and reports what it measured; the timeout is the
    # backstop (the CSV keeps every finished cycle, the log says where it stopped).
    budget=$(((HARD_S - SECONDS - 20) / (${#modes[@]} - i)))
    if ((budget < 60)); then  # (timeout 0 would mean no limit at all)
      check "pause-overhead benchmark, mode ${m}" 1 "skipped: ${SECONDS} s elapsed, too close to the ${HARD_S} s limit"
      continue
    fi
    say "=== pause-overhead benchmark, mode ${m}, ${gib} GiB, ${CYCLES} cycles, ${budget} s at most"
    LD_LIBRARY_PATH="${PKG}/lib" timeout -s INT "${budget}" "${PKG}/bin/bench_pause_overhead" --kubeconfig "${KUBECONFIG}" \
      --mode "${m}" --runsc "${RUNSC}" --runsc-flags "${RUNSC_FLAGS}" --bundle "${BUNDLES}/bundle-${gib}" --node "${NODE}" \
      --namespace "${NS}" --name "bench-${m}" --work-dir "${WORK}/bench-${m}" --cycles "${CYCLES}" --warmup "${WARMUP}" \
      --agent-log "${WORK}/node-agent.log" --csv "${RESULTS}/pause-overhead${suffix}.csv" \
      --gpu-uuid "${want_uuid}" --cdi-spec-dirs "${WORK}/cdi" --cuda-checkpoint-path "${CKPT_PATH}" \
      --leave-running-side=false --time-budget "$((budget - 30))s" "${bench_store_flags[@]}" \
      > "${RESULTS}/pause-overhead${suffix}.txt" 2> "${WORK}/bench${suffix}.log"
    rc=$?
    check "pause-overhead benchmark, mode ${m}, ${gib} GiB, ${CYCLES} cycles" "${rc}" \
      "$(grep -E 'target|ratio end-to-end' "${RESULTS}/pause-overhead${suffix}.txt" | one_line) $(tail -2 "${WORK}/bench${suffix}.log" | one_line)"
  done
  exit 0
fi

if [[ "${MODE}" == template ]]; then
  source "${REPO_ROOT}/hack/gpu-e2e-templates.sh"
  exit 0
fi

if [[ "${MODE}" == platform ]]; then
  platform_run
  exit 0
fi

if [[ "${MODE}" == old-glibc ]]; then
  source "${REPO_ROOT}/hack/gpu-e2e-old-glibc.sh"
fi

# ---- 4. suspend and resume, per size ------------------------------------------------------------
for gib in ${SIZES}; do
  a="cuda-${gib}"
  if over_time 200; then check "size ${gib} GiB run" 1 "skipped: ${SECONDS} s elapsed, too close to the ${HARD_S} s limit"; continue; fi
  say "=== ${gib} GiB"
  create_actor "${a}" "${gib}"
  wait_status "${a}" STATUS_RUNNING 120 || { check "${gib} GiB: RUNNING" 1 "$(jp "${a}" '{.status}')"; continue; }
  wait_log "${a}" '^ready' 120 || { check "${gib} GiB: workload ready" 1 "$(wlog "${a}" | tail -3)"; continue; }
  wait_log "${a}" '^tick 20$' 60
  if [[ "${MODE}" == old-glibc ]]; then old_glibc_checks "${a}"; fi
  used_running=$(gpu_used)
  check "${gib} GiB: the actor runs on the GPU from the CDI spec (bundle lists no device)" \
    "$([[ "${CPU_ONLY}" == 1 ]] || ((used_running > baseline_used + gib * 900)); echo $?)" \
    "worker $(jp "${a}" '{.status.workerName}'); GPU memory used ${baseline_used} → ${used_running} MiB; $(wlog "${a}" | grep '^ready')"

  # Pause, then Running again: the node-local snapshot whose hashing and fsyncs come after.
  pk_before=$(op_sum checkpoint Pause)
  t0=$(now); patch_desired "${a}" Paused
  if ! wait_status "${a}" STATUS_PAUSED 400; then
    check "${gib} GiB: PAUSED" 1 "$(jp "${a}" '{.status}')"; continue
  fi
  t1=$(now); pause_s=$(secs "${t0}" "${t1}")
  worker_at_paused=$(worker_phase)
  ploc=$(jp "${a}" '{.status.latestSnapshot.location}')
  pending_at_paused=$(checksums_pending "${ploc}")
  for _ in $(seq 1200); do [[ "$(checksums_pending "${ploc}")" == false ]] && break; sleep 0.1; done
  sums_s=$(secs "${t1}" "$(now)")
  wait_worker_free; sleep 1
  used_paused=$(gpu_used)
  pk_s=$(delta "${pk_before}" "$(op_sum checkpoint Pause)")
  check "${gib} GiB: paused — GPU memory released, worker Free, checksums follow the PAUSED write" \
    "$({ [[ "${CPU_ONLY}" == 1 ]] || ((used_paused < baseline_used + 200)); } && [[ "$(worker_phase)" == Free && "$(checksums_pending "${ploc}")" == false ]]; echo $?)" \
    "${pause_s} s to PAUSED (runsc checkpoint ${pk_s} s); nvidia-smi ${used_running} → ${used_paused} MiB; worker ${worker_at_paused} at PAUSED, $(worker_phase) now; checksumsPending ${pending_at_paused} at PAUSED, false ${sums_s} s later; ${ploc}"
  t0=$(now); patch_desired "${a}" Running
  if ! wait_status "${a}" STATUS_RUNNING 400; then
    check "${gib} GiB: RUNNING after the pause" 1 "$(jp "${a}" '{.status}')"; continue
  fi
  t1=$(now); presume_s=$(secs "${t0}" "${t1}")
  p_first=$(last_tick "${a}")
  p_later=$(tick_after "${a}" "${p_first}" 30)
  check "${gib} GiB: resumed from the pause — the ticks continue with no gap" \
    "$([[ -n "${p_first}" && -n "${p_later}" ]] && ((p_later > p_first)) && ticks_consecutive "${a}"; echo $?)" \
    "${presume_s} s to RUNNING; last tick right after RUNNING ${p_first}, then ${p_later} (waited up to 30 s)"
  PAUSE_ROWS+=("| ${gib} | ${pause_s} | ${pk_s} | ${worker_at_paused} | ${used_paused} | ${sums_s} | ${presume_s} | ${p_first} → ${p_later} |")

  ck_before=$(op_sum checkpoint); cm_before=$(op_sum commit); rs_before=$(op_sum restore)
  ru_before=$(op_sum restore_usable)

  t0=$(now); patch_desired "${a}" Suspended
  if ! wait_status "${a}" STATUS_SUSPENDED 400; then
    check "${gib} GiB: SUSPENDED" 1 "$(jp "${a}" '{.status}')"; continue
  fi
  t1=$(now); suspend_s=$(secs "${t0}" "${t1}")
  wait_worker_free; sleep 1
  used_suspended=$(gpu_used)
  check "${gib} GiB: suspended — GPU memory released" \
    "$([[ "${CPU_ONLY}" == 1 ]] || ((used_suspended < baseline_used + 200)); echo $?)" \
    "nvidia-smi memory.used ${used_running} → ${used_suspended} MiB (baseline ${baseline_used}); compute apps: $(gpu_apps | one_line)"
  check "${gib} GiB: suspended — worker Free" "$([[ "$(worker_phase)" == Free ]]; echo $?)" "phase $(worker_phase)"
  loc=$(jp "${a}" '{.status.latestSnapshot.location}'); size=$(jp "${a}" '{.status.latestSnapshot.sizeBytes}')
  check "${gib} GiB: snapshot committed to the store" \
    "$([[ "${loc}" == "${WORK}/store/"* && -f "${loc}/manifest.json" ]]; echo $?)" "latestSnapshot ${loc}, ${size} bytes; $(jp "${a}" '{.status.conditions[?(@.type=="CudaCheckpointReady")].message}')"
  ck_s=$(delta "${ck_before}" "$(op_sum checkpoint)"); cm_s=$(delta "${cm_before}" "$(op_sum commit)")
  size_metric=$(metric stasis_snapshot_size_bytes_sum 'trigger="Suspend"' 'scope="Full"' 'gpu="true"')
  check "${gib} GiB: metrics show the snapshot's size and latency" "$(awk -v c="${ck_s}" -v s="${size_metric}" 'BEGIN { exit !(c > 0 && s > 0) }'; echo $?)" \
    "stasis_snapshot_duration_seconds checkpoint +${ck_s} s, commit +${cm_s} s; stasis_snapshot_size_bytes_sum ${size_metric}"
  toggle_s=$(sentry_toggle_s)

  t0=$(now); patch_desired "${a}" Running
  if ! wait_status "${a}" STATUS_RUNNING 400; then
    check "${gib} GiB: RUNNING again" 1 "$(jp "${a}" '{.status}')"; continue
  fi
  t1=$(now); resume_s=$(secs "${t0}" "${t1}")
  rs_s=$(delta "${rs_before}" "$(op_sum restore)")
  # RUNNING comes when runsc restore returns; Ready only once the CUDA toggle back has finished.
  ready_at_running=$(jp "${a}" '{.status.conditions[?(@.type=="Ready")].reason}')
  wait_ready "${a}" 120; t2=$(now); usable_s=$(secs "${t0}" "${t2}")
  ru_s=$(delta "${ru_before}" "$(op_sum restore_usable)")
  waited=$(grep "restore finished actor=${NS}/${a} " "${WORK}/node-agent.log" | tail -1 | sed -n 's/.*waited_s=\([0-9.]*\).*/\1/p')
  check "${gib} GiB: resumed — Ready only once the CUDA state is back (runsc wait -restore)" \
    "$([[ "$(jp "${a}" '{.status.conditions[?(@.type=="Restored")].reason}')" == RestoreComplete && -n "${waited}" ]] \
       && awk -v u="${ru_s}" -v r="${rs_s}" 'BEGIN { exit !(u >= r) }'; echo $?)" \
    "Ready at RUNNING: ${ready_at_running:-?}; patch → RUNNING ${resume_s} s, → Ready ${usable_s} s; runsc restore ${rs_s} s, until usable ${ru_s} s (wait -restore ${waited:-?} s)"
  t_first=$(last_tick "${a}")
  t_later=$(tick_after "${a}" "${t_first}" 30)
  timeout 30 "${RUNSC}" -root "$(sb_root "${a}")" kill "$(sb_id "${a}")" USR1 >/dev/null 2>&1
  wait_log "${a}" '^verify' 120
  verify=$(wlog "${a}" | grep '^verify' | tail -1)
  check "${gib} GiB: resumed — the pattern verifies" "$([[ "${verify}" == "verify ok mismatches=0"* ]]; echo $?)" "${verify:-no answer}"
  check "${gib} GiB: resumed — the ticks continue with no gap" \
    "$([[ -n "${t_first}" && -n "${t_later}" ]] && ((t_later > t_first)) && ticks_consecutive "${a}"; echo $?)" \
    "last tick right after RUNNING ${t_first}, then ${t_later} (waited up to 30 s); every tick 1…${t_later} present once"
  SIZE_ROWS+=("| ${gib} | ${suspend_s} | ${ck_s} | ${toggle_s:-?} | ${cm_s} | ${size} | ${used_running} → ${used_suspended} | ${resume_s} | ${usable_s} | ${rs_s} | ${verify} |")

  kubectl delete actor "${a}" -n "${NS}" --timeout=120s >/dev/null 2>&1
  check "${gib} GiB: kubectl delete completes, the worker is free" \
    "$([[ -z "$(kubectl get actor "${a}" -n "${NS}" -o name 2>/dev/null)" && "$(worker_phase)" == Free ]]; echo $?)" "worker $(worker_phase)"
done

bandwidth_figure

# ---- 5. the seed's failure, for contrast (hack/gpu-e2e-contrast.sh) ------------------------------
if [[ "${MODE}" != old-glibc ]]; then
  source "${REPO_ROOT}/hack/gpu-e2e-contrast.sh"
fi
