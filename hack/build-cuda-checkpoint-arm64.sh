#!/usr/bin/env bash
# Cross-compiles stasis-cuda-checkpoint for arm64 (aarch64) with Debian's cross compiler,
# installing gcc-aarch64-linux-gnu and libc6-dev-arm64-cross if missing (as root, unless
# STASIS_NO_INSTALL=1), and checks that the result is an aarch64 ELF executable. NVIDIA's cuda-checkpoint ships for x86-64 only; this is the proof
# that stasis's helper builds for arm64 GPU nodes (running it there needs such a node).
#
# Usage: hack/build-cuda-checkpoint-arm64.sh [output-path]
#        (default build/arm64/stasis-cuda-checkpoint)
set -euo pipefail
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${REPO_ROOT}/build/arm64/stasis-cuda-checkpoint}"
cc=aarch64-linux-gnu-gcc

# The compiler alone is not enough: libc6-dev-arm64-cross (only a Recommends of the compiler)
# holds the arm64 libc headers and crt files.
if ! command -v "${cc}" >/dev/null || [[ ! -f /usr/aarch64-linux-gnu/include/stdio.h ]]; then
  packages=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross)
  if [[ "${STASIS_NO_INSTALL:-0}" == 1 || $(id -u) -ne 0 ]]; then
    echo "[$(basename "$0")] ERROR: the arm64 cross toolchain is incomplete; install ${packages[*]}" >&2
    exit 1
  fi
  echo "[$(basename "$0")] installing ${packages[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}" >/dev/null
fi

mkdir -p "$(dirname "${out}")"
# The same flags the CMake build uses, plus -Werror: a warning on one architecture only
# (type sizes, alignment) is exactly what this build is here to catch.
"${cc}" -std=c11 -O2 -Wall -Wextra -Werror -o "${out}.tmp" \
  "${REPO_ROOT}"/cmd/stasis-cuda-checkpoint/*.c -ldl
mv "${out}.tmp" "${out}"

# e_machine at offset 18 of the ELF header; 183 (0xb7) is EM_AARCH64.
machine=$(od -An -tu2 -j18 -N2 "${out}" | tr -d ' ')
if [[ "${machine}" != 183 ]]; then
  echo "[$(basename "$0")] ERROR: ${out} has ELF machine ${machine}, not 183 (aarch64)" >&2
  exit 1
fi
echo "${out}"
