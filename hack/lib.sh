# Shared shell helpers for hack/*.sh: versions, cache paths, logging. Sourced, never run.
set -euo pipefail
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "${HACK_DIR}/.." && pwd)"
# shellcheck source=versions.env
source "${HACK_DIR}/versions.env"
STASIS_CACHE="${STASIS_CACHE:-${HOME}/.cache/stasis}"
GO_PROXY_BASE="$(go env GOPROXY 2>/dev/null | cut -d, -f1 || true)"  # no go: only cached builds

log() { printf '%s %s\n' "[$(basename "$0")]" "$*" >&2; }
die() { printf '%s ERROR: %s\n' "[$(basename "$0")]" "$*" >&2; exit 1; }

# copy_shared_libs DEST BINARY…: the shared libraries the binaries load, copied into DEST,
# minus glibc itself (libc, libm, libpthread, libdl, librt, the loader), which the machine they
# are carried to brings: its glibc must be at least this one's (the bundles record it).
copy_shared_libs() {
  local dest="$1" lib; shift
  ldd "$@" | awk '$3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
    case "$(basename "${lib}")" in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*) continue ;;
    esac
    cp -L "${lib}" "${dest}/"
  done
}

# pack_carry_archive STAGE ARCHIVE [DICT]: STAGE's files as one xz stream at ARCHIVE, refused
# when the device tool could not carry it (64 MiB). One stream with a dictionary larger than
# what is staged (default 512 MiB): kube-apiserver, kubectl, etcd and runsc share much of the Go
# runtime and of client-go, which -9's 64 MiB window does not reach across (65 MiB with it, 60
# with this; decompressing needs the dictionary's memory). The x86 branch filter first: about
# 6 % less for these executables (runsc: 18.7 → 17.6 MB at -6).
pack_carry_archive() {
  local stage="$1" archive="$2" dict="${3:-512MiB}" limit=$((64 * 1024 * 1024)) size
  mkdir -p "$(dirname "${archive}")"
  tar -C "${stage}" -cf - . | xz --x86 --lzma2=preset=9e,dict="${dict}" >"${archive}.tmp"
  mv "${archive}.tmp" "${archive}"
  size=$(stat -c %s "${archive}")
  log "$(du -sh "${stage}" | cut -f1) staged → ${archive}: $((size / 1024 / 1024)) MiB"
  ((size < limit)) || die "the archive is $((size / 1024 / 1024)) MiB; the device tool carries at most 64 MiB"
}

# Builds with the go command into a throwaway module; the result is cached by version.
# Args: dest-binary go-package-path [ldflags] [build-tags], with GO_MODULE_FILE holding the
# go.mod text.
go_build_cached() {
  local dest="$1" pkg="$2" ldflags="${3:-}" tags="${4:-}"
  [[ -x "${dest}" ]] && return 0
  command -v go >/dev/null || die "go is not installed; it is needed once to build ${pkg}"
  local work; work="$(mktemp -d)"
  trap 'rm -rf "${work}"' RETURN
  printf '%s\n' "${GO_MODULE_FILE}" > "${work}/go.mod"
  log "building ${pkg} (cached afterwards at ${dest})"
  local start=${SECONDS}
  # `go get PKG` alone would upgrade to the newest release; the version is the one require
  # line of GO_MODULE_FILE, so the cache's name and the binary agree.
  local version; version="$(awk '$1 == "require" {print $3; exit}' <<<"${GO_MODULE_FILE}")"
  [[ -n "${version}" ]] || die "no require line in the module file for ${pkg}"
  (cd "${work}" && GOFLAGS=-mod=mod go get "${pkg}@${version}" >/dev/null 2>"${work}/get.err") \
    || { cat "${work}/get.err" >&2; die "go get ${pkg} failed"; }
  mkdir -p "$(dirname "${dest}")"
  (cd "${work}" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath \
      -tags "${tags}" -ldflags "-s -w ${ldflags}" -o "${dest}.tmp" "${pkg}") \
    || die "go build ${pkg} failed"
  mv "${dest}.tmp" "${dest}"
  log "built ${pkg} in $((SECONDS - start))s"
}

# The `replace` lines a module file needs to build a k8s.io/kubernetes command at
# KUBERNETES_VERSION: every staging module at its matching v0.X.Y (the published module's go.mod
# points them at ./staging). Shared by hack/build-control-plane.sh and hack/build-cluster.sh.
k8s_staging_replaces() {
  local staging_version="v0${KUBERNETES_VERSION#v1}" k8s_mod
  k8s_mod="$(curl -fsS "${GO_PROXY_BASE}/k8s.io/kubernetes/@v/${KUBERNETES_VERSION}.mod")" \
    || die "cannot read k8s.io/kubernetes ${KUBERNETES_VERSION} go.mod from ${GO_PROXY_BASE}"
  awk '/=> .\/staging\//{print "replace " $1 " => " $1 " '"${staging_version}"'"}' <<<"${k8s_mod}" \
    | grep -v -E 'sample-(cli-plugin|controller) '
}

# The -ldflags that stamp a Kubernetes component with KUBERNETES_VERSION.
k8s_version_ldflags() {
  echo "-X k8s.io/component-base/version.gitVersion=${KUBERNETES_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"${KUBERNETES_VERSION}")"
}

# Process helpers for the scripts that run local servers (hack/control-plane.sh,
# hack/object-store.sh).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Waits for the process in pidfile $1 to exit, SIGKILLing it after $2 seconds.
stop_pid() {
  local pidfile="$1" grace="$2"
  pid_alive "${pidfile}" || { rm -f "${pidfile}"; return 0; }
  local pid; pid="$(cat "${pidfile}")"
  kill -TERM "${pid}" 2>/dev/null || true
  for _ in $(seq $((grace * 10))); do kill -0 "${pid}" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "${pid}" 2>/dev/null || true
  while kill -0 "${pid}" 2>/dev/null; do sleep 0.05; done
  rm -f "${pidfile}"
}
