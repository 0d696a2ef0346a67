#include "reconcilers/node/restore_readiness.h"

#include <algorithm>

#include "api/conditions.h"

namespace stasis {

bool RestoresCudaState(const api::Actor& a, const std::optional<CloneSnapshot>& clone) {
  if (clone) return clone->cuda_checkpointed;
  return a.status.latest_snapshot && a.status.latest_snapshot->cuda_checkpointed;
}

bool MayStillBeRestoring(const api::Actor& a) {
  if (const auto& snap = a.status.latest_snapshot) {
    return snap->scope == api::SnapshotScope::kFull && snap->cuda_checkpointed;
  }
  return a.status.cloned_from.has_value() && a.spec.gpu.count > 0;
}

bool AwaitsRestore(const api::Actor& a) {
  const auto* restored = api::FindCondition(a.status.conditions, api::kConditionRestored);
  return restored && restored->status == api::ConditionStatus::kFalse &&
         restored->reason == api::kReasonRestoring;
}

std::chrono::milliseconds RestoreWaitBudget(const api::Actor& a, Time now) {
  using std::chrono::milliseconds;
  const milliseconds whole = std::chrono::seconds(a.spec.timeouts.restore_seconds);
  const auto* restored = api::FindCondition(a.status.conditions, api::kConditionRestored);
  milliseconds left = whole;
  if (restored && restored->last_transition_time != Time{} && now > restored->last_transition_time) {
    left = whole - std::chrono::duration_cast<milliseconds>(now - restored->last_transition_time);
  }
  return std::max<milliseconds>(left, kMinRestoreWait);
}

}  // namespace stasis
