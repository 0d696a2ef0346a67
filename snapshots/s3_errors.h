// What an S3 request's outcome means for its caller: one pure mapping from (transport error,
// HTTP status, S3 error Code) to a Status with a code and a reason (snapshot_reasons.h), and
// the one decision whether the same request may be sent again. Unit-tested without a server.
//
// Retryable: no answer at all (refused, reset, timed out), 5xx, 429, and the S3 codes that say
// "slow down" or "try again". Never retryable: every other 4xx — wrong credentials, a missing
// bucket or key, a malformed request — since sending it again gives the same answer.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace stasis {

struct S3Outcome {
  bool transport_error = false;  // no HTTP answer (libcurl failed before a status line)
  std::string transport_message;  // libcurl's error text, when transport_error
  long http_status = 0;
  std::string s3_code;     // <Error><Code> of the body, "" when there was none
  std::string s3_message;  // <Error><Message>
};

bool IsRetryable(const S3Outcome& outcome);

// The Status for a failed request: "<op> s3://bucket/key: HTTP 404 NoSuchKey: The specified key
// does not exist." with a code and reason. `op` and `target` name the request (never a secret).
Status S3FailureStatus(const S3Outcome& outcome, std::string_view op, std::string_view target);

}  // namespace stasis
