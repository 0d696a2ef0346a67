// The client's pacing, in pure arithmetic: the one backoff (exponential, capped, jittered),
// the qps/burst token bucket, and the delay before resending a request refused for load.
#include <gtest/gtest.h>

#include <set>

#include "controller/backoff.h"
#include "controller/kube_client.h"
#include "controller/token_bucket.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;

TEST(BackoffTest, DoublesUpToTheCapThenJittersWithinItsFraction) {
  const BackoffPolicy p{800ms, 30s, 2.0, 1.0};
  EXPECT_EQ(BackoffDelay(p, 0, 0.0), 800ms);
  EXPECT_EQ(BackoffDelay(p, 3, 0.0), 6400ms);
  EXPECT_EQ(BackoffDelay(p, 5, 0.0), 25600ms);
  EXPECT_EQ(BackoffDelay(p, 6, 0.0), 30s);     // capped
  EXPECT_EQ(BackoffDelay(p, 5000, 0.0), 30s);  // no overflow
  EXPECT_EQ(BackoffDelay(p, 0, 0.5), 1200ms);  // jitter 1.0: up to twice the delay
  EXPECT_EQ(BackoffDelay(p, 6, 0.5), 45s);     // and after the cap: capped retries spread too
}

// What an API server restart looks like to a fleet: every agent's informer fails at once.
// With the same policy, different agents (seeds) must not come back at the same instants.
TEST(BackoffTest, AgentsThatFailedTogetherDoNotRetryTogether) {
  const BackoffPolicy p{800ms, 30s, 2.0, 1.0};
  std::set<std::chrono::nanoseconds::rep> first_retry;
  for (uint64_t agent = 0; agent < 50; ++agent) {
    Backoff b(p, agent);
    auto d = b.Next();
    EXPECT_GE(d, 800ms);
    EXPECT_LT(d, 1600ms);
    first_retry.insert(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
  }
  EXPECT_GE(first_retry.size(), 45u) << "agents retried in lockstep";
  Backoff b(p, 7);
  for (int i = 0; i < 3; ++i) (void)b.Next();
  EXPECT_EQ(b.attempts(), 3);
  b.Reset();
  EXPECT_LT(b.Next(), 1600ms);
}

TEST(TokenBucketTest, BurstThenOneRequestPerInterval) {
  const Clock::TimePoint t0{};
  TokenBucket bucket(5, 2, t0);  // 5 qps, burst 2
  EXPECT_EQ(bucket.Reserve(t0), 0ns);
  EXPECT_EQ(bucket.Reserve(t0), 0ns);
  // Reservations beyond the burst queue up 200 ms apart.
  EXPECT_EQ(bucket.Reserve(t0), 200ms);
  EXPECT_EQ(bucket.Reserve(t0), 400ms);
  // Time pays the debt back: 1 s later, 5 tokens came, 2 were owed.
  EXPECT_EQ(bucket.Reserve(t0 + 1s), 0ns);
  EXPECT_EQ(bucket.Reserve(t0 + 1s), 0ns);
  EXPECT_EQ(bucket.Reserve(t0 + 1s), 200ms);  // the burst is a ceiling, not a savings account
  EXPECT_FALSE(bucket.Full(t0 + 1s));
  EXPECT_TRUE(bucket.Full(t0 + 2s));
}

TEST(TokenBucketTest, TryTakeNeverBorrows) {
  const Clock::TimePoint t0{};
  TokenBucket bucket(1, 1, t0);
  EXPECT_TRUE(bucket.TryTake(t0));
  EXPECT_FALSE(bucket.TryTake(t0));
  EXPECT_FALSE(bucket.TryTake(t0 + 500ms));
  EXPECT_TRUE(bucket.TryTake(t0 + 1s));
}

TEST(RetryDelayTest, RefusalsForLoadWaitTheServersRetryAfter) {
  EXPECT_EQ(RetryDelay(429, "3", 1s, 60s), std::optional<std::chrono::nanoseconds>(3s));
  EXPECT_EQ(RetryDelay(429, "", 1500ms, 60s), std::optional<std::chrono::nanoseconds>(1500ms));
  EXPECT_EQ(RetryDelay(503, "2", 1s, 60s), std::optional<std::chrono::nanoseconds>(2s));
  EXPECT_EQ(RetryDelay(429, "86400", 1s, 60s), std::optional<std::chrono::nanoseconds>(60s));
  // A date is not guessed at: a 429 falls back to the backoff, a 5xx is not retried.
  EXPECT_EQ(RetryDelay(429, "Wed, 21 Oct 2026 07:28:00 GMT", 1s, 60s),
            std::optional<std::chrono::nanoseconds>(1s));
  EXPECT_EQ(RetryDelay(503, "Wed, 21 Oct 2026 07:28:00 GMT", 1s, 60s), std::nullopt);
  // Not refusals for load.
  EXPECT_EQ(RetryDelay(500, "", 1s, 60s), std::nullopt);
  EXPECT_EQ(RetryDelay(409, "1", 1s, 60s), std::nullopt);
  EXPECT_EQ(RetryDelay(200, "", 1s, 60s), std::nullopt);
}

}  // namespace
}  // namespace stasis
