// The key that encrypts an object store's copy of snapshots (--snapshot-store-encryption-key):
// 32 bytes for AES-256-GCM, read from a file that only its owner may read (a Kubernetes Secret
// mounted with defaultMode 0400), and its id — a name for it that manifests record, so that a
// reader with another key is refused by name before anything is downloaded.
//
// Invariants: the key's bytes never appear in a Status message or a log line, and are wiped
// from memory when the last copy goes; the id is one-way (the first 16 hex digits of a sha256
// over a domain-separation string and the key), so recording it reveals nothing of the key.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace stasis {

inline constexpr size_t kEncryptionKeyBytes = 32;

class EncryptionKey {
 public:
  // kInvalidArgument store_config_invalid unless `raw` is 32 bytes, not all zero (a zeroed
  // placeholder Secret is a mistake, never a key).
  static Result<EncryptionKey> FromBytes(std::string_view raw);

  EncryptionKey(const EncryptionKey& other) = default;
  EncryptionKey& operator=(const EncryptionKey& other) = default;
  ~EncryptionKey();

  const unsigned char* data() const { return bytes_.data(); }
  const std::string& id() const { return id_; }

 private:
  EncryptionKey() = default;
  std::array<unsigned char, kEncryptionKeyBytes> bytes_{};
  std::string id_;
};

// The id of a 32-byte key: 16 lowercase hex digits.
std::string EncryptionKeyId(std::string_view raw);

// A key file: exactly 32 raw bytes, or 64 hex digits (trailing whitespace ignored: a Secret
// written with `echo`). A regular file (symbolic links followed: a Secret volume's files are
// links) that neither its group nor others may read. kInvalidArgument store_config_invalid
// with what is wrong and how to fix it; never the file's content.
Result<EncryptionKey> LoadEncryptionKeyFile(const std::string& path);

}  // namespace stasis
