#!/usr/bin/env bash
# Builds the stasis image here, without a container engine or a registry: a Debian 12 root
# filesystem from the Debian archive (mmdebstrap, minbase plus hack/image-packages.txt), stasis's
# own files (hack/image-install.sh), and the Dockerfile's labels and entrypoint, packed as an OCI
# image by umoci. Prints the OCI layout's path; beside it, the same image as one tar archive for
# `ctr images import` or `skopeo copy oci-archive:…`.
#
#   hack/image.sh [--build-dir DIR] [--out DIR] [--version V]
#
# --build-dir: a CMake build of stasis to take `stasis` and `cuda-checkpoint/` from (a Release
#   build without sanitizers: the image has no libasan). Default: <repo>/build-image, configured
#   and built here (Release, no tests).
# --out: where the layout (DIR/oci, tag VERSION) and archive (DIR/stasis-VERSION.oci.tar) go.
#   Default: <repo>/build-image/image.
# --version: the version stamped into stasis (--version, stasis_build_info), the image's label and
#   its tag. Default: the project's (CMakeLists.txt). Only with the default --build-dir.
#
# The root filesystem without stasis's files is cached outside the repo, keyed by the package
# list's hash: a new list builds a new one.
source "$(dirname "$0")/lib.sh"

build_dir="${REPO_ROOT}/build-image"
out=""
version=""
while (($#)); do
  case "$1" in
    --build-dir) build_dir="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --version) version="$2"; shift 2 ;;
    *) die "usage: $0 [--build-dir DIR] [--out DIR] [--version V]" ;;
  esac
done
out="${out:-${REPO_ROOT}/build-image/image}"
[[ "$(id -u)" == 0 ]] || die "run as root (mmdebstrap --mode=root, umoci unpack of root-owned files)"
for tool in mmdebstrap umoci; do
  command -v "${tool}" >/dev/null || die "${tool} is not installed: run hack/install-deps.sh"
done

project_version="$(sed -n 's/^project(stasis VERSION \([0-9.]*\).*/\1/p' "${REPO_ROOT}/CMakeLists.txt")"
[[ -n "${project_version}" ]] || die "no project version in CMakeLists.txt"
if [[ -n "${version}" && "${build_dir}" != "${REPO_ROOT}/build-image" ]]; then
  die "--version stamps the build this script makes; it cannot restamp --build-dir ${build_dir}"
fi
version="${version:-${project_version}}"
# A tag and a label value: OCI's tag grammar.
[[ "${version}" =~ ^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$ ]] || die "--version ${version} is not a valid image tag"
revision="$(git -C "${REPO_ROOT}" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"

# Packages: the list's names, without comments and blank lines.
packages="$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "${HACK_DIR}/image-packages.txt" | tr -d ' ' | paste -sd, -)"
[[ -n "${packages}" ]] || die "hack/image-packages.txt names no package"

base_rootfs() {
  local key; key="$(printf 'bookworm minbase %s' "${packages}" | sha256sum | cut -c1-16)"
  local tar="${STASIS_CACHE}/rootfs/stasis-image-base-${key}.tar"
  mkdir -p "${STASIS_CACHE}/rootfs"
  exec 9>"${tar}.lock"
  flock 9
  if [[ ! -s "${tar}" ]]; then
    log "building the image's Debian root (cached afterwards at ${tar})"
    # What debian:bookworm-slim leaves out: documentation, manual pages, translations.
    local attempt
    # mmdebstrap picks the output's format by its name's extension.
    local tmp="${tar%.tar}.tmp.tar"
    for attempt in 1 2 3; do
      mmdebstrap --quiet --variant=minbase --mode=root --include="${packages}" \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
        bookworm "${tmp}" "http://deb.debian.org/debian" >&2 && break
      ((attempt < 3)) || die "mmdebstrap failed 3 times"
      log "mmdebstrap failed (attempt ${attempt}); trying again in 10s"
      sleep 10
    done
    mv "${tmp}" "${tar}"
  fi
  exec 9>&-
  echo "${tar}"
}

build_stasis() {
  if [[ "${build_dir}" == "${REPO_ROOT}/build-image" ]]; then
    cmake -S "${REPO_ROOT}" -B "${build_dir}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTASIS_BUILD_TESTS=OFF \
      -DSTASIS_REVISION="${revision}" -DSTASIS_VERSION="${version}" >/dev/null
    # The compiler's output goes to a log (an optimised build warns where a Debug one does not).
    cmake --build "${build_dir}" --target stasis stasis-cuda-checkpoint-private >"${build_dir}/image-build.log" 2>&1 \
      || { tail -40 "${build_dir}/image-build.log" >&2; die "building stasis for the image failed"; }
  fi
  [[ -x "${build_dir}/stasis" ]] || die "no stasis in ${build_dir}"
  [[ -d "${build_dir}/cuda-checkpoint" ]] || die "no cuda-checkpoint/ in ${build_dir} (target stasis-cuda-checkpoint-private)"
}

# The Dockerfile's org.opencontainers.image.* labels, as `--config.label` arguments: one place
# says what they are. The revision is this checkout's, the version the one stamped.
label_args() {
  sed -n 's/.*\(org\.opencontainers\.image\.[a-z]*\)="\([^"]*\)".*/\1=\2/p' "${REPO_ROOT}/Dockerfile" \
    | sed -e "s/\${STASIS_REVISION}/${revision}/" -e "s/\${STASIS_VERSION}/${version}/" \
    | while IFS= read -r label; do printf -- '--config.label=%s\n' "${label}"; done
}

start=${SECONDS}
build_stasis
runsc="$("${HACK_DIR}/runsc.sh")"
base="$(base_rootfs)"
rm -rf "${out}"
mkdir -p "${out}"
umoci init --layout "${out}/oci"
umoci new --image "${out}/oci:${version}"
umoci unpack --image "${out}/oci:${version}" "${out}/bundle" >/dev/null
tar -C "${out}/bundle/rootfs" -xf "${base}"
"${HACK_DIR}/image-install.sh" "${out}/bundle/rootfs" "${build_dir}/stasis" "${build_dir}/cuda-checkpoint" "${runsc}"
umoci repack --image "${out}/oci:${version}" "${out}/bundle"
mapfile -t labels < <(label_args)
((${#labels[@]} >= 5)) || die "found ${#labels[@]} OCI labels in the Dockerfile, expected at least 5"
# As the Dockerfile: tini is PID 1 (it reaps the sandboxes runsc leaves to it), the role comes
# as arguments, and the default user is root (the node agent needs it; the controller's
# Deployment sets its own).
umoci config --image "${out}/oci:${version}" --author "stasis" \
  --config.entrypoint /usr/bin/tini --config.entrypoint -- \
  --config.cmd stasis --config.cmd --help --config.workingdir / "${labels[@]}"
umoci gc --layout "${out}/oci"
rm -rf "${out}/bundle"
# One archive of the layout; its index names the image stasis:VERSION.
tar -C "${out}/oci" -cf "${out}/stasis-${version}.oci.tar" .
log "built the image stasis:${version} (revision ${revision}) in $((SECONDS - start))s"
echo "${out}/oci"
