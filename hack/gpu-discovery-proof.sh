#!/usr/bin/env bash
# Builds tests/gpu/gpu_discovery_probe.cc (the agent's own GPU discovery: runtimes/gpu/nvml.cc
# and gpu_discovery.cc, with base/) into one file that runs on any x86-64 glibc machine, for a
# GPU machine to show that NVML, the driver's /proc files and nvidia-smi name the same GPUs,
# models and driver (docs/gpu-e2e-results.md). Prints the binary's path.
#
#   hack/gpu-discovery-proof.sh [OUT_DIR]        (default build/gpu-discovery-probe)
#
# On the GPU machine: run the binary as root; it prints one line per source and agree=true|false
# and exits 0 only when NVML answered and every source that exists agrees with it.
source "$(dirname "$0")/lib.sh"

out="${1:-${REPO_ROOT}/build/gpu-discovery-probe}"
mkdir -p "${out}"
# libstdc++ linked in: the GPU machine's C++ runtime may be older than this one's.
g++ -std=c++20 -O2 -Wall -Wextra -I"${REPO_ROOT}" -static-libstdc++ -static-libgcc \
  "${REPO_ROOT}/tests/gpu/gpu_discovery_probe.cc" "${REPO_ROOT}/runtimes/gpu/nvml.cc" \
  "${REPO_ROOT}/runtimes/gpu/gpu_discovery.cc" "${REPO_ROOT}/base/status.cc" "${REPO_ROOT}/base/subprocess.cc" \
  -ldl -pthread -o "${out}/gpu-discovery-probe" || die "building the GPU discovery probe failed"
echo "${out}/gpu-discovery-probe"
