#include "controller/token_bucket.h"

#include <algorithm>

namespace stasis {

double TokenBucket::TokensAt(Clock::TimePoint now) const {
  if (now <= last_) return tokens_;
  return std::min(burst_, tokens_ + std::chrono::duration<double>(now - last_).count() * rate_);
}

void TokenBucket::Refill(Clock::TimePoint now) {
  tokens_ = TokensAt(now);
  last_ = std::max(last_, now);
}

bool TokenBucket::TryTake(Clock::TimePoint now) {
  Refill(now);
  if (tokens_ < 1) return false;
  tokens_ -= 1;
  return true;
}

TokenBucket::Duration TokenBucket::Reserve(Clock::TimePoint now) {
  Refill(now);
  tokens_ -= 1;  // may go negative: the debt later reservations wait behind
  if (tokens_ >= 0) return Duration::zero();
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(-tokens_ / rate_));
}

}  // namespace stasis
