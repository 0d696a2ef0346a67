# shellcheck shell=bash
# Sourced by hack/gpu-runsc-proof.sh when STASIS_GPU_RUNSC_MODE=fast-snapshot, once the bundle's
# rootfs exists: the steps of a copy-speed GPU snapshot measured one by one, on the host and in
# runsc with nvproxy, before anything is built on them. For each size of STASIS_GPU_FAST_GIB
# (default "1 8"), tests/gpu/fast_snapshot_probe.cu holds that much device memory (one VMM
# allocation, patterned) and:
#
#   F1. host: stages it (pinned arena ← device, ordinary memory ← arena, device memory released,
#       the address range kept) and unstages it (mapped again at the same address, copied up,
#       verified), timing every step: what the hardware allows without gVisor;
#   F2. sandbox fast-<N>: the same stage inside runsc; then `runsc checkpoint
#       -cuda-checkpoint-path` of the staged process (the driver's toggle now moves ~nothing;
#       runsc saves the arena as ordinary memory), `runsc restore` and `runsc wait -restore`,
#       then the unstage: same address, pattern verified;
#   F3. sandbox plain-<N>: the same memory checkpointed and restored by the plain path (the
#       toggle moves it all), the baseline of the same run;
#   F4. (first size only) sandbox pinned-<N>: staged with its pinned arena still mapped, then
#       checkpointed: what runsc's save does with a live pinned mapping;
#   F5. (first size only) what one helper call costs in the sandbox before any memory moves
#       (`runsc exec` of the helper's --get-state against `runsc exec` of /bin/true).
#
# The sentries' own times (toggle, save, load) come from their debug logs. Uses
# gpu-runsc-proof.sh's helpers (rs, wlog, check, gpu_used, image_bytes, …).
FAST_GIB="${STASIS_GPU_FAST_GIB:-1 8}"
FAST_ROWS=()
PROBE_CMD="exec /w/fast_snapshot_probe --gib"
# shellcheck source=gpu-runsc-cycle.sh
source "${REPO_ROOT}/hack/gpu-runsc-cycle.sh"

if [[ "${CPU_ONLY}" == 1 ]]; then
  # Speaks the probe's protocol without a GPU: a check of this script, not a measurement.
  cat > "${WORK}/bin/fast_snapshot_probe" <<'EOF'
#!/bin/sh
staged=0
stage() { staged=1; echo "stage pin_alloc_ms=0 d2h_pinned_gbps=0 arena_alloc_ms=0 pinned_to_arena_gbps=0 d2h_pageable_gbps=0 register=ok d2h_registered_gbps=0 unmap_release_ms=0 free_pinned_ms=0 staged_ms=0 pinned_path_ms=0 (cpu stand-in)"; }
unstage() {
  if [ "${staged}" = 1 ]; then echo "unstage map_ms=0 same_va=yes h2d_pageable_gbps=0 verify ok mismatches=0 unstaged_ms=0 (cpu stand-in)"
  else echo "check same_va=yes verify ok mismatches=0 (cpu stand-in)"; fi
  staged=0
}
trap stage USR1
trap unstage USR2
trap 'echo "exit clean"; exit 0' TERM
echo "ready pid=$$ gib=$2 va=0x0"
[ "$3" = --cycle ] && { stage; unstage; echo "exit clean"; exit 0; }
while :; do sleep 0.05; done
EOF
  chmod 0755 "${WORK}/bin/fast_snapshot_probe"
else
  nvcc -O2 -arch=sm_90 -o "${WORK}/bin/fast_snapshot_probe" "${REPO_ROOT}/tests/gpu/fast_snapshot_probe.cu" \
    -L"$(dirname "$(command -v nvcc)")/../lib64/stubs" -lcuda > "${WORK}/build-probe.log" 2>&1
  probe_built=$?
  check "F0. the probe builds (nvcc -arch=sm_90, driver API)" "${probe_built}" "$(tail -5 "${WORK}/build-probe.log")"
  [[ ${probe_built} == 0 ]] || finish
fi

# field LINE KEY: the value of KEY= in a probe line.
field() { sed -n "s/.*\<$2=\([^ ]*\).*/\1/p" <<< "$1"; }
# probe_line ID PREFIX SECONDS: waits for the probe's next line starting with PREFIX.
probe_line() {
  local deadline=$((SECONDS + $3)) line
  while ((SECONDS < deadline)); do
    line=$(wlog "$1" | grep "^$2" | tail -1)
    [[ -n "${line}" ]] && { echo "${line}"; return 0; }
    wlog "$1" | grep -q '^failed' && { wlog "$1" | grep '^failed' | tail -1; return 1; }
    sleep 0.3
  done
  echo "(no '$2' line in $3 s; log: $(wlog "$1" | tail -3 | one_line))"
  return 1
}
# start_probe ID GIB [FLAGS]: a sandbox running the probe, ready.
start_probe() {
  write_config "${WORK}/bundle-$1" "$2" "${PROBE_CMD} $2 ${3:-}"
  rs "run-$1" 120 run -detach -bundle "${WORK}/bundle-$1" "$1"
  step "F. start $1" "$1"
  [[ ${RC} == 0 ]] && probe_line "$1" ready 180 > /dev/null
}
# helper_overhead ID (F5): what one helper call costs before any device memory moves — a
# process started in the sandbox, the driver loaded and asked — against `runsc exec` of
# /bin/true, five of each, medians.
helper_overhead() {
  local t0 i helper=() plain=()
  for i in 1 2 3 4 5; do
    t0=$(now)
    timeout 30 "${RUNSC}" "${FLAGS[@]}" exec "$1" /bin/true > /dev/null 2>&1
    plain+=("$(secs "${t0}" "$(now)")")
    t0=$(now)
    timeout 30 "${RUNSC}" "${FLAGS[@]}" exec "$1" "${CKPT_PATH}" --get-state --pid 1 > "${WORK}/get-state.out" 2>&1
    helper+=("$(secs "${t0}" "$(now)")")
  done
  FIGURES+=("- F5. per helper call in sandbox $1: \`runsc exec … cuda-checkpoint --get-state --pid 1\` $(printf '%s\n' "${helper[@]}" | sort -n | sed -n 3p) s median (answer: $(one_line < "${WORK}/get-state.out" | head -c 120)) against \`runsc exec … /bin/true\` $(printf '%s\n' "${plain[@]}" | sort -n | sed -n 3p) s; all: ${helper[*]} / ${plain[*]}")
}
# finish_probe ID: the image removed (the disk holds one size at a time), the sandbox gone.
finish_probe() {
  rs "end-$1" 60 delete -force "$1"
  rm -rf "${WORK}/images/$1"
}

FIGURES+=("- fast-snapshot mode, sizes ${FAST_GIB} GiB; GPU memory used before: $(gpu_used) MiB")
first=1
for g in ${FAST_GIB}; do
  # F1. the host
  host=$(timeout 300 "${WORK}/bin/fast_snapshot_probe" --gib "${g}" --cycle 2>&1)
  hs=$(grep '^stage' <<< "${host}"); hu=$(grep '^unstage' <<< "${host}")
  check "F1. ${g} GiB on the host: staged and unstaged, same address, pattern verified" \
    "$([[ "${hu}" == *"same_va=yes"*"verify ok"* ]]; echo $?)" "$(one_line <<< "${host}")"
  FAST_ROWS+=("| ${g} | host | $(field "${hs}" pin_alloc_ms) | $(field "${hs}" d2h_pinned_gbps) | $(field "${hs}" pinned_to_arena_gbps) | $(field "${hs}" d2h_pageable_gbps) | $(field "${hs}" register) $(field "${hs}" d2h_registered_gbps) | $(field "${hs}" unmap_release_ms) / $(field "${hs}" free_pinned_ms) | $(field "${hs}" pinned_path_ms) | $(field "${hu}" map_ms) | $(field "${hu}" h2d_pageable_gbps) | — | — | — | — | — |")

  # F2. the staged process in runsc
  id="fast-${g}"
  if start_probe "${id}" "${g}"; then
    timeout 30 "${RUNSC}" "${FLAGS[@]}" kill "${id}" USR1 > /dev/null 2>&1
    ss=$(probe_line "${id}" stage 300); st=$?
    used=$(gpu_used)
    check "F2. ${g} GiB staged inside runsc (pinned arena, ordinary memory, device memory released)" "${st}" "${ss}; GPU memory used after: ${used} MiB"
    row="—"
    if [[ ${st} == 0 ]] && cycle "${id}" "${g}"; then
      timeout 30 "${RUNSC}" "${FLAGS[@]}" kill "${id}" USR2 > /dev/null 2>&1
      su=$(probe_line "${id}" unstage 300); uu=$?
      check "F2. ${g} GiB after runsc checkpoint + restore: mapped at the same address, pattern verified" \
        "$([[ ${uu} == 0 && "${su}" == *"same_va=yes"*"verify ok"* ]]; echo $?)" "${su}; sentry: $(sentry_times "${id}")"
    else
      su=""
      check "F2. ${g} GiB staged process checkpointed and restored" 1 "${CYCLE_ROW:-not reached}; ${CYCLE_CK_ERR:-}; sentry: $(sentry_times "${id}")"
    fi
    FAST_ROWS+=("| ${g} | runsc | $(field "${ss}" pin_alloc_ms) | $(field "${ss}" d2h_pinned_gbps) | $(field "${ss}" pinned_to_arena_gbps) | $(field "${ss}" d2h_pageable_gbps) | $(field "${ss}" register) $(field "${ss}" d2h_registered_gbps) | $(field "${ss}" unmap_release_ms) / $(field "${ss}" free_pinned_ms) | $(field "${ss}" pinned_path_ms) | $(field "${su}" map_ms) | $(field "${su}" h2d_pageable_gbps) | ${CYCLE_ROW:-— | — | — | —} | $(sentry_times "${id}") |")
    finish_probe "${id}"
  else
    check "F2. ${g} GiB probe starts in runsc" 1 "$(wlog "${id}" | tail -3 | one_line); ${ERR_TEXT}"
  fi
  CYCLE_ROW=""

  # F3. the plain path, same size, same run
  id="plain-${g}"
  if start_probe "${id}" "${g}"; then
    [[ ${first} == 1 ]] && helper_overhead "${id}"
    if cycle "${id}" "${g}"; then
      timeout 30 "${RUNSC}" "${FLAGS[@]}" kill "${id}" USR2 > /dev/null 2>&1
      pc=$(probe_line "${id}" check 300); pu=$?
      check "F3. ${g} GiB through the plain path (the toggle moves it all): same address, pattern verified" \
        "$([[ ${pu} == 0 && "${pc}" == *"same_va=yes"*"verify ok"* ]]; echo $?)" "${pc}; sentry: $(sentry_times "${id}")"
    else
      check "F3. ${g} GiB plain checkpoint and restore" 1 "${CYCLE_ROW}; ${CYCLE_CK_ERR}"
    fi
    FAST_ROWS+=("| ${g} | runsc, plain path | — | — | — | — | — | — | — | — | — | ${CYCLE_ROW:-— | — | — | —} | $(sentry_times "${id}") |")
    finish_probe "${id}"
  fi
  CYCLE_ROW=""

  # F4. a live pinned mapping through runsc's save
  if [[ ${first} == 1 ]]; then
    id="pinned-${g}"
    if start_probe "${id}" "${g}" --keep-pinned; then
      timeout 30 "${RUNSC}" "${FLAGS[@]}" kill "${id}" USR1 > /dev/null 2>&1
      probe_line "${id}" stage 300 > /dev/null
      cycle "${id}" "${g}"
      FIGURES+=("- F4. ${g} GiB staged with the pinned arena still mapped, then \`runsc checkpoint -cuda-checkpoint-path\`: exit ${CYCLE_CK_RC}; $(printf '%s' "${CYCLE_CK_ERR:-(no stderr)}" | one_line | no_stack | head -c 400); sentry: $(sentry_times "${id}")")
      finish_probe "${id}"
    fi
    first=0
  fi
done

FIGURES+=("" "### The steps of a copy-speed snapshot" "" \
  "Times in ms, rates in GB/s (1e9 bytes). Stage: pinned alloc, device→pinned, pinned→ordinary (all cores), device→pageable directly, device→registered pageable, device memory unmapped+released / pinned freed, the pinned path's sum. Unstage: map again, host→device from ordinary memory. Cycle: runsc checkpoint, restore, wait -restore (s), image GiB." "" \
  "| GiB | where | pin alloc ms | D2H pinned | pinned→arena | D2H pageable | register, D2H registered | release / free pinned ms | pinned path ms | map ms | H2D pageable | checkpoint s | restore s | wait -restore s | image GiB | sentry: toggle, save, load |" \
  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|" "${FAST_ROWS[@]}")
finish
