#!/usr/bin/env bash
# A real OCI registry on loopback for tests: Debian's docker-registry (the distribution
# project's registry, 2.8) on a free 127.0.0.1 port, over TLS with a CA made here, with
# htpasswd (bcrypt) Basic authentication, storing on the filesystem.
#
#   hack/registry.sh up     [--dir DIR] [--no-auth | --token] [--plain-http] [--s3]
#                                        start; prints the `export` lines a shell needs
#   hack/registry.sh down   [--dir DIR]               stop; no process is left behind
#   hack/registry.sh token-server-down [--dir DIR]    stop only the token server (a fault)
#   hack/registry.sh status [--dir DIR]
#
# DIR defaults to ${STASIS_REGISTRY_DIR:-/tmp/stasis-registry}. Tests pass their own temporary
# DIR, so several registries can run at once. Made once per DIR and kept: the port, the CA
# (DIR/ca.crt, the only *.crt there, so DIR serves as skopeo's --cert-dir), the server's key and
# certificate (DIR/tls/), the user and password (DIR/credentials.env, mode 600), and whether
# auth is on (--no-auth on the first `up`: anonymous pulls and pushes). The blobs live in
# DIR/data and survive a down/up (tests stop the registry mid-transfer as a fault); deletes are
# enabled. --plain-http (on the first `up`) serves HTTP without TLS: a registry an operator
# lists as insecure.
#
# --s3 (on the first `up`) stores the blobs in an S3 bucket instead, from the variables
# hack/object-store.sh prints (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
# AWS_REGION, STASIS_S3_BUCKET; kept in DIR/s3.env), with redirects on: the registry answers a
# blob GET with a 307 to a presigned URL on the store, another origin than its own, the way
# Docker Hub and GHCR send blobs to their CDNs.
#
# --token (on the first `up`) makes the registry ask for Bearer tokens, the way Docker Hub,
# GHCR and most hosted registries do, and starts the distribution project's own token server
# (hack/build-token-server.sh) beside it on another port, over the same TLS. The token server
# checks the same htpasswd user and grants only repositories under `<user>/`; the registry
# verifies its tokens against the signing key's certificate (DIR/token/). STASIS_REGISTRY_REALM
# is printed for it.
source "$(dirname "$0")/lib.sh"

cmd="${1:-}"; shift || true
dir="${STASIS_REGISTRY_DIR:-/tmp/stasis-registry}"
no_auth=0
token=0
s3=0
plain_http=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --no-auth) no_auth=1; shift ;;
    --token) token=1; shift ;;
    --s3) s3=1; shift ;;
    --plain-http) plain_http=1; shift ;;
    *) die "unknown argument: $1" ;;
  esac
done
registry_bin="${STASIS_REGISTRY_BIN:-/usr/bin/docker-registry}"
((no_auth && token)) && die "--no-auth and --token exclude each other"

# A CA and a server certificate for 127.0.0.1 and localhost, valid long enough for any test run.
make_tls() {
  [[ -f "${dir}/ca.crt" && -f "${dir}/tls/server.pem" ]] && return 0
  mkdir -p "${dir}/tls"
  local t="${dir}/tls"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 \
    -subj "/CN=stasis test registry CA" -keyout "${t}/ca-key.pem" -out "${dir}/ca.crt" 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
    -subj "/CN=127.0.0.1" -keyout "${t}/server-key.pem" -out "${t}/server.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "${t}/ext.cnf"
  openssl x509 -req -in "${t}/server.csr" -CA "${dir}/ca.crt" -CAkey "${t}/ca-key.pem" \
    -CAcreateserial -CAserial "${t}/ca.srl" -days 30 -extfile "${t}/ext.cnf" -out "${t}/server.pem" 2>/dev/null
  chmod 600 "${t}/ca-key.pem" "${t}/server-key.pem"
}

# Made once per DIR, so a restarted registry keeps accepting what its clients hold.
make_credentials() {
  [[ -f "${dir}/credentials.env" ]] && return 0
  (
    umask 077
    printf 'STASIS_REGISTRY_USER=stasis%s\nSTASIS_REGISTRY_PASSWORD=%s\n' \
      "$(openssl rand -hex 4)" "$(openssl rand -hex 16)" > "${dir}/credentials.env"
  )
  # shellcheck source=/dev/null
  source "${dir}/credentials.env"
  # A registry without auth needs no htpasswd file (and the GPU machine has no htpasswd).
  [[ "$(cat "${dir}/auth-mode")" == none ]] && return 0
  # bcrypt: the only htpasswd hash the registry accepts.
  htpasswd -Bbn "${STASIS_REGISTRY_USER}" "${STASIS_REGISTRY_PASSWORD}" > "${dir}/htpasswd" 2>/dev/null
  chmod 600 "${dir}/htpasswd"
}

# The token server's signing key (EC P-256, the PEM form libtrust reads) and a certificate of
# it: the registry trusts tokens whose key is in that bundle.
make_token_key() {
  [[ -f "${dir}/token/key.pem" && -f "${dir}/token/cert.pem" ]] && return 0
  mkdir -p "${dir}/token"
  openssl ecparam -name prime256v1 -genkey -noout -out "${dir}/token/key.pem" 2>/dev/null
  chmod 600 "${dir}/token/key.pem"
  openssl req -x509 -new -key "${dir}/token/key.pem" -days 30 -subj "/CN=stasis test token issuer" \
    -out "${dir}/token/cert.pem" 2>/dev/null
  [[ -f "${dir}/token/port" ]] || free_port > "${dir}/token/port"
}

realm_url() { echo "$(cat "${dir}/scheme")://127.0.0.1:$(cat "${dir}/token/port")/token/"; }

# The storage section: the filesystem under DIR/data, or the bucket of DIR/s3.env.
storage_config() {
  if [[ ! -f "${dir}/s3.env" ]]; then
    printf '  filesystem:\n    rootdirectory: %s\n' "${dir}/data"
    return 0
  fi
  # shellcheck source=/dev/null
  source "${dir}/s3.env"
  cat <<YAML
  s3:
    accesskey: ${AWS_ACCESS_KEY_ID}
    secretkey: ${AWS_SECRET_ACCESS_KEY}
    region: ${AWS_REGION:-us-east-1}
    regionendpoint: ${AWS_ENDPOINT_URL}
    bucket: ${STASIS_S3_BUCKET}
    rootdirectory: /registry
    secure: false
    v4auth: true
  redirect:
    disable: false
YAML
}

make_s3_env() {
  [[ -f "${dir}/s3.env" ]] && return 0
  local v
  for v in AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY STASIS_S3_BUCKET; do
    [[ -n "${!v:-}" ]] || die "--s3 needs ${v} (hack/object-store.sh up prints it)"
  done
  (
    umask 077
    for v in AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION STASIS_S3_BUCKET; do
      printf '%s=%s\n' "${v}" "${!v:-}"
    done > "${dir}/s3.env"
  )
}

tls_config() {
  [[ "$(cat "${dir}/scheme")" == https ]] || return 0
  printf '  tls:\n    certificate: %s\n    key: %s\n' "${dir}/tls/server.pem" "${dir}/tls/server-key.pem"
}

write_config() {
  local auth=""
  case "$(cat "${dir}/auth-mode")" in
    htpasswd) auth="auth:
  htpasswd:
    realm: stasis-test-registry
    path: ${dir}/htpasswd" ;;
    token) auth="auth:
  token:
    realm: $(realm_url)
    service: stasis-test-registry
    issuer: ${token_issuer}
    rootcertbundle: ${dir}/token/cert.pem" ;;
  esac
  # No upload purging (it would start a background sweeper), no access log, no debug server.
  cat > "${dir}/config.yml" <<YAML
version: 0.1
log:
  level: info
  accesslog:
    disabled: true
storage:
$(storage_config)
  delete:
    enabled: true
  maintenance:
    uploadpurging:
      enabled: false
http:
  addr: 127.0.0.1:$(cat "${dir}/port")
$(tls_config)
${auth}
YAML
}

# Ready when /v2/ answers: 401 with auth on (the challenge), 200 without.
wait_ready() {
  local deadline=$((SECONDS + 30)) code=""
  until code="$(curl -sS --max-time 2 --cacert "${dir}/ca.crt" -o /dev/null -w '%{http_code}' \
                  "$(cat "${dir}/scheme")://127.0.0.1:$(cat "${dir}/port")/v2/" 2>/dev/null)" \
        && [[ "${code}" == 200 || "${code}" == 401 ]]; do
    pid_alive "${dir}/registry.pid" || { tail -20 "${dir}/registry.log" >&2; die "docker-registry exited"; }
    (( SECONDS < deadline )) || { tail -20 "${dir}/registry.log" >&2; die "registry not ready after 30s (last HTTP ${code:-none})"; }
    sleep 0.1
  done
}

print_exports() {
  echo "export STASIS_REGISTRY=127.0.0.1:$(cat "${dir}/port")"
  echo "export STASIS_REGISTRY_CA=${dir}/ca.crt"
  if [[ "$(cat "${dir}/auth-mode")" == token ]]; then echo "export STASIS_REGISTRY_REALM=$(realm_url)"; fi
  if [[ "$(cat "${dir}/auth-mode")" != none ]]; then
    # shellcheck source=/dev/null
    source "${dir}/credentials.env"
    echo "export STASIS_REGISTRY_USER=${STASIS_REGISTRY_USER}"
    echo "export STASIS_REGISTRY_PASSWORD=${STASIS_REGISTRY_PASSWORD}"
  fi
}

token_issuer=stasis-test-token-server

# The token server, on its own port over the registry's TLS; ready when its endpoint answers an
# anonymous request with its Basic challenge.
start_token_server() {
  make_token_key
  local server; server="$("${HACK_DIR}/build-token-server.sh")"
  if ! pid_alive "${dir}/token/server.pid"; then
    local tls=()
    [[ "$(cat "${dir}/scheme")" == https ]] && tls=(-tlscert "${dir}/tls/server.pem" -tlskey "${dir}/tls/server-key.pem")
    setsid "${server}" -addr "127.0.0.1:$(cat "${dir}/token/port")" -issuer "${token_issuer}" \
      -key "${dir}/token/key.pem" -passwd "${dir}/htpasswd" -realm stasis-test-token-server \
      "${tls[@]}" >>"${dir}/token/server.log" 2>&1 </dev/null &
    echo $! > "${dir}/token/server.pid"
  fi
  local deadline=$((SECONDS + 30)) code=""
  until code="$(curl -sS --max-time 2 --cacert "${dir}/ca.crt" -o /dev/null -w '%{http_code}' \
                  "$(realm_url)?service=stasis-test-registry" 2>/dev/null)" && [[ "${code}" == 401 ]]; do
    pid_alive "${dir}/token/server.pid" || { tail -20 "${dir}/token/server.log" >&2; die "token server exited"; }
    (( SECONDS < deadline )) || { tail -20 "${dir}/token/server.log" >&2; die "token server not ready after 30s (last HTTP ${code:-none})"; }
    sleep 0.1
  done
}

up() {
  [[ -x "${registry_bin}" ]] || die "${registry_bin} missing: run hack/install-deps.sh (docker-registry)"
  if pid_alive "${dir}/registry.pid"; then
    # A token server stopped on its own (a test's fault) comes back with the same key and port.
    if [[ "$(cat "${dir}/auth-mode")" == token ]]; then start_token_server; fi
    log "already up"; print_exports; return 0
  fi
  mkdir -p "${dir}/data"
  # A failed start leaves nothing running.
  trap 'rc=$?; if ((rc != 0)); then down >/dev/null 2>&1 || true; fi' EXIT
  [[ -f "${dir}/port" ]] || free_port > "${dir}/port"
  [[ -f "${dir}/scheme" ]] || { if ((plain_http)); then echo http; else echo https; fi > "${dir}/scheme"; }
  if [[ ! -f "${dir}/auth-mode" ]]; then
    if ((no_auth)); then echo none; elif ((token)); then echo token; else echo htpasswd; fi > "${dir}/auth-mode"
  fi
  make_tls
  make_credentials
  if [[ "$(cat "${dir}/auth-mode")" == token ]]; then start_token_server; fi
  if ((s3)); then make_s3_env; fi
  write_config
  # The AWS SDK inside the registry would load a CA bundle named by the caller's environment
  # (and fail on it: its S3 client's transport is not the SDK's); the store is plain HTTP.
  setsid env -u AWS_CA_BUNDLE "${registry_bin}" serve "${dir}/config.yml" >>"${dir}/registry.log" 2>&1 </dev/null &
  echo $! > "${dir}/registry.pid"
  wait_ready
  trap - EXIT
  if [[ -n "${STASIS_REGISTRY_OWNER_PID:-}" ]]; then
    # Tests pass their pid: if the test binary dies without `down`, the registry follows it.
    setsid bash -c 'while kill -0 "$1" 2>/dev/null && [[ -f "$2/registry.pid" ]]; do sleep 1; done
                    [[ -f "$2/registry.pid" ]] && "$3" down --dir "$2"' \
      registry-owner "${STASIS_REGISTRY_OWNER_PID}" "${dir}" "${HACK_DIR}/registry.sh" \
      >/dev/null 2>&1 </dev/null &
  fi
  log "registry up ($(cat "${dir}/scheme"), $(cat "${dir}/auth-mode") auth) at ${dir}"
  print_exports
}

down() {
  # Every blob the registry acknowledged is in its files already; a short grace is enough.
  stop_pid "${dir}/registry.pid" 2
  stop_pid "${dir}/token/server.pid" 2
  log "registry down (${dir})"
}

status() {
  if pid_alive "${dir}/registry.pid"; then echo "docker-registry: running (pid $(cat "${dir}/registry.pid"))"
  else echo "docker-registry: stopped"; return 1; fi
  if [[ "$(cat "${dir}/auth-mode")" == token ]]; then
    pid_alive "${dir}/token/server.pid" || { echo "token server: stopped"; return 1; }
    echo "token server: running (pid $(cat "${dir}/token/server.pid"))"
  fi
  print_exports
}

case "${cmd}" in
  up) up ;;
  down) down ;;
  token-server-down) stop_pid "${dir}/token/server.pid" 2 ;;
  status) status ;;
  *) die "usage: $0 up|down|token-server-down|status [--dir DIR] [--no-auth | --token] [--plain-http] [--s3]" ;;
esac
