// The seam between the actor state machine and the thing that runs sandboxes. The node
// reconciler speaks only this interface; runsc_driver.cc is the production implementation
// (and the only code that knows runsc's argv), a micro-VM driver may be another.
//
// Failures are Status values whose code says what the caller may do and whose reason() names
// the failure class exactly (the reconciler never parses messages):
//   reason                  code                 meaning
//   "nvproxy_live_clients"  kFailedPrecondition  checkpoint met live GPU state; the sandbox is dead
//   "container_stopped"     kFailedPrecondition  the sandbox is stopped: never retry, clean up
//   "version_mismatch"      kFailedPrecondition  the image was made by another runtime build
//   "timeout"               kDeadlineExceeded    the deadline passed; the process group was killed
//   "not_found"             kNotFound            no such sandbox
//   "bad_bundle"            kInvalidArgument     the bundle or its rootfs cannot be used
//   "runtime_error"         kInternal            anything else (the message quotes stderr)
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis {

// Everything a driver needs to address one actor's sandbox.
struct SandboxRef {
  std::string id;      // the sandbox (container) id; unique on the node
  std::string root;    // the runtime's state directory for this actor (one per actor)
  std::string bundle;  // the OCI bundle directory (config.json + rootfs)
  std::string log_path;  // where the runtime's and the workload's output goes
  // The bundle's root filesystem is shared with other sandboxes (an unpacked image): it must
  // never be written, so the runtime keeps each sandbox's writes in its own upper layer.
  bool shared_rootfs = false;
};

enum class SandboxState { kNotFound, kCreated, kRunning, kPaused, kStopped };
const char* ToString(SandboxState s);

struct CheckpointOptions {
  std::string image_dir;  // an empty directory (runsc refuses to overwrite an image)
  // Keep the sandbox running after the save (runsc -leave-running). The caller then stops it
  // once the image is safe: a failed save does not kill the workload.
  bool leave_running = false;
  // Path of the cuda-checkpoint binary inside the container; empty for CPU actors.
  std::string cuda_checkpoint_path;
  std::chrono::milliseconds deadline{std::chrono::minutes(10)};
};

struct RestoreOptions {
  std::string image_dir;
  std::chrono::milliseconds deadline{std::chrono::minutes(10)};
};

struct ExecResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A command to run inside a running sandbox (a postRestore hook).
struct ExecRequest {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "NAME=value", added to the container's environment
  std::chrono::milliseconds deadline{std::chrono::seconds(30)};
};

// Checkpointing a live CUDA context: the runtime runs cuda-checkpoint inside the sandbox
// during its checkpoint (runsc -cuda-checkpoint-path). The node agent's preflight asks both
// questions below before it freezes a GPU actor, so a missing helper costs a condition, not
// the workload.
class CudaCheckpointCapability {
 public:
  virtual ~CudaCheckpointCapability() = default;
  // Whether checkpoint supports CUDA (runsc: `checkpoint --help` lists -cuda-checkpoint-path).
  virtual Result<bool> SupportsCudaCheckpoint() = 0;
  // Runs argv inside the running sandbox (the preflight runs the helper there).
  virtual Result<ExecResult> Exec(const SandboxRef& ref, const std::vector<std::string>& argv,
                                  std::chrono::milliseconds deadline) = 0;
  // Blocks until the restore of a CUDA snapshot into ref has finished: its device memory copied
  // back and its processes unlocked, which the runtime does after Restore has returned (runsc:
  // `wait -restore`). An error when that part failed (runsc then kills the sandbox) or outlived
  // the deadline; the workload is not usable until this returns OK.
  virtual Status WaitRestored(const SandboxRef& ref, std::chrono::milliseconds deadline) = 0;
};

class RuntimeDriver {
 public:
  virtual ~RuntimeDriver() = default;

  // Creates and starts the sandbox from its bundle, detached.
  virtual Status Run(const SandboxRef& ref, std::chrono::milliseconds deadline) = 0;
  // kNotFound is a state (kNotFound), not an error; errors are for a runtime that cannot answer.
  virtual Result<SandboxState> State(const SandboxRef& ref) = 0;
  virtual Status Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) = 0;
  // Restores into a new sandbox with ref.id (which must not exist), detached.
  virtual Status Restore(const SandboxRef& ref, const RestoreOptions& options) = 0;
  // Stops every process of the sandbox where it is (runsc pause: a cgroup freeze), so that
  // what it wrote can be copied consistently (Data snapshots); Thaw lets it run on.
  virtual Status Freeze(const SandboxRef& ref) = 0;
  virtual Status Thaw(const SandboxRef& ref) = 0;
  // Force-deletes the sandbox; succeeds when it does not exist.
  virtual Status Delete(const SandboxRef& ref) = 0;
  // The ids of every sandbox under `root` (restart recovery).
  virtual Result<std::vector<std::string>> List(const std::string& root) = 0;
  // Bytes of memory the sandbox uses now: what a checkpoint's image is expected to need on
  // disk (runsc: `events -stats`, the sandbox cgroup's usage). kFailedPrecondition "unknown"
  // where the driver cannot tell; the caller then checks its margin alone.
  virtual Result<int64_t> MemoryUsage(const SandboxRef& ref) {
    (void)ref;
    return Status(Code::kFailedPrecondition, "this runtime does not report memory usage", "unknown");
  }
  // Runs a command inside the running sandbox. A process that ran is an ExecResult whatever its
  // exit status; an error only when the sandbox could not be asked. A runtime that cannot run
  // commands in its sandboxes says so (kFailedPrecondition "unsupported").
  virtual Result<ExecResult> Exec(const SandboxRef& ref, const ExecRequest& request) {
    (void)ref;
    (void)request;
    return Status(Code::kFailedPrecondition, "this runtime cannot run a command in a sandbox", "unsupported");
  }
  // The runtime build's version string, recorded in snapshot manifests ("go-160fafc42237").
  virtual Result<std::string> Version() = 0;
  // What the driver can do for GPU actors, or nullptr when it runs none (QEMU micro-VMs, whose
  // GPU design is not built): an optional capability, not methods every driver must stub.
  virtual CudaCheckpointCapability* CudaCheckpoint() { return nullptr; }
};

}  // namespace stasis
