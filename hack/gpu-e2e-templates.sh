# shellcheck shell=bash
# STASIS_GPU_E2E_MODE=template of hack/gpu-e2e.sh (sourced by it after its steps 1–3, with its
# helpers and variables): a GPU ActorTemplate whose golden snapshot holds a live CUDA context,
# and actors from it restored onto the GPU their own worker holds.
#
#   1. an ActorTemplate of the workload (the first size of STASIS_GPU_E2E_GIB) with a readiness
#      gate "tick 20 is in the workload's log" and a postRestore hook writing the actor's
#      identity; the controller takes its golden snapshot (a Full checkpoint through the
#      cuda-checkpoint path, committed to the store) and records it (checks: cudaCheckpointed,
#      GPU memory released once the golden actor is suspended);
#   2. STASIS_GPU_E2E_CLONES actors (default 2) from the template, one after the other (one GPU):
#      each is filled in from the template, bound by the controller, restored from the golden
#      snapshot onto its GPU (checks: its ticks continue past the gate's 20 with none missing,
#      the device memory pattern verifies, the hook gave it its own identity, status.clonedFrom
#      names the golden snapshot), then deleted (its worker freed).

tpl_jp() { kubectl get actortemplate "$1" -n "${NS}" -o jsonpath="$2" 2>/dev/null; }

# wait_golden TEMPLATE SECONDS: until GoldenReady=True (0), or a GoldenReady=False that is final
# or the time is up (1).
wait_golden() {
  local deadline=$((SECONDS + $2)) reason
  while ((SECONDS < deadline)); do
    [[ "$(tpl_jp "$1" '{.status.conditions[?(@.type=="GoldenReady")].status}')" == True ]] && return 0
    reason=$(tpl_jp "$1" '{.status.conditions[?(@.type=="GoldenReady")].reason}')
    [[ "${reason}" == ReadinessGateFailed || "${reason}" == GoldenActorFailed ]] && return 1
    sleep 0.5
  done
  return 1
}

create_gpu_template() {  # create_gpu_template NAME GIB
  kubectl apply -f - >/dev/null <<EOF
apiVersion: stasis.dev/v1alpha1
kind: ActorTemplate
metadata: {name: $1, namespace: ${NS}}
spec:
  actor:
    runtime: gvisor
$(actor_source "$2" "    ")
    gpu: {count: 1, cudaCheckpointPath: ${CKPT_PATH}}
    checkpointPolicy: Direct
    timeouts: {checkpointSeconds: 300, restoreSeconds: 300}
    hooks:
      postRestore:
        command: ["/bin/sh", "-c", "echo \"\$STASIS_ACTOR_NAME \$STASIS_RESTORE \$STASIS_SNAPSHOT_ID\" > /tmp/identity"]
        timeoutSeconds: 60
  readinessGate:
    command: ["/bin/sh", "-c", "grep -q '^tick 20\$' /tmp/w.log"]
    timeoutSeconds: 240
    periodSeconds: 1
EOF
}

clone_from_template() {  # clone_from_template NAME TEMPLATE GOLDEN_ID GIB
  local a=$1 t0 t1 first later verify identity used
  kubectl apply -f - >/dev/null <<EOF
apiVersion: stasis.dev/v1alpha1
kind: Actor
metadata: {name: ${a}, namespace: ${NS}}
spec:
  templateRef: {name: $2}
  desiredState: Running
EOF
  t0=$(now)
  if ! wait_status "${a}" STATUS_RUNNING 300; then
    check "${a}: RUNNING from the golden snapshot" 1 "$(jp "${a}" '{.status}')"
    return
  fi
  t1=$(now)
  first=$(last_tick "${a}")
  later=$(tick_after "${a}" "${first}" 30)
  used=$(gpu_used)
  timeout 30 "${RUNSC}" -root "$(sb_root "${a}")" kill "$(sb_id "${a}")" USR1 >/dev/null 2>&1
  wait_log "${a}" '^verify' 120
  verify=$(wlog "${a}" | grep '^verify' | tail -1)
  identity=$(timeout 30 "${RUNSC}" -root "$(sb_root "${a}")" exec "$(sb_id "${a}")" /bin/cat /tmp/identity 2>/dev/null)
  check "${a}: restored from the golden — its ticks continue past the gate's 20, none missing" \
    "$([[ -n "${first}" && -n "${later}" ]] && ((first >= 20 && later > first)) && ticks_consecutive "${a}"; echo $?)" \
    "create → RUNNING $(secs "${t0}" "${t1}") s; first tick after RUNNING ${first}, then ${later}; worker $(jp "${a}" '{.status.workerName}')"
  check "${a}: on its GPU — the device memory pattern verifies" \
    "$([[ "${verify}" == "verify ok mismatches=0"* ]] && { [[ "${CPU_ONLY}" == 1 ]] || ((used > baseline_used + $4 * 900)); }; echo $?)" \
    "${verify:-no answer}; GPU memory used ${used} MiB (baseline ${baseline_used})"
  check "${a}: its own identity from the postRestore hook, clonedFrom the golden" \
    "$([[ "${identity}" == "${a} clone $3" && "$(jp "${a}" '{.status.clonedFrom.snapshotID}')" == "$3" ]]; echo $?)" \
    "/tmp/identity: ${identity:-none}; clonedFrom $(jp "${a}" '{.status.clonedFrom}')"
  FIGURES+=("- ${a}: kubectl apply → RUNNING $(secs "${t0}" "${t1}") s (filled in, bound, golden restored onto the GPU, hook run)")
  kubectl delete actor "${a}" -n "${NS}" --timeout=120s >/dev/null 2>&1
  wait_worker_free
  check "${a}: deleted, the worker is free" "$([[ "$(worker_phase)" == Free ]]; echo $?)" "worker $(worker_phase)"
}

gib="${SIZES%% *}"
say "=== GPU template, ${gib} GiB"
rs_before=$(op_sum restore)
t0=$(now)
create_gpu_template cuda "${gib}"
if ! wait_golden cuda 400; then
  fail_now "GPU template: golden snapshot taken" "$(kubectl get actortemplate cuda -n "${NS}" -o jsonpath='{.status}')"
fi
golden_s=$(secs "${t0}" "$(now)")
golden_id=$(tpl_jp cuda '{.status.golden.snapshotID}')
golden_cuda=$(tpl_jp cuda '{.status.golden.cudaCheckpointed}')
wait_worker_free; sleep 1
used_golden=$(gpu_used)
check "GPU template: golden snapshot taken through the cuda-checkpoint path and committed" \
  "$([[ -n "${golden_id}" && ( "${CPU_ONLY}" == 1 || "${golden_cuda}" == true ) ]] && store_has_manifest "$(tpl_jp cuda '{.status.golden.actorName}')" "${golden_id}"; echo $?)" \
  "template apply → GoldenReady ${golden_s} s; golden $(tpl_jp cuda '{.status.golden}'); GPU memory used after the suspend ${used_golden} MiB (baseline ${baseline_used}); worker $(worker_phase)"
FIGURES+=("- GPU template, ${gib} GiB: kubectl apply → golden snapshot recorded ${golden_s} s (boot, gate at tick 20, suspend with the CUDA context, commit)")
for i in $(seq "${STASIS_GPU_E2E_CLONES:-2}"); do
  if over_time 120; then check "clone ${i}" 1 "skipped: ${SECONDS} s elapsed, too close to the ${HARD_S} s limit"; break; fi
  clone_from_template "cuda-clone-${i}" cuda "${golden_id}" "${gib}"
done
FIGURES+=("- runsc restore, every golden restore of this run: $(delta "${rs_before}" "$(op_sum restore)") s in all (stasis_snapshot_duration_seconds); the agent's part of each start: $(metric stasis_actor_start_seconds_sum 'kind="golden"') s over $(metric stasis_actor_start_seconds_count 'kind="golden"') starts (stasis_actor_start_seconds{kind=\"golden\"})")
