// The node's GPUs, for `stasis node --gpus=auto`: their UUIDs from `nvidia-smi -L`, one
// Worker each. MIG devices (indented "MIG …" lines) are not workers of their own yet.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

// "GPU 0: NVIDIA H200 (UUID: GPU-7870a581-…)" lines → their UUIDs, in order.
std::vector<std::string> ParseNvidiaSmiList(const std::string& text);

// Runs `<nvidia_smi> -L`. kNotFound when the tool is missing, kUnavailable when it fails or
// lists no GPU (the message quotes its output).
Result<std::vector<std::string>> DiscoverGpus(const std::string& nvidia_smi = "nvidia-smi",
                                              std::chrono::milliseconds deadline = std::chrono::seconds(30));

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
