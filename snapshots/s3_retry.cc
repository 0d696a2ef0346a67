#include "snapshots/s3_retry.h"

#include <algorithm>
#include <cmath>

namespace stasis {

std::chrono::milliseconds S3BackoffDelay(const S3RetryPolicy& policy, int attempt,
                                         double random01) {
  double ceiling = static_cast<double>(policy.initial.count()) *
                   std::pow(policy.multiplier, std::max(0, attempt - 1));
  ceiling = std::min(ceiling, static_cast<double>(policy.max_delay.count()));
  double r = std::clamp(random01, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<long long>(ceiling / 2 + ceiling / 2 * r));
}

}  // namespace stasis
