// BENCHMARK ONLY: a RuntimeDriver that runs nothing. It keeps each sandbox's state in memory and
// answers at once, so that a node agent built with it (bench_node_noop) measures the agent's
// own path — watch, queue, quorum reads, worker claims, status writes, snapshot bookkeeping —
// without runsc. It lives in tests/bench/ and is linked only into benchmark binaries:
// `stasis node` cannot select it.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtimes/runtime_driver.h"

namespace stasis::bench {

class NoopRuntimeDriver : public RuntimeDriver {
 public:
  Status Run(const SandboxRef& ref, std::chrono::milliseconds deadline) override;
  Result<SandboxState> State(const SandboxRef& ref) override;
  // Writes one small file into the image directory (the snapshot manifest hashes it).
  Status Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) override;
  Status Restore(const SandboxRef& ref, const RestoreOptions& options) override;
  Status Freeze(const SandboxRef& ref) override { return SetState(ref, SandboxState::kRunning, SandboxState::kPaused); }
  Status Thaw(const SandboxRef& ref) override { return SetState(ref, SandboxState::kPaused, SandboxState::kRunning); }
  Status Delete(const SandboxRef& ref) override;
  Result<std::vector<std::string>> List(const std::string& root) override;
  Result<std::string> Version() override { return std::string("bench-noop"); }

 private:
  // Moves a sandbox in state `from` to `to` (Freeze, Thaw).
  Status SetState(const SandboxRef& ref, SandboxState from, SandboxState to);
  struct Sandbox {
    std::string root;
    SandboxState state = SandboxState::kNotFound;
  };
  std::mutex mu_;
  std::map<std::string, Sandbox> sandboxes_;  // by id
};

}  // namespace stasis::bench
