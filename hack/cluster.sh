#!/usr/bin/env bash
# A real one-node Kubernetes cluster on this machine, as root: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kube-proxy and kubelet built from the pinned
# k8s.io/kubernetes module, containerd (from its Go module) with Debian's runc, and Debian's CNI
# plugins (one bridge). Nothing is downloaded but packages and Go modules (hack/build-cluster.sh).
#
#   hack/cluster.sh up              start; waits until the node is Ready; prints export KUBECONFIG=…
#   hack/cluster.sh down            stop; no process, mount, network device or iptables rule left
#   hack/cluster.sh status
#   hack/cluster.sh import ARCHIVE NAME   an OCI archive into the node's containerd as NAME
#                                   (e.g. docker.io/library/stasis:0.1.0), never collected
#
# State in ${STASIS_CLUSTER_DIR:-/var/lib/stasis-cluster}. The node is named
# ${STASIS_CLUSTER_NODE:-stasis-node} and gets an address of its own (172.31.255.1, on the
# loopback device), so the cluster does not depend on this machine's interfaces.
source "$(dirname "$0")/lib.sh"

cmd="${1:-}"; shift || true
dir="${STASIS_CLUSTER_DIR:-/var/lib/stasis-cluster}"
node="${STASIS_CLUSTER_NODE:-stasis-node}"
readonly node_ip=172.31.255.1
# The node agent DaemonSet's state directory (its hostPath, manifests/node-agent/base).
readonly agent_state=/var/lib/stasis
k8s_dir="${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"
etcd_dir="${STASIS_CACHE}/bin/etcd-${ETCD_VERSION}"
containerd_dir="${STASIS_CACHE}/bin/containerd-${CONTAINERD_VERSION}"
# kubectl: the machine's, else the one hack/build-control-plane.sh builds there.
export PATH="${PATH}:${k8s_dir}"
source "${HACK_DIR}/cluster-config.sh"

[[ "$(id -u)" == 0 ]] || die "run as root: the kubelet and containerd manage cgroups, mounts and networks"

# start NAME ARGV…: NAME in its own session, logging to logs/NAME.log, pid in NAME.pid.
start() {
  local name="$1"; shift
  mkdir -p "${dir}/logs"
  PATH="${containerd_dir}:${PATH}" setsid "$@" >>"${dir}/logs/${name}.log" 2>&1 </dev/null &
  echo $! > "${dir}/${name}.pid"
}

# wait_for WHAT SECONDS COMMAND…: until COMMAND succeeds; WHAT is also the process that must
# stay alive meanwhile, when one of that name was started.
wait_for() {
  local what="$1" seconds="$2"; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if [[ -f "${dir}/${what}.pid" ]] && ! pid_alive "${dir}/${what}.pid"; then
      tail -5 "${dir}/logs/${what}.log" >&2
      die "${what} exited (log: ${dir}/logs/${what}.log)"
    fi
    ((SECONDS < deadline)) || die "${what} not ready after ${seconds}s (logs: ${dir}/logs/)"
    sleep 1
  done
}

kc() { kubectl --kubeconfig "${dir}/admin.kubeconfig" "$@"; }

start_control_plane() {
  start etcd "${etcd_dir}/etcd" --name stasis-cluster --data-dir="${dir}/etcd" \
    --listen-client-urls="http://127.0.0.1:${etcd_port}" --advertise-client-urls="http://127.0.0.1:${etcd_port}" \
    --listen-peer-urls="http://127.0.0.1:${etcd_peer_port}" \
    --initial-advertise-peer-urls="http://127.0.0.1:${etcd_peer_port}" \
    --initial-cluster="stasis-cluster=http://127.0.0.1:${etcd_peer_port}" --log-level=warn
  local pki="${dir}/pki"
  start kube-apiserver "${k8s_dir}/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:${etcd_port}" \
    --bind-address="${node_ip}" --advertise-address="${node_ip}" --secure-port="${apiserver_port}" \
    --tls-cert-file="${pki}/apiserver.crt" --tls-private-key-file="${pki}/apiserver.key" \
    --client-ca-file="${pki}/ca.crt" \
    --kubelet-client-certificate="${pki}/apiserver-kubelet.crt" --kubelet-client-key="${pki}/apiserver-kubelet.key" \
    --kubelet-certificate-authority="${pki}/ca.crt" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-issuer="https://kubernetes.default.svc.cluster.local" \
    --service-account-key-file="${pki}/sa.pub" --service-account-signing-key-file="${pki}/sa.key" \
    --service-cluster-ip-range="${service_cidr}" --allow-privileged=true --profiling=false \
    --kubelet-preferred-address-types=InternalIP
  wait_for kube-apiserver 90 kc get --raw /readyz
  start kube-controller-manager "${k8s_dir}/kube-controller-manager" \
    --kubeconfig="${dir}/controller-manager.kubeconfig" \
    --authentication-kubeconfig="${dir}/controller-manager.kubeconfig" \
    --authorization-kubeconfig="${dir}/controller-manager.kubeconfig" \
    --service-account-private-key-file="${pki}/sa.key" --root-ca-file="${pki}/ca.crt" \
    --use-service-account-credentials=true --leader-elect=false --bind-address=127.0.0.1
  start kube-scheduler "${k8s_dir}/kube-scheduler" --kubeconfig="${dir}/scheduler.kubeconfig" \
    --authentication-kubeconfig="${dir}/scheduler.kubeconfig" \
    --authorization-kubeconfig="${dir}/scheduler.kubeconfig" --leader-elect=false --bind-address=127.0.0.1
}

# The pause image (the pod sandbox), from the binary hack/build-cluster.sh compiled: an OCI
# layout made with umoci, imported and pinned like any image of `import`.
import_pause() {
  local work="${dir}/pause-image"
  rm -rf "${work}"
  umoci init --layout "${work}/oci"
  umoci new --image "${work}/oci:${PAUSE_VERSION}"
  umoci unpack --image "${work}/oci:${PAUSE_VERSION}" "${work}/bundle" >/dev/null
  install -m 0755 "${k8s_dir}/pause" "${work}/bundle/rootfs/pause"
  umoci repack --image "${work}/oci:${PAUSE_VERSION}" "${work}/bundle"
  umoci config --image "${work}/oci:${PAUSE_VERSION}" --config.entrypoint /pause --config.user 65535:65535
  tar -C "${work}/oci" -cf "${work}/pause.oci.tar" .
  import_image "${work}/pause.oci.tar" "registry.k8s.io/pause:${PAUSE_VERSION}"
  rm -rf "${work}"
}

# import_image ARCHIVE NAME: the archive's one image, named NAME and pinned (the kubelet's image
# garbage collection leaves pinned images alone).
import_image() {
  local archive="$1" name="$2"
  [[ -f "${archive}" ]] || die "no archive at ${archive}"
  [[ "${name}" == */*:* ]] || die "name the image in full (REGISTRY/REPOSITORY:TAG): ${name}"
  local ctr=("${containerd_dir}/ctr" --address "${dir}/containerd/containerd.sock" -n k8s.io)
  # ctr names an OCI archive's image BASE:TAG, the tag being the layout's ref.name annotation.
  local tag; tag="$(tar -xOf "${archive}" ./index.json | python3 -c \
    'import json,sys; m=json.load(sys.stdin)["manifests"]; print(m[0]["annotations"]["org.opencontainers.image.ref.name"] if len(m)==1 else "")')"
  [[ -n "${tag}" ]] || die "${archive} holds no single tagged image"
  "${ctr[@]}" images import --base-name "${name%:*}" "${archive}" >/dev/null
  if [[ "${name%:*}:${tag}" != "${name}" ]]; then
    "${ctr[@]}" images tag --force "${name%:*}:${tag}" "${name}" >/dev/null
  fi
  "${ctr[@]}" images label "${name}" io.cri-containerd.pinned=pinned >/dev/null
}

# The node's own address, which the API server also listens on (the kubernetes Service's
# endpoint, where kube-proxy sends the pods).
# (On the loopback device: this machine's kernel has no dummy devices.)
add_node_address() {
  ip addr replace "${node_ip}/32" dev lo
}

start_node() {
  # Pods reach Services through kube-proxy's rules on the bridge, and the world through the node.
  # The machine's values are put back by `down`.
  modprobe br_netfilter 2>/dev/null || true
  sysctl -n net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables > "${dir}/sysctl.saved"
  sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  write_containerd_config
  start containerd "${containerd_dir}/containerd" --config "${dir}/containerd/config.toml"
  wait_for containerd 60 "${containerd_dir}/ctr" --address "${dir}/containerd/containerd.sock" version
  import_pause
  write_kubelet_config
  start kubelet "${k8s_dir}/kubelet" --config="${dir}/kubelet/config.yaml" \
    --kubeconfig="${dir}/kubelet.kubeconfig" --root-dir="${dir}/kubelet/root" \
    --hostname-override="${node}" --node-ip="${node_ip}"
  start kube-proxy "${k8s_dir}/kube-proxy" --kubeconfig="${dir}/proxy.kubeconfig" \
    --hostname-override="${node}" --cluster-cidr="${pod_cidr}" --proxy-mode=iptables \
    --conntrack-max-per-core=0 --metrics-bind-address=127.0.0.1:10249
}

up() {
  "${HACK_DIR}/build-cluster.sh"
  [[ -f "${dir}/kube-apiserver.pid" ]] && pid_alive "${dir}/kube-apiserver.pid" && die "already up (${dir}); run down first"
  local began=${SECONDS}
  # A new cluster each time: the previous one's state goes, but only a directory this script
  # made (its CA) or an empty one is removed.
  if [[ -d "${dir}" && -n "$(ls -A "${dir}")" && ! -f "${dir}/pki/ca.crt" ]]; then
    die "${dir} is not empty and holds no cluster made by this script; set STASIS_CLUSTER_DIR"
  fi
  rm -rf "${dir}"
  mkdir -p "${dir}"
  make_pki
  for c in admin:admin kubelet:kubelet scheduler:scheduler controller-manager:controller-manager proxy:proxy; do
    kubeconfig "${c%%:*}" "${c##*:}"
  done
  start_node_prerequisites_checked
  add_node_address
  start_control_plane
  start_node
  wait_for "node ${node} Ready" 120 kc wait --for=condition=Ready "node/${node}" --timeout=2s
  log "cluster up in $((SECONDS - began))s (Kubernetes ${KUBERNETES_VERSION}, containerd ${CONTAINERD_VERSION}) at ${dir}"
  echo "export KUBECONFIG=${dir}/admin.kubeconfig"
}

start_node_prerequisites_checked() {
  command -v runc >/dev/null || die "runc is not installed: run hack/install-deps.sh"
  [[ -x /usr/lib/cni/bridge ]] || die "the CNI plugins are not installed: run hack/install-deps.sh"
  command -v umoci >/dev/null || die "umoci is not installed: run hack/install-deps.sh"
}

# What the kubelet and containerd leave when stopped: the pods' containers and their shims,
# mounts under the state directory, the pods' network namespaces, the bridge, kube-proxy's rules.
down() {
  stop_pid "${dir}/kubelet.pid" 20
  if pid_alive "${dir}/containerd.pid"; then
    local ctr=("${containerd_dir}/ctr" --address "${dir}/containerd/containerd.sock" -n k8s.io)
    local id
    for id in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -s SIGKILL "${id}" >/dev/null 2>&1 || true; done
  fi
  pkill -9 -f "containerd-shim-runc-v2 .*-address ${dir}/containerd/containerd.sock" 2>/dev/null || true
  # The node agent's sandboxes outlive its pod (docs/node-agent.md); they end with the cluster.
  # Their runsc roots are under the DaemonSet's state directory.
  pkill -9 -f -- "--root=${agent_state}/run/" 2>/dev/null || true
  for _ in $(seq 100); do pgrep -f -- "--root=${agent_state}/run/" >/dev/null || break; sleep 0.1; done
  remove_sandbox_cgroups
  for name in kube-proxy containerd kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop_pid "${dir}/${name}.pid" 20
  done
  [[ -x "${k8s_dir}/kube-proxy" ]] && "${k8s_dir}/kube-proxy" --cleanup >/dev/null 2>&1 || true
  # Deepest first, so that a mount under another one goes before it.
  awk -v d="${dir}/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do umount -l "${m}" || true; done
  for ns in /var/run/netns/cni-*; do
    [[ -e "${ns}" ]] || continue
    umount -l "${ns}" 2>/dev/null || true
    rm -f "${ns}"
  done
  ip link del stasis-cni0 2>/dev/null || true
  ip addr del "${node_ip}/32" dev lo 2>/dev/null || true
  if [[ -f "${dir}/sysctl.saved" ]]; then
    local saved; mapfile -t saved < "${dir}/sysctl.saved"
    sysctl -qw "net.ipv4.ip_forward=${saved[0]}" "net.bridge.bridge-nf-call-iptables=${saved[1]}" || true
    rm -f "${dir}/sysctl.saved"
  fi
  # The kubelet's and kube-proxy's chains (KUBE-*), the bridge plugin's masquerading (CNI-*).
  local tool
  for tool in iptables ip6tables; do
    remove_chains "${tool}" KUBE-
    remove_chains "${tool}" CNI-
  done
  log "cluster down (${dir} kept for its logs)"
}

# The cgroups the sandboxes of the cluster's agent were in: the agent's stasis-sandboxes and
# runsc's own, named after each sandbox, in every hierarchy. Only empty ones go (rmdir).
remove_sandbox_cgroups() {
  local names=(stasis-sandboxes) d
  for d in "${agent_state}"/run/*/; do [[ -d "${d}" ]] && names+=("$(basename "${d}")"); done
  for d in "${names[@]}"; do
    for cg in /sys/fs/cgroup/*/"${d}" /sys/fs/cgroup/"${d}"; do
      [[ -d "${cg}" && ! -L "${cg}" ]] && rmdir "${cg}" 2>/dev/null || true
    done
  done
}

# remove_chains TOOL PREFIX: in every table, the rules that jump to a chain named PREFIX*, then
# those chains.
remove_chains() {
  local tool="$1" prefix="$2" table rule chain
  command -v "${tool}-save" >/dev/null || return 0
  for table in filter nat mangle; do
    "${tool}-save" -t "${table}" 2>/dev/null \
      | awk -v jump="-j ${prefix}" '/^-A / && index($0, jump) {sub("^-A", "-D"); print}' \
      | while read -r rule; do eval "${tool} -t ${table} ${rule}" 2>/dev/null || true; done
    local chains=()
    mapfile -t chains < <("${tool}-save" -t "${table}" 2>/dev/null | awk -v p=":${prefix}" 'index($0, p) == 1 {print substr($1, 2)}')
    for chain in "${chains[@]}"; do "${tool}" -t "${table}" -F "${chain}" 2>/dev/null || true; done
    for chain in "${chains[@]}"; do "${tool}" -t "${table}" -X "${chain}" 2>/dev/null || true; done
  done
}

status() {
  local name
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy; do
    if pid_alive "${dir}/${name}.pid"; then echo "${name}: running (pid $(cat "${dir}/${name}.pid"))"; else echo "${name}: stopped"; fi
  done
  pid_alive "${dir}/kube-apiserver.pid" && kc get nodes -o wide
  return 0
}

case "${cmd}" in
  up) up ;;
  down) down ;;
  status) status ;;
  import) (($# == 2)) || die "usage: $0 import ARCHIVE NAME"; import_image "$1" "$2" ;;
  *) die "usage: $0 up|down|status|import ARCHIVE NAME" ;;
esac
