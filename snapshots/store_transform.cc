#include "snapshots/store_transform.h"

#include <charconv>
#include <string>

#include "snapshots/snapshot_reasons.h"

namespace stasis {

const char* CompressionName(Compression c) { return c == Compression::kZstd ? "zstd" : "none"; }

const char* EncryptionName(Encryption e) { return e == Encryption::kAes256Gcm ? "aes-256-gcm" : "none"; }

std::optional<Compression> CompressionFromName(std::string_view name) {
  if (name == "none") return Compression::kNone;
  if (name == "zstd") return Compression::kZstd;
  return std::nullopt;
}

std::optional<Encryption> EncryptionFromName(std::string_view name) {
  if (name == "none") return Encryption::kNone;
  if (name == "aes-256-gcm") return Encryption::kAes256Gcm;
  return std::nullopt;
}

Result<CompressionSetting> ParseCompressionSetting(std::string_view flag) {
  const auto invalid = [&] {
    return Status(Code::kInvalidArgument,
                  "--snapshot-store-compression is \"" + std::string(flag) + "\": want none, zstd or zstd:LEVEL with LEVEL in [" +
                      std::to_string(kMinZstdLevel) + ", " + std::to_string(kMaxZstdLevel) + "]",
                  snapshot_reason::kStoreConfigInvalid);
  };
  if (flag == "none") return CompressionSetting{};
  if (flag == "zstd") return CompressionSetting{Compression::kZstd, kDefaultZstdLevel};
  constexpr std::string_view kZstdPrefix = "zstd:";
  if (flag.substr(0, kZstdPrefix.size()) != kZstdPrefix) return invalid();
  const std::string_view digits = flag.substr(kZstdPrefix.size());
  int level = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), level);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || level < kMinZstdLevel ||
      level > kMaxZstdLevel) {
    return invalid();
  }
  return CompressionSetting{Compression::kZstd, level};
}

}  // namespace stasis
