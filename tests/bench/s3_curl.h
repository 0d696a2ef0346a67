// The peer the object-store benchmarks measure stasis against: curl's own SigV4 client. One
// definition, so that every benchmark's peer is the same program with the same flags.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "snapshots/s3_location.h"

namespace stasis::bench {

// Sent with every upload: curl then signs the request without hashing the body first (S3's
// UNSIGNED-PAYLOAD), its fastest way to put a file; TLS or the loopback protects the bytes.
inline constexpr char kUnsignedPayloadHeader[] = "x-amz-content-sha256: UNSIGNED-PAYLOAD";

// Runs `curl -sS -f --aws-sigv4 … ARGS` against `e` (a 600 s transfer limit); the failure's
// stderr in the Status.
[[nodiscard]] Status CurlSigV4(const S3Endpoint& e, const std::vector<std::string>& args);

}  // namespace stasis::bench
