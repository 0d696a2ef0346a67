#!/usr/bin/env bash
# Runs a fleet benchmark from the archive of hack/fleet-bundle.sh on a machine with no compiler,
# Go or network (the device tool's 16-core machines), which needs only bash, openssl, curl,
# python3 and xz (or python3's lzma):
#
#   hack/bench/fleet-from-bundle.sh ARCHIVE fleet.sh|transitions.sh [ARGS…]
#
# Unpacks ARCHIVE into a temporary directory (removed at exit), checks the machine's glibc
# against the one the binaries were built with, then runs hack/bench/SCRIPT ARGS… with the
# archive's binaries (STASIS_BENCH_PREBUILT=1) and its control plane (STASIS_CACHE). The
# benchmark's own output is this script's.
source "$(dirname "$0")/../lib.sh"

(($# >= 2)) || die "usage: $0 ARCHIVE fleet.sh|transitions.sh [ARGS…]"
archive="$1" script="$2"; shift 2
[[ -f "${archive}" ]] || die "no archive at ${archive} (hack/fleet-bundle.sh writes it)"
case "${script}" in
  fleet.sh|transitions.sh) ;;
  *) die "the archive serves fleet.sh and transitions.sh, not ${script}" ;;
esac

pkg="$(mktemp -d /tmp/stasis-fleet-bundle.XXXXXX)"
trap 'rm -rf "${pkg}"' EXIT
if command -v xz >/dev/null; then
  xz -dc "${archive}" | tar -C "${pkg}" -xf -
else
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), sys.stdout.buffer)' \
    "${archive}" | tar -C "${pkg}" -xf -
fi

# glibc versions compare as version strings: 2.36 < 2.39 < 2.100.
need="$(cat "${pkg}/glibc-version")" have="$(ldd --version | sed -n 1p | awk '{ print $NF }')"
[[ "$(printf '%s\n%s\n' "${need}" "${have}" | sort -V | head -1)" == "${need}" ]] \
  || die "the archive's binaries need glibc ${need}; this machine has ${have}"

export STASIS_CACHE="${pkg}/cache" STASIS_BENCH_BUILD_DIR="${pkg}/build" STASIS_BENCH_PREBUILT=1
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"
log "glibc ${have} (the archive's: ${need}); $(nproc) cores; running hack/bench/${script} $*"
"${HACK_DIR}/bench/${script}" "$@"
