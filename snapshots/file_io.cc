#include "snapshots/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "base/sha256.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;
using snapshot_reason::kSnapshotCorrupt;
using snapshot_reason::kStoreNotWritable;

constexpr size_t kBufferSize = 1 << 20;

// Writes all of `data` to `fd`, retrying short writes and EINTR; false with errno on failure.
bool WriteAll(int fd, const char* data, size_t n) {
  for (size_t off = 0; off < n;) {
    const ssize_t w = write(fd, data + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

// Feeds the file open as `in` to `hash`, and to `out` when it is not -1.
Status CopyAndHash(int in, const fs::path& from, int out, const fs::path& to, Sha256& hash) {
  // Not zeroed: read() fills it (zeroing 1 MiB was 14 % of a small pause's instructions).
  auto buf = std::make_unique_for_overwrite<char[]>(kBufferSize);
  while (true) {
    const ssize_t n = read(in, buf.get(), kBufferSize);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(Code::kInternal, Errno("read " + from.string()), kIoError);
    if (n == 0) return OkStatus();
    hash.Update(buf.get(), static_cast<size_t>(n));
    if (out >= 0 && !WriteAll(out, buf.get(), static_cast<size_t>(n))) {
      return Status(Code::kFailedPrecondition, Errno("write " + to.string()), kStoreNotWritable);
    }
  }
}

}  // namespace

std::string Errno(const std::string& what) { return what + ": " + std::strerror(errno); }

bool PwriteAll(int fd, const char* data, int64_t n, int64_t offset) {
  for (int64_t done = 0; done < n;) {
    const ssize_t w = pwrite(fd, data + done, static_cast<size_t>(n - done), offset + done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return false;
    done += w;
  }
  return true;
}

Status FsyncPath(const fs::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(Code::kInternal, Errno("open " + path.string()), kIoError);
  const int r = fsync(fd);
  const int saved = errno;
  close(fd);
  if (r != 0) {
    errno = saved;
    return Status(Code::kInternal, Errno("fsync " + path.string()), kIoError);
  }
  return OkStatus();
}

Result<Digest> HashFile(const fs::path& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status(Code::kInternal, Errno("open " + path.string()), kIoError);
  Sha256 hash;
  Status status = hash.status();
  if (status.ok()) status = CopyAndHash(fd, path, -1, {}, hash);
  close(fd);
  if (!status.ok()) return status;
  return Digest{hash.FinishHex(), hash.size()};
}

Result<Digest> CopyFileHashed(const fs::path& from, const fs::path& to) {
  const int in = open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return Status(Code::kInternal, Errno("open " + from.string()), kIoError);
  const int out = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) {
    Status s(Code::kFailedPrecondition, Errno("create " + to.string()), kStoreNotWritable);
    close(in);
    return s;
  }
  Sha256 hash;
  Status status = hash.status();
  if (status.ok()) status = CopyAndHash(in, from, out, to, hash);
  if (status.ok() && fsync(out) != 0) {
    status = Status(Code::kFailedPrecondition, Errno("fsync " + to.string()), kStoreNotWritable);
  }
  close(in);
  close(out);
  if (!status.ok()) return status;
  return Digest{hash.FinishHex(), hash.size()};
}

Status WriteNewFile(const fs::path& path, const std::string& text, bool sync) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status(Code::kInternal, Errno("create " + path.string()), kIoError);
  Status status;
  if (!WriteAll(fd, text.data(), text.size())) {
    status = Status(Code::kInternal, Errno("write " + path.string()), kIoError);
  }
  if (status.ok() && sync && fsync(fd) != 0)
    status = Status(Code::kInternal, Errno("fsync " + path.string()), kIoError);
  close(fd);
  return status;
}

Result<std::vector<fs::path>> RegularFilesUnder(const fs::path& dir, const fs::path& skip) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const auto st = it->symlink_status(ec);
    if (fs::is_directory(st)) continue;
    const fs::path rel = fs::relative(it->path(), dir);
    if (rel == skip) continue;
    if (!fs::is_regular_file(st)) {
      return Status(Code::kFailedPrecondition,
                    "snapshot " + dir.string() + ": " + rel.string() + " is not a regular file",
                    kSnapshotCorrupt);
    }
    files.push_back(rel);
  }
  if (ec) return Status(Code::kInternal, "walk " + dir.string() + ": " + ec.message(), kIoError);
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<fs::path> SubdirectoriesOf(const std::vector<fs::path>& files) {
  std::vector<fs::path> dirs;
  for (const auto& rel : files) {
    for (fs::path d = rel.parent_path(); !d.empty(); d = d.parent_path()) dirs.push_back(d);
  }
  return dirs;
}

}  // namespace stasis
