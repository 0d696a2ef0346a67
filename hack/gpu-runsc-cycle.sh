# shellcheck shell=bash
# Sourced by hack/gpu-fast-snapshot.sh and hack/gpu-fast-path.sh (modes of
# hack/gpu-runsc-proof.sh): one sandbox through the CUDA checkpoint path and back, and what its
# sentries timed. Uses gpu-runsc-proof.sh's helpers (rs, step, wait_state, image_bytes, gib_of).

# sentry_times ID: the toggle, save and load times the sentries of ID logged, in order.
sentry_times() {
  grep -l "$1" "${WORK}"/dbg/*boot* 2>/dev/null | xargs -r grep -hE 'cuda-checkpoint on [0-9]+ processes took|Overall save took|Overall load took|Save failed' \
    | sort -k2,2 | sed -E 's/.*(cuda-checkpoint on [0-9]+ processes took|Overall save took|Overall load took|Save failed)/\1/' | one_line | head -c 600
}
# cycle ID GIB: checkpoint with the CUDA path, restore, wait for the restore; one table row.
cycle() {
  local img="${WORK}/images/$1" ck rt wt bytes
  mkdir -p "${img}"
  rs "ckpt-$1" 300 checkpoint -image-path "${img}" -cuda-checkpoint-path "${CKPT_PATH}" "$1"
  step "F. checkpoint $1" "$1"
  ck=${DUR}; CYCLE_CK_RC=${RC}; CYCLE_CK_ERR=${ERR_TEXT}
  bytes=$(image_bytes "${img}")
  [[ ${RC} == 0 ]] || { CYCLE_ROW="${ck} (exit ${RC}) | — | — | $(gib_of "${bytes}")"; return 1; }
  wait_state "$1" stopped 30
  rs "del-$1" 60 delete -force "$1"
  rs "restore-$1" 300 restore -detach -bundle "${WORK}/bundle-$1" -image-path "${img}" "$1"
  step "F. restore $1" "$1"
  rt=${DUR}
  [[ ${RC} == 0 ]] || { CYCLE_ROW="${ck} | ${rt} (exit ${RC}) | — | $(gib_of "${bytes}")"; return 1; }
  rs "wait-$1" 300 wait -restore "$1"
  wt=${DUR}
  CYCLE_ROW="${ck} | ${rt} | ${wt} | $(gib_of "${bytes}")"
}
