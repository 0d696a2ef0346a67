// How often and how patiently an S3 request is sent again after a retryable failure
// (s3_errors.h): exponential backoff with "equal jitter" (half the wait fixed, half random),
// bounded by an attempt count and by a total time. A pure function of (policy, attempt, a
// random number), so the sequence is asserted exactly in unit tests. (controller/backoff.h is
// the controller layer's per-key backoff; snapshots/ cannot include it, and a per-request
// backoff needs no key state.)
#pragma once

#include <chrono>

namespace stasis {

struct S3RetryPolicy {
  int max_attempts = 5;                        // 1 = no retry
  std::chrono::milliseconds initial{200};      // the ceiling of the first wait
  std::chrono::milliseconds max_delay{5000};   // no wait is longer
  double multiplier = 2.0;
  // No new attempt starts after this much time since the first one began.
  std::chrono::milliseconds max_elapsed{60000};
};

// The wait before attempt `attempt + 1`, after `attempt` (1-based) failed: a uniformly random
// point (`random01` in [0, 1)) of [ceiling/2, ceiling], ceiling = min(max_delay,
// initial * multiplier^(attempt-1)). Half the ceiling is kept so retries never bunch at zero.
std::chrono::milliseconds S3BackoffDelay(const S3RetryPolicy& policy, int attempt,
                                         double random01);

}  // namespace stasis
