// The node's GPUs through NVML, the driver's own management library, opened with dlopen: the
// agent's image carries no nvidia-smi, and the library comes with the driver that the node
// mounts in. The only code that knows NVML's symbols.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

struct DiscoveredGpu {
  std::string uuid;   // "GPU-…", as CDI specs and cuda-checkpoint's device map name it
  std::string model;  // NVML's device name, e.g. "NVIDIA H200"
};

// What discovery learned of the node's GPUs: one driver serves them all.
struct GpuInventory {
  std::vector<DiscoveredGpu> gpus;  // in NVML's index order
  std::string driver_version;       // "580.95.05"
  std::string cuda_version;         // the CUDA driver API version, "13.0"; empty from nvidia-smi
  std::string source;               // "nvml" or "nvidia-smi"
};

inline constexpr char kDefaultNvmlLibrary[] = "libnvidia-ml.so.1";

// NVML's CUDA driver version (1000 × major + 10 × minor, e.g. 13000) as "13.0"; "" for <= 0.
std::string FormatCudaDriverVersion(int version);

// Opens `library` (a file name the dynamic loader searches for, or a path) and lists every GPU.
// kNotFound when the library cannot be loaded (no NVIDIA driver here), kUnavailable when NVML
// fails (the message carries its error string) or lists no GPU, kDeadlineExceeded when it does
// not answer within `deadline` (a wedged driver: the call is abandoned on its thread).
Result<GpuInventory> DiscoverGpusWithNvml(const std::string& library = kDefaultNvmlLibrary,
                                          std::chrono::milliseconds deadline = std::chrono::seconds(30));

}  // namespace stasis
