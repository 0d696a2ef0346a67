#include "snapshots/chunk_digest.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "base/parallel.h"
#include "snapshots/file_io.h"
#include "base/sha256.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using snapshot_reason::kIoError;
using snapshot_reason::kStoreNotWritable;

// Each thread reads its chunk in pieces of this size through one buffer of its own.
constexpr int64_t kPieceBytes = int64_t{1} << 20;

struct FileJob {
  fs::path from, to;
  int out = -1;  // the copy's descriptor, or -1: hash only
  int64_t size = 0;
};

Status IoError(const std::string& what) { return Status(Code::kInternal, Errno(what), kIoError); }

// The size of a regular file, without following a final symlink.
Result<int64_t> RegularFileSize(const fs::path& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) return IoError("stat " + path.string());
  if (!S_ISREG(st.st_mode)) {
    return Status(Code::kInternal, path.string() + " is not a regular file", kIoError);
  }
  return static_cast<int64_t>(st.st_size);
}

// Reads one chunk through a descriptor of its own (so that the kernel's read-ahead follows
// each thread's run), hashes it, and writes it to the copy when there is one.
Result<std::string> DigestChunk(const FileJob& f, const ChunkSpan& c, char* buf) {
  const int64_t begin = c.offset;
  const int64_t end = c.offset + c.length;
  const int fd = open(f.from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return IoError("open " + f.from.string());
  (void)posix_fadvise(fd, begin, end - begin, POSIX_FADV_SEQUENTIAL);
  Sha256 hash;
  Status status = hash.status();
  for (int64_t off = begin; status.ok() && off < end;) {
    const ssize_t n = pread(fd, buf, static_cast<size_t>(std::min(kPieceBytes, end - off)), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = IoError("read " + f.from.string());
    } else if (n == 0) {
      status = Status(Code::kInternal,
                      f.from.string() + " ended at byte " + std::to_string(off) + " while it was read (" +
                          std::to_string(f.size) + " bytes when it was opened)",
                      kIoError);
    } else {
      hash.Update(buf, static_cast<size_t>(n));
      if (f.out >= 0 && !PwriteAll(f.out, buf, n, off)) {
        status = Status(Code::kFailedPrecondition, Errno("write " + f.to.string()), kStoreNotWritable);
      }
      off += n;
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return hash.FinishHex();
}

// Every chunk of every file, on up to `threads` threads, each with a buffer of its own.
Result<std::vector<ChunkedDigest>> RunChunks(const std::vector<FileJob>& files, int64_t chunk_bytes,
                                             int threads) {
  std::vector<ChunkedDigest> digests(files.size());
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < files.size(); ++i) {
    digests[i].size = files[i].size;
    digests[i].chunks.resize(static_cast<size_t>(ChunkCount(files[i].size, chunk_bytes)));
    sizes.push_back(files[i].size);
  }
  const std::vector<ChunkSpan> chunks = ChunkSpans(sizes, chunk_bytes);
  std::vector<std::unique_ptr<char[]>> buffers(WorkersFor(chunks.size(), threads));
  // Not zeroed: pread fills them.
  for (auto& b : buffers) b = std::make_unique_for_overwrite<char[]>(static_cast<size_t>(kPieceBytes));
  Status status = ParallelFor(chunks.size(), threads, [&](size_t j, size_t worker) -> Status {
    const ChunkSpan& c = chunks[j];
    auto digest = DigestChunk(files[c.file], c, buffers[worker].get());
    if (!digest.ok()) return digest.status();
    digests[c.file].chunks[static_cast<size_t>(c.index)] = std::move(*digest);
    return OkStatus();
  });
  if (!status.ok()) return status;
  return digests;
}

}  // namespace

int64_t ChunkCount(int64_t size, int64_t chunk_bytes) {
  if (size <= 0 || chunk_bytes <= 0) return 0;
  return (size + chunk_bytes - 1) / chunk_bytes;
}

std::vector<ChunkSpan> ChunkSpans(const std::vector<int64_t>& sizes, int64_t chunk_bytes) {
  std::vector<ChunkSpan> out;
  for (size_t f = 0; f < sizes.size(); ++f) {
    for (int64_t c = 0; c < ChunkCount(sizes[f], chunk_bytes); ++c) {
      const int64_t offset = c * chunk_bytes;
      out.push_back({f, c, offset, std::min(chunk_bytes, sizes[f] - offset)});
    }
  }
  return out;
}

Result<std::vector<ChunkedDigest>> HashFilesChunked(const std::vector<fs::path>& files, int64_t chunk_bytes,
                                                    int threads) {
  std::vector<FileJob> jobs;
  for (const auto& path : files) {
    auto size = RegularFileSize(path);
    if (!size.ok()) return size.status();
    jobs.push_back({path, {}, -1, *size});
  }
  auto digests = RunChunks(jobs, chunk_bytes, threads);
  if (!digests.ok()) return digests;
  // A file that grew while it was read (a writer still at it) would be described short.
  for (const auto& job : jobs) {
    auto size = RegularFileSize(job.from);
    if (!size.ok()) return size.status();
    if (*size != job.size) {
      return Status(Code::kInternal,
                    job.from.string() + " changed size while it was hashed (" + std::to_string(job.size) +
                        " → " + std::to_string(*size) + " bytes)",
                    kIoError);
    }
  }
  return digests;
}

Result<std::vector<ChunkedDigest>> CopyFilesChunked(const std::vector<fs::path>& from, const std::vector<fs::path>& to,
                                                    int64_t chunk_bytes, int threads) {
  std::vector<FileJob> jobs;
  auto close_all = [&] {
    for (auto& j : jobs) close(j.out);
  };
  for (size_t i = 0; i < from.size() && i < to.size(); ++i) {
    auto size = RegularFileSize(from[i]);
    if (!size.ok()) {
      close_all();
      return size.status();
    }
    const int out = open(to[i].c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
      Status s(Code::kFailedPrecondition, Errno("create " + to[i].string()), kStoreNotWritable);
      close_all();
      return s;
    }
    jobs.push_back({from[i], to[i], out, *size});
  }
  auto digests = RunChunks(jobs, chunk_bytes, threads);
  for (const auto& j : jobs) {
    if (digests.ok() && fsync(j.out) != 0) {
      digests = Status(Code::kFailedPrecondition, Errno("fsync " + j.to.string()), kStoreNotWritable);
    }
  }
  close_all();
  return digests;
}

}  // namespace stasis
