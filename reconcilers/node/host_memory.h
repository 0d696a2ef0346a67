// The host memory a GPU checkpoint can use: a CUDA checkpoint copies the device memory in use
// into the process's host memory before runsc saves it, so that much must be available, or the
// kernel's OOM killer ends the workload half-way through.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace stasis {

// MemAvailable of /proc/meminfo's text, in bytes. kInvalidArgument when the line is missing or
// malformed.
[[nodiscard]] Result<int64_t> ParseMemAvailable(const std::string& meminfo);

// MemAvailable of `path` (default /proc/meminfo), in bytes.
[[nodiscard]] Result<int64_t> MemAvailableBytes(const std::string& path = "/proc/meminfo");

}  // namespace stasis
