// The file primitives snapshots are made of: writing, copying and hashing (sha256, OpenSSL
// EVP) and fsyncing files, and walking a snapshot directory. Every failure is a Status with a
// snapshot reason (io_error; store_not_writable for a copy's destination), never an exception.
// Invariant: a file these functions create is created new (O_EXCL), never written over.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

// "what: strerror(errno)".
std::string Errno(const std::string& what);

// Writes all `n` bytes of `data` to `fd` at `offset`, retrying short writes and EINTR; false
// with errno on failure.
bool PwriteAll(int fd, const char* data, int64_t n, int64_t offset);

// fsync of a file or a directory by path.
Status FsyncPath(const std::filesystem::path& path);

struct Digest {
  std::string sha256;  // lowercase hex
  int64_t size = 0;
};

Result<Digest> HashFile(const std::filesystem::path& path);

// Copies one file, hashing the bytes as they are read (one reading, not two), and fsyncs the
// copy. The caller compares the digest with the manifest.
Result<Digest> CopyFileHashed(const std::filesystem::path& from, const std::filesystem::path& to);

// Writes `text` to `path` (which must not exist), and fsyncs it if `sync`.
Status WriteNewFile(const std::filesystem::path& path, const std::string& text, bool sync);

// The files under `dir`, relative to it, sorted; `skip` (relative) is left out. Anything that
// is neither a directory nor a regular file (a symlink, a device) is kFailedPrecondition
// snapshot_corrupt: a snapshot holds only regular files.
Result<std::vector<std::filesystem::path>> RegularFilesUnder(const std::filesystem::path& dir,
                                                             const std::filesystem::path& skip);

// The subdirectories `files` (relative paths) are in, deepest first per file: their entries
// must be durable too.
std::vector<std::filesystem::path> SubdirectoriesOf(const std::vector<std::filesystem::path>& files);

}  // namespace stasis
