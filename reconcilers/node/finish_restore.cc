// The last part of a CUDA snapshot's restore (restore_readiness.h): RUNNING was written with
// Restored=False; the runtime is asked to wait until the CUDA state is back, then Ready=True.
// A restore that fails here (runsc has killed the sandbox) or outlives the restore's deadline
// is a failed resume: the sandbox is deleted, the worker freed, the actor back where it rested
// (its snapshot kept) and retried with backoff.
#include <spdlog/spdlog.h>

#include <cstdio>

#include "api/conditions.h"
#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/restore_readiness.h"

namespace stasis {

using api::ActorState;

Result<ReconcileOutcome> ActorReconciler::FinishRestore(Ctx& c, const std::optional<RestoreStarted>& started) {
  const auto budget = RestoreWaitBudget(c.a, std::chrono::floor<std::chrono::seconds>(clock_.WallNow()));
  const auto wait_start = clock_.Now();
  CudaCheckpointCapability* cuda = c.driver->CudaCheckpoint();
  const Status waited = cuda ? cuda->WaitRestored(c.ref, budget) : OkStatus();
  const double waited_s = Seconds(clock_.Now() - wait_start);
  const bool gpu = c.a.spec.gpu.count > 0;
  if (started) {
    metrics_.ObserveDuration("restore_usable", started->trigger, gpu, waited.ok() ? "success" : "error",
                             Seconds(clock_.Now() - started->at));
  }
  metrics_.CountOperation("restore", waited.ok() ? "success" : "error",
                          waited.ok() ? "" : api::MetricReason(FailureReason(waited)));
  if (!waited.ok()) {
    spdlog::warn("restore did not finish actor={} sandbox={} waited_s={:.3f} budget_s={} error=\"{}\"", c.key,
                 c.ref.id, waited_s, std::chrono::duration_cast<std::chrono::seconds>(budget).count(),
                 waited.message());
    SetCondition(c, api::kConditionRestored, false, FailureReason(waited), waited.message());
    // Where it rested before this start (a clone's first start: nowhere yet).
    const ActorState resting = RestingState(c.a);
    return ResumeFailed(c, resting == ActorState::kFailed ? ActorState::kUnspecified : resting, waited);
  }
  const bool first_start_of_clone = !c.a.status.latest_snapshot && c.a.status.cloned_from;
  char after[64];
  std::snprintf(after, sizeof after, "%.3fs after the sandbox was restored", waited_s);
  SetCondition(c, api::kConditionRestored, true, api::kReasonRestoreComplete,
               std::string("CUDA state and device memory restored ") + (started ? after : "(seen after a restart)"));
  SetCondition(c, api::kConditionReady, true,
               first_start_of_clone ? api::kReasonRestoredFromSource : api::kReasonRunning,
               "restored and usable");
  if (Status s = WriteStatus(c); !s.ok()) return s;
  spdlog::info("restore finished actor={} sandbox={} waited_s={:.3f}", c.key, c.ref.id, waited_s);
  if (c.a.spec.readiness_gate) return ReconcileOutcome{std::chrono::seconds(c.a.spec.readiness_gate->period_seconds)};
  return ReconcileOutcome{options_.liveness_period};
}

}  // namespace stasis
