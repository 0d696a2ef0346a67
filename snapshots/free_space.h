// The free space of the file system a snapshot is written to, asked before a checkpoint so
// that a snapshot that cannot fit is refused while the workload still runs, rather than found
// out by a save that fails half-way.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace stasis {

// Bytes an unprivileged writer may still use on the file system holding `path` (statvfs
// f_bavail × f_frsize); io_error when the path cannot be asked.
Result<int64_t> FreeBytes(const std::string& path);

}  // namespace stasis
