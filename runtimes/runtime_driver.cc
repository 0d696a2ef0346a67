#include "runtimes/runtime_driver.h"

namespace stasis {

const char* ToString(SandboxState s) {
  switch (s) {
    case SandboxState::kNotFound:
      return "not_found";
    case SandboxState::kCreated:
      return "created";
    case SandboxState::kRunning:
      return "running";
    case SandboxState::kPaused:
      return "paused";
    case SandboxState::kStopped:
      return "stopped";
  }
  return "unknown";
}

}  // namespace stasis
