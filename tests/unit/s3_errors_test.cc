// How an S3 request's outcome is classified (retryable or not; code and reason), the retry
// backoff sequence (exact, with the random source fixed), and the canonical URLs libcurl signs.
#include "snapshots/s3_errors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "snapshots/s3_retry.h"
#include "snapshots/s3_url.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

S3Outcome Http(long status, std::string code = "") {
  S3Outcome o;
  o.http_status = status;
  o.s3_code = std::move(code);
  return o;
}

TEST(S3Errors, RetriesWhatMayPassAndNothingElse) {
  S3Outcome refused;
  refused.transport_error = true;
  refused.transport_message = "Failed to connect to 127.0.0.1 port 1: Connection refused";
  EXPECT_TRUE(IsRetryable(refused));
  for (long status : {500L, 502L, 503L, 504L, 429L}) {
    EXPECT_TRUE(IsRetryable(Http(status))) << status;
  }
  EXPECT_TRUE(IsRetryable(Http(503, "SlowDown")));
  EXPECT_TRUE(IsRetryable(Http(400, "RequestTimeout")));
  for (long status : {400L, 401L, 403L, 404L, 409L, 412L, 416L}) {
    EXPECT_FALSE(IsRetryable(Http(status))) << status;
  }
  EXPECT_FALSE(IsRetryable(Http(403, "SignatureDoesNotMatch")));
  EXPECT_FALSE(IsRetryable(Http(404, "NoSuchBucket")));
}

TEST(S3Errors, MapsEachFailureToACodeAndReason) {
  struct Case {
    S3Outcome outcome;
    Code code;
    const char* reason;
  };
  S3Outcome refused;
  refused.transport_error = true;
  namespace r = snapshot_reason;
  const std::vector<Case> cases = {
      {refused, Code::kUnavailable, r::kStoreUnreachable},
      {Http(503, "SlowDown"), Code::kUnavailable, r::kStoreUnavailable},
      {Http(500), Code::kUnavailable, r::kStoreUnavailable},
      {Http(403, "InvalidAccessKeyId"), Code::kPermissionDenied, r::kStoreAuthFailed},
      {Http(403, "SignatureDoesNotMatch"), Code::kPermissionDenied, r::kStoreAuthFailed},
      {Http(403), Code::kPermissionDenied, r::kStoreAuthFailed},
      {Http(401), Code::kUnauthenticated, r::kStoreAuthFailed},
      {Http(404, "NoSuchBucket"), Code::kFailedPrecondition, r::kStoreBucketMissing},
      {Http(404, "NoSuchKey"), Code::kNotFound, r::kStoreObjectMissing},
      {Http(404, "NoSuchUpload"), Code::kNotFound, r::kStoreObjectMissing},
      {Http(404), Code::kNotFound, r::kStoreObjectMissing},
      {Http(400, "InvalidPart"), Code::kFailedPrecondition, r::kStoreRequestRejected},
  };
  for (const Case& c : cases) {
    Status s = S3FailureStatus(c.outcome, "get", "s3://b/k");
    EXPECT_EQ(s.code(), c.code) << c.outcome.http_status << " " << c.outcome.s3_code;
    EXPECT_EQ(s.reason(), c.reason) << c.outcome.http_status << " " << c.outcome.s3_code;
  }
}

TEST(S3Errors, SaysWhatFailedWithTheS3Code) {
  S3Outcome o = Http(404, "NoSuchKey");
  o.s3_message = "The specified key does not exist.";
  EXPECT_EQ(S3FailureStatus(o, "get", "s3://b/k").message(),
            "get s3://b/k: HTTP 404 NoSuchKey: The specified key does not exist.");
  S3Outcome refused;
  refused.transport_error = true;
  refused.transport_message = "Connection refused";
  EXPECT_THAT(S3FailureStatus(refused, "put", "s3://b/k").message(),
              HasSubstr("put s3://b/k: no answer from the object store: Connection refused"));
}

TEST(S3Retry, BacksOffExponentiallyWithinHalfToFullCeiling) {
  S3RetryPolicy p;
  p.initial = 200ms;
  p.max_delay = 1000ms;
  p.multiplier = 2;
  EXPECT_EQ(S3BackoffDelay(p, 1, 0.0), 100ms);
  EXPECT_EQ(S3BackoffDelay(p, 1, 0.5), 150ms);
  EXPECT_EQ(S3BackoffDelay(p, 2, 0.0), 200ms);
  EXPECT_EQ(S3BackoffDelay(p, 3, 0.999), 799ms);
  EXPECT_EQ(S3BackoffDelay(p, 4, 0.0), 500ms);   // capped at max_delay
  EXPECT_EQ(S3BackoffDelay(p, 30, 1.0), 1000ms);
}

TEST(S3Url, BuildsCanonicalPathStyleUrls) {
  EXPECT_EQ(S3UriEncode("a b/c~d_e.f-g+h=", true), "a%20b/c~d_e.f-g%2Bh%3D");
  EXPECT_EQ(S3UriEncode("a/b", false), "a%2Fb");
  EXPECT_EQ(S3UriEncode("\xc3\xa9", true), "%C3%A9");
  EXPECT_EQ(S3Url("http://h:1", "b", "ns/a b"), "http://h:1/b/ns/a%20b");
  // Sorted by name, every value written (also an empty one): libcurl signs the query as given.
  EXPECT_EQ(S3Url("http://h:1", "b", "", {{"prefix", "p/"}, {"list-type", "2"}, {"uploads", ""}}),
            "http://h:1/b?list-type=2&prefix=p%2F&uploads=");
}

}  // namespace
}  // namespace stasis
