// An incremental SHA-256 (OpenSSL EVP: SHA-NI or AVX2 where the CPU has them) that counts the
// bytes it was given: snapshots' file and chunk digests, images' blob digests and diff IDs.
#pragma once

#include <openssl/evp.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace stasis {

// Lowercase hex of `len` bytes.
std::string HexBytes(const unsigned char* bytes, unsigned int len);
// The bytes of an even-length hex string (either case); nullopt when it is not one.
std::optional<std::string> HexDecode(std::string_view hex);

class Sha256 {
 public:
  Sha256();
  // kInternal io_error when OpenSSL could not set up the digest.
  [[nodiscard]] Status status() const;
  void Update(const void* data, size_t n);
  // The lowercase hex digest of everything given; the object is spent.
  std::string FinishHex();
  int64_t size() const { return size_; }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
  bool ok_ = false;
  int64_t size_ = 0;
};

// The hex sha256 of `text`.
std::string Sha256Hex(const std::string& text);

}  // namespace stasis
