#!/usr/bin/env bash
# TEST DOUBLE — NOT runsc. Placed in front of the real runsc, it makes it look like a runsc
# built without CUDA checkpoint support: `checkpoint --help` is answered by the real runsc with
# every line naming -cuda-checkpoint-path removed (stasis's preflight reads that text). Every
# other call, and all the work, goes to the real runsc with its arguments unchanged.
#
# Environment:
#   STASIS_REAL_RUNSC     (required) the runsc to exec.
set -u
runsc="${STASIS_REAL_RUNSC:?STASIS_REAL_RUNSC must name the real runsc}"
args=("$@")
# shellcheck source=runsc-args.sh
source "$(dirname "${BASH_SOURCE[0]}")/runsc-args.sh"
if (( sub_index < 0 )) || [[ "${args[sub_index]}" != "checkpoint" ]] || [[ " ${args[*]} " != *" --help "* ]]; then
  exec "${runsc}" "$@"
fi
"${runsc}" "$@" 2>&1 | grep -v -e 'cuda-checkpoint-path'
exit "${PIPESTATUS[0]}"
