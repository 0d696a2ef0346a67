#!/usr/bin/env bash
# A real local Kubernetes control plane (etcd + kube-apiserver on loopback), the way envtest
# starts one: a throwaway CA, serving and admin client certificates, RBAC on, service-account
# signing keys, a temporary etcd data directory.
#
#   hack/control-plane.sh up     [--dir DIR]   start; prints `export KUBECONFIG=…`
#   hack/control-plane.sh down   [--dir DIR]   stop both; no process is left behind
#   hack/control-plane.sh status [--dir DIR]
#   hack/control-plane.sh restart-apiserver [--dir DIR]   (etcd keeps running)
#
# DIR defaults to ${STASIS_CONTROL_PLANE_DIR:-/tmp/stasis-control-plane}. Tests pass their
# own temporary DIR, so several instances can run at once on different free ports.
source "$(dirname "$0")/lib.sh"

cmd="${1:-}"; shift || true
dir="${STASIS_CONTROL_PLANE_DIR:-/tmp/stasis-control-plane}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    *) die "unknown argument: $1" ;;
  esac
done

# free_port, pid_alive and stop_pid come from lib.sh.

make_certs() {
  local pki="${dir}/pki"
  mkdir -p "${pki}"
  (
    cd "${pki}"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=stasis-local-ca" \
      -keyout ca.key -out ca.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
      -keyout apiserver.key -out apiserver.csr 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=admin" \
      -keyout admin.key -out admin.csr 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' > admin.ext
    openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
      -extfile admin.ext -out admin.crt 2>/dev/null
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext ./*.srl
  ) || die "certificate generation with openssl failed"
}

write_kubeconfig() {
  local b64; b64() { base64 -w0 < "$1"; }
  cat > "${dir}/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: stasis-local
  cluster:
    server: https://127.0.0.1:$(cat "${dir}/apiserver.port")
    certificate-authority-data: $(b64 "${dir}/pki/ca.crt")
users:
- name: admin
  user:
    client-certificate-data: $(b64 "${dir}/pki/admin.crt")
    client-key-data: $(b64 "${dir}/pki/admin.key")
contexts:
- name: stasis-local
  context: {cluster: stasis-local, user: admin}
current-context: stasis-local
KC
  chmod 600 "${dir}/kubeconfig"
}

# start_apiserver [MAY_MOVE]: starts kube-apiserver on ${dir}/apiserver.port and waits until it
# is ready. With MAY_MOVE=1 (a fresh `up`, nothing has its address yet) a port taken since it was
# picked — free_port can only say it was free then — is replaced by another, up to three times.
start_apiserver() {
  local may_move="${1:-0}" attempt
  for attempt in 1 2 3; do
    # stderr first: a redirection that fails (no log yet) reports before a later 2> applies.
    local mark; mark="$(wc -l 2>/dev/null <"${dir}/kube-apiserver.log" || echo 0)"
    if run_apiserver; then return 0; fi
    ((may_move)) && grep -q 'address already in use' < <(tail -n +"$((mark + 1))" "${dir}/kube-apiserver.log") \
      || die "kube-apiserver exited"
    log "port $(cat "${dir}/apiserver.port") was taken before kube-apiserver bound it (attempt ${attempt}); picking another"
    free_port > "${dir}/apiserver.port"
  done
  die "kube-apiserver could not bind a port in 3 attempts"
}

# run_apiserver: one start; non-zero if it exits before it is ready (its log says why).
run_apiserver() {
  local port; port="$(cat "${dir}/apiserver.port")"
  setsid "${KUBE_APISERVER}" \
    --etcd-servers="http://127.0.0.1:$(cat "${dir}/etcd.port")" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="${port}" \
    --tls-cert-file="${dir}/pki/apiserver.crt" --tls-private-key-file="${dir}/pki/apiserver.key" \
    --client-ca-file="${dir}/pki/ca.crt" \
    --authorization-mode=RBAC \
    --service-account-issuer="https://127.0.0.1:${port}/" \
    --service-account-key-file="${dir}/pki/sa.pub" \
    --service-account-signing-key-file="${dir}/pki/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --allow-privileged=true \
    --endpoint-reconciler-type=none \
    --disable-admission-plugins=ServiceAccount \
    --enable-priority-and-fairness=false \
    --profiling=false \
    ${STASIS_APISERVER_EXTRA_FLAGS:-} \
    >>"${dir}/kube-apiserver.log" 2>&1 </dev/null &
  echo $! > "${dir}/kube-apiserver.pid"
  local deadline=$((SECONDS + 90))
  until curl -fsS --cacert "${dir}/pki/ca.crt" --cert "${dir}/pki/admin.crt" \
        --key "${dir}/pki/admin.key" "https://127.0.0.1:${port}/readyz" >/dev/null 2>&1; do
    pid_alive "${dir}/kube-apiserver.pid" || { tail -20 "${dir}/kube-apiserver.log" >&2; return 1; }
    (( SECONDS < deadline )) || { tail -20 "${dir}/kube-apiserver.log" >&2; die "kube-apiserver not ready after 90s"; }
    sleep 0.2
  done
}

up() {
  local start=${SECONDS}
  if pid_alive "${dir}/kube-apiserver.pid"; then
    log "already up"; echo "export KUBECONFIG=${dir}/kubeconfig"; return 0
  fi
  mapfile -t bins < <("${HACK_DIR}/build-control-plane.sh")
  KUBE_APISERVER="${bins[0]}"; ETCD="${bins[1]}"
  mkdir -p "${dir}"
  # A failed start leaves nothing running.
  trap 'rc=$?; if ((rc != 0)); then down >/dev/null 2>&1 || true; fi' EXIT
  [[ -f "${dir}/pki/ca.crt" ]] || make_certs
  [[ -f "${dir}/etcd.port" ]] || { free_port > "${dir}/etcd.port"; free_port > "${dir}/etcd-peer.port"; free_port > "${dir}/apiserver.port"; }
  local eport; eport="$(cat "${dir}/etcd.port")"
  setsid "${ETCD}" --name stasis --data-dir="${dir}/etcd-data" \
    --listen-client-urls="http://127.0.0.1:${eport}" --advertise-client-urls="http://127.0.0.1:${eport}" \
    --listen-peer-urls="http://127.0.0.1:$(cat "${dir}/etcd-peer.port")" \
    --initial-advertise-peer-urls="http://127.0.0.1:$(cat "${dir}/etcd-peer.port")" \
    --initial-cluster="stasis=http://127.0.0.1:$(cat "${dir}/etcd-peer.port")" \
    --unsafe-no-fsync=true --log-level=warn \
    >>"${dir}/etcd.log" 2>&1 </dev/null &
  echo $! > "${dir}/etcd.pid"
  local deadline=$((SECONDS + 30))
  until curl -fsS "http://127.0.0.1:${eport}/health" >/dev/null 2>&1; do
    pid_alive "${dir}/etcd.pid" || { tail -20 "${dir}/etcd.log" >&2; die "etcd exited"; }
    (( SECONDS < deadline )) || die "etcd not healthy after 30s"
    sleep 0.1
  done
  echo "${KUBE_APISERVER}" > "${dir}/kube-apiserver.path"
  start_apiserver 1
  write_kubeconfig
  trap - EXIT
  if [[ -n "${STASIS_CP_OWNER_PID:-}" ]]; then
    # Tests pass their pid: if the test binary dies without `down` (a crash, an abort, a
    # timeout kill), the control plane follows it instead of outliving the run.
    setsid bash -c 'while kill -0 "$1" 2>/dev/null && [[ -f "$2/kube-apiserver.pid" ]]; do sleep 1; done
                    [[ -f "$2/kube-apiserver.pid" ]] && "$3" down --dir "$2"' \
      control-plane-owner "${STASIS_CP_OWNER_PID}" "${dir}" "${HACK_DIR}/control-plane.sh" \
      >/dev/null 2>&1 </dev/null &
  fi
  log "control plane up in $((SECONDS - start))s (kube-apiserver ${KUBERNETES_VERSION}, etcd ${ETCD_VERSION}) at ${dir}"
  echo "export KUBECONFIG=${dir}/kubeconfig"
}

down() {
  stop_pid "${dir}/kube-apiserver.pid" 20
  stop_pid "${dir}/etcd.pid" 20
  log "control plane down (${dir})"
}

status() {
  local ok=0
  for p in kube-apiserver etcd; do
    if pid_alive "${dir}/${p}.pid"; then echo "${p}: running (pid $(cat "${dir}/${p}.pid"))"
    else echo "${p}: stopped"; ok=1; fi
  done
  [[ -f "${dir}/kubeconfig" ]] && echo "export KUBECONFIG=${dir}/kubeconfig"
  return ${ok}
}

case "${cmd}" in
  up) up ;;
  down) down ;;
  status) status ;;
  restart-apiserver)
    KUBE_APISERVER="$(cat "${dir}/kube-apiserver.path")"
    stop_pid "${dir}/kube-apiserver.pid" 20
    start_apiserver
    log "kube-apiserver restarted" ;;
  *) die "usage: $0 up|down|status|restart-apiserver [--dir DIR]" ;;
esac
