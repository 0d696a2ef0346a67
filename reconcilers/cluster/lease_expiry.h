// Whether a node's heartbeat Lease has expired, judged the way client-go's leader election
// judges its Lease: by when this controller last *observed* the Lease change (holder or
// renewTime), on its own monotonic clock, never by comparing the node-written renewTime with
// this controller's wall clock. A node whose clock is minutes off but that renews stays alive;
// a node that stops renewing is lost leaseDurationSeconds after the last change seen. A Lease
// seen for the first time (a controller just started) starts its timer then: it is not lost
// at once, however old its renewTime.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/clock.h"

namespace stasis {

// What this controller knows of one Lease: what it last saw and when it first saw that.
struct LeaseRecord {
  std::string renewal;  // holderIdentity and renewTime as written by the node
  Clock::TimePoint observed_at{};
  std::chrono::seconds duration{40};
  // The newest metadata.resourceVersion seen (0: none, or not a number). A copy older than it
  // (a lagging cache after a quorum read) is not a renewal.
  int64_t resource_version = 0;
};

// The renewal a Lease carries (what must change for it to count as renewed).
std::string LeaseRenewal(const nlohmann::json& lease);
std::chrono::seconds LeaseDuration(const nlohmann::json& lease);
// metadata.resourceVersion as a number; 0 when absent or not one (then copies are not ordered).
int64_t LeaseResourceVersion(const nlohmann::json& lease);
// The record after seeing `renewal` (at resourceVersion `rv`) at `now`: the previous one kept
// when nothing changed or the copy is older than one already seen, a new observation time
// when it changed or when there was none.
LeaseRecord ObserveLease(const std::optional<LeaseRecord>& previous, const std::string& renewal,
                         int64_t rv, std::chrono::seconds duration, Clock::TimePoint now);
// Lost: no change observed for longer than the Lease's duration.
bool LeaseExpired(const LeaseRecord& record, Clock::TimePoint now);

// The records of every node's Lease, fed by the Lease informer's events and by quorum reads.
// Thread-safe.
class LeaseTracker {
 public:
  explicit LeaseTracker(Clock& clock) : clock_(clock) {}
  // Records what `lease` shows now and returns whether it is unexpired, and its duration.
  std::pair<bool, std::chrono::seconds> Observe(const std::string& key, const nlohmann::json& lease);
  void Forget(const std::string& key);

 private:
  Clock& clock_;
  std::mutex mu_;
  std::map<std::string, LeaseRecord> records_;
};

}  // namespace stasis
