#!/usr/bin/env bash
# Installs stasis's own files into an image's root filesystem, then checks that they run there.
# The one list of files: the Dockerfile's runtime stage runs it on its own root (/), and
# hack/image.sh on the root it builds from hack/image-packages.txt.
#
#   hack/image-install.sh ROOT STASIS HELPER_DIR RUNSC
#
# STASIS is the `stasis` binary, HELPER_DIR the self-contained GPU helper's directory (a build's
# cuda-checkpoint/: the helper and its own loader and libraries), RUNSC the runsc binary.
set -euo pipefail

die() { printf '[image-install.sh] ERROR: %s\n' "$*" >&2; exit 1; }

(($# == 4)) || die "usage: $0 ROOT STASIS HELPER_DIR RUNSC"
root="$1" stasis="$2" helper="$3" runsc="$4"
[[ -x "${root}/bin/sh" ]] || die "${root} is no root filesystem (no /bin/sh)"
[[ -x "${stasis}" ]] || die "no stasis binary at ${stasis}"
[[ -x "${helper}/stasis-cuda-checkpoint" ]] || die "no GPU helper in ${helper}"
[[ -x "${runsc}" ]] || die "no runsc at ${runsc}"

# The controller's user (the Deployment runs it as 65532, docs/security.md); the node agent
# runs as root, which runsc needs.
readonly uid=65532
install -D -m 0755 "${stasis}" "${root}/usr/local/bin/stasis"
install -D -m 0755 "${runsc}" "${root}/usr/local/bin/runsc"
# The host path of manifests/cdi/'s spec: GPU containers get this directory mounted at
# /opt/stasis/cuda-checkpoint (docs/gpu.md).
rm -rf "${root}/usr/lib/stasis/cuda-checkpoint"
mkdir -p "${root}/usr/lib/stasis"
cp -a "${helper}" "${root}/usr/lib/stasis/cuda-checkpoint"
grep -q "^stasis:" "${root}/etc/group" || echo "stasis:x:${uid}:" >> "${root}/etc/group"
grep -q "^stasis:" "${root}/etc/passwd" \
  || echo "stasis:x:${uid}:${uid}:stasis controller:/nonexistent:/usr/sbin/nologin" >> "${root}/etc/passwd"

# A missing shared library fails the build here, not the pod at start. The helper's interpreter
# is where CDI mounts its directory, so it is run through its own directory's loader.
in_root() { if [[ "${root}" == / ]]; then "$@"; else chroot "${root}" "$@"; fi; }
missing="$(in_root ldd /usr/local/bin/stasis | grep 'not found' || true)"
[[ -z "${missing}" ]] || die "shared libraries of stasis missing in the image: ${missing}"
h=/usr/lib/stasis/cuda-checkpoint
in_root sh -c "$h/lib/ld-linux-*.so.* --library-path $h/lib $h/stasis-cuda-checkpoint --help" >/dev/null \
  || die "the GPU helper does not run on its own loader in the image"
in_root stasis --version >/dev/null || die "stasis --version fails in the image"
# runsc reads /proc at start, which a chroot lacks; it is one static binary, so outside the
# image it runs the same.
if [[ "${root}" == / ]]; then runsc --version; else "${runsc}" --version; fi >/dev/null \
  || die "runsc --version fails"
