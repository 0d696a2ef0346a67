// How an object store's copy of a snapshot is encoded: each chunk optionally compressed
// (zstd) and optionally encrypted (AES-256-GCM), as the node agent's flags choose for what it
// writes and as each snapshot's manifest records for whoever reads it. The names here are the
// manifest's and the flags' spellings, one place for both.
//
// Invariant: a reader decodes by what the snapshot's manifest says, never by its own flags, so
// an agent set to zstd reads an uncompressed snapshot and the other way round.
#pragma once

#include <optional>
#include <string_view>

#include "base/status.h"

namespace stasis {

enum class Compression { kNone, kZstd };
enum class Encryption { kNone, kAes256Gcm };

inline constexpr int kDefaultZstdLevel = 3;
// zstd's levels 20–22 ("ultra") need hundreds of MiB a context for little gain on 8 MiB
// chunks, and negative levels trade most of the ratio away: neither is worth a flag value.
inline constexpr int kMinZstdLevel = 1;
inline constexpr int kMaxZstdLevel = 19;

const char* CompressionName(Compression c);  // "none" | "zstd"
const char* EncryptionName(Encryption e);    // "none" | "aes-256-gcm"
std::optional<Compression> CompressionFromName(std::string_view name);
std::optional<Encryption> EncryptionFromName(std::string_view name);

struct CompressionSetting {
  Compression compression = Compression::kNone;
  int level = 0;  // zstd's level; 0 with kNone
};

// --snapshot-store-compression: "none", "zstd" (level 3) or "zstd:LEVEL" with LEVEL in
// [1, 19]; anything else is kInvalidArgument store_config_invalid saying what is accepted.
Result<CompressionSetting> ParseCompressionSetting(std::string_view flag);

}  // namespace stasis
