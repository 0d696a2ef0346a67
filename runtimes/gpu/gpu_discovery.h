// The node's GPUs, for `stasis node --gpus=auto`: through NVML (nvml.h), or where the driver's
// library is not found, from nvidia-smi; one Worker each. MIG devices are not workers of their
// own yet.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtimes/gpu/nvml.h"

namespace stasis {

// `nvidia-smi --query-gpu=uuid,name,driver_version --format=csv,noheader` → the inventory
// (no CUDA version: nvidia-smi's query has no such field). kUnavailable when it lists no GPU
// or the GPUs disagree on the driver. Pure.
Result<GpuInventory> ParseNvidiaSmiQuery(const std::string& text);

// One GPU from its /proc/driver/nvidia/gpus/<bus>/information text ("Model:" and "GPU UUID:"
// lines); nullopt when either is missing. Pure.
std::optional<DiscoveredGpu> ParseProcGpuInformation(const std::string& text);

// The driver's version from /proc/driver/nvidia/version's "NVRM version:" line (proprietary
// and open kernel modules word it differently); "" when there is none. Pure.
std::string ParseProcDriverVersion(const std::string& text);

// The GPUs the loaded kernel module lists under `proc_dir` (/proc/driver/nvidia), in bus order.
// kNotFound when the directory lists none (no driver loaded), kUnavailable when the version
// file cannot be read or parsed.
Result<GpuInventory> DiscoverGpusFromProc(const std::string& proc_dir);

// The GPUs of each worker when `per_worker` consecutive GPUs (discovery's order, or the --gpus
// list's) form one: a multi-GPU actor is claimed, given and checkpointed with all of them.
// kInvalidArgument when the GPUs do not divide into such groups, or per_worker < 1. Pure.
Result<std::vector<std::vector<std::string>>> GroupGpus(const std::vector<std::string>& uuids, int per_worker);

// Where --gpus=auto looks, in order; the first that exists answers.
struct GpuDiscoverySources {
  std::string nvml_library = kDefaultNvmlLibrary;
  std::string proc_dir = "/proc/driver/nvidia";
  std::string nvidia_smi = "nvidia-smi";
  std::chrono::milliseconds deadline = std::chrono::seconds(30);
};

// NVML first; where its library is not there at all (kNotFound), the kernel module's /proc
// files (they name no CUDA version); where those list no GPU either, `nvidia-smi --query-gpu`.
// Errors are the first source's that exists; kNotFound when none does.
Result<GpuInventory> DiscoverGpus(const GpuDiscoverySources& sources = {});

// "GPU-…, 1234" lines (`nvidia-smi --query-gpu=uuid,memory.used --format=csv,noheader,nounits`,
// MiB) → the bytes in use on the GPUs named in `uuids`, summed; kUnavailable when one of them
// is not listed. Pure.
Result<int64_t> SumGpuMemoryUsed(const std::string& text, const std::vector<std::string>& uuids);

// The device memory in use on these GPUs now, from nvidia-smi: what a CUDA checkpoint of the
// process holding them copies into its image. 0 for no GPU, without running anything.
Result<int64_t> GpuMemoryUsed(const std::vector<std::string>& uuids,
                              const std::string& nvidia_smi = "nvidia-smi",
                              std::chrono::milliseconds deadline = std::chrono::seconds(10));

}  // namespace stasis
