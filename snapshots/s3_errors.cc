#include "snapshots/s3_errors.h"

#include <array>

#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

constexpr long kTooManyRequests = 429;

// S3 Codes that mean "the store is busy or hiccuped", whatever the status they came with.
constexpr std::array<std::string_view, 5> kRetryableCodes = {
    "SlowDown", "InternalError", "ServiceUnavailable", "RequestTimeout", "RequestTimeTooSkewed"};
constexpr std::array<std::string_view, 6> kAuthCodes = {
    "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied",
    "InvalidToken",       "ExpiredToken",          "AuthorizationHeaderMalformed"};
constexpr std::array<std::string_view, 2> kMissingObjectCodes = {"NoSuchKey", "NoSuchUpload"};

template <size_t N>
bool OneOf(std::string_view code, const std::array<std::string_view, N>& codes) {
  for (std::string_view c : codes) {
    if (c == code) return true;
  }
  return false;
}

struct Classified {
  Code code;
  const char* reason;
};

Classified Classify(const S3Outcome& o) {
  if (o.transport_error) return {Code::kUnavailable, snapshot_reason::kStoreUnreachable};
  if (IsRetryable(o)) return {Code::kUnavailable, snapshot_reason::kStoreUnavailable};
  if (o.s3_code == "NoSuchBucket") {
    return {Code::kFailedPrecondition, snapshot_reason::kStoreBucketMissing};
  }
  if (OneOf(o.s3_code, kMissingObjectCodes)) {
    return {Code::kNotFound, snapshot_reason::kStoreObjectMissing};
  }
  if (OneOf(o.s3_code, kAuthCodes) || o.http_status == 403) {
    return {Code::kPermissionDenied, snapshot_reason::kStoreAuthFailed};
  }
  if (o.http_status == 401) return {Code::kUnauthenticated, snapshot_reason::kStoreAuthFailed};
  // A body-less 404 (HEAD): the object is missing as far as the caller can tell.
  if (o.http_status == 404) return {Code::kNotFound, snapshot_reason::kStoreObjectMissing};
  return {Code::kFailedPrecondition, snapshot_reason::kStoreRequestRejected};
}

}  // namespace

bool IsRetryable(const S3Outcome& o) {
  if (o.transport_error) return true;
  if (o.http_status >= 500 || o.http_status == kTooManyRequests) return true;
  return OneOf(o.s3_code, kRetryableCodes);
}

Status S3FailureStatus(const S3Outcome& o, std::string_view op, std::string_view target) {
  Classified c = Classify(o);
  std::string message = std::string(op) + " " + std::string(target) + ": ";
  if (o.transport_error) {
    message += "no answer from the object store: " + o.transport_message;
  } else {
    message += "HTTP " + std::to_string(o.http_status);
    if (!o.s3_code.empty()) message += " " + o.s3_code;
    if (!o.s3_message.empty()) message += ": " + o.s3_message;
  }
  return Status(c.code, std::move(message), c.reason);
}

}  // namespace stasis
