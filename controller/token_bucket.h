// A token bucket: `rate` tokens a second, holding at most `burst`. Pure arithmetic on the times
// it is given; the callers own the clock and the waiting. The client's qps/burst limiter and
// the event recorder's spam filter are both this.
#pragma once

#include <chrono>

#include "base/clock.h"

namespace stasis {

class TokenBucket {
 public:
  using Duration = Clock::TimePoint::duration;
  // Starts full at `now`.
  TokenBucket(double rate, double burst, Clock::TimePoint now)
      : rate_(rate), burst_(burst), tokens_(burst), last_(now) {}

  // Takes a token if one is there at `now`.
  bool TryTake(Clock::TimePoint now);
  // Takes a token now, borrowing from the future when none is there (golang.org/x/time/rate's
  // Reserve, which client-go's limiter waits on): returns how long the caller must wait before
  // using it. Callers that reserve together are spaced 1/rate apart.
  Duration Reserve(Clock::TimePoint now);
  // Whether the bucket is full at `now` (forgetting it loses nothing).
  bool Full(Clock::TimePoint now) const { return TokensAt(now) >= burst_; }

 private:
  double TokensAt(Clock::TimePoint now) const;
  void Refill(Clock::TimePoint now);

  double rate_, burst_, tokens_;
  Clock::TimePoint last_;
};

}  // namespace stasis
