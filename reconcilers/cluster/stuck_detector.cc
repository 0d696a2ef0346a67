#include "reconcilers/cluster/stuck_detector.h"

#include "api/conditions.h"

namespace stasis {

std::optional<Time> TransitionDeadline(const api::Actor& a, std::chrono::seconds grace) {
  if (!api::IsTransitioning(a.status.status) || !a.status.transition_start_time) return std::nullopt;
  const int timeout = a.status.status == api::ActorState::kResuming
                          ? a.spec.timeouts.restore_seconds
                          : a.spec.timeouts.checkpoint_seconds;
  return *a.status.transition_start_time + std::chrono::seconds(timeout) + grace;
}

std::optional<StuckVerdict> DetectStuck(const api::Actor& a, Time now,
                                        std::chrono::seconds grace,
                                        std::optional<bool> node_alive) {
  const auto s = a.status.status;
  const bool occupies_node = s == api::ActorState::kRunning || api::IsTransitioning(s) ||
                             !a.status.worker_name.empty();
  if (occupies_node && node_alive.has_value() && !*node_alive) {
    return StuckVerdict{api::kReasonNodeLost, "the node agent on " + a.status.node_name +
                                         " stopped renewing its heartbeat while the actor was " +
                                         api::ToString(s)};
  }
  if (auto deadline = TransitionDeadline(a, grace); deadline && now > *deadline) {
    return StuckVerdict{api::kReasonDeadlineExceeded, std::string(api::ToString(s)) + " since " +
                                        FormatTime(*a.status.transition_start_time) +
                                        ", past its deadline " + FormatTime(*deadline)};
  }
  return std::nullopt;
}

}  // namespace stasis
