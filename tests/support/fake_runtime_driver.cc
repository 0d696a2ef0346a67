#include "tests/support/fake_runtime_driver.h"

#include <filesystem>
#include <fstream>

namespace stasis::testing {

void FakeRuntimeDriver::FailNext(Call call, Status status) {
  std::lock_guard lock(mu_);
  failures_[call].push_back(std::move(status));
}

void FakeRuntimeDriver::SetState(const std::string& id, SandboxState state) {
  std::lock_guard lock(mu_);
  sandboxes_[id] = state;
}

SandboxState FakeRuntimeDriver::StateOf(const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? SandboxState::kNotFound : it->second;
}

std::vector<std::string> FakeRuntimeDriver::Calls() {
  std::lock_guard lock(mu_);
  return calls_;
}

int FakeRuntimeDriver::CountCalls(const std::string& method) {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& c : calls_) n += c.rfind(method + " ", 0) == 0 ? 1 : 0;
  return n;
}

Status FakeRuntimeDriver::Enter(Call call, const char* method, const std::string& id) {
  std::lock_guard lock(mu_);
  calls_.push_back(std::string(method) + " " + id);
  auto& queue = failures_[call];
  if (queue.empty()) return OkStatus();
  Status s = queue.front();
  queue.pop_front();
  return s;
}

Status FakeRuntimeDriver::Run(const SandboxRef& ref, std::chrono::milliseconds) {
  if (Status s = Enter(Call::kRun, "Run", ref.id); !s.ok()) return s;
  SetState(ref.id, SandboxState::kRunning);
  return OkStatus();
}

Result<SandboxState> FakeRuntimeDriver::State(const SandboxRef& ref) {
  if (Status s = Enter(Call::kState, "State", ref.id); !s.ok()) return s;
  return StateOf(ref.id);
}

Status FakeRuntimeDriver::Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) {
  if (Status s = Enter(Call::kCheckpoint, "Checkpoint", ref.id); !s.ok()) {
    if (after_failed_checkpoint_) SetState(ref.id, *after_failed_checkpoint_);
    return s;
  }
  if (StateOf(ref.id) != SandboxState::kRunning) {
    return Status(Code::kFailedPrecondition, "cannot checkpoint container " + ref.id + " in state stopped",
                  "container_stopped");
  }
  std::ofstream(options.image_dir + "/checkpoint.img") << "image of " << ref.id;
  if (!options.leave_running) SetState(ref.id, SandboxState::kStopped);
  if (after_checkpoint_) after_checkpoint_(options.image_dir);
  return OkStatus();
}

Status FakeRuntimeDriver::Restore(const SandboxRef& ref, const RestoreOptions& options) {
  if (before_restore_) before_restore_(ref);
  {
    std::lock_guard lock(mu_);
    restored_from_.push_back(options.image_dir);
  }
  if (Status s = Enter(Call::kRestore, "Restore", ref.id); !s.ok()) return s;
  if (!std::filesystem::exists(options.image_dir + "/checkpoint.img")) {
    return Status(Code::kInternal, "no image in " + options.image_dir, "runtime_error");
  }
  SetState(ref.id, SandboxState::kRunning);
  return OkStatus();
}

Status FakeRuntimeDriver::WaitRestored(const SandboxRef& ref, std::chrono::milliseconds) {
  Status s = Enter(Call::kWaitRestored, "WaitRestored", ref.id);
  if (!s.ok()) SetState(ref.id, SandboxState::kStopped);
  return s;
}

Status FakeRuntimeDriver::Freeze(const SandboxRef& ref) {
  if (Status s = Enter(Call::kFreeze, "Freeze", ref.id); !s.ok()) return s;
  SetState(ref.id, SandboxState::kPaused);
  return OkStatus();
}

Status FakeRuntimeDriver::Thaw(const SandboxRef& ref) {
  if (Status s = Enter(Call::kThaw, "Thaw", ref.id); !s.ok()) return s;
  SetState(ref.id, SandboxState::kRunning);
  return OkStatus();
}

Status FakeRuntimeDriver::Delete(const SandboxRef& ref) {
  if (Status s = Enter(Call::kDelete, "Delete", ref.id); !s.ok()) return s;
  std::lock_guard lock(mu_);
  sandboxes_.erase(ref.id);
  return OkStatus();
}

Result<std::vector<std::string>> FakeRuntimeDriver::List(const std::string&) {
  std::lock_guard lock(mu_);
  std::vector<std::string> ids;
  for (const auto& [id, state] : sandboxes_) ids.push_back(id);
  return ids;
}

std::vector<std::string> FakeRuntimeDriver::RestoredFrom() {
  std::lock_guard lock(mu_);
  return restored_from_;
}

Result<int64_t> FakeRuntimeDriver::MemoryUsage(const SandboxRef& ref) {
  (void)ref;
  std::lock_guard lock(mu_);
  if (!memory_usage_) return RuntimeDriver::MemoryUsage(ref);
  return *memory_usage_;
}

Result<bool> FakeRuntimeDriver::SupportsCudaCheckpoint() {
  if (Status s = Enter(Call::kSupportsCuda, "SupportsCudaCheckpoint", ""); !s.ok()) return s;
  return supports_cuda_;
}

Result<ExecResult> FakeRuntimeDriver::Exec(const SandboxRef& ref, const std::vector<std::string>&,
                                           std::chrono::milliseconds) {
  if (Status s = Enter(Call::kExec, "Exec", ref.id); !s.ok()) return s;
  if (StateOf(ref.id) != SandboxState::kRunning) {
    return Status(Code::kFailedPrecondition, "container " + ref.id + " is not running", "container_stopped");
  }
  return ExecResult{exec_exit_code_, "", exec_exit_code_ == 0 ? "" : "failed to load /usr/local/bin/cuda-checkpoint"};
}

Result<ExecResult> FakeRuntimeDriver::Exec(const SandboxRef& ref, const ExecRequest&) {
  if (Status s = Enter(Call::kExec, "ExecInSandbox", ref.id); !s.ok()) return s;
  if (StateOf(ref.id) != SandboxState::kRunning) {
    return Status(Code::kFailedPrecondition, "container " + ref.id + " is not running", "container_stopped");
  }
  return ExecResult{0, "", ""};
}

}  // namespace stasis::testing
