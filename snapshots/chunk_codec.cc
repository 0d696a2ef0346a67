#include "snapshots/chunk_codec.h"

#include <zstd.h>
#include <zstd_errors.h>

#include "snapshots/aes_gcm.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

// The first byte of a compressed payload.
constexpr char kStoredRaw = 0;
constexpr char kStoredZstd = 1;

Status Corrupt(const std::string& why) {
  return Status(Code::kFailedPrecondition, why, snapshot_reason::kSnapshotCorrupt);
}

// NUL-separated: no field can run into the next (names never hold NUL).
std::string Aad(const ChunkPlace& p, Compression c) {
  std::string aad = "stasis snapshot chunk v1";
  for (const std::string& field : {p.snapshot, p.content, std::to_string(p.file), std::to_string(p.chunk),
                                   std::string(CompressionName(c))}) {
    aad.push_back('\0');
    aad += field;
  }
  return aad;
}

// One context per thread, kept for the thread's life: a level-3 context holds a few MiB of
// tables, worth reusing across the chunks a transfer thread handles.
ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> ctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  return ctx.get();
}

ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  return ctx.get();
}

// [kind][bytes] into `out`: a zstd frame when it is smaller than the chunk, else the chunk.
Status Compress(std::string_view plain, int level, std::string& out) {
  ZSTD_CCtx* ctx = ThreadCCtx();
  if (!ctx) return Status(Code::kInternal, "zstd: no compression context", snapshot_reason::kIoError);
  out.resize(1 + plain.size());
  // Room for one byte less than the chunk: a frame that does not fit saves nothing.
  const size_t n = plain.size() < 2 ? 0
                   : ZSTD_compressCCtx(ctx, out.data() + 1, plain.size() - 1, plain.data(), plain.size(), level);
  if (n > 0 && !ZSTD_isError(n)) {
    out[0] = kStoredZstd;
    out.resize(1 + n);
    return OkStatus();
  }
  if (n > 0 && ZSTD_getErrorCode(n) != ZSTD_error_dstSize_tooSmall) {
    return Status(Code::kInternal, std::string("zstd: ") + ZSTD_getErrorName(n), snapshot_reason::kIoError);
  }
  out[0] = kStoredRaw;
  out.replace(1, plain.size(), plain);
  return OkStatus();
}

// The chunk from a compressed payload: the raw bytes after the kind byte, or the frame unpacked
// into `out` — exactly `length` bytes, or refused.
Result<std::string_view> Decompress(std::string_view payload, int64_t length, std::string& out) {
  if (payload.empty()) return Corrupt("compressed payload is empty");
  const std::string_view body = payload.substr(1);
  const auto want = static_cast<uint64_t>(length);
  if (payload[0] == kStoredRaw) {
    if (body.size() != want) {
      return Corrupt("stored uncompressed with " + std::to_string(body.size()) + " bytes, not the chunk's " +
                     std::to_string(length));
    }
    return body;
  }
  if (payload[0] != kStoredZstd) return Corrupt("compressed payload of unknown kind " + std::to_string(payload[0]));
  // Checked before anything is decompressed: a frame may only unpack to the chunk's length.
  const unsigned long long declared = ZSTD_getFrameContentSize(body.data(), body.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    return Corrupt("not a zstd frame that declares its size");
  }
  if (declared != want) {
    return Corrupt("zstd frame declares " + std::to_string(declared) + " bytes, not the chunk's " +
                   std::to_string(length) + ": refused before decompressing");
  }
  ZSTD_DCtx* ctx = ThreadDCtx();
  if (!ctx) return Status(Code::kInternal, "zstd: no decompression context", snapshot_reason::kIoError);
  out.resize(want);
  // The output buffer is the bound: zstd stops with dstSize_tooSmall rather than write past it.
  const size_t n = ZSTD_decompressDCtx(ctx, out.data(), out.size(), body.data(), body.size());
  if (ZSTD_isError(n)) return Corrupt(std::string("zstd: ") + ZSTD_getErrorName(n));
  if (n != want) return Corrupt("zstd frame unpacked to " + std::to_string(n) + " bytes, not " + std::to_string(length));
  return std::string_view(out);
}

}  // namespace

ChunkCodec::ChunkCodec(CompressionSetting compression, std::shared_ptr<const EncryptionKey> key)
    : compression_(compression), encryption_(key ? Encryption::kAes256Gcm : Encryption::kNone), key_(std::move(key)) {}

ChunkCodec ChunkCodec::ForSnapshot(Compression compression, Encryption encryption) const {
  ChunkCodec c;
  c.compression_ = CompressionSetting{compression, compression == Compression::kZstd ? kDefaultZstdLevel : 0};
  c.encryption_ = encryption;
  if (encryption == Encryption::kAes256Gcm) c.key_ = key_;
  return c;
}

Result<std::string_view> ChunkCodec::Encode(std::string_view plain, const ChunkPlace& place, std::string& out,
                                            std::string& scratch) const {
  if (identity()) return plain;
  std::string_view payload = plain;
  if (compression_.compression == Compression::kZstd) {
    std::string& dst = key_ ? scratch : out;
    if (Status s = Compress(plain, compression_.level, dst); !s.ok()) return s;
    payload = dst;
  }
  if (!key_) return std::string_view(out);
  if (Status s = GcmSeal(*key_, Aad(place, compression_.compression), payload, out); !s.ok()) return s;
  return std::string_view(out);
}

Result<std::string_view> ChunkCodec::Decode(std::string_view object, const ChunkPlace& place, int64_t length,
                                            ChunkBuffers& buffers) const {
  std::string_view payload = object;
  if (encryption_ == Encryption::kAes256Gcm) {
    if (!key_) {
      return Status(Code::kFailedPrecondition, "the chunk is encrypted and this agent has no key",
                    snapshot_reason::kSnapshotKeyMismatch);
    }
    if (Status s = GcmOpen(*key_, Aad(place, compression_.compression), object, buffers.opened); !s.ok()) return s;
    payload = buffers.opened;
  }
  if (compression_.compression == Compression::kZstd) return Decompress(payload, length, buffers.unpacked);
  return payload;
}

}  // namespace stasis
