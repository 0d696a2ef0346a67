# Sourced by hack/gpu-runsc-proof.sh when STASIS_GPU_RUNSC_MODE=deadline, once sandboxes gpu1
# and gpu2 run the CUDA workload: what a checkpoint deadline leaves behind. stasis bounds
# `runsc checkpoint` with a deadline and, past it, kills the runsc process (its process group)
# and force-cleans the actor: `runsc delete -force`, worker freed, the actor SUSPENDED on its
# last snapshot or FAILED (docs/node-agent.md, "Failures"). The runsc process is only a client
# of the sandbox, so killing it does not stop what the sentry does. Seen here for each phase:
#
#   D1. gpu1: the runsc checkpoint process SIGKILLed 1 s in, during the CUDA toggle (lock +
#       device memory copied to host: seconds at GIB GiB);
#   D2. gpu2: SIGKILLed once the sentry's debug log says the toggle finished, during the save;
#
# each followed, at 0, 3 and 15 s, by what runsc and the helper report (`runsc state`, the
# helper's --get-state of PID 1 through `runsc exec`, the ticks, the image directory, GPU
# memory), then by what stasis does next, `runsc delete -force`, and whether the GPU's memory
# is released and a new sandbox can use the GPU afterwards (D3).
#
# Uses gpu-runsc-proof.sh's helpers (rs, state_of, wlog, last_tick, gpu_used, check, …).

DEADLINE_ROWS=()
# observe ID LABEL IMAGE_DIR: one row of what is seen now.
observe() {
  local st cuda ticks img
  st=$(state_of "$1")
  cuda=$(timeout 10 "${RUNSC}" "${FLAGS[@]}" exec "$1" "${CKPT_PATH}" --get-state --pid 1 2>&1 | one_line | head -c 200)
  ticks=$(last_tick "$1")
  img=$(image_files "$3")
  DEADLINE_ROWS+=("| $1 | $2 | ${st} | ${cuda:-(no answer)} | ${ticks:-(none)} | ${img:-(empty)} | $(gpu_used) |")
  say "deadline $1 $2: state=${st} cuda=${cuda} tick=${ticks} image=${img} gpu_used=$(gpu_used)"
}
# toggle_done ID: the sentry's debug log of ID says its CUDA toggle finished.
toggle_done() { grep -l "cuda-checkpoint on [0-9]* processes took" "${WORK}"/dbg/*boot* 2>/dev/null | xargs -r grep -l "$1" >/dev/null 2>&1; }
# kill_checkpoint ID IMAGE_DIR WHEN: starts runsc checkpoint in its own process group and
# SIGKILLs the group at WHEN ("1s", or "toggle": once toggle_done); sets KILLED_AFTER.
kill_checkpoint() {
  local t0 pid deadline
  mkdir -p "$2"
  SANDBOX_PID=$(timeout 30 "${RUNSC}" "${FLAGS[@]}" state "$1" 2>/dev/null | awk -F'[:,]' '/"pid"/ { gsub(/ /, "", $2); print $2; exit }')
  t0=$(now)
  setsid "${RUNSC}" "${FLAGS[@]}" checkpoint -image-path "$2" -cuda-checkpoint-path "${CKPT_PATH}" "$1" \
    > "${WORK}/kill-$1.out" 2> "${WORK}/kill-$1.err" < /dev/null &
  pid=$!
  if [[ "$3" == toggle ]]; then
    deadline=$((SECONDS + 120))
    until toggle_done "$1" || ((SECONDS > deadline)) || ! kill -0 "${pid}" 2>/dev/null; do sleep 0.1; done
  else
    sleep "${3%s}"
  fi
  kill -KILL -- "-${pid}" 2>/dev/null
  wait "${pid}" 2>/dev/null
  KILLED_AFTER=$(secs "${t0}" "$(now)")
  say "runsc checkpoint of $1 killed after ${KILLED_AFTER} s ($3); its stderr: $(one_line < "${WORK}/kill-$1.err")"
}
# holds_gpu PID: the GPU's compute processes include PID (the sandbox's host process).
holds_gpu() { nvidia-smi --query-compute-apps=pid --format=csv,noheader | grep -qx "$1"; }
# after_kill ID IMAGE_DIR PHASE: observations, then stasis's cleanup and its effect. The
# check is on the killed sandbox's own process (SANDBOX_PID, from `runsc state` before the
# kill): the GPU's total also counts the other sandbox, and a sandbox whose toggle finished has
# already given its device memory up before the delete.
after_kill() {
  local used_before_delete used_after rc held_before
  observe "$1" "killed in the ${3} (${KILLED_AFTER} s in) +0 s" "$2"
  sleep 3; observe "$1" "+3 s" "$2"
  sleep 12; observe "$1" "+15 s" "$2"
  used_before_delete=$(gpu_used)
  held_before=no
  [[ "${CPU_ONLY}" != 1 ]] && holds_gpu "${SANDBOX_PID}" && held_before=yes
  rs "delete-$1" 60 delete -force "$1"
  rc=${RC}
  sleep 2
  used_after=$(gpu_used)
  DEADLINE_ROWS+=("| $1 | after \`runsc delete -force\` (exit ${rc}, ${DUR} s) | $(state_of "$1") | — | — | $(image_files "$2") | ${used_after} |")
  check "D. $1 killed in the ${3}: runsc delete -force removes it and its process holds no GPU memory" \
    "$([[ ${rc} == 0 && "$(state_of "$1")" == "(no state)" ]] && { [[ "${CPU_ONLY}" == 1 ]] || ! holds_gpu "${SANDBOX_PID}"; }; echo $?)" \
    "sandbox process ${SANDBOX_PID:-?} held GPU memory just before the delete: ${held_before}; GPU memory used ${used_before_delete} → ${used_after} MiB (the other sandbox included); compute apps after: $(gpu_apps)"
}

baseline_two=$(gpu_used)
FIGURES+=("- deadline mode: ${GIB} GiB in gpu1, ${GIB_MAIN} GiB in gpu2; GPU memory used with both running: ${baseline_two} MiB")
if fits 90 D1; then
  kill_checkpoint gpu1 "${WORK}/images/kill-toggle" 1s
  after_kill gpu1 "${WORK}/images/kill-toggle" "CUDA toggle"
fi
if [[ ${ok2} == 0 ]] && fits 150 D2; then
  kill_checkpoint gpu2 "${WORK}/images/kill-save" toggle
  after_kill gpu2 "${WORK}/images/kill-save" "save"
fi
# D3. The GPU is usable by a new sandbox after both cleanups.
if fits 150 D3; then
  start gpu3 "${BUNDLE}" && ok3=0 || ok3=1
  check "D3. after both cleanups a new sandbox runs the CUDA workload on the GPU" "${ok3}" \
    "$(wlog gpu3 | head -1); last tick $(last_tick gpu3); GPU memory used $(gpu_used) MiB"
  timeout 60 "${RUNSC}" "${FLAGS[@]}" delete -force gpu3 >/dev/null 2>&1
fi
FIGURES+=("" "### A checkpoint killed at its deadline" "" \
  "| sandbox | when | runsc state | helper --get-state --pid 1 (in the sandbox) | last tick | image files | GPU MiB used |" \
  "|---|---|---|---|---|---|---|" "${DEADLINE_ROWS[@]}")
finish
