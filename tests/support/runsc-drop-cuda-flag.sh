#!/usr/bin/env bash
# FAULT INJECTOR, placed BESIDE the real runsc (never instead of it), for the GPU end-to-end
# run (hack/gpu-e2e.sh, step "failure contrast"): it forces what stasis itself never does — a
# `runsc checkpoint` of a GPU sandbox WITHOUT -cuda-checkpoint-path — so that the real runsc,
# on the real GPU, fails the way the seed's platform failed, and stasis's clean-up can be
# watched. It only removes that one flag (and its value) from checkpoint calls; every call,
# and all the work, goes to the real runsc.
#
# Environment:
#   STASIS_REAL_RUNSC     (required) the runsc to exec.
#   STASIS_DROP_LOG       when set, one line per checkpoint call: "checkpoint dropped=<0|1> args=…".
set -u
runsc="${STASIS_REAL_RUNSC:?STASIS_REAL_RUNSC must name the real runsc}"
args=("$@")
source "$(dirname "${BASH_SOURCE[0]}")/runsc-args.sh"
if (( sub_index < 0 )) || [[ "${args[sub_index]}" != "checkpoint" ]]; then
  exec "${runsc}" "$@"
fi
kept=()
dropped=0
i=0
while (( i < ${#args[@]} )); do
  a="${args[i]}"
  if (( i > sub_index )) && [[ "${a}" == -cuda-checkpoint-path || "${a}" == --cuda-checkpoint-path ]]; then
    dropped=1; i=$((i + 2)); continue
  fi
  if (( i > sub_index )) && [[ "${a}" == -cuda-checkpoint-path=* || "${a}" == --cuda-checkpoint-path=* ]]; then
    dropped=1; i=$((i + 1)); continue
  fi
  kept+=("${a}")
  i=$((i + 1))
done
[[ -n "${STASIS_DROP_LOG:-}" ]] && echo "checkpoint dropped=${dropped} args=${kept[*]}" >>"${STASIS_DROP_LOG}"
exec "${runsc}" "${kept[@]}"
