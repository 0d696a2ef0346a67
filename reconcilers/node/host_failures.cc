// How the node agent reports a transition that failed and bounds its retries: the failure's
// reason (a Host* reason for an error of the node itself, host_errors.h), its backoff, and —
// for host errors — the point after which a generation is no longer retried, said in the
// condition. A user who fixes the host and changes the spec (a new generation) gets a retry.
#include <spdlog/spdlog.h>

#include <optional>

#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/host_errors.h"

namespace stasis {

ActorReconciler::FailureVerdict ActorReconciler::JudgeFailure(Ctx& c, RetryOp op, const Status& failure) {
  FailureVerdict v;
  const int64_t generation = c.a.metadata.generation;
  const auto host = ClassifyHostError(failure, {options_.root, snapshots_.store_root()});
  v.reason = FailureReason(failure);
  if (!host) {
    retries_.NoteFailure(c.key, op, generation);
    return v;
  }
  v.host = true;
  v.permanent = host->permanent;
  const int attempts = retries_.NoteFailure(c.key, op, generation, /*host_error=*/true);
  v.gave_up = v.permanent || attempts >= options_.host_error_attempts;
  if (v.gave_up) {
    retries_.GiveUp(c.key, op, generation);
    // First, so that a long message (a path of thousands of characters) cannot cut it off.
    v.note = v.permanent ? "not retried until the spec changes (an error of the host no retry can fix): "
                         : "not retried until the spec changes (failed " + std::to_string(attempts) +
                               " times in a row): ";
  }
  spdlog::warn("host error actor={} op={} reason={} permanent={} attempt={} gave_up={} error=\"{}\"", c.key,
               ToString(op), v.reason, v.permanent, attempts, v.gave_up, failure.message());
  return v;
}

std::string ActorReconciler::FailureReason(const Status& failure) const {
  if (const auto host = ClassifyHostError(failure, {options_.root, snapshots_.store_root()})) return host->reason;
  return ConditionReason(failure.reason().empty() ? "runtime_error" : failure.reason());
}

void ActorReconciler::ReportHostException(const Request& request, const Status& failure) {
  // An Event, not a condition: the status write may be what threw, and the step that threw is
  // not known here. The work queue retries with its backoff; the recorder folds repeats into a
  // count. Reporting must not throw again out of the reconcile's catch.
  if (!events_) return;
  try {
    ObjectPtr obj = actors_(request.Key());
    if (!obj) return;
    const auto host = ClassifyHostError(failure, {options_.root, snapshots_.store_root()});
    events_->Event(*obj, EventType::kWarning, host ? host->reason : api::kReasonHostError, failure.message());
  } catch (const std::exception& e) {
    spdlog::error("host error not reported actor={} error=\"{}\"", request.Key(), e.what());
  }
}

bool ActorReconciler::SetFailureCondition(Ctx& c, const char* type, bool status, const FailureVerdict& v,
                                          const std::string& message) {
  const api::Condition* found = api::FindCondition(c.a.status.conditions, type);
  const std::optional<api::Condition> old = found ? std::optional(*found) : std::nullopt;
  SetCondition(c, type, status, v.reason, v.note + message);
  const api::Condition* now = api::FindCondition(c.a.status.conditions, type);
  const bool changed = !old || !now || old->status != now->status || old->reason != now->reason ||
                       old->message != now->message;
  return !v.host || changed;
}

}  // namespace stasis
