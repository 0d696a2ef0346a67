#include "reconcilers/cluster/lease_expiry.h"

#include <algorithm>
#include <climits>

namespace stasis {

using json = nlohmann::json;

std::string LeaseRenewal(const json& lease) {
  const json spec = lease.value("spec", json::object());
  const json holder = spec.value("holderIdentity", json());
  const json renew = spec.value("renewTime", json());
  return (holder.is_string() ? holder.get<std::string>() : "") + "\n" +
         (renew.is_string() ? renew.get<std::string>() : "");
}

std::chrono::seconds LeaseDuration(const json& lease) {
  const json spec = lease.value("spec", json::object());
  const json d = spec.value("leaseDurationSeconds", json());
  return std::chrono::seconds(d.is_number_integer() ? d.get<int64_t>() : 40);
}

int64_t LeaseResourceVersion(const json& lease) {
  const json meta = lease.value("metadata", json::object());
  const json rv = meta.value("resourceVersion", json());
  if (!rv.is_string()) return 0;
  int64_t n = 0;
  for (char ch : rv.get<std::string>()) {
    if (ch < '0' || ch > '9' || n > (INT64_MAX - 9) / 10) return 0;
    n = n * 10 + (ch - '0');
  }
  return n;
}

LeaseRecord ObserveLease(const std::optional<LeaseRecord>& previous, const std::string& renewal,
                         int64_t rv, std::chrono::seconds duration, Clock::TimePoint now) {
  // etcd's revisions order the copies of one object; where they are not numbers nothing is
  // ordered and any different renewal counts.
  if (previous && rv > 0 && previous->resource_version > 0 && rv < previous->resource_version) {
    return *previous;
  }
  if (previous && previous->renewal == renewal) {
    LeaseRecord kept = *previous;
    kept.duration = duration;  // a changed duration alone is no renewal, but it applies
    kept.resource_version = std::max(kept.resource_version, rv);
    return kept;
  }
  return LeaseRecord{renewal, now, duration, rv};
}

bool LeaseExpired(const LeaseRecord& record, Clock::TimePoint now) {
  return now - record.observed_at > record.duration;
}

std::pair<bool, std::chrono::seconds> LeaseTracker::Observe(const std::string& key, const json& lease) {
  const Clock::TimePoint now = clock_.Now();
  std::lock_guard lock(mu_);
  std::optional<LeaseRecord> previous;
  if (auto it = records_.find(key); it != records_.end()) previous = it->second;
  LeaseRecord record =
      ObserveLease(previous, LeaseRenewal(lease), LeaseResourceVersion(lease), LeaseDuration(lease), now);
  records_[key] = record;
  return {!LeaseExpired(record, now), record.duration};
}

void LeaseTracker::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  records_.erase(key);
}

}  // namespace stasis
