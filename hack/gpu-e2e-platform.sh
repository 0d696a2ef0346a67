# shellcheck shell=bash
# STASIS_GPU_E2E_MODE=platform of hack/gpu-e2e.sh (sourced by it before the node agent starts,
# with its helpers and variables): the GPU actor as a user deploys it, with every service the
# mode needs running on this machine.
#
#   services  a registry (Debian's docker-registry, TLS with a CA made here, hack/registry.sh)
#             and an S3-compatible store (SeaweedFS, hack/object-store.sh), both from
#             hack/gpu-e2e-platform-bundle.sh's archive (STASIS_GPU_E2E_PLATFORM_ARCHIVE); the
#             node agent commits to `s3://<bucket>/gpu-e2e/` and trusts the registry's CA.
#   1. image    the CUDA workload and what it links, with sh, cat, grep and sleep, made into an
#               OCI image by umoci (as hack/image.sh makes stasis's) and pushed by skopeo;
#   2. actor    `spec.image` (no bundle), the driver's libraries from the GPU's CDI spec one by
#               one, as nvidia-ctk writes them (checks: RUNNING, Ready, status.imageDigest is the
#               pushed digest, the GPU memory in use);
#   3. suspend  to the object store (checks: the manifest object exists, the bytes uploaded,
#               GPU memory released, worker Free);
#   4. resume   from the store alone: the agent is restarted with its download cache emptied, as
#               a node that never held the snapshot (checks: the chunks downloaded, RUNNING,
#               Ready only once the CUDA state is back, the pattern verifies, the ticks go on);
#   5. template a GPU ActorTemplate of the same image: its golden snapshot in the store, two
#               clones from it in turn (hack/gpu-e2e-templates.sh);
#   6. admission a GPU actor holding more device memory than the host has available (or, on a
#               GPU smaller than the host's memory, than the snapshot disk has free) asked to
#               suspend: refused before anything freezes, the actor keeps running;
#   7. deadline a checkpoint of the last size of STASIS_GPU_E2E_GIB given 3 s: runsc is killed
#               at the deadline, the sandbox force-deleted, the worker and the GPU freed, the
#               actor FAILED with `Timeout` (it has no earlier snapshot), nothing partial left.
#
# Steps 6 and 7 need a GPU: with STASIS_GPU_E2E_CPU=1 they are reported as not run.
PLATFORM_ARCHIVE="${STASIS_GPU_E2E_PLATFORM_ARCHIVE:-${REPO_ROOT}/.gpu-carry/platform/platform.tar.xz}"
PLAT="${WORK}/platform"
S3_PREFIX=gpu-e2e/
IMAGE_REF=""; IMAGE_DIGEST=""

# ---- services -------------------------------------------------------------------------------
platform_services_up() {
  [[ -f "${PLATFORM_ARCHIVE}" ]] || fail_now "platform archive present" \
    "${PLATFORM_ARCHIVE} is missing: run hack/gpu-e2e-platform-bundle.sh on the developer machine"
  mkdir -p "${PLAT}"
  xz -dc "${PLATFORM_ARCHIVE}" | tar -C "${PKG}" -xf - || fail_now "platform archive unpacks" "${PLATFORM_ARCHIVE}"
  local exports
  exports=$("${REPO_ROOT}/hack/object-store.sh" up --dir "${PLAT}/s3" 2>"${WORK}/object-store.log") \
    || fail_now "object store up" "$(tail -5 "${WORK}/object-store.log")"
  eval "${exports}"
  exports=$(STASIS_REGISTRY_BIN="${PKG}/bin/docker-registry" "${REPO_ROOT}/hack/registry.sh" up \
    --dir "${PLAT}/registry" --no-auth 2>"${WORK}/registry.log") \
    || fail_now "registry up" "$(tail -5 "${WORK}/registry.log")"
  eval "${exports}"
  STORE="s3://${STASIS_S3_BUCKET}/${S3_PREFIX}"
  AGENT_FLAGS+=(--registry-ca-file "${STASIS_REGISTRY_CA}")
  MACHINE_LINES+=("- services: SeaweedFS $(basename "$(dirname "$(ls "${PKG}"/cache/bin/seaweedfs-*/weed)")") at ${AWS_ENDPOINT_URL} (the agent's store ${STORE}); docker-registry $("${PKG}/bin/docker-registry" --version 2>&1 | awk '{ print $NF }') at ${STASIS_REGISTRY} over TLS")
}

# s3_head KEY: the HTTP status of a HEAD of the object KEY in the bucket.
s3_head() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 10 --aws-sigv4 "aws:amz:${AWS_REGION}:s3" \
    --user "${AWS_ACCESS_KEY_ID}:${AWS_SECRET_ACCESS_KEY}" -I "${AWS_ENDPOINT_URL}/${STASIS_S3_BUCKET}/$1"
}
store_has_manifest() { [[ "$(s3_head "${S3_PREFIX}${NS}/$1/$2/manifest.json")" == 200 ]]; }
store_bytes() { metric stasis_object_store_bytes_total "direction=\"$1\""; }

# The driver's libraries one by one (hack/gpu-e2e.sh's cdi_driver_libraries): the image brings
# its own C library, and the host's whole library directory would shadow it.
platform_cdi() { cdi_driver_libraries "hack/gpu-e2e-platform.sh"; }

# ---- 1. the workload's image ------------------------------------------------------------------
# install_libraries ROOT FILE: the shared libraries ldd names for FILE and the loader, each at the
# path ldd gives, except the driver's own (the CDI spec mounts those) and what ROOT already has.
install_libraries() {
  local lib
  for lib in $(ldd "$2" 2>/dev/null | awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'); do
    case "$(basename "${lib}")" in libcuda.so*|libnvidia-*) continue ;; esac
    [[ -e "$1${lib}" ]] && continue
    mkdir -p "$1$(dirname "${lib}")"
    cp -L "${lib}" "$1${lib}"
  done
}

# install_binary ROOT SOURCE DEST: SOURCE copied to ROOT/DEST, with its libraries (a script has
# none).
install_binary() {
  mkdir -p "$1$(dirname "$3")"
  cp -L "$2" "$1$3"
  install_libraries "$1" "$2"
}

# install_driver_dependencies ROOT: what the driver's libraries (mounted by the CDI spec) link
# beyond themselves — the C library's libdl, libpthread and librt, which libcuda still names
# though a program built against glibc ≥ 2.34 no longer does — as any distribution's base image
# has them. Without them the workload's CUDA runtime cannot load libcuda and the actor dies.
install_driver_dependencies() {
  local lib
  for lib in $(awk '/hostPath: .*libnvidia|hostPath: .*libcuda/ { sub(/,$/, "", $3); print $3 }' "${WORK}/cdi/nvidia.yaml"); do
    install_libraries "$1" "${lib}"
  done
}

build_and_push_image() {
  local oci="${PLAT}/oci" bundle="${PLAT}/image-bundle" t
  rm -rf "${oci}" "${bundle}"
  umoci() { "${PKG}/bin/umoci" "$@"; }
  umoci init --layout "${oci}" && umoci new --image "${oci}:v1" &&
    umoci unpack --image "${oci}:v1" "${bundle}" >/dev/null || fail_now "umoci makes an image" "umoci failed"
  mkdir -m 1777 "${bundle}/rootfs/tmp"
  for t in sh cat grep sleep; do install_binary "${bundle}/rootfs" "$(readlink -f "$(command -v "${t}")")" "/bin/${t}"; done
  install_binary "${bundle}/rootfs" "${WORK}/w/workload" /w/workload
  install_driver_dependencies "${bundle}/rootfs"
  umoci repack --image "${oci}:v1" "${bundle}" &&
    umoci config --image "${oci}:v1" --author "stasis gpu-e2e" --config.cmd /w/workload \
      --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --config.env HOME=/tmp \
      --config.workingdir / && umoci gc --layout "${oci}" || fail_now "umoci makes an image" "umoci repack/config failed"
  IMAGE_REF="${STASIS_REGISTRY}/gpu/workload:v1"
  LD_LIBRARY_PATH="${PKG}/lib" "${PKG}/bin/skopeo" --insecure-policy copy --dest-cert-dir "${PLAT}/registry" \
    --digestfile "${PLAT}/digest" "oci:${oci}:v1" "docker://${IMAGE_REF}" > "${WORK}/skopeo.log" 2>&1
  local rc=$?
  IMAGE_DIGEST=$(cat "${PLAT}/digest" 2>/dev/null)
  check "image: the workload's OCI image built by umoci and pushed to the registry by skopeo" \
    "$([[ "${rc}" == 0 && "${IMAGE_DIGEST}" == sha256:* ]]; echo $?)" \
    "${IMAGE_REF}@${IMAGE_DIGEST:-none}; $(du -sh "${oci}" | cut -f1) in the layout; $(tail -1 "${WORK}/skopeo.log")"
  [[ "${rc}" == 0 ]] || exit 1
}

# actor_source GIB INDENT: the spec's lines that say what the actor runs — here the image and
# the workload's command (the driver's libraries come from the CDI spec, platform_cdi).
actor_source() {
  local workload="exec /w/workload --gib $1 --spin-ms 5000 >/tmp/w.log 2>&1"
  cat <<EOF
$2image: ${IMAGE_REF}
$2command: ["/bin/sh", "-c", "${workload}"]
EOF
}

# ---- 2–4. from the image, through the object store ----------------------------------------------
image_actor_round_trip() {
  local a=img-cuda gib="${SIZES%% *}" t0 t1 used up_before down_before size loc
  create_actor "${a}" "${gib}"
  t0=$(now)
  wait_status "${a}" STATUS_RUNNING 300 && wait_ready "${a}" 120 \
    || fail_now "image actor: RUNNING and Ready" "$(jp "${a}" '{.status}')"
  t1=$(now)
  wait_log "${a}" '^tick 20$' 60
  used=$(gpu_used)
  check "image actor: pulled, RUNNING and Ready on the GPU, status.imageDigest the pushed digest" \
    "$([[ "$(jp "${a}" '{.status.imageDigest}')" == "${IMAGE_DIGEST}" ]] && { [[ "${CPU_ONLY}" == 1 ]] || ((used > baseline_used + gib * 900)); }; echo $?)" \
    "kubectl apply → Ready $(secs "${t0}" "${t1}") s (pull, verify, unpack, boot); imageDigest $(jp "${a}" '{.status.imageDigest}'); GPU memory used ${used} MiB (baseline ${baseline_used}); $(wlog "${a}" | grep '^ready')"
  FIGURES+=("- image actor, ${gib} GiB: kubectl apply → Ready $(secs "${t0}" "${t1}") s (the image pulled from the registry, verified and unpacked, the sandbox booted)")

  up_before=$(store_bytes upload)
  t0=$(now); patch_desired "${a}" Suspended
  wait_status "${a}" STATUS_SUSPENDED 400 || fail_now "image actor: SUSPENDED to the object store" "$(jp "${a}" '{.status}')"
  t1=$(now)
  wait_worker_free; sleep 1
  loc=$(jp "${a}" '{.status.latestSnapshot.location}'); size=$(jp "${a}" '{.status.latestSnapshot.sizeBytes}')
  local id; id=$(jp "${a}" '{.status.latestSnapshot.id}')
  local uploaded; uploaded=$(awk -v a="${up_before}" -v b="$(store_bytes upload)" 'BEGIN { printf "%.0f", b - a }')
  check "image actor: suspended into the object store — manifest object present, GPU released, worker Free" \
    "$([[ "${loc}" == s3://* ]] && store_has_manifest "${a}" "${id}" && ((uploaded >= size)) && [[ "$(worker_phase)" == Free ]] \
       && { [[ "${CPU_ONLY}" == 1 ]] || (($(gpu_used) < baseline_used + 200)); }; echo $?)" \
    "patch → SUSPENDED $(secs "${t0}" "${t1}") s; ${loc}; ${size} bytes, ${uploaded} uploaded; commit $(delta 0 "$(op_sum commit)") s; GPU memory used $(gpu_used) MiB; worker $(worker_phase)"
  FIGURES+=("- image actor, ${gib} GiB: patch Suspended → SUSPENDED $(secs "${t0}" "${t1}") s, the image's ${size} bytes uploaded to SeaweedFS (commit $(delta 0 "$(op_sum commit)") s)")

  # A node that never held the snapshot: the agent restarted with its download cache empty.
  kill -TERM "${AGENT_PID}"; wait "${AGENT_PID}" 2>/dev/null
  rm -rf "${WORK}/root/store-cache"
  start_agent "${RUNSC}" node-agent-2
  down_before=$(store_bytes download)
  t0=$(now); patch_desired "${a}" Running
  wait_status "${a}" STATUS_RUNNING 400 || fail_now "image actor: RUNNING from the store" "$(jp "${a}" '{.status}')"
  t1=$(now)
  wait_ready "${a}" 120; local t2; t2=$(now)
  local downloaded; downloaded=$(awk -v a="${down_before}" -v b="$(store_bytes download)" 'BEGIN { printf "%.0f", b - a }')
  local first later verify
  first=$(last_tick "${a}"); later=$(tick_after "${a}" "${first}" 30)
  timeout 30 "${RUNSC}" -root "$(sb_root "${a}")" kill "$(sb_id "${a}")" USR1 >/dev/null 2>&1
  wait_log "${a}" '^verify' 120
  verify=$(wlog "${a}" | grep '^verify' | tail -1)
  check "image actor: resumed from the object store alone — downloaded, Ready once the CUDA state is back, pattern and ticks intact" \
    "$(((downloaded >= size)) && [[ "$(jp "${a}" '{.status.conditions[?(@.type=="Restored")].reason}')" == RestoreComplete \
       && "${verify}" == "verify ok mismatches=0"* && -n "${later}" ]] && ((later > first)) && ticks_consecutive "${a}"; echo $?)" \
    "patch → RUNNING $(secs "${t0}" "${t1}") s, → Ready $(secs "${t0}" "${t2}") s; ${downloaded} bytes downloaded (download $(delta 0 "$(metric stasis_object_store_transfer_seconds_sum 'direction="download"' 'result="success"')") s); ${verify:-no answer}; ticks ${first} → ${later}"
  FIGURES+=("- image actor, ${gib} GiB: patch Running → RUNNING $(secs "${t0}" "${t1}") s, → Ready $(secs "${t0}" "${t2}") s, from the store on a node without the copy (${downloaded} bytes downloaded and verified first)")
  kubectl delete actor "${a}" -n "${NS}" --timeout=120s >/dev/null 2>&1
  wait_worker_free
}

# ---- 6. admission ----------------------------------------------------------------------------------
# admission_gib: GiB of device memory that the host's available memory (or else the snapshot
# disk's free space) cannot stage, if the GPU has that much; empty when neither is possible.
admission_gib() {
  local gpu_gib avail_gib disk_gib
  gpu_gib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | awk '{ printf "%d", $1 / 1024 }')
  avail_gib=$(awk '/MemAvailable/ { printf "%d", $2 / 1048576 + 1 }' /proc/meminfo)
  disk_gib=$(df -P --block-size=1G "${WORK}/root" | awk 'NR == 2 { print $4 + 1 }')
  if ((avail_gib + 2 <= gpu_gib - 3)); then echo "$((avail_gib + 2)) InsufficientHostMemory"
  elif ((disk_gib + 2 <= gpu_gib - 3)); then echo "$((disk_gib + 2)) InsufficientSpace"
  fi
}

admission_refusal() {
  [[ "${CPU_ONLY}" == 1 ]] && { NOT_RUN+=("admission refusal (needs a GPU)"); return; }
  local a=too-big pick gib want
  pick=$(admission_gib)
  [[ -n "${pick}" ]] || { NOT_RUN+=("admission refusal: this GPU's memory fits both the host's available memory and the disk's free space"); return; }
  read -r gib want <<<"${pick}"
  create_actor "${a}" "${gib}"
  wait_status "${a}" STATUS_RUNNING 300 && wait_log "${a}" '^tick 5$' 300 \
    || { check "admission: a ${gib} GiB actor runs" 1 "$(jp "${a}" '{.status}') $(wlog "${a}" | tail -2)"; return; }
  local before; before=$(last_tick "${a}")
  patch_desired "${a}" Suspended
  # A running actor already carries CheckpointFailed=False (ClearedOnResume): wait for True.
  local deadline=$((SECONDS + 60)) reason=""
  while ((SECONDS < deadline)); do
    if [[ "$(jp "${a}" '{.status.conditions[?(@.type=="CheckpointFailed")].status}')" == True ]]; then
      reason=$(jp "${a}" '{.status.conditions[?(@.type=="CheckpointFailed")].reason}')
      break
    fi
    sleep 0.3
  done
  local after; after=$(tick_after "${a}" "${before}" 30)
  check "admission: suspending ${gib} GiB of device memory is refused (${want}), the actor keeps running" \
    "$([[ "${reason}" == "${want}" && "$(jp "${a}" '{.status.status}')" == STATUS_RUNNING ]] && ((after > before)); echo $?)" \
    "CheckpointFailed ${reason:-none}: $(jp "${a}" '{.status.conditions[?(@.type=="CheckpointFailed")].message}'); $(jp "${a}" '{.status.status}'); ticks ${before} → ${after}; MemAvailable $(awk '/MemAvailable/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo), disk free $(df -P --block-size=1G "${WORK}/root" | awk 'NR == 2 { print $4 }') GiB"
  kubectl delete actor "${a}" -n "${NS}" --timeout=120s >/dev/null 2>&1
  wait_worker_free
}

# ---- 7. a checkpoint past its deadline -----------------------------------------------------------
deadline_kill() {
  [[ "${CPU_ONLY}" == 1 ]] && { NOT_RUN+=("deadline kill (the CPU stand-in checkpoints within any deadline)"); return; }
  local a=late gib="${SIZES##* }" t0 t1 forced_before
  create_actor "${a}" "${gib}" 3
  wait_status "${a}" STATUS_RUNNING 300 && wait_log "${a}" '^tick 5$' 120 \
    || { check "deadline: a ${gib} GiB actor runs" 1 "$(jp "${a}" '{.status}')"; return; }
  forced_before=$(metric stasis_forced_cleanups_total 'reason="timeout"')
  t0=$(now); patch_desired "${a}" Suspended
  wait_status "${a}" STATUS_FAILED 120; t1=$(now)
  wait_worker_free
  # The driver frees a killed process's device memory after the sandbox is gone.
  for _ in $(seq 40); do (($(gpu_used) < baseline_used + 200)) && break; sleep 0.5; done
  local partial; partial=$(find "${WORK}/root/snapshots" -name '*.partial' 2>/dev/null | head -3)
  check "deadline: a ${gib} GiB checkpoint given 3 s — runsc killed, sandbox deleted, worker and GPU freed, FAILED with Timeout" \
    "$([[ "$(jp "${a}" '{.status.status}')" == STATUS_FAILED \
       && "$(jp "${a}" '{.status.conditions[?(@.type=="CheckpointFailed")].reason}')" == Timeout \
       && "$(worker_phase)" == Free && -z "${partial}" ]] && (($(gpu_used) < baseline_used + 200)) \
       && awk -v a="${forced_before}" -v b="$(metric stasis_forced_cleanups_total 'reason="timeout"')" 'BEGIN { exit !(b > a) }'; echo $?)" \
    "patch → FAILED $(secs "${t0}" "${t1}") s; $(jp "${a}" '{.status.conditions[?(@.type=="CheckpointFailed")].message}' | cut -c1-300); worker $(worker_phase); GPU memory used $(gpu_used) MiB; partial images: ${partial:-none}"
  kubectl delete actor "${a}" -n "${NS}" --timeout=120s >/dev/null 2>&1
}

platform_run() {
  build_and_push_image
  image_actor_round_trip
  source "${REPO_ROOT}/hack/gpu-e2e-templates.sh"
  admission_refusal
  deadline_kill
  bandwidth_figure
}
