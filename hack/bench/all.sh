#!/usr/bin/env bash
# Every benchmark in one run, then one summary table: each figure beside the
# baseline measured in the same run and the target. The benchmarks run one after the other
# (each with its own control plane), so that they do not measure each other.
#
#   hack/bench/all.sh [--quick] [--out DIR]
#
#   --quick   smaller sizes (1,000 actors / 100 workers, fewer rounds and cycles): minutes, not
#             the full run's ~30 min; the targets are for the full sizes
#   --out DIR keep every benchmark's full output there (default: a temporary directory, printed)
#
# Runs: scale.sh (10,000 suspended actors, 1,000 workers), transitions.sh (no-op driver and
# runsc), reconcile-cost.sh (callgrind), pause-overhead.sh (issue 5), template-start.sh (boot,
# golden, warm pool). Root is needed (runsc).
source "$(dirname "$0")/../lib.sh"

quick=0 out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --out) out="$2"; shift 2 ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
[[ -n "${out}" ]] || out="$(mktemp -d /tmp/stasis-bench-all.XXXXXX)"
mkdir -p "${out}"
bench="${HACK_DIR}/bench"
if ((quick)); then
  scale_args=(--actors 1000 --workers 100 --idle-seconds 10)
  trans_args=(--actors 40 --rounds 2 --runsc-actors 5 --runsc-rounds 2 --ceiling-seconds 10)
  cost_args=(--repeat 3)
  pause_args=(--cycles 10 --warmup 1)
  template_args=(--actors 20)
else
  scale_args=() trans_args=() cost_args=() pause_args=() template_args=()
fi

run() {
  local name="$1"; shift
  log "running ${name} (output: ${out}/${name}.txt)"
  if ! "$@" 2>&1 | tee "${out}/${name}.txt"; then
    log "${name} failed; its figures are missing below"
  fi
}
run scale "${bench}/scale.sh" "${scale_args[@]}"
run transitions "${bench}/transitions.sh" "${trans_args[@]}"
run reconcile-cost "${bench}/reconcile-cost.sh" "${cost_args[@]}"
run pause-overhead "${bench}/pause-overhead.sh" "${pause_args[@]}"
run template-start "${bench}/template-start.sh" "${template_args[@]}"

# k=v from a benchmark's RESULT line ("-" when missing).
get() { sed -n "s/^RESULT.* $2=\([^ ]*\).*/\1/p" "${out}/$1.txt" 2>/dev/null | tail -1 | grep . || echo -; }
# A pause-overhead figure (that benchmark prints a table, not RESULT): the first number after
# the label on its line, i.e. the p50 of a row, or "p50 X" of the ratio line.
pause_fig() { grep -F "$1" "${out}/pause-overhead.txt" 2>/dev/null | head -1 | awk -v k="$1" '{print substr($0, index($0, k) + length(k))}' | grep -oE '[0-9]+(\.[0-9]+)?' | head -1 | grep . || echo -; }

echo
echo "== summary ($(date -u +%FT%TZ), stasis $(git -C "${REPO_ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown), load $(cut -d' ' -f1-3 /proc/loadavg)) =="
printf '%-52s %-22s %-30s %s\n' "figure" "result" "baseline (same run)" "target"
printf '%-52s %-22s %-30s %s\n' "scale: actors / workers" "$(get scale actors) / $(get scale workers)" "-" "10,000 / 1,000"
printf '%-52s %-22s %-30s %s\n' "scale: peak RSS controller / node, MB" "$(get scale ctl_rss_mb) / $(get scale node_rss_mb)" "-" "< 200"
printf '%-52s %-22s %-30s %s\n' "scale: synced controller / node, s" "$(get scale ctl_ready_s) / $(get scale node_ready_s)" "paged LIST $(get scale list_s) s" "< 10"
printf '%-52s %-22s %-30s %s\n' "scale: every actor reconciled ctl / node, s" "$(get scale ctl_settled_s) / $(get scale node_settled_s)" "-" "-"
printf '%-52s %-22s %-30s %s\n' "scale: idle CPU controller / node, % of a core" "$(get scale ctl_idle_pct) / $(get scale node_idle_pct)" "-" "-"
printf '%-52s %-22s %-30s %s\n' "scale: full resync (restart) ctl / node, s" "$(get scale ctl_resync_s) / $(get scale node_resync_s)" "-" "-"
printf '%-52s %-22s %-30s %s\n' "transitions (no-op driver): per s" "$(get transitions noop_tps)" "mix ceiling $(get transitions ceiling_mixed_transitions_per_s)/s" "-"
printf '%-52s %-22s %-30s %s\n' "transitions (no-op): p50 / p99 ms" "$(get transitions noop_p50_ms) / $(get transitions noop_p99_ms)" "-" "-"
printf '%-52s %-22s %-30s %s\n' "transitions (no-op): ratio, the agent's request mix" "$(get transitions noop_ratio_mixed)" "its requests replayed" ">= 0.70"
printf '%-52s %-22s %-30s %s\n' "  the same, one-field patch ceiling" "$(get transitions noop_ratio)" "ceiling $(get transitions ceiling_writes_per_s) w/s, $(get transitions noop_writes_per_t) writes/transition" "(beside it)"
printf '%-52s %-22s %-30s %s\n' "  the same, ceiling with two watches open" "$(get transitions noop_ratio_watched)" "ceiling $(get transitions ceiling_watched_writes_per_s) writes/s" "(explains)"
printf '%-52s %-22s %-30s %s\n' "transitions (runsc): per s, p50 / p99 ms" "$(get transitions runsc_tps), $(get transitions runsc_p50_ms) / $(get transitions runsc_p99_ms)" "-" "-"
printf '%-52s %-22s %-30s %s\n' "transitions (runsc): ratio to the write ceiling" "$(get transitions runsc_ratio)" "-" "-"
printf '%-52s %-22s %-30s %s\n' "callgrind Ir: node_pause / node_resume" "$(get reconcile-cost node_pause_ir) / $(get reconcile-cost node_resume_ir)" "$(grep -E '^node_pause ' "${bench}/callgrind-baseline.txt" | cut -d' ' -f2) / $(grep -E '^node_resume ' "${bench}/callgrind-baseline.txt" | cut -d' ' -f2) (checked in)" "no regression > 10 %"
printf '%-52s %-22s %-30s %s\n' "callgrind Ir: cluster_at_rest" "$(get reconcile-cost cluster_at_rest_ir)" "$(grep -E '^cluster_at_rest ' "${bench}/callgrind-baseline.txt" | cut -d' ' -f2) (checked in)" "-"
printf '%-52s %-22s %-30s %s\n' "callgrind: regressions" "$(get reconcile-cost regressions)" "-" "0"
printf '%-52s %-22s %-30s %s\n' "pause: overhead p50, ms" "$(pause_fig 'agent: overhead (end-to-end − checkpoint)')" "direct checkpoint $(pause_fig 'direct: runsc checkpoint') ms" "-"
printf '%-52s %-22s %-30s %s\n' "pause: end-to-end ÷ direct checkpoint, p50" "$(pause_fig 'ratio end-to-end pause / direct checkpoint: p50')" "(ratio of the two)" "<= 1.1"
printf '%-52s %-22s %-30s %s\n' "resume: end-to-end ÷ direct restore, p50" "$(pause_fig 'ratio end-to-end resume / direct restore: p50')" "direct restore $(pause_fig 'direct: runsc restore -detach') ms" "<= 1.1"
printf '%-52s %-22s %-30s %s\n' "template start p50: boot / golden / warm, ms" "$(get template-start boot_p50_ms) / $(get template-start golden_p50_ms) / $(get template-start warm_p50_ms)" "-" "-"
printf '%-52s %-22s %-30s %s\n' "template start: golden p50 ÷ direct restore p50" "$(get template-start golden_ratio)" "runsc restore $(get template-start direct_p50_ms) ms" "<= 1.1"
printf '%-52s %-22s %-30s %s\n' "template start: warm p50 − resume p50, ms" "$(get template-start warm_over_resume_ms)" "agent resume $(get template-start resume_p50_ms) ms" "<= 100"
echo "full outputs: ${out}"
