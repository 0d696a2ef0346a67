#!/usr/bin/env bash
# TEST DOUBLE — NOT runsc. A fault-injecting wrapper placed BESIDE the real runsc (never instead
# of it) that reproduces, on a machine without a GPU, the failure of the pinned runsc
# release-20260622.0 when it checkpoints a sandbox holding a live CUDA context
# (reference/runsc.md §7):
#
#   - stderr gets exactly
#       checkpoint failed: checkpointing container "<id>": encoding error: can't save with live nvproxy clients
#   - the exit status is 128;
#   - without -leave-running the sandbox is killed, as the real Save kills the kernel on
#     failure as on success; with -leave-running it keeps running (Save then calls BeforeResume);
#   - files the attempt created in the image directory are left there, empty, as runsc leaves
#     a failed attempt's files.
#
# How it kills the sandbox: it runs the REAL `runsc checkpoint` with the same flags into a
# throwaway directory, i.e. the very kernel path (pause, save, kill) a failing save takes, then
# discards that image and waits (up to STASIS_FAULT_STOP_WAIT_S, default 10 s) until the real
# runsc reports the container stopped, so that a retry sees what it sees after the real failure:
# `cannot checkpoint container "<id>" in state stopped`. Failures the real runsc reports before
# reaching the sandbox (not found, wrong state, an image already in the directory) come out of
# the real runsc unchanged.
#
# Environment:
#   STASIS_REAL_RUNSC   (required) the real runsc binary; every other subcommand is exec'd to it
#                       with the arguments unchanged.
#   STASIS_FAULT_MODE   nvproxy (default): fail every checkpoint WITHOUT -cuda-checkpoint-path
#                         (the seed failure: a GPU sandbox checkpointed without the CUDA toggle);
#                       nvproxy-always: fail every checkpoint (e.g. a wrong -cuda-checkpoint-path
#                         with a driver >= R555, reference §6.5);
#                       off: pass everything through.
#   STASIS_FAULT_STOP_WAIT_S  see above.
set -u

real="${STASIS_REAL_RUNSC:?STASIS_REAL_RUNSC must name the real runsc}"
mode="${STASIS_FAULT_MODE:-nvproxy}"
args=("$@")

# shellcheck source=runsc-args.sh
source "$(dirname "$0")/runsc-args.sh"

if (( sub_index < 0 )) || [[ "${args[sub_index]}" != "checkpoint" ]] || [[ "${mode}" == "off" ]]; then
  exec "${real}" "$@"
fi

globals=("${args[@]:0:sub_index}")
sub=("${args[@]:sub_index+1}")

# The checkpoint's own flags: find the image path, the CUDA path, -leave-running and the id.
image_path=""
cuda_path=""
leave_running=0
id=""
image_index=-1
j=0
while (( j < ${#sub[@]} )); do
  a="${sub[j]}"
  name="${a#-}"; name="${name#-}"
  case "${name}" in
    image-path=*) image_path="${name#image-path=}"; image_index=${j} ;;
    image-path) image_path="${sub[j+1]:-}"; image_index=$((j + 1)); j=$((j + 1)) ;;
    cuda-checkpoint-path=*) cuda_path="${name#cuda-checkpoint-path=}" ;;
    cuda-checkpoint-path) cuda_path="${sub[j+1]:-}"; j=$((j + 1)) ;;
    leave-running|leave-running=true) leave_running=1 ;;
    leave-running=false) leave_running=0 ;;
    compression|save-restore-exec-argv|save-restore-exec-timeout|work-path)
      j=$((j + 1)) ;;
    *) if [[ "${a}" != -* ]]; then id="${a}"; fi ;;
  esac
  j=$((j + 1))
done

inject=0
case "${mode}" in
  nvproxy) [[ -z "${cuda_path}" ]] && inject=1 ;;
  nvproxy-always) inject=1 ;;
esac
# Nothing to inject, or an error the real runsc gives before it reaches the sandbox.
if (( inject == 0 )) || [[ -z "${image_path}" || -z "${id}" ]] || [[ -e "${image_path}/checkpoint.img" ]]; then
  exec "${real}" "$@"
fi

# The real save, into a throwaway directory: same flags, same kernel path.
throwaway="$(mktemp -d "${TMPDIR:-/tmp}/stasis-nvproxy-fault-XXXXXX")"
trap 'rm -rf "${throwaway}"' EXIT
forwarded=("${sub[@]}")
if [[ "${forwarded[image_index]}" == *=* ]]; then
  forwarded[image_index]="${forwarded[image_index]%%=*}=${throwaway}"
else
  forwarded[image_index]="${throwaway}"
fi
if ! "${real}" "${globals[@]}" checkpoint "${forwarded[@]}"; then
  exit 128  # the real runsc failed before or during the save; its stderr said why
fi

# What a failed save leaves in the image directory: the files it had created.
mkdir -p "${image_path}"
: >"${image_path}/checkpoint.img"
: >"${image_path}/pages_meta.img"
: >"${image_path}/pages.img"

if (( leave_running == 0 )); then
  # The kernel is dead; wait until the real runsc's own state says so (its host process has
  # been reaped), as a retry after the real failure would find it.
  deadline=$(( $(date +%s) + ${STASIS_FAULT_STOP_WAIT_S:-10} ))
  while (( $(date +%s) < deadline )); do
    state="$("${real}" "${globals[@]}" state "${id}" 2>/dev/null || true)"
    if [[ -z "${state}" || "${state}" == *'"status": "stopped"'* ]]; then break; fi
    sleep 0.05
  done
fi

echo "checkpoint failed: checkpointing container \"${id}\": encoding error: can't save with live nvproxy clients" >&2
exit 128
