#include "api/worker.h"

#include <utility>

namespace stasis::api {

const char* ToString(WorkerPhase v) {
  switch (v) {
    case WorkerPhase::kFree:
      return "Free";
    case WorkerPhase::kHeld:
      return "Held";
  }
  return "";
}

std::optional<WorkerPhase> ParseWorkerPhase(std::string_view s) {
  if (s == "Free") return WorkerPhase::kFree;
  if (s == "Held") return WorkerPhase::kHeld;
  return std::nullopt;
}

void Hold(Worker& worker, ActorRef ref) {
  worker.status.phase = WorkerPhase::kHeld;
  worker.status.actor_ref = std::move(ref);
}

void Release(Worker& worker) {
  worker.status.phase = WorkerPhase::kFree;
  worker.status.actor_ref.reset();
}

}  // namespace stasis::api
