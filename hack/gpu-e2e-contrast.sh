# shellcheck shell=bash
# Step 5 of hack/gpu-e2e.sh (sourced by it, with its helpers and variables): the seed's failure,
# for contrast — a wrong helper path that preflight refuses while the actor keeps running, and a
# checkpoint forced without -cuda-checkpoint-path that stasis cleans up within the deadline.
if over_time 150; then
  check "failure contrast" 1 "skipped: ${SECONDS} s elapsed, too close to the ${HARD_S} s limit"
  exit 1
fi
say "=== failure contrast"
a=contrast
create_actor "${a}" 1
wait_status "${a}" STATUS_RUNNING 120 && wait_log "${a}" '^tick 10$' 120 || fail_now "contrast actor RUNNING" "$(jp "${a}" '{.status}')"
# (a) the helper path is wrong: preflight refuses, the actor keeps running.
kubectl patch actor "${a}" -n "${NS}" --type merge \
  -p '{"spec":{"desiredState":"Suspended","gpu":{"cudaCheckpointPath":"/opt/stasis/no-such-helper"}}}' >/dev/null
deadline=$((SECONDS + 60))
while ((SECONDS < deadline)); do
  [[ "$(jp "${a}" '{.status.conditions[?(@.type=="CudaCheckpointReady")].status}')" == False ]] && break
  sleep 0.3
done
msg=$(jp "${a}" '{.status.conditions[?(@.type=="CudaCheckpointReady")].message}')
t1=$(last_tick "${a}"); sleep 2; t2=$(last_tick "${a}")
check "wrong helper path: preflight refuses, the actor keeps running" \
  "$([[ "$(jp "${a}" '{.status.status}')" == STATUS_RUNNING && "${msg}" == *no-such-helper* ]] && ((t2 > t1)); echo $?)" \
  "status $(jp "${a}" '{.status.status}'); CudaCheckpointReady=False: ${msg}; ticks ${t1} → ${t2}; worker $(worker_phase)"
CONTRAST+=("**Wrong helper path** (\`spec.gpu.cudaCheckpointPath: /opt/stasis/no-such-helper\`, desiredState Suspended):" "" '```' \
  "status: $(jp "${a}" '{.status.status}')" "CudaCheckpointReady=False reason=$(jp "${a}" '{.status.conditions[?(@.type=="CudaCheckpointReady")].reason}')" \
  "message: ${msg}" '```' "")
kubectl patch actor "${a}" -n "${NS}" --type merge \
  -p "{\"spec\":{\"desiredState\":\"Running\",\"gpu\":{\"cudaCheckpointPath\":\"${CKPT_PATH}\"}}}" >/dev/null

# (b) a checkpoint forced without -cuda-checkpoint-path: the agent is restarted with the fault
# injector in front of the real runsc.
kill -TERM "${AGENT_PID}"; wait "${AGENT_PID}" 2>/dev/null
start_agent "${REPO_ROOT}/tests/support/runsc-drop-cuda-flag.sh" node-agent-drop-flag \
  STASIS_REAL_RUNSC="${RUNSC}" STASIS_DROP_LOG="${WORK}/drop-flag-calls.log"
wait_status "${a}" STATUS_RUNNING 30
sid=$(sb_id "${a}"); sroot=$(sb_root "${a}")  # cleared from the status once it fails
t0=$(now); patch_desired "${a}" Suspended
deadline=$((SECONDS + 300 + 30))
final=""
while ((SECONDS < deadline)); do
  final=$(jp "${a}" '{.status.status}')
  [[ "${final}" == STATUS_FAILED || "${final}" == STATUS_SUSPENDED ]] && break
  sleep 0.2
done
clean_s=$(secs "${t0}" "$(now)")
ck_msg=$(jp "${a}" '{.status.conditions[?(@.type=="CheckpointFailed")].message}')
ck_reason=$(jp "${a}" '{.status.conditions[?(@.type=="CheckpointFailed")].reason}')
sleep 1
sandbox_state=$(timeout 30 "${RUNSC}" -root "${sroot}" state "${sid}" 2>&1 | one_line | cut -c1-200)
# The failure must be the one provoked: live GPU state met by a checkpoint without the helper
# (runsc's failure class nvproxy_live_clients, as the agent names it in the condition's reason;
# reconcilers/node/transitions.h), not any other failure that also ends in STATUS_FAILED.
want_reason=NvproxyLiveClients
check "checkpoint without -cuda-checkpoint-path: runsc fails (${want_reason}), stasis cleans up within the deadline" \
  "$([[ "${CPU_ONLY}" == 1 || ( "${final}" == STATUS_FAILED && "${ck_reason}" == "${want_reason}" && -n "${ck_msg}" ) ]] && [[ "$(worker_phase)" == Free ]]; echo $?)" \
  "patch → ${final} in ${clean_s} s (deadline 300 s); worker $(worker_phase); CheckpointFailed ${ck_reason}: ${ck_msg}; runsc state now: ${sandbox_state}; GPU memory used $(gpu_used) MiB"
CONTRAST+=("**Checkpoint forced without \`-cuda-checkpoint-path\`** (the node agent restarted with tests/support/runsc-drop-cuda-flag.sh in front of the real runsc; its call: \`$(tail -1 "${WORK}/drop-flag-calls.log" 2>/dev/null | sed "s#${WORK}#\$W#g")\`):" "" '```' \
  "status after ${clean_s} s: ${final}" "worker ${WORKER}: $(worker_phase)" "CheckpointFailed reason=${ck_reason}" "message: ${ck_msg}" \
  "events: $(kubectl get events -n "${NS}" --field-selector involvedObject.name="${a}" -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' | tail -4)" \
  "runsc state of the sandbox afterwards: ${sandbox_state}" '```' "")
kubectl delete actor "${a}" -n "${NS}" --timeout=120s >/dev/null 2>&1
check "kubectl delete of the failed actor completes" "$([[ -z "$(kubectl get actor "${a}" -n "${NS}" -o name 2>/dev/null)" ]]; echo $?)" ""
exit 0
