// Standard base64 (RFC 4648, with padding) by OpenSSL's EVP_EncodeBlock/EVP_DecodeBlock:
// Kubernetes Secrets' data, kubeconfig's *-data fields, registry credentials.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace stasis {

// The decoded bytes, or nullopt when `text` is not base64. Line breaks and spaces (PEM-style
// wrapping) are ignored.
std::optional<std::string> DecodeBase64(std::string_view text);
// `bytes` encoded, padded, on one line.
std::string EncodeBase64(std::string_view bytes);

}  // namespace stasis
