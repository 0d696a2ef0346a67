#!/usr/bin/env bash
# The README's test command: installs dependencies, builds (with AddressSanitizer and UBSan),
# and runs every test — unit, integration (real kube-apiserver + etcd), end-to-end (real
# runsc sandboxes) and cluster (the image on the one-node cluster of hack/cluster.sh) — through
# ctest. Exits non-zero on any failure. Run as root (runsc).
#
#   hack/test.sh            everything, then the integration tests again against the oldest
#                           supported Kubernetes (KUBERNETES_OLDEST_VERSION)
#   hack/test.sh -L unit    only one label, against the pinned Kubernetes (ctest arguments pass through)
source "$(dirname "$0")/lib.sh"
start=${SECONDS}

[[ $(id -u) == 0 ]] || die "run as root: the end-to-end tests start runsc sandboxes"
"${HACK_DIR}/install-deps.sh"
# Seconds, before minutes of building: file and function length, include layering.
"${HACK_DIR}/check-layout.sh"

# The external programs, built once per machine and cached by version (slow only when cold).
"${HACK_DIR}/build-control-plane.sh" >/dev/null
# A full run also tests the oldest Kubernetes stasis supports (hack/versions.env, README).
full_run=$(( $# == 0 ))
if (( full_run )); then
  STASIS_KUBERNETES_VERSION="${KUBERNETES_OLDEST_VERSION}" "${HACK_DIR}/build-control-plane.sh" >/dev/null
fi
"${HACK_DIR}/runsc.sh" >/dev/null
"${HACK_DIR}/build-object-store.sh" >/dev/null
"${HACK_DIR}/build-token-server.sh" >/dev/null
"${HACK_DIR}/debian-rootfs.sh" bullseye >/dev/null
"${HACK_DIR}/debian-rootfs.sh" bookworm >/dev/null
"${HACK_DIR}/build-cluster.sh"
"${HACK_DIR}/build-prometheus.sh" >/dev/null
export PATH="${PATH}:${STASIS_CACHE}/bin/kubernetes-${KUBERNETES_VERSION}"
log "external binaries ready after $((SECONDS - start))s"

build_dir="${STASIS_TEST_BUILD_DIR:-${REPO_ROOT}/build-test}"
cmake -S "${REPO_ROOT}" -B "${build_dir}" -G Ninja -DSTASIS_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build "${build_dir}"
log "built after $((SECONDS - start))s"
# The image (a Release build of its own, build-image/), for integration_image_test and the
# cluster tests; unit tests alone do not need it. The cluster's upgrade test rolls out a second
# image, another version of the same tree (build-image/image-upgrade), built first so that
# build-image/ ends at the project's version.
if [[ "$*" != "-L unit" ]]; then
  project_version="$(sed -n 's/^project(stasis VERSION \([0-9.]*\).*/\1/p' "${REPO_ROOT}/CMakeLists.txt")"
  "${HACK_DIR}/image.sh" --version "${project_version}-next" --out "${REPO_ROOT}/build-image/image-upgrade" >/dev/null
  "${HACK_DIR}/image.sh" >/dev/null
  log "images built after $((SECONDS - start))s"
fi

# detect_leaks stays on; cpprest's process-lifetime singletons are suppressed by name only.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=${REPO_ROOT}/tests/lsan.supp}"
rc=0
(cd "${build_dir}" && ctest --output-on-failure --timeout 1500 -j2 "$@") || rc=$?
if (( full_run )); then
  # The integration tests that talk to an API server, once more against the oldest supported
  # one; the tests' control planes read STASIS_KUBERNETES_VERSION through hack/versions.env.
  # They make the requests of stasis's API code and check every field and rule of its CRDs; the
  # end-to-end tests drive the same client code with real sandboxes behind it, and against a
  # second version would add a third to a cold CI run (docs/testing.md).
  log "integration tests against Kubernetes ${KUBERNETES_OLDEST_VERSION}"
  (cd "${build_dir}" && STASIS_KUBERNETES_VERSION="${KUBERNETES_OLDEST_VERSION}" \
    ctest --output-on-failure --timeout 1500 -j2 -L kube -L integration) || rc=$?
fi

# Nothing may outlive the tests: no control plane, no sandbox, no QEMU (micro-VM tests' QEMUs
# name their stasis-microvm-* or stasis-e2e-* directories on their command lines). (A control plane's owner
# watcher needs a second to see its test binary gone.)
sleep 2
leaked="$(pgrep -a -f 'stasis-test-cp-|stasis-runsc-root-|stasis-e2e-|stasis-cc-|stasis-microvm-|stasis-test-cluster-' | grep -v control-plane-owner || true)"
if [[ -n "${leaked}" ]]; then
  log "ERROR: tests leaked processes:"; echo "${leaked}" >&2
  pkill -9 -f 'stasis-test-cp-|stasis-runsc-root-|stasis-e2e-|stasis-cc-|stasis-microvm-|stasis-test-cluster-' || true
  rc=1
fi
# The object-store tests' SeaweedFS (its -dir names the test's stasis-test-s3-* directory).
leaked_s3="$(pgrep -a -f 'stasis-test-s3-' | grep -v object-store-owner || true)"
if [[ -n "${leaked_s3}" ]]; then
  log "ERROR: tests leaked object stores:"; echo "${leaked_s3}" >&2
  pkill -9 -f 'weed server .*stasis-test-s3-' || true
  rc=1
fi
# The image tests' registries and token servers (their arguments name the test's
# stasis-test-registry-* directory).
leaked_registries="$(pgrep -a -f '(docker-registry|token-server) .*stasis-test-registry-' || true)"
if [[ -n "${leaked_registries}" ]]; then
  log "ERROR: tests leaked registries:"; echo "${leaked_registries}" >&2
  pkill -9 -f '(docker-registry|token-server) .*stasis-test-registry-' || true
  rc=1
fi
log "done in $((SECONDS - start))s (rc=${rc})"
exit ${rc}
