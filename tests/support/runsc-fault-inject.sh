#!/usr/bin/env bash
# TEST DOUBLE — NOT runsc. A fault/delay injecting wrapper for tests/e2e/node_*_test.cc,
# given to `stasis node --runsc`. It never does runsc's work itself: every call ends in an
# exec of the runsc named by STASIS_INJECT_RUNSC (the real runsc, or another labelled test
# double such as runsc-nvproxy-fault.sh), with the arguments unchanged (global flags stay
# before the subcommand, where the caller put them).
#
# Modes (STASIS_INJECT_MODE):
#   pass              only record the call (below) and exec.
#   kill-checkpoint   for `checkpoint`: first kill the sandbox for real (`runsc <globals> kill
#                     <id> KILL`, which ends the container's init and with it the sandbox),
#                     wait (up to STASIS_INJECT_STOP_WAIT_S, default 10 s) until the real
#                     runsc's `state` reports it stopped, then exec the real checkpoint, which
#                     fails for real: `cannot checkpoint container "<id>" in state stopped`.
#                     Models a sandbox that dies (OOM kill, crash) just as it is checkpointed.
#   hold-checkpoint   DELAY INJECTOR for `checkpoint` (resp. hold-restore for `restore`,
#   hold-restore      hold-wait-restore for `wait -restore`): wait until
#   hold-wait-restore STASIS_INJECT_RELEASE_FILE exists, at most STASIS_INJECT_HOLD_S seconds
#                     (default 3), then exec the real runsc, which does the work. Widens the
#                     window in which a test kills the node agent mid-transition, or sees a
#                     restore whose last part (a CUDA toggle back, on a GPU) is still running.
# Other subcommands always pass through untouched (`wait -restore` is recorded as wait-restore).
#
# Environment:
#   STASIS_INJECT_RUNSC      (required) the runsc to exec.
#   STASIS_INJECT_MODE       see above (default pass).
#   STASIS_INJECT_LOG        when set, one line per checkpoint/restore/wait-restore call is appended:
#                            "<subcommand> <id> pid=<pid> action=<pass|kill|hold> t=<unix time>
#                            args=<runsc's whole argv, space-separated>".
#   STASIS_INJECT_ARM_FILE   when set, faults are injected only for sandbox ids listed (one a
#                            line) in this file; other ids pass through (still recorded).
set -u

runsc="${STASIS_INJECT_RUNSC:?STASIS_INJECT_RUNSC must name the runsc to exec}"
mode="${STASIS_INJECT_MODE:-pass}"
args=("$@")

# shellcheck source=runsc-args.sh
source "$(dirname "$0")/runsc-args.sh"

sub=""
(( sub_index >= 0 )) && sub="${args[sub_index]}"
if [[ "${sub}" == "wait" ]]; then
  for a in "${args[@]:sub_index+1}"; do
    [[ "${a}" == "-restore" || "${a}" == "--restore" ]] && sub="wait-restore"
  done
fi
if [[ "${sub}" != "checkpoint" && "${sub}" != "restore" && "${sub}" != "wait-restore" ]]; then
  exec "${runsc}" "$@"
fi

globals=("${args[@]:0:sub_index}")
# The sandbox id is the last argument of checkpoint, restore and wait as stasis calls them.
id="${args[${#args[@]}-1]}"

armed=1
if [[ -n "${STASIS_INJECT_ARM_FILE:-}" ]]; then
  armed=0
  [[ -f "${STASIS_INJECT_ARM_FILE}" ]] && grep -qxF -- "${id}" "${STASIS_INJECT_ARM_FILE}" && armed=1
fi

action=pass
if (( armed )); then
  case "${mode}:${sub}" in
    kill-checkpoint:checkpoint) action=kill ;;
    hold-checkpoint:checkpoint|hold-restore:restore|hold-wait-restore:wait-restore) action=hold ;;
  esac
fi

if [[ -n "${STASIS_INJECT_LOG:-}" ]]; then
  echo "${sub} ${id} pid=$$ action=${action} t=$(date +%s.%N) args=${args[*]}" >>"${STASIS_INJECT_LOG}"
fi

case "${action}" in
  kill)
    "${runsc}" "${globals[@]}" kill "${id}" KILL >/dev/null 2>&1 || true
    deadline=$(( $(date +%s) + ${STASIS_INJECT_STOP_WAIT_S:-10} ))
    while (( $(date +%s) < deadline )); do
      # Only runsc's own "stopped" will do: a `state` that printed nothing (it failed while the
      # sandbox was being torn down, under load) is no answer, and a checkpoint started then
      # finds the container still "running" and fails otherwise ("connecting to control
      # server … connection refused").
      state="$("${runsc}" "${globals[@]}" state "${id}" 2>/dev/null || true)"
      if [[ "${state}" == *'"status": "stopped"'* ]]; then break; fi
      sleep 0.05
    done
    ;;
  hold)
    deadline=$(( $(date +%s) + ${STASIS_INJECT_HOLD_S:-3} ))
    while (( $(date +%s) < deadline )); do
      [[ -n "${STASIS_INJECT_RELEASE_FILE:-}" && -e "${STASIS_INJECT_RELEASE_FILE}" ]] && break
      sleep 0.05
    done
    ;;
esac

exec "${runsc}" "$@"
