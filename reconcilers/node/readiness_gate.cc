#include "reconcilers/node/readiness_gate.h"

#include <chrono>

#include "api/conditions.h"

namespace stasis {

GateStep DecideGate(const api::Actor& a, Time now) {
  if (!a.spec.readiness_gate) return GateStep::kNone;
  const auto* gate = api::FindCondition(a.status.conditions, api::kConditionReadinessGate);
  if (!gate || gate->reason != api::kReasonReadinessGatePending) return GateStep::kNone;
  const auto* ready = api::FindCondition(a.status.conditions, api::kConditionReady);
  if (!ready || ready->status != api::ConditionStatus::kTrue || ready->last_transition_time == Time{}) {
    return GateStep::kNone;
  }
  const auto timeout = std::chrono::seconds(a.spec.readiness_gate->timeout_seconds);
  return now - ready->last_transition_time >= timeout ? GateStep::kTimedOut : GateStep::kProbe;
}

}  // namespace stasis
