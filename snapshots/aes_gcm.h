// AES-256-GCM (OpenSSL's EVP) for the object store's encrypted objects: a sealed object is
// nonce (12 random bytes, fresh for each object) ‖ ciphertext ‖ tag (16 bytes). The associated
// data (AAD) is not stored; the reader supplies the AAD it expects, so an object moved to
// another place (whose AAD differs) fails authentication exactly as a modified one does.
//
// Random 96-bit nonces are safe for up to 2^32 objects under one key (NIST SP 800-38D): at
// 8 MiB a chunk, 32 PiB of snapshots before the key must be rotated.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"
#include "snapshots/encryption_key.h"

namespace stasis {

inline constexpr size_t kGcmNonceBytes = 12;
inline constexpr size_t kGcmTagBytes = 16;
inline constexpr size_t kGcmOverheadBytes = kGcmNonceBytes + kGcmTagBytes;

// `plain` sealed under `key` and `aad` into `out` (replaced). kInternal io_error only when
// OpenSSL fails (no randomness, an allocation).
[[nodiscard]] Status GcmSeal(const EncryptionKey& key, std::string_view aad, std::string_view plain, std::string& out);

// The plaintext of `sealed` into `out` (replaced). kFailedPrecondition snapshot_corrupt when it
// is too short to be sealed or its tag does not match: modified, truncated, moved to another
// place (another AAD) or sealed under another key — GCM cannot tell these apart, the message
// names them all.
[[nodiscard]] Status GcmOpen(const EncryptionKey& key, std::string_view aad, std::string_view sealed, std::string& out);

}  // namespace stasis
