#!/usr/bin/env bash
# A minimal Debian root filesystem (mmdebstrap --variant=minbase) of one release, built once per
# machine from the Debian archive and cached outside the repo; prints its path. The GPU helper's
# tests run the helper in these roots: bullseye's glibc 2.31 is older than the helper's build,
# bookworm's is the same. Nothing is written into a cached root afterwards (tests mount it
# read-only).
#
#   hack/debian-rootfs.sh SUITE [PACKAGE...]     (SUITE: bullseye, bookworm)
#
# PACKAGEs are included beyond minbase (a root of its own: debian-SUITE-minbase+P1+P2): the GPU
# run's workload is compiled inside bullseye+gcc+libc6-dev (hack/gpu-e2e-old-glibc-bundle.sh).
source "$(dirname "$0")/lib.sh"

suite="${1:-}"
case "${suite}" in
  bullseye|bookworm) ;;
  *) die "usage: $0 bullseye|bookworm [PACKAGE...]" ;;
esac
shift
extra=("$@")
command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed: run hack/install-deps.sh"
name="debian-${suite}-minbase"
for p in "${extra[@]}"; do
  [[ "${p}" =~ ^[a-z0-9][a-z0-9.+-]*$ ]] || die "not a package name: ${p}"
  name+="+${p}"
done
root="${STASIS_CACHE}/rootfs/${name}"
include=()
if ((${#extra[@]})); then include=("--include=$(IFS=,; echo "${extra[*]}")"); fi
mkdir -p "${STASIS_CACHE}/rootfs"
# One builder at a time per suite (tests of one run may ask together).
exec 9>"${root}.lock"
flock 9
if [[ ! -x "${root}/bin/sh" ]]; then
  log "building a Debian ${suite} minbase root${extra:+ with ${extra[*]}} (cached afterwards at ${root})"
  start=${SECONDS}
  # The archive is the network's: a transient failure is tried again, twice.
  for attempt in 1 2 3; do
    rm -rf "${root}.tmp"
    mmdebstrap --quiet --variant=minbase --mode=root "${include[@]}" "${suite}" "${root}.tmp" \
      "http://deb.debian.org/debian" >&2 && break
    ((attempt < 3)) || die "mmdebstrap ${suite} failed 3 times"
    log "mmdebstrap ${suite} failed (attempt ${attempt}); trying again in 10s"
    sleep 10
  done
  mv "${root}.tmp" "${root}"
  log "built the ${suite} root in $((SECONDS - start))s"
fi
echo "${root}"
