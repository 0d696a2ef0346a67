// The object-store encoding of one snapshot chunk, applied on upload and undone on download:
//   plaintext chunk → [zstd] → [AES-256-GCM] → object
// With compression on, the payload is one byte saying how it is stored — 0: the chunk's bytes
// as they are (compression did not make them smaller), 1: one zstd frame — then those bytes.
// With encryption on, the object is that payload sealed (aes_gcm.h: nonce ‖ ciphertext ‖ tag)
// under an AAD that names the chunk's place: the snapshot (namespace/name/id and its content
// digest, the manifest's chunkListSha256), the file index, the chunk index and the compression,
// so a chunk swapped with another, replayed from another snapshot or relabelled fails. With
// neither, the object is the plaintext chunk (the layout before codecs; old snapshots read so).
//
// Decoding is bounded: a zstd frame must declare exactly the chunk's length and may not
// produce more (a decompression bomb is refused, never allocated). The caller still checks the
// plaintext's sha256 against the manifest: the codec proves where an object belongs, the
// digest that its bytes are the snapshot's.
//
// Thread-safe: each call uses its own contexts (zstd's are kept one per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "snapshots/encryption_key.h"
#include "snapshots/store_transform.h"

namespace stasis {

// Where a chunk belongs; bound into its encryption.
struct ChunkPlace {
  std::string snapshot;  // "<namespace>/<name>/<id>"
  std::string content;   // the manifest's chunkListSha256
  size_t file = 0;
  int64_t chunk = 0;
};

// Scratch space a transfer thread keeps for decoding.
struct ChunkBuffers {
  std::string opened, unpacked;
};

class ChunkCodec {
 public:
  ChunkCodec() = default;  // none/none: an object is its plaintext chunk
  // A codec that writes with `compression` and, when `key` is set, encrypts with it; it decodes
  // whatever it would write. Reading a snapshot takes ForSnapshot.
  ChunkCodec(CompressionSetting compression, std::shared_ptr<const EncryptionKey> key);

  // The codec that decodes a stored snapshot's chunks: its manifest's transform, with this
  // agent's key (whose id the caller has checked against the manifest's).
  ChunkCodec ForSnapshot(Compression compression, Encryption encryption) const;

  Compression compression() const { return compression_.compression; }
  Encryption encryption() const { return encryption_; }
  const EncryptionKey* key() const { return key_.get(); }
  bool identity() const { return compression_.compression == Compression::kNone && encryption_ == Encryption::kNone; }

  // The object's bytes for the chunk `plain`: `plain` itself when the codec is the identity,
  // else a view of `out` (`scratch` holds the compressed payload in between).
  Result<std::string_view> Encode(std::string_view plain, const ChunkPlace& place, std::string& out,
                                  std::string& scratch) const;
  // The chunk's plaintext (exactly `length` bytes) from `object` as got from the store: a view
  // of `object` itself where nothing had to be undone (the identity codec, a chunk stored raw),
  // else of one of `buffers` — kept by the caller across chunks, so that decoding allocates
  // and faults in its pages once, not per chunk. kFailedPrecondition snapshot_corrupt saying
  // what failed (the caller names the chunk); with the identity codec `object` is returned as
  // it is (the caller's length and digest check judge it).
  Result<std::string_view> Decode(std::string_view object, const ChunkPlace& place, int64_t length,
                                  ChunkBuffers& buffers) const;

 private:
  CompressionSetting compression_;
  Encryption encryption_ = Encryption::kNone;
  std::shared_ptr<const EncryptionKey> key_;
};

}  // namespace stasis
