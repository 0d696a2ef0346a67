#include "snapshots/free_space.h"

#include <sys/statvfs.h>

#include "snapshots/file_io.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {

Result<int64_t> FreeBytes(const std::string& path) {
  struct statvfs st {};
  if (statvfs(path.c_str(), &st) != 0) {
    return Status(Code::kInternal, Errno("statvfs " + path), snapshot_reason::kIoError);
  }
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

}  // namespace stasis
