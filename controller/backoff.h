// The controller runtime's one backoff: exponential, capped, with jitter — client-go's
// wait.Backoff. The work queue (per-key retries), the informer (reconnects) and the client
// (conflicts, 429 without Retry-After) all draw their delays from it, so that a fleet of
// agents that failed together (an API server restart) does not retry in lockstep.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace stasis {

struct BackoffPolicy {
  std::chrono::nanoseconds initial{std::chrono::milliseconds(5)};
  std::chrono::nanoseconds cap{std::chrono::seconds(1000)};
  double factor = 2.0;
  // Each delay is stretched by a uniform fraction in [0, jitter): 1.0 (the reflector's) spreads
  // retries over up to twice the delay, 0.1 (client-go's DefaultRetry) by up to a tenth.
  double jitter = 0.1;
};

// The delay before retry number `attempt` (0 for the first): min(initial × factor^attempt,
// cap) × (1 + jitter × unit), unit in [0, 1). The jitter applies after the cap, so that capped
// retries are spread too. Pure.
std::chrono::nanoseconds BackoffDelay(const BackoffPolicy& policy, int attempt, double unit);

// One sequence of delays (one key, one connection). Not thread-safe.
class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy, uint64_t seed = std::random_device{}())
      : policy_(policy), rng_(seed) {}

  // The delay before the next attempt; counts the attempt.
  std::chrono::nanoseconds Next();
  void Reset() { attempts_ = 0; }
  int attempts() const { return attempts_; }
  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
  std::mt19937_64 rng_;
  int attempts_ = 0;
};

}  // namespace stasis
