#!/usr/bin/env bash
# Builds runsc from gVisor's Go module (go branch) once per machine, cached by version
# outside the repo, stamps its version string, checks that `runsc checkpoint` has
# -cuda-checkpoint-path, and prints the binary's path.
#
# The platform's pin is tried first. If the module proxy refuses it, the documented
# fallback in versions.env is built instead and a warning says so on every call; set
# STASIS_RUNSC_STRICT=1 to make that refusal fatal.
source "$(dirname "$0")/lib.sh"

module_available() {
  curl -fsS -o /dev/null "${GO_PROXY_BASE}/gvisor.dev/gvisor/@v/$1.info" 2>/dev/null
}

version="${RUNSC_PIN_VERSION}"
pin_marker="${STASIS_CACHE}/bin/runsc-${RUNSC_PIN_VERSION}/runsc"
if [[ ! -x "${pin_marker}" ]] && ! module_available "${RUNSC_PIN_VERSION}"; then
  msg="gvisor.dev/gvisor@${RUNSC_PIN_VERSION} (the platform pin) is not served by ${GO_PROXY_BASE}"
  [[ "${STASIS_RUNSC_STRICT:-0}" == 1 ]] && die "${msg}"
  log "WARNING: ${msg}; building the documented fallback ${RUNSC_FALLBACK_VERSION} (see docs/runsc-version.md)"
  version="${RUNSC_FALLBACK_VERSION}"
fi

dir="${STASIS_CACHE}/bin/runsc-${version}"
commit="${version##*-}"
# The version string is what restore compares; stamp the exact go-branch commit so that
# images from a different build are refused rather than silently accepted.
stamp="go-${commit}"
GO_MODULE_FILE="module stasis.dev/build/runsc
go 1.26
require gvisor.dev/gvisor ${version}"
go_build_cached "${dir}/runsc" gvisor.dev/gvisor/runsc \
  "-X gvisor.dev/gvisor/runsc/version.version=${stamp}"

# `checkpoint --help` exits non-zero by design ("help requested"); look only at its text.
help_text="$("${dir}/runsc" checkpoint --help 2>&1 || true)"
if ! grep -q -- '-cuda-checkpoint-path' <<<"${help_text}"; then
  die "${dir}/runsc has no -cuda-checkpoint-path in 'runsc checkpoint --help'"
fi
echo "${dir}/runsc"
