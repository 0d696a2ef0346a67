#!/usr/bin/env bash
# A real S3-compatible object store on loopback: SeaweedFS (Apache-2.0), built from its Go
# module by hack/build-object-store.sh, with one access key, one bucket and an S3 gateway on a
# free 127.0.0.1 port.
#
#   hack/object-store.sh up     [--dir DIR]   start; prints the `export` lines a shell needs
#   hack/object-store.sh down   [--dir DIR]   stop; no process is left behind
#   hack/object-store.sh status [--dir DIR]
#
# DIR defaults to ${STASIS_OBJECT_STORE_DIR:-/tmp/stasis-object-store}. Tests pass their own
# temporary DIR, so several instances can run at once. The data lives in DIR/data and survives
# a down/up of the same DIR (tests stop the store and start it again as a fault). The
# credentials are made up per DIR (DIR/credentials.env, mode 600); STASIS_S3_BUCKET names the
# bucket (default "stasis").
#
# One process: `weed server -filer -s3` runs the master, a volume server, the filer and the S3
# gateway in one Go process. `weed mini` would too, but it also starts WebDAV, an admin UI and
# maintenance workers that a test store does not need; separate `weed master/volume/filer/s3`
# processes would mean four pid files and four readiness waits for nothing.
source "$(dirname "$0")/lib.sh"

cmd="${1:-}"; shift || true
dir="${STASIS_OBJECT_STORE_DIR:-/tmp/stasis-object-store}"
bucket="${STASIS_S3_BUCKET:-stasis}"
region="us-east-1"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    *) die "unknown argument: $1" ;;
  esac
done
ports=(master master.grpc volume volume.grpc filer filer.grpc s3 s3.grpc)

port() { cat "${dir}/$1.port"; }

# Made once per DIR, so a restarted store keeps accepting the key its clients hold.
make_credentials() {
  [[ -f "${dir}/credentials.env" ]] && return 0
  (
    umask 077
    printf 'AWS_ACCESS_KEY_ID=stasis%s\nAWS_SECRET_ACCESS_KEY=%s\n' \
      "$(openssl rand -hex 6)" "$(openssl rand -hex 20)" > "${dir}/credentials.env"
  )
}

write_identities() {
  # shellcheck source=/dev/null
  source "${dir}/credentials.env"
  (
    umask 077
    cat > "${dir}/s3.json" <<JSON
{"identities": [{"name": "stasis",
  "credentials": [{"accessKey": "${AWS_ACCESS_KEY_ID}", "secretKey": "${AWS_SECRET_ACCESS_KEY}"}],
  "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}
JSON
  )
}

start_weed() {
  local weed="$1" ip=127.0.0.1
  mkdir -p "${dir}/data"
  # Every port is chosen (gRPC ones default to HTTP+10000, Iceberg and Lance to fixed ports);
  # a restarted single master elects itself after 2 s, not the default 10 s; telemetry is off
  # (it would post to the internet); buckets are never created implicitly, so a missing bucket
  # is an error a client sees.
  setsid "${weed}" server -ip="${ip}" -ip.bind="${ip}" -dir="${dir}/data" \
    -master.port="$(port master)" -master.port.grpc="$(port master.grpc)" \
    -master.telemetry=false -master.volumeSizeLimitMB=64 -volume.max=0 \
    -master.electionTimeout=2s \
    -volume.port="$(port volume)" -volume.port.grpc="$(port volume.grpc)" \
    -filer -filer.port="$(port filer)" -filer.port.grpc="$(port filer.grpc)" \
    -filer.localSocket="${dir}/filer.sock" \
    -s3 -s3.port="$(port s3)" -s3.port.grpc="$(port s3.grpc)" -s3.config="${dir}/s3.json" \
    -s3.port.iceberg=0 -s3.port.lance=0 -s3.autoCreateBucket=false \
    -s3.localSocket="${dir}/s3.sock" \
    >>"${dir}/weed.log" 2>&1 </dev/null &
  echo $! > "${dir}/weed.pid"
}

# A signed request with curl's own SigV4 (argv only, a deadline each).
s3_curl() {
  # shellcheck source=/dev/null
  source "${dir}/credentials.env"
  curl -sS --max-time 10 --aws-sigv4 "aws:amz:${region}:s3" \
    --user "${AWS_ACCESS_KEY_ID}:${AWS_SECRET_ACCESS_KEY}" "$@"
}

# weed exited while starting. A port chosen free was taken before weed bound it (free_port's
# ports come from the ephemeral range, which any process's outgoing connection may be given):
# status 75, for `up` to choose others. Anything else dies with weed's last lines.
weed_exited() {
  grep -q "address already in use" "${dir}/weed.log" && return 75
  tail -20 "${dir}/weed.log" >&2
  die "weed exited"
}

# Retries the signed request "$@" until it answers one of the HTTP codes in $1 ("200|409"),
# or dies after the deadline $2 (seconds since the script started). 75: see weed_exited.
s3_until() {
  local codes="$1" deadline="$2" code=""; shift 2
  until code="$(s3_curl -o "${dir}/ready.out" -w '%{http_code}' "$@" 2>/dev/null)" \
        && [[ "|${codes}|" == *"|${code}|"* ]]; do
    pid_alive "${dir}/weed.pid" || { weed_exited; return; }
    (( SECONDS < deadline )) || { tail -20 "${dir}/weed.log" >&2; cat "${dir}/ready.out" >&2 || true
                                  die "S3 gateway not ready after 90s (last HTTP ${code:-none} for $*)"; }
    sleep 0.3
  done
}

# Ready is when an object can be stored: the bucket answers as soon as the filer does, but a
# write also needs the volume server registered with the master (until then: "Not enough data
# nodes"). An existing bucket answers 409 BucketAlreadyOwnedByYou, which is as good.
wait_ready() {
  local url="http://127.0.0.1:$(port s3)/${bucket}" deadline=$((SECONDS + 90))
  s3_until "200|409" "${deadline}" -X PUT "${url}" || return
  echo ready > "${dir}/ready.in"
  # An upload from a file (-T) with the payload unsigned, as the client sends them: curl 7.88
  # signs a --data body as a form and the store refuses that signature.
  s3_until "200" "${deadline}" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "${dir}/ready.in" \
    "${url}/.stasis-ready"
  s3_until "204|200" "${deadline}" -X DELETE "${url}/.stasis-ready"
}

print_exports() {
  # shellcheck source=/dev/null
  source "${dir}/credentials.env"
  echo "export AWS_ENDPOINT_URL=http://127.0.0.1:$(port s3)"
  echo "export AWS_REGION=${region}"
  echo "export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID}"
  echo "export AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}"
  echo "export STASIS_S3_BUCKET=${bucket}"
}

up() {
  local start=${SECONDS}
  if pid_alive "${dir}/weed.pid"; then log "already up"; print_exports; return 0; fi
  local weed; weed="$("${HACK_DIR}/build-object-store.sh")"
  mkdir -p "${dir}"
  # A failed start leaves nothing running.
  trap 'rc=$?; if ((rc != 0)); then down >/dev/null 2>&1 || true; fi' EXIT
  # Ports are kept across a restart of the same directory (a client keeps its endpoint); only
  # freshly chosen ones are chosen again when one was taken before weed bound it.
  local fresh=0 attempt rc
  [[ -f "${dir}/s3.port" ]] || fresh=1
  make_credentials
  write_identities
  for attempt in 1 2 3; do
    for p in "${ports[@]}"; do [[ -f "${dir}/${p}.port" ]] || free_port > "${dir}/${p}.port"; done
    start_weed "${weed}"
    rc=0
    wait_ready || rc=$?
    ((rc == 0)) && break
    ((rc == 75 && fresh == 1 && attempt < 3)) || { tail -20 "${dir}/weed.log" >&2; die "weed could not bind its ports"; }
    log "a port was taken before weed bound it; choosing others"
    down >/dev/null 2>&1 || true
    for p in "${ports[@]}"; do rm -f "${dir}/${p}.port"; done
    mv "${dir}/weed.log" "${dir}/weed.log.${attempt}"
  done
  trap - EXIT
  if [[ -n "${STASIS_OBJECT_STORE_OWNER_PID:-}" ]]; then
    # Tests pass their pid: if the test binary dies without `down`, the store follows it.
    setsid bash -c 'while kill -0 "$1" 2>/dev/null && [[ -f "$2/weed.pid" ]]; do sleep 1; done
                    [[ -f "$2/weed.pid" ]] && "$3" down --dir "$2"' \
      object-store-owner "${STASIS_OBJECT_STORE_OWNER_PID}" "${dir}" "${HACK_DIR}/object-store.sh" \
      >/dev/null 2>&1 </dev/null &
  fi
  log "object store up in $((SECONDS - start))s (SeaweedFS ${SEAWEEDFS_VERSION}, bucket ${bucket}) at ${dir}"
  print_exports
}

down() {
  # weed's shutdown hooks can take 20 s and more; every write it acknowledged is already in
  # its files (the page cache), so a kill after a short grace loses nothing a client was told.
  stop_pid "${dir}/weed.pid" 5
  # weed names gRPC sockets of its own in /tmp by port (no flag moves them).
  for p in master volume filer s3; do
    [[ -f "${dir}/${p}.grpc.port" ]] && rm -f "/tmp/seaweedfs-${p}-grpc-$(port "${p}.grpc").sock"
  done
  log "object store down (${dir})"
}

status() {
  if pid_alive "${dir}/weed.pid"; then echo "weed: running (pid $(cat "${dir}/weed.pid"))"
  else echo "weed: stopped"; return 1; fi
  print_exports
}

case "${cmd}" in
  up) up ;;
  down) down ;;
  status) status ;;
  *) die "usage: $0 up|down|status [--dir DIR]" ;;
esac
