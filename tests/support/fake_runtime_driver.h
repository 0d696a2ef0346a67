// A RuntimeDriver for tests of the node agent's decisions and actions without runsc: sandboxes
// are states in memory, a checkpoint writes a one-file image, and any call can be made to fail
// with the exact Status a real driver returns for that failure class (runtime_driver.h's
// table), so every branch of checkpoint, resume and recovery is reachable in a test. The real
// drivers are tested against real runsc and QEMU in tests/e2e/.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtimes/runtime_driver.h"

namespace stasis::testing {

class FakeRuntimeDriver : public RuntimeDriver, public CudaCheckpointCapability {
 public:
  enum class Call { kRun, kState, kCheckpoint, kRestore, kFreeze, kThaw, kExec, kDelete, kSupportsCuda, kWaitRestored };

  // The next call of `call` returns `status` (queued: one failure per call).
  void FailNext(Call call, Status status);
  // Sets a sandbox's state as if the runtime changed it (a sandbox that died: kStopped).
  void SetState(const std::string& id, SandboxState state);
  SandboxState StateOf(const std::string& id);
  // What a failed checkpoint leaves (runsc's nvproxy failure kills the sandbox); by default it
  // leaves the sandbox as it was.
  void SetStateAfterFailedCheckpoint(SandboxState state) { after_failed_checkpoint_ = state; }
  // Whether checkpoint supports CUDA, and the exit code of an Exec (the preflight's helper).
  void SetSupportsCuda(bool supports) { supports_cuda_ = supports; }
  void SetExecExitCode(int code) { exec_exit_code_ = code; }
  // Called with the image directory after a checkpoint wrote its image: what the host did to
  // the directory before the agent completes the snapshot (a disk that lost it).
  void SetAfterCheckpoint(std::function<void(const std::string& image_dir)> hook) {
    after_checkpoint_ = std::move(hook);
  }
  // Called at the start of every Restore with its sandbox: what the host looks like while the
  // restore runs (the agent's files written before it).
  void SetBeforeRestore(std::function<void(const SandboxRef&)> hook) { before_restore_ = std::move(hook); }
  // What MemoryUsage answers (bytes); unset, it answers "unknown" as a driver that cannot tell.
  void SetMemoryUsage(int64_t bytes) { memory_usage_ = bytes; }
  // The image directory of every Restore, in order.
  std::vector<std::string> RestoredFrom();
  // Every call made, as "Method id", in order.
  std::vector<std::string> Calls();
  int CountCalls(const std::string& method);

  Status Run(const SandboxRef& ref, std::chrono::milliseconds deadline) override;
  Result<SandboxState> State(const SandboxRef& ref) override;
  Status Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) override;
  Status Restore(const SandboxRef& ref, const RestoreOptions& options) override;
  Status Freeze(const SandboxRef& ref) override;
  Status Thaw(const SandboxRef& ref) override;
  Status Delete(const SandboxRef& ref) override;
  Result<std::vector<std::string>> List(const std::string& root) override;
  Result<std::string> Version() override { return std::string("fake-1"); }
  Result<int64_t> MemoryUsage(const SandboxRef& ref) override;
  CudaCheckpointCapability* CudaCheckpoint() override { return this; }
  Result<bool> SupportsCudaCheckpoint() override;
  Result<ExecResult> Exec(const SandboxRef& ref, const std::vector<std::string>& argv,
                          std::chrono::milliseconds deadline) override;
  // A command in the sandbox (a hook, a readiness gate): exits 0 while the sandbox runs.
  Result<ExecResult> Exec(const SandboxRef& ref, const ExecRequest& request) override;
  // OK at once; a queued failure stops the sandbox first, as runsc kills a sandbox whose
  // restore failed after `runsc restore` had returned.
  Status WaitRestored(const SandboxRef& ref, std::chrono::milliseconds deadline) override;

 private:
  // Records the call; returns the failure queued for it, or OK.
  Status Enter(Call call, const char* method, const std::string& id);

  std::mutex mu_;
  std::map<Call, std::deque<Status>> failures_;
  std::map<std::string, SandboxState> sandboxes_;  // by id
  std::vector<std::string> calls_;
  std::optional<SandboxState> after_failed_checkpoint_;
  bool supports_cuda_ = true;
  int exec_exit_code_ = 0;
  std::function<void(const std::string&)> after_checkpoint_;
  std::function<void(const SandboxRef&)> before_restore_;
  std::optional<int64_t> memory_usage_;
  std::vector<std::string> restored_from_;
};

}  // namespace stasis::testing
