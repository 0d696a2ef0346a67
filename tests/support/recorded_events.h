// An EventRecorder that keeps what it is given, for tests that assert on the Events a
// reconciler records without a round trip to the API server.
#pragma once

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "controller/event_recorder.h"

namespace stasis::testing {

class RecordedEvents : public EventRecorder {
 public:
  using EventRecorder::Event;
  void Event(const ObjectReference&, EventType type, const std::string& reason,
             const std::string& message) override {
    std::lock_guard lock(mu_);
    reasons_.push_back(reason);
    if (type == EventType::kWarning) warnings_.push_back(reason + ": " + message);
  }
  // The Warning Events, as "Reason: message".
  std::vector<std::string> Warnings() {
    std::lock_guard lock(mu_);
    return warnings_;
  }
  // Events of any type with this reason.
  int Count(const std::string& reason) {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count(reasons_.begin(), reasons_.end(), reason));
  }

 private:
  std::mutex mu_;
  std::vector<std::string> reasons_, warnings_;
};

}  // namespace stasis::testing
