#include "tests/bench/noop_runtime_driver.h"

#include <fstream>

namespace stasis::bench {

Status NoopRuntimeDriver::Run(const SandboxRef& ref, std::chrono::milliseconds) {
  std::lock_guard lock(mu_);
  auto& s = sandboxes_[ref.id];
  if (s.state == SandboxState::kRunning) return Status(Code::kInternal, "sandbox " + ref.id + " exists", "runtime_error");
  s = Sandbox{ref.root, SandboxState::kRunning};
  return OkStatus();
}

Result<SandboxState> NoopRuntimeDriver::State(const SandboxRef& ref) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(ref.id);
  return it == sandboxes_.end() ? SandboxState::kNotFound : it->second.state;
}

Status NoopRuntimeDriver::Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) {
  {
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(ref.id);
    if (it == sandboxes_.end()) return Status(Code::kNotFound, "no sandbox " + ref.id, "not_found");
    if (it->second.state != SandboxState::kRunning) {
      return Status(Code::kFailedPrecondition, "sandbox " + ref.id + " is stopped", "container_stopped");
    }
    if (!options.leave_running) it->second.state = SandboxState::kStopped;
  }
  std::ofstream image(options.image_dir + "/checkpoint.img", std::ios::binary);
  image << "bench-noop checkpoint of " << ref.id << "\n";
  image.close();
  return image ? OkStatus() : Status(Code::kInternal, "cannot write into " + options.image_dir, "runtime_error");
}

Status NoopRuntimeDriver::Restore(const SandboxRef& ref, const RestoreOptions&) {
  std::lock_guard lock(mu_);
  auto& s = sandboxes_[ref.id];
  if (s.state == SandboxState::kRunning) return Status(Code::kInternal, "sandbox " + ref.id + " exists", "runtime_error");
  s = Sandbox{ref.root, SandboxState::kRunning};
  return OkStatus();
}

Status NoopRuntimeDriver::SetState(const SandboxRef& ref, SandboxState from, SandboxState to) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(ref.id);
  if (it == sandboxes_.end()) return Status(Code::kNotFound, "no sandbox " + ref.id, "not_found");
  if (it->second.state != from) {
    return Status(Code::kFailedPrecondition, "sandbox " + ref.id + " is " + ToString(it->second.state),
                  "container_stopped");
  }
  it->second.state = to;
  return OkStatus();
}

Status NoopRuntimeDriver::Delete(const SandboxRef& ref) {
  std::lock_guard lock(mu_);
  sandboxes_.erase(ref.id);
  return OkStatus();
}

Result<std::vector<std::string>> NoopRuntimeDriver::List(const std::string& root) {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, s] : sandboxes_) {
    if (s.root == root) ids.push_back(id);
  }
  return ids;
}

}  // namespace stasis::bench
