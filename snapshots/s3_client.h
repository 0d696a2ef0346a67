// A client of one bucket of an S3-compatible object store (AWS S3, GCS's XML API, SeaweedFS,
// Ceph RGW…): objects put and got from memory or from/to file descriptors at offsets (byte
// ranges, so a large image moves in parts without a copy), listed by prefix, deleted, and
// uploaded in parts (multipart). Path-style URLs, so a store on 127.0.0.1 works.
//
// Every call returns a Status (or Result) whose code says what the caller can do and whose
// reason (snapshot_reasons.h: store_unreachable, store_auth_failed, store_bucket_missing…)
// says why; the message carries the S3 error Code. A retryable failure (s3_errors.h) is sent
// again, with backoff (s3_retry.h), before it is returned; a call never blocks longer than its
// attempts' deadlines (s3_http.h) and the waits between them. Thread-safe.
//
// The operations live by job: objects in s3_client.cc, multipart uploads in s3_multipart.cc.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "snapshots/s3_http.h"
#include "snapshots/s3_location.h"
#include "snapshots/s3_retry.h"
#include "snapshots/transfer_observer.h"
#include "snapshots/s3_url.h"
#include "snapshots/s3_xml.h"

namespace stasis {

struct S3ClientOptions {
  S3Deadlines deadlines;
  S3RetryPolicy retry;
  // [0, 1) for the backoff's jitter; tests pass their own. Default: a seeded engine.
  std::function<double()> random01;
  // Bytes moved and retries, for metrics; nullptr: none. Not owned; outlives the client.
  TransferObserver* observer = nullptr;
};

struct ByteRange {
  uint64_t offset = 0;
  uint64_t length = 0;  // > 0
};

struct S3ObjectInfo {
  uint64_t size = 0;
  std::string etag;
};

class S3Client {
 public:
  S3Client(S3Endpoint endpoint, std::string bucket, S3ClientOptions options = {});

  const std::string& bucket() const { return bucket_; }
  TransferObserver* observer() const { return options_.observer; }

  [[nodiscard]] Status PutObject(const std::string& key, std::string_view data);
  // `length` bytes of `fd` from `offset`, read as they are sent.
  [[nodiscard]] Status PutObjectFromFile(const std::string& key, int fd, uint64_t offset,
                                         uint64_t length);
  Result<std::string> GetObject(const std::string& key,
                                std::optional<ByteRange> range = std::nullopt);
  // Writes the object (or the range) to `fd` from `fd_offset` (pwrite); returns the bytes written.
  // A range the store does not honour (a 200 with the whole object) is an error, not a write.
  Result<uint64_t> GetObjectToFile(const std::string& key, int fd, uint64_t fd_offset,
                                   std::optional<ByteRange> range = std::nullopt);
  Result<S3ObjectInfo> HeadObject(const std::string& key);
  // Deleting a key that is not there succeeds (S3's semantics).
  [[nodiscard]] Status DeleteObject(const std::string& key);
  // One page (at most `max_keys`, S3 caps it at 1000); pass the page's next_continuation_token
  // for the next.
  Result<ListObjectsPage> ListObjectsV2(const std::string& prefix,
                                        const std::string& continuation_token = "",
                                        int max_keys = 1000);
  // Every object under `prefix`, page after page.
  Result<std::vector<S3Object>> ListAllObjects(const std::string& prefix);

  // Multipart uploads (s3_multipart.cc). Parts are numbered from 1; every part but the last
  // must be at least 5 MiB on AWS.
  Result<std::string> CreateMultipartUpload(const std::string& key);
  // The part's ETag, for CompleteMultipartUpload.
  Result<std::string> UploadPart(const std::string& key, const std::string& upload_id,
                                 int part_number, std::string_view data);
  Result<std::string> UploadPartFromFile(const std::string& key, const std::string& upload_id,
                                         int part_number, int fd, uint64_t offset,
                                         uint64_t length);
  [[nodiscard]] Status CompleteMultipartUpload(const std::string& key,
                                               const std::string& upload_id,
                                               const std::vector<CompletedPart>& parts);
  [[nodiscard]] Status AbortMultipartUpload(const std::string& key, const std::string& upload_id);
  // One page of the uploads begun and neither completed nor aborted, under `prefix`.
  Result<ListUploadsPage> ListMultipartUploads(const std::string& prefix,
                                               const std::string& key_marker = "",
                                               const std::string& upload_id_marker = "");

 private:
  // Sends `request` until it succeeds, fails for good, or the retry policy is spent. `op`
  // names the operation in messages and logs.
  Result<S3HttpResponse> Send(std::string_view op, const std::string& key,
                              const S3HttpRequest& request);
  // Tells the observer what a successful object or part put, or object get, carried.
  void CountBytes(std::string_view op, const S3HttpRequest& request, const S3HttpResponse& response) const;
  std::string Url(const std::string& key, const S3Query& query = {}) const;
  std::string Target(const std::string& key) const;  // "s3://bucket/key", for messages

  std::string endpoint_url_;
  std::string bucket_;
  S3ClientOptions options_;
  S3Http http_;
};

}  // namespace stasis
