// One HTTP exchange with an S3-compatible store, signed with AWS Signature V4 by libcurl
// (CURLOPT_AWS_SIGV4; no signing code of ours). This is the only file pair that knows libcurl;
// s3_client.h builds requests and decides on retries above it.
//
// Invariants: every exchange has deadlines (connect timeout, a low-speed limit, an optional
// total timeout), so a dead or stalled store is an error, never a hang. The secret key is
// handed to libcurl and never logged. A 2xx body goes where the request says (memory, or a
// file descriptor at an offset); a non-2xx body is always kept in memory, for its <Error>.
// Thread-safe: each exchange takes an idle libcurl handle from a small pool (keeping its
// connection alive for the next one), so parts may be sent from several threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "snapshots/s3_errors.h"
#include "snapshots/s3_location.h"

namespace stasis {

struct S3Deadlines {
  std::chrono::milliseconds connect{5000};
  // A transfer slower than low_speed_bytes per second for low_speed_time is abandoned.
  long low_speed_bytes = 1024;
  std::chrono::seconds low_speed_time{15};
  std::chrono::milliseconds total{0};  // 0: no bound on a transfer that keeps moving
};

struct S3HttpRequest {
  std::string method;                // GET PUT POST DELETE HEAD
  std::string url;                   // canonical (s3_url.h)
  std::vector<std::string> headers;  // "Name: value"
  // The body: `body` in memory, or `body_length` bytes of `body_fd` from `body_offset`.
  std::string_view body;
  int body_fd = -1;
  uint64_t body_offset = 0;
  uint64_t body_length = 0;
  // Where a 2xx body goes: memory (-1), or `sink_fd` from `sink_offset` (pwrite).
  int sink_fd = -1;
  uint64_t sink_offset = 0;
  // When set, a 2xx of another status is not written to the sink (the exchange stops, with
  // `sink_refused`): a 200 with a whole object where a 206 with a range was asked for.
  long sink_status = 0;
};

inline S3HttpRequest MakeS3Request(std::string method, std::string url,
                                   std::string_view body = {}) {
  S3HttpRequest request;
  request.method = std::move(method);
  request.url = std::move(url);
  request.body = body;
  return request;
}

struct S3HttpResponse {
  S3Outcome outcome;        // transport error or status; s3_code filled by the caller
  std::string body;         // a non-2xx body, or a 2xx body when there was no sink
  uint64_t sink_bytes = 0;  // bytes written to sink_fd
  std::string etag;         // the ETag header, quotes included
  uint64_t content_length = 0;
  // Reading the body from body_fd or writing it to sink_fd failed here, not at the store
  // (what failed in outcome.transport_message): not a store fault, and not retried.
  bool local_failed = false;
  bool sink_refused = false;  // the status was not the request's sink_status
};

class S3Http {
 public:
  S3Http(S3Endpoint endpoint, S3Deadlines deadlines);
  ~S3Http();
  S3Http(const S3Http&) = delete;
  S3Http& operator=(const S3Http&) = delete;

  S3HttpResponse Perform(const S3HttpRequest& request);

 private:
  struct Pool;
  S3Endpoint endpoint_;
  S3Deadlines deadlines_;
  std::string sigv4_;  // "aws:amz:<region>:s3"
  std::unique_ptr<Pool> pool_;
};

}  // namespace stasis
