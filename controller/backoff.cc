#include "controller/backoff.h"

#include <algorithm>
#include <cmath>

namespace stasis {

std::chrono::nanoseconds BackoffDelay(const BackoffPolicy& p, int attempt, double unit) {
  // In double: factor^attempt overflows any integer type long before the cap stops mattering.
  const double cap = static_cast<double>(p.cap.count());
  double delay = static_cast<double>(p.initial.count()) * std::pow(p.factor, std::max(attempt, 0));
  delay = std::min(delay, cap);
  delay *= 1.0 + p.jitter * std::clamp(unit, 0.0, 1.0);
  return std::chrono::nanoseconds(static_cast<std::chrono::nanoseconds::rep>(delay));
}

std::chrono::nanoseconds Backoff::Next() {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  return BackoffDelay(policy_, attempts_++, unit(rng_));
}

}  // namespace stasis
