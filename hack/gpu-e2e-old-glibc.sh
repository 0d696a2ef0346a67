# shellcheck shell=bash
# STASIS_GPU_E2E_MODE=old-glibc of hack/gpu-e2e.sh (sourced by it after its steps 1–3, with its
# helpers and variables; step 4 then runs as usual on the bundles made here, and step 5 is
# skipped): the live CUDA actor runs in a Debian 11 root filesystem (glibc 2.31, older than the
# 2.36 the helper was built against) and is paused, resumed, suspended and resumed through
# stasis. The self-contained helper (docs/gpu.md, "A helper for any image") makes that work; the
# ordinary helper fails there, and a check shows how.
#
# From the archive hack/gpu-e2e-old-glibc-bundle.sh made on the developer machine
# (STASIS_GPU_E2E_OLD_GLIBC_ARCHIVE): rootfs/ (Debian 11 minbase), w/workload_driver_api
# (tests/gpu/workload_driver_api.c built in a Debian 11 root: it needs nothing newer than
# GLIBC_2.2.5) and w/stasis-cuda-checkpoint-dynamic (the ordinary helper, for the contrast). Here:
# the kernels as a cubin (nvcc -cubin), and the GPU's CDI spec rewritten the way nvidia-ctk
# writes it, the driver's libraries mounted one by one (not the host's whole library directory,
# which would bring the host's glibc into the root).

OLD_GLIBC_ARCHIVE="${STASIS_GPU_E2E_OLD_GLIBC_ARCHIVE:-${REPO_ROOT}/.gpu-carry/old-glibc/old-glibc.tar.xz}"
OLD_ROOT="${BUNDLES}/bullseye"
[[ -f "${OLD_GLIBC_ARCHIVE}" ]] || fail_now "old-glibc archive present" "${OLD_GLIBC_ARCHIVE} is missing: run hack/gpu-e2e-old-glibc-bundle.sh"
mkdir -p "${OLD_ROOT}"
xz -dc "${OLD_GLIBC_ARCHIVE}" | tar -C "${OLD_ROOT}" -xf - || fail_now "old-glibc archive unpacks" "${OLD_GLIBC_ARCHIVE}"
cp "${OLD_ROOT}/w/workload_driver_api" "${OLD_ROOT}/w/stasis-cuda-checkpoint-dynamic" "${WORK}/w/"
if [[ "${CPU_ONLY}" != 1 ]]; then
  nvcc -cubin -arch=sm_90 -o "${WORK}/w/workload_kernels.cubin" "${REPO_ROOT}/tests/gpu/workload_kernels.cu" \
    >> "${WORK}/build.log" 2>&1 || fail_now "nvcc builds the kernels' cubin" "$(tail -5 "${WORK}/build.log")"
fi
MACHINE_LINES+=("- the actor's root filesystem: Debian $(cat "${OLD_ROOT}/rootfs/etc/debian_version") minbase; the workload: tests/gpu/workload_driver_api.c, built against its glibc")

cdi_driver_libraries "hack/gpu-e2e-old-glibc.sh"

# The Debian 11 root and the workload under /w: nothing of the host's /usr, /etc or /lib.
make_bundle() {  # make_bundle GIB
  local workload="exec /w/workload_driver_api --cubin /w/workload_kernels.cubin --gib $1 >/tmp/w.log 2>&1"
  [[ "${CPU_ONLY}" == 1 ]] && workload="exec /w/workload >/tmp/w.log 2>&1"
  mkdir -p "${BUNDLES}/bundle-$1"
  cat > "${BUNDLES}/bundle-$1/config.json" <<EOF
{"ociVersion": "1.0.2",
 "process": {"terminal": false, "user": {"uid": 0, "gid": 0},
  "args": ["/bin/sh", "-c", "${workload}"],
  "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/tmp"],
  "cwd": "/", "noNewPrivileges": true},
 "root": {"path": "${OLD_ROOT}/rootfs", "readonly": false},
 "hostname": "stasis-gpu-bullseye",
 "mounts": [{"destination":"/proc","type":"proc","source":"proc"},
  {"destination":"/dev","type":"tmpfs","source":"tmpfs","options":["nosuid","strictatime","mode=755","size=65536k"]},
  {"destination":"/sys","type":"sysfs","source":"sysfs","options":["nosuid","noexec","nodev","ro"]},
  {"destination":"/tmp","type":"tmpfs","source":"tmpfs","options":["nosuid","nodev","mode=1777"]},
  {"destination":"/w","type":"bind","source":"${WORK}/w","options":["rbind","ro","nosuid","nodev"]}],
 "linux": {"namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}]}}
EOF
}

# old_glibc_checks ACTOR: inside the running actor, the root's own C library is 2.31, the
# self-contained helper runs, and the ordinary helper does not (the failure this mode is for).
old_glibc_checks() {
  local x=(timeout 30 "${RUNSC}" -root "$(sb_root "$1")" exec "$(sb_id "$1")")
  local libc own plain
  libc=$("${x[@]}" /lib/x86_64-linux-gnu/libc.so.6 2>&1 | head -1)
  own=$("${x[@]}" "${CKPT_PATH}" --get-state --pid 1 2>&1)
  plain=$("${x[@]}" /w/stasis-cuda-checkpoint-dynamic --help 2>&1 | head -2)
  check "old glibc: the actor's own C library is glibc 2.31" "$([[ "${libc}" == *"version 2.31"* ]]; echo $?)" "${libc}"
  # Without a GPU (STASIS_GPU_E2E_CPU=1) there is no libcuda.so.1: the helper runs and says so.
  local ran='^(running|locked|checkpointed|failed)$'
  [[ "${CPU_ONLY}" == 1 ]] && ran='cannot load libcuda.so.1'
  check "old glibc: the self-contained helper runs in it (--get-state of pid 1)" \
    "$([[ "${own}" =~ ${ran} ]]; echo $?)" "${own}"
  check "old glibc: the ordinary (dynamically linked) helper does not" \
    "$([[ "${plain}" == *"GLIBC_2.3"*"not found"* ]]; echo $?)" "${plain}"
  CONTRAST+=("**The ordinary helper in the Debian 11 actor** (\`runsc exec … /w/stasis-cuda-checkpoint-dynamic --help\`):" "" '```' "${plain}" '```' "")
}
