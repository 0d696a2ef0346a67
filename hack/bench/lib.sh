# What the benchmark scripts share: sourced after hack/lib.sh. Each benchmark brings up its own
# control plane in its own work directory and tears everything down at exit, also on failure.

# stop_process PID: SIGTERM, up to 30 s to exit, then SIGKILL; reaps it. Always succeeds.
stop_process() {
  local pid="$1"
  [[ -n "${pid}" ]] || return 0
  kill -TERM "${pid}" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${pid}" 2>/dev/null || true
  wait "${pid}" 2>/dev/null || true
  return 0
}

# bench_build TARGET…: builds the targets in the non-sanitized ${STASIS_BENCH_BUILD_DIR:-build}/
# (configured first if it is not) and sets `build` to it; a sanitized build is refused (its
# figures would measure the sanitizer).
# STASIS_BENCH_PREBUILT=1: the targets were built elsewhere and carried here (a machine with no
# compiler: hack/bench/fleet-from-bundle.sh); each must exist, nothing is built.
bench_build() {
  build="${STASIS_BENCH_BUILD_DIR:-${REPO_ROOT}/build}"
  if [[ "${STASIS_BENCH_PREBUILT:-0}" == 1 ]]; then
    local target
    for target in "$@"; do
      [[ -x "${build}/${target}" || -x "${build}/tests/${target}" ]] \
        || die "STASIS_BENCH_PREBUILT=1 but ${build} has no ${target}"
    done
    return 0
  fi
  [[ -f "${build}/build.ninja" ]] || cmake -S "${REPO_ROOT}" -B "${build}" -G Ninja -DSTASIS_SANITIZE=OFF >/dev/null
  grep -q '^STASIS_SANITIZE:BOOL=ON' "${build}/CMakeCache.txt" \
    && die "${build} is a sanitized build; set STASIS_BENCH_BUILD_DIR to a non-sanitized one"
  cmake --build "${build}" --target "$@" -j"${STASIS_BUILD_JOBS:-2}" >/dev/null || die "building $* failed"
}

# bench_control_plane_up NAMESPACE…: the control plane in ${STASIS_CONTROL_PLANE_DIR}, the CRDs
# established and served, and the namespaces created; exports KUBECONFIG.
bench_control_plane_up() {
  "${HACK_DIR}/control-plane.sh" up >/dev/null
  export KUBECONFIG="${STASIS_CONTROL_PLANE_DIR}/kubeconfig"
  kubectl apply -f "${REPO_ROOT}/manifests/crd/" >/dev/null
  kubectl wait --for condition=established --timeout=60s crd/actors.stasis.dev crd/actortemplates.stasis.dev crd/workers.stasis.dev >/dev/null
  local ns
  for ns in "$@"; do kubectl create namespace "${ns}" >/dev/null; done
  # "established" comes before the API server serves the resource from its watch cache.
  for _ in $(seq 100); do kubectl get actors -A >/dev/null 2>&1 && break; sleep 0.2; done
}

# bench_teardown WORK KEEP [RUNSC_ROOT…]: force-deletes every sandbox left under the runsc
# roots (after a failure), stops the control plane, lazily unmounts what runsc left mounted
# under WORK (its null-netns bind mounts, deepest first) and removes WORK unless KEEP is 1.
bench_teardown() {
  local work="$1" keep="$2" root id
  shift 2
  for root in "$@"; do
    [[ -d "${root}" ]] || continue
    for id in $("${RUNSC}" -root "${root}" list -quiet 2>/dev/null); do
      "${RUNSC}" -root "${root}" delete -force "${id}" >/dev/null 2>&1
    done
  done
  "${HACK_DIR}/control-plane.sh" down >/dev/null 2>&1
  findmnt -rn -o TARGET | grep -F "${work}/" | sort -r | while read -r m; do umount -l "${m}"; done
  if ((keep)); then log "kept ${work}"; else rm -rf "${work}"; fi
}

# start_prometheus DIR TARGET: Debian's Prometheus scraping TARGET (host:port) every second, its
# data in DIR; sets prom_pid and prom_url once it answers /-/ready. The caller stops prom_pid.
start_prometheus() {
  local dir="$1" target="$2" port
  mkdir -p "${dir}/tsdb"
  cat >"${dir}/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: stasis-node
    static_configs: [{targets: ["${target}"]}]
YML
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
  prometheus --config.file="${dir}/prometheus.yml" --storage.tsdb.path="${dir}/tsdb" \
    --web.listen-address="127.0.0.1:${port}" >"${dir}/prometheus.log" 2>&1 &
  prom_pid=$!
  prom_url="http://127.0.0.1:${port}"
  for _ in $(seq 300); do curl -fs "${prom_url}/-/ready" >/dev/null 2>&1 && return 0; sleep 0.2; done
  tail -20 "${dir}/prometheus.log" >&2
  die "prometheus did not become ready on ${prom_url}"
}

# A target verdict ("met"/"missed") is printed only from figures that can be trusted. These
# refuse instead — say why (on stderr, which a command substitution does not swallow) and exit 1 —
# when a process measured has died, a sample is empty, fewer objects were seen than expected,
# or a case is missing. tests/unit/bench_refusals_test.sh feeds them each refusal.

# refuse REASON…: no verdict; exits 1 (from a command substitution: that subshell, which
# set -e turns into the script's exit at the assignment).
refuse() {
  echo "[$(basename "$0")] no verdict: $*" >&2
  exit 1
}

# require_alive NAME PID: refuses unless PID is a running process: a dead one reads as 0 MB
# and 0 % CPU, and a child that died is a zombie until it is reaped.
require_alive() {
  local name="$1" pid="$2" state=""
  [[ "${pid}" =~ ^[0-9]+$ ]] || refuse "${name}: no process id"
  state="$(awk '/^State:/ {print $2}' "/proc/${pid}/status" 2>/dev/null || true)"
  [[ -n "${state}" ]] || refuse "${name} (pid ${pid}) has exited"
  [[ "${state}" != Z && "${state}" != X ]] || refuse "${name} (pid ${pid}) has died (state ${state})"
}

# require_number NAME VALUE: refuses unless VALUE is a number (an empty sample, or a figure a
# failed step left blank).
require_number() {
  [[ "$2" =~ ^-?[0-9]+(\.[0-9]+)?$ ]] || refuse "$1: no figure (got '${2}')"
}

# require_positive NAME VALUE: a number above zero (a rate or a ceiling of 0 is a failed run).
require_positive() {
  require_number "$1" "$2"
  awk -v v="$2" 'BEGIN { exit !(v > 0) }' || refuse "$1 is $2"
}

# require_cases EXPECTED GOT: refuses unless every case named in EXPECTED (words) is in GOT.
require_cases() {
  local c missing=""
  for c in $1; do
    [[ " $2 " == *" ${c} "* ]] || missing+=" ${c}"
  done
  [[ -z "${missing}" ]] || refuse "case(s) missing from the run:${missing}"
}

# calc EXPRESSION: the arithmetic of two-decimal figures (awk, not bc: a machine the benchmarks
# are carried to may have no bc). mb KB: kibibytes as whole mebibytes.
calc() { awk "BEGIN { printf \"%.2f\", $* }"; }
mb() { awk -v kb="$1" 'BEGIN { printf "%d", kb / 1024 }'; }

# max_of A B: the larger of two figures, as awk prints it (bc would print 0.18 as ".18", which
# require_number refuses).
max_of() { awk -v a="$1" -v b="$2" 'BEGIN { print (a > b) ? a : b }'; }

# verdict VALUE OP TARGET: "met" or "missed" (OP: < <= >= >), from two numbers.
verdict() {
  require_number value "$1"
  local rc=0
  awk -v a="$1" -v op="$2" -v b="$3" 'BEGIN {
    met = op == "<" ? a < b : op == "<=" ? a <= b : op == ">=" ? a >= b : op == ">" ? a > b : -1
    if (met < 0) exit 2
    exit !met
  }' || rc=$?
  case "${rc}" in 0) echo met ;; 1) echo missed ;; *) refuse "verdict: no operator '$2'" ;; esac
}
