# The one-node cluster's certificates, kubeconfigs and configuration files (sourced by
# hack/cluster.sh, which sets dir, node, node_ip and the binaries' paths).

readonly pod_cidr=10.244.0.0/24
readonly service_cidr=10.96.0.0/16
readonly service_ip=10.96.0.1
readonly apiserver_port=16443
readonly etcd_port=12379
readonly etcd_peer_port=12380

# cert NAME SUBJECT EXTENSIONS: a key and a certificate signed by the cluster's CA.
cert() {
  local name="$1" subject="$2" ext="$3"
  openssl req -newkey rsa:2048 -nodes -subj "${subject}" -keyout "${name}.key" -out "${name}.csr" 2>/dev/null
  printf '%s\n' "${ext}" > "${name}.ext"
  openssl x509 -req -in "${name}.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
    -extfile "${name}.ext" -out "${name}.crt" 2>/dev/null
  rm -f "${name}.csr" "${name}.ext"
}

make_pki() {
  local pki="${dir}/pki"
  mkdir -p "${pki}"
  (
    cd "${pki}"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=stasis-cluster-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    local client='extendedKeyUsage=clientAuth'
    cert apiserver "/CN=kube-apiserver" "subjectAltName=IP:${node_ip},IP:127.0.0.1,IP:${service_ip},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth"
    cert admin "/O=system:masters/CN=admin" "${client}"
    # The API server's client certificate towards kubelets (logs, exec).
    cert apiserver-kubelet "/O=system:masters/CN=kube-apiserver-kubelet-client" "${client}"
    cert kubelet "/O=system:nodes/CN=system:node:${node}" "${client}"
    cert kubelet-serving "/CN=${node}" "subjectAltName=IP:${node_ip},DNS:${node}
extendedKeyUsage=serverAuth"
    cert scheduler "/CN=system:kube-scheduler" "${client}"
    cert controller-manager "/CN=system:kube-controller-manager" "${client}"
    cert proxy "/CN=system:kube-proxy" "${client}"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.srl
  ) || die "certificate generation with openssl failed"
  chmod 600 "${pki}"/*.key
}

# kubeconfig NAME CERT: ${dir}/NAME.kubeconfig with the client certificate pki/CERT.
kubeconfig() {
  local name="$1" cert="$2" b64; b64() { base64 -w0 < "$1"; }
  cat > "${dir}/${name}.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: stasis-cluster
  cluster:
    server: https://${node_ip}:${apiserver_port}
    certificate-authority-data: $(b64 "${dir}/pki/ca.crt")
users:
- name: ${cert}
  user:
    client-certificate-data: $(b64 "${dir}/pki/${cert}.crt")
    client-key-data: $(b64 "${dir}/pki/${cert}.key")
contexts:
- name: stasis-cluster
  context: {cluster: stasis-cluster, user: ${cert}}
current-context: stasis-cluster
KC
  chmod 600 "${dir}/${name}.kubeconfig"
}

write_containerd_config() {
  mkdir -p "${dir}/containerd" "${dir}/cni"
  cat > "${dir}/containerd/config.toml" <<EOF
version = 3
root = "${dir}/containerd/root"
state = "${dir}/containerd/state"
[grpc]
  address = "${dir}/containerd/containerd.sock"
[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = "registry.k8s.io/pause:${PAUSE_VERSION}"
# This machine withholds CAP_SYS_RESOURCE even from root: no process may lower its OOM score,
# so the kubelet's negative scores (the pod sandbox's -998) are raised to containerd's own.
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
[plugins."io.containerd.cri.v1.runtime".containerd]
  default_runtime_name = "runc"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
  BinaryName = "$(command -v runc)"
  Root = "${dir}/containerd/runc"
  SystemdCgroup = false
[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "${dir}/cni"
EOF
  # One bridge for the node's pods, masqueraded towards the rest of the world.
  cat > "${dir}/cni/10-stasis.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "stasis-cluster",
  "plugins": [
    {"type": "bridge", "bridge": "stasis-cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "${pod_cidr}"}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": "${dir}/cni-ipam"}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
}

write_kubelet_config() {
  mkdir -p "${dir}/kubelet"
  cat > "${dir}/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${dir}/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: ${dir}/pki/kubelet-serving.crt
tlsPrivateKeyFile: ${dir}/pki/kubelet-serving.key
containerRuntimeEndpoint: unix://${dir}/containerd/containerd.sock
cgroupDriver: cgroupfs
# This machine's cgroups are v1 (the kubelet refuses them unless told otherwise).
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# Images are imported, never pulled: nothing may collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The node's disk is the machine's, shared with everything else on it: a share of a large disk
# (the default 10 %, or 2 % of 252 GB) evicts the pods while gigabytes are still free.
evictionHard: {memory.available: "100Mi", nodefs.available: "1Gi", imagefs.available: "1Gi"}
EOF
}
