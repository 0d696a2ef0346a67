// When is an actor stuck? Pure logic, so that every rule is tested in microseconds with
// hand-made times (STYLE.md): an in-between status (RESUMING, PAUSING, SUSPENDING) that
// outlives transitionStartTime + its timeout + a grace period; or an actor that holds (or is
// moving) a sandbox on a node whose heartbeat Lease has expired.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "api/actor.h"

namespace stasis {

struct StuckVerdict {
  // api::kReasonDeadlineExceeded | api::kReasonNodeLost: the Stuck condition's reason, and
  // (api::MetricReason) the stasis_forced_cleanups_total label.
  std::string reason;
  std::string message;  // for the Stuck condition and the Event
};

// node_alive: whether the actor's node has a heartbeat Lease that has not expired (nullopt =
// the actor is on no node). `now` is wall-clock time (API timestamps are wall-clock).
std::optional<StuckVerdict> DetectStuck(const api::Actor& actor, Time now,
                                        std::chrono::seconds grace,
                                        std::optional<bool> node_alive);

// The deadline of the actor's current in-between status, if it is in one.
std::optional<Time> TransitionDeadline(const api::Actor& actor, std::chrono::seconds grace);

}  // namespace stasis
