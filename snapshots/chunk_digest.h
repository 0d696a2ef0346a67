// Snapshot files cut into fixed-size chunks, each with its own sha256: the unit a snapshot is
// hashed, copied and verified in. A file's sha256 is one sequential computation (~1–2 GB/s on
// one core); its chunks' are independent, so every core can hash one, a large image takes
// (its size / cores) of hashing, and a later reader (a copy, a download, a verification)
// can check any piece without the rest.
//
// Invariants: chunk i of a file covers bytes [i·chunk_bytes, min((i+1)·chunk_bytes, size));
// an empty file has no chunks. The work of several files is divided by chunk, not by file, so
// one large file keeps every thread busy. A failure is reported for the first file, in the
// order given, that failed — never a mix of threads' answers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

// 8 MiB: an 8 GiB image is 1,024 chunks (a 70 KB manifest), a 256 MiB one 32 — enough to keep
// 16 cores busy — and each is a reasonable unit for an object store's parallel transfers.
inline constexpr int64_t kDefaultChunkBytes = int64_t{8} << 20;
// The bounds a manifest read from disk must respect (a manifest is not trusted).
inline constexpr int64_t kMinChunkBytes = int64_t{64} << 10;
inline constexpr int64_t kMaxChunkBytes = int64_t{1} << 30;

// How many chunks a file of `size` bytes has (0 for an empty file).
int64_t ChunkCount(int64_t size, int64_t chunk_bytes);

// Chunk `index` of file `file` (an index into the caller's list): bytes [offset, offset+length).
struct ChunkSpan {
  size_t file = 0;
  int64_t index = 0, offset = 0, length = 0;
};

// Every chunk of files of these sizes, file by file, in order.
std::vector<ChunkSpan> ChunkSpans(const std::vector<int64_t>& sizes, int64_t chunk_bytes);

struct ChunkedDigest {
  int64_t size = 0;
  std::vector<std::string> chunks;  // lowercase hex sha256 of each chunk, in order
};

// Hashes every file, chunk by chunk, on up to `threads` threads (0: AvailableCpus()). A file
// that changes size while it is hashed is an io_error: its chunks would describe no state it
// was ever in.
Result<std::vector<ChunkedDigest>> HashFilesChunked(const std::vector<std::filesystem::path>& files,
                                                    int64_t chunk_bytes, int threads = 0);

// Copies from[i] to to[i] (created new, O_EXCL: never over a file), chunk by chunk on up to
// `threads` threads, hashing each chunk as it is read (one reading, not two), then fsyncs every
// copy. The caller compares the digests with the manifest. A failure to create or write a copy
// is store_not_writable, to read a source io_error.
Result<std::vector<ChunkedDigest>> CopyFilesChunked(const std::vector<std::filesystem::path>& from,
                                                    const std::vector<std::filesystem::path>& to,
                                                    int64_t chunk_bytes, int threads = 0);

}  // namespace stasis
