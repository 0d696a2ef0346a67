// Whether a RUNNING actor is usable yet. A CUDA snapshot's restore ends after `runsc restore`
// has returned: runsc copies the device memory back and unlocks the processes inside the
// restored sandbox (2.5 s at 8 GiB, 8.7 s at 32 GiB on an H200, docs/gpu-runsc-results.md).
// Until then the actor is RUNNING with Restored=False Restoring and Ready=False, so that
// `kubectl wait --for=condition=Ready` means the workload can use its GPU. Decided here from
// the actor alone; finish_restore.cc waits and writes (read → decide → act).
#pragma once

#include <chrono>
#include <optional>

#include "api/actor.h"
#include "base/time.h"
#include "reconcilers/node/clone_source.h"

namespace stasis {

// Whether a start from a Full snapshot restores a CUDA context (the actor's own latest
// snapshot, or `clone`'s source snapshot when it starts from its source): its restore then
// ends after the runtime's, and RUNNING is written with Restored=False.
bool RestoresCudaState(const api::Actor& a, const std::optional<CloneSnapshot>& clone);

// An agent restarted and found a RESUMING actor's sandbox running: whether its CUDA state may
// still be coming back. Its latest Full snapshot says whether it holds CUDA state; a clone's
// first start records only which source snapshot it restored, so a GPU actor is asked.
bool MayStillBeRestoring(const api::Actor& a);

// The RUNNING write said the restore's last part was still under way and nothing has said
// since that it finished (or failed): Restored=False with reason Restoring.
bool AwaitsRestore(const api::Actor& a);

// How long the wait may take: what is left of spec.timeouts.restoreSeconds since Restored
// became False, and never less than kMinRestoreWait (an agent restarted after the budget
// passed still asks the runtime once, which answers at once for a restore that has ended).
inline constexpr std::chrono::seconds kMinRestoreWait{5};
std::chrono::milliseconds RestoreWaitBudget(const api::Actor& a, Time now);

}  // namespace stasis
