#!/usr/bin/env bash
# The node agent's pause (or suspend) and resume of a real sandbox, against a direct `runsc
# checkpoint` and `runsc restore -detach` of a second sandbox of the same bundle, interleaved in
# the same run; and the extra cost of checkpointPolicy LeaveRunningThenStop (a second actor)
# against Direct. docs/benchmarks.md has the targets and what each step of the report means.
#
# Builds `stasis` and `bench_pause_overhead` in the non-sanitized build/ directory, brings up a
# throwaway control plane (kube-apiserver + etcd) in a temporary directory, starts one node agent
# (two workers, one per benchmarked actor; the pinned runsc; --log-level debug so that each pause
# can be split into its steps), runs the benchmark, and tears everything down: no process,
# sandbox or mount is left.
#
#   hack/bench/pause-overhead.sh [--mode pause|suspend] [--store dir|s3] [--cycles N] [--warmup N]
#                                [--fill-mb N] [--no-leave-running] [--keep] [--out FILE]
#                                [--agent-flags "FLAGS"]
#
#   --mode M     pause (default): PATCH Paused → PAUSED against the direct checkpoint, then the
#                resume from that node-local image against the direct restore of the direct
#                side's own image; suspend: PATCH Suspended → SUSPENDED (committed to the
#                agent's filesystem --snapshot-store in the work directory) against the same
#                direct checkpoint, then the resume from the store
#   --store S    with --mode suspend: dir (default, a filesystem store) or s3: a real object
#                store (SeaweedFS, hack/object-store.sh, in the work directory); the direct side
#                then also uploads its image with curl --aws-sigv4 and downloads it again before
#                its restore, and the agent's cached copy is dropped before each resume, so both
#                sides move the image as a resume on another node would
#   --cycles N   measured pause/resume cycles of each side (default 50)
#   --warmup N   unmeasured cycles first (default 2)
#   --fill-mb N  the workload first writes N MiB of random data to a tmpfs inside its sandbox,
#                so that the checkpoint has that much more memory to save (default 0: the
#                plain counter of hack/make-bundle.sh, a ~0.4 MB image)
#   --out FILE   also write the report there (and FILE.csv: every cycle)
#   --agent-flags "FLAGS"  more flags for the node agent, space-separated (e.g. "--resume-writes
#                serial", to compare a setting against the default in back-to-back runs)
#   --no-leave-running  leave out the LeaveRunningThenStop actor (a third side: a shorter run)
#   --keep       keep the work directory (logs, CSV) after tearing down the processes
#   --prometheus also scrape the agent with a real Prometheus (Debian's, every second) and check
#                the dashboard's quantile panels against this run's own percentiles of the same
#                samples (hack/bench/dashboard-quantiles.py); no warm-up cycles then, so that
#                the agent's histograms hold exactly the samples the benchmark measured
source "$(dirname "$0")/../lib.sh"
source "${HACK_DIR}/bench/lib.sh"

cycles=50 warmup=2 fill_mb=0 keep=0 out="" prometheus=0 mode=pause leave_running=true store=dir agent_flags=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --mode) mode="$2"; shift 2 ;;
    --store) store="$2"; shift 2 ;;
    --no-leave-running) leave_running=false; shift ;;
    --cycles) cycles="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --fill-mb) fill_mb="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --agent-flags) agent_flags="$2"; shift 2 ;;
    --prometheus) prometheus=1; shift ;;
    *) die "unknown argument: $1 (see the header of $0)" ;;
  esac
done
read -ra extra_agent_flags <<< "${agent_flags}"
[[ "${mode}" == pause || "${mode}" == suspend ]] || die "--mode: pause or suspend, not ${mode}"
[[ "${store}" == dir || "${store}" == s3 ]] || die "--store: dir or s3, not ${store}"
[[ "${store}" == dir || "${mode}" == suspend ]] || die "--store s3 needs --mode suspend"
[[ $(id -u) == 0 ]] || die "run as root: the benchmark drives runsc sandboxes"

build="${REPO_ROOT}/build"
cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
cmake --build "${build}" --target stasis bench_pause_overhead -j2
"${HACK_DIR}/build-control-plane.sh" >/dev/null
RUNSC="$("${HACK_DIR}/runsc.sh")"
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"

work="$(mktemp -d /tmp/stasis-bench-pause.XXXXXX)"
export STASIS_CONTROL_PLANE_DIR="${work}/control-plane"
node_pid="" prom_pid=""

teardown() {
  local rc=$?
  set +e
  stop_process "${prom_pid}"
  stop_process "${node_pid}"
  [[ "${store}" == s3 ]] && "${HACK_DIR}/object-store.sh" down --dir "${work}/object-store" >/dev/null 2>&1
  # Sandboxes the agent or the benchmark left (after a failure): one runsc root each.
  bench_teardown "${work}" "${keep}" "${work}"/node/run/*/ "${work}/direct-root/"
  exit "${rc}"
}
trap teardown EXIT
trap 'exit 130' INT TERM

bench_control_plane_up stasis-system

"${HACK_DIR}/make-bundle.sh" "${work}/bundles/bundle" >/dev/null
if ((fill_mb > 0)); then
  # Random data (incompressible) in a sandbox-internal tmpfs: memory the checkpoint must save.
  mkdir -p "${work}/bundles/bundle/rootfs/fill"
  python3 - "${work}/bundles/bundle/config.json" "${fill_mb}" <<'PY'
import json, sys
path, mb = sys.argv[1], int(sys.argv[2])
spec = json.load(open(path))
spec["mounts"].append({"destination": "/fill", "type": "tmpfs", "source": "tmpfs",
                       "options": ["nosuid", "size=%dm" % (mb + 16)]})
loop = spec["process"]["args"][2]
spec["process"]["args"][2] = "/bin/busybox head -c %dm /dev/urandom > /fill/data; %s" % (mb, loop)
json.dump(spec, open(path, "w"), indent=2)
PY
fi
store_flag="${work}/store" bench_store_flags=()
if [[ "${store}" == s3 ]]; then
  eval "$("${HACK_DIR}/object-store.sh" up --dir "${work}/object-store")"
  store_flag="s3://${STASIS_S3_BUCKET}/agent/"
  bench_store_flags=(--peer-object-store --agent-store-cache "${work}/node/store-cache")
fi
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
"${build}/stasis" node --node-name bench-node --runsc "${RUNSC}" --root "${work}/node" --bundle-root "${work}/bundles" \
  --snapshot-store "${store_flag}" --workers 2 --metrics-addr "127.0.0.1:${port}" \
  --log-level debug "${extra_agent_flags[@]}" >"${work}/node.log" 2>&1 &
node_pid=$!
for _ in $(seq 200); do curl -fs "127.0.0.1:${port}/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fs "127.0.0.1:${port}/readyz" >/dev/null || { tail -20 "${work}/node.log" >&2; die "the node agent is not ready"; }

if ((prometheus)); then
  warmup=0
  start_prometheus "${work}/prometheus" "127.0.0.1:${port}"
  run_start="$(date +%s)"
fi

cmd=("${build}/tests/bench_pause_overhead" --kubeconfig "${KUBECONFIG}" --runsc "${RUNSC}"
     --bundle "${work}/bundles/bundle" --node bench-node --work-dir "${work}"
     --cycles "${cycles}" --warmup "${warmup}" --agent-log "${work}/node.log" --csv "${work}/cycles.csv"
     --mode "${mode}" --leave-running-side="${leave_running}" "${bench_store_flags[@]}")
log "commit $(git -C "${REPO_ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown), work dir ${work}"
"${cmd[@]}" | tee "${work}/report.txt"
if [[ -n "${out}" ]]; then
  cp "${work}/report.txt" "${out}"
  cp "${work}/cycles.csv" "${out}.csv"
fi
if ((prometheus)); then
  # Every sample the agent recorded: both actors' checkpoints and snapshot sizes from the CSV
  # (status.latestSnapshot), their restores from the agent's log (the histogram's own values).
  python3 - "${work}/cycles.csv" "${work}/node.log" >"${work}/samples.json" <<'PY'
import csv, json, re, sys
rows = list(csv.DictReader(open(sys.argv[1])))
pairs = [(float(r["agent_checkpoint_ms"]) / 1e3, float(r["agent_image_bytes"])) for r in rows]
pairs += [(float(r["lr_checkpoint_ms"]) / 1e3, float(r["lr_image_bytes"]))
          for r in rows if float(r["lr_pause_e2e_ms"]) > 0]
restores = [float(m.group(1)) for m in
            re.finditer(r"actor resumed .*from_snapshot=true duration_s=([0-9.]+)", open(sys.argv[2]).read())]
json.dump({"checkpoint_seconds": [s for s, _ in pairs], "snapshot_bytes": [b for _, b in pairs],
           "throughput_bytes_per_second": [b / s for s, b in pairs], "restore_seconds": restores},
          sys.stdout)
PY
  rc=0
  "${HACK_DIR}/bench/dashboard-quantiles.py" --prometheus "${prom_url}" --since "${run_start}" \
    --samples "${work}/samples.json" >"${work}/quantiles.txt" || rc=$?
  tee -a "${work}/report.txt" <"${work}/quantiles.txt"
  if [[ -n "${out}" ]]; then cp "${work}/report.txt" "${out}"; fi
  ((rc == 0)) || die "dashboard quantiles: exit ${rc} (1: a panel is off by more than a bucket; 2: no verdict)"
fi
