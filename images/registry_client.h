// A client of the OCI distribution API (pull only), over libcurl:
//  - GET /v2/<repo>/manifests/<tag|digest> with every manifest type accepted; the body's
//    sha256 is its digest (Docker-Content-Digest is only compared, never trusted);
//  - GET /v2/<repo>/blobs/<digest> streamed to a file, hashed as it streams, resumed with a
//    Range request from the bytes already on disk after a broken transfer, refused when the
//    size or the digest differs (the partial file is removed then);
//  - authentication on a 401: Basic with the credentials given, or the token protocol (GET the
//    realm with Basic credentials or anonymously, then Bearer) — tokens cached per scope;
//  - TLS verified against the system store plus an optional CA file; plain HTTP only for a
//    registry the operator lists as insecure (a test registry on loopback).
// Every request has a connect timeout and a low-speed limit (a stalled transfer fails rather
// than hangs) and an overall deadline.
//
// Errors (reason → meaning):
//   "image_not_found"   kNotFound           404 for a manifest (MANIFEST_UNKNOWN, NAME_UNKNOWN)
//                                           or a blob (BLOB_UNKNOWN)
//   "unauthorized"      kUnauthenticated    401/403 after authenticating (or no credentials)
//   "digest_mismatch"   kFailedPrecondition content differs from its digest or size
//   "registry_unavailable" kUnavailable     connect/TLS/5xx/transfer errors, timeouts: retry
//   "bad_manifest"      kInvalidArgument    the manifest cannot be used
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "images/image_reasons.h"
#include "images/image_reference.h"
#include "images/registry_credentials.h"

namespace stasis::images {


struct RegistryClientOptions {
  std::string ca_file;                      // extra CA bundle (PEM), beside the system store
  // The system store that ca_file is added to (Debian's bundle; tests name another).
  std::string system_ca_file = "/etc/ssl/certs/ca-certificates.crt";
  std::vector<std::string> insecure_hosts;  // host[:port] reached over plain HTTP
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // A transfer slower than low_speed_bytes per second for low_speed_time fails (and resumes).
  int64_t low_speed_bytes = 1024;
  std::chrono::seconds low_speed_time{30};
  std::chrono::milliseconds request_deadline{std::chrono::minutes(30)};
  int max_resumes = 5;  // broken blob transfers resumed from their partial bytes
};

struct FetchedManifest {
  std::string media_type;  // Content-Type, or the body's mediaType
  std::string digest;      // sha256 of the body
  std::string body;
};

// Bytes as they arrive (for metrics and tests); called from the transfer's thread. The count
// is of bytes fetched from the network by this FetchBlob call (resumes included), not of bytes
// a partial file already held: a resumed transfer reports only what it added.
using ProgressFn = std::function<void(int64_t bytes_so_far)>;

class RegistryClient {
 public:
  explicit RegistryClient(RegistryClientOptions options);
  ~RegistryClient();
  RegistryClient(const RegistryClient&) = delete;
  RegistryClient& operator=(const RegistryClient&) = delete;

  // `reference_or_digest` is a tag or "sha256:…"; when it is a digest the body must hash to it.
  // Anything else is kInvalidArgument "invalid_image_reference" (no request made).
  [[nodiscard]] Result<FetchedManifest> GetManifest(const ImageReference& image,
                                                    const std::string& reference_or_digest,
                                                    const std::optional<BasicCredentials>& credentials);

  // Streams the blob into `path` (appending to a partial file already there, with a Range
  // request). On success the file holds exactly `size` bytes hashing to `digest`; on a digest
  // or size mismatch the file is removed; on an unavailable registry it is kept for a resume.
  [[nodiscard]] Status FetchBlob(const ImageReference& image, const std::string& digest, int64_t size,
                                 const std::string& path, const std::optional<BasicCredentials>& credentials,
                                 const ProgressFn& progress = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace stasis::images
