// The production RuntimeDriver: gVisor's runsc. This is the only code in stasis that knows
// runsc's argv and its error text; everything above it sees SandboxState values and Status
// codes with the reasons of runtime_driver.h.
//
// Invariants:
//  - Every call runs runsc by argv (RunCommand), with a deadline, in its own process group.
//  - Every call passes the same global flags, and `-root <ref.root>` for the sandbox's own root
//    (runsc requires one root per sandbox for its whole life; the checkpoint guide requires the
//    run flags again on checkpoint with -leave-running).
//  - Failures are classified once, here, from the exit status and stderr (ClassifyRunscFailure);
//    the message quotes runsc's last stderr line.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtimes/runtime_driver.h"
#include "base/subprocess.h"

namespace stasis {

// Deadlines of the calls whose interface method takes none.
struct RunscDeadlines {
  std::chrono::milliseconds query{std::chrono::seconds(30)};  // state, list, version, --help
  // `delete -force` SIGKILLs the sandbox and waits up to 2 min for it to exit (runsc.md §5).
  std::chrono::milliseconds remove{std::chrono::seconds(150)};
};

class RunscDriver : public RuntimeDriver, public CudaCheckpointCapability {
 public:
  // runsc_path: the runsc binary (or a test wrapper that forwards to one).
  // global_flags: put before every subcommand, after `-root <ref.root>`.
  explicit RunscDriver(std::string runsc_path,
                       std::vector<std::string> global_flags = {"-network=none"},
                       RunscDeadlines deadlines = {});

  // Sandboxes started from now on (run, restore) start in these cgroups: cgroup.procs files
  // that runsc joins before it execs (runtimes/sandbox_cgroup.h). Empty: the agent's own.
  void JoinCgroups(std::vector<std::string> procs_files) { sandbox_cgroups_ = std::move(procs_files); }

  Status Run(const SandboxRef& ref, std::chrono::milliseconds deadline) override;
  // Reports runsc's view, except that a created/running/paused sandbox whose host process is a
  // zombie is reported kStopped: runsc checks liveness with kill(pid, 0), which a zombie passes,
  // so until something reaps it runsc keeps saying "running" for a sandbox that is gone.
  Result<SandboxState> State(const SandboxRef& ref) override;
  Status Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) override;
  Status Restore(const SandboxRef& ref, const RestoreOptions& options) override;
  // `runsc pause` / `runsc resume`.
  Status Freeze(const SandboxRef& ref) override;
  Status Thaw(const SandboxRef& ref) override;
  // A process that ran (whatever its exit status, including runsc's own "failed to load <argv0>"
  // for a binary missing in the container) is an ExecResult; an error is returned only when the
  // sandbox could not be asked (not_found, container_stopped, timeout, runtime_error).
  Result<ExecResult> Exec(const SandboxRef& ref, const std::vector<std::string>& argv,
                          std::chrono::milliseconds deadline) override;
  // `runsc exec -env NAME=value… <id> argv…`, classified as above.
  Result<ExecResult> Exec(const SandboxRef& ref, const ExecRequest& request) override;
  CudaCheckpointCapability* CudaCheckpoint() override { return this; }
  // Also releases the root's runsc-owned null-netns bind mount once no container is left in
  // ref.root (one root per actor: the actor's sandboxes are deleted one at a time), so that the
  // root directory can be removed and no mount leaks.
  Status Delete(const SandboxRef& ref) override;
  Result<std::vector<std::string>> List(const std::string& root) override;
  // Cached after the first success: a binary's version does not change under it.
  Result<std::string> Version() override;
  Result<int64_t> MemoryUsage(const SandboxRef& ref) override;
  Result<bool> SupportsCudaCheckpoint() override;
  // `runsc wait -restore <id>`, classified as above.
  Status WaitRestored(const SandboxRef& ref, std::chrono::milliseconds deadline) override;

  const std::string& runsc_path() const { return runsc_path_; }

 private:
  // `args` with the root overlay a sandbox on a shared rootfs needs (SandboxRef::shared_rootfs).
  static std::vector<std::string> WithRootOverlay(const SandboxRef& ref, std::vector<std::string> args);
  std::vector<std::string> Argv(const std::string& root,
                                const std::vector<std::string>& args) const;
  // Runs one command and logs one line for it; `ok_exit` says which exit statuses count as
  // success for logging. Returns the result, or a Status when runsc could not be started.
  Result<CommandResult> Call(const char* op, const std::string& sandbox,
                             std::vector<std::string> argv, std::chrono::milliseconds deadline,
                             const CommandOptions& options = {});

  void ReleaseRootIfEmpty(const std::string& root);
  // A subcommand that takes only the sandbox id (pause, resume).
  Status Simple(const char* op, const SandboxRef& ref);

  std::string runsc_path_;
  std::vector<std::string> global_flags_;
  RunscDeadlines deadlines_;
  std::vector<std::string> sandbox_cgroups_;
  std::mutex cache_mu_;
  std::optional<std::string> version_;
  std::optional<bool> supports_cuda_;
};

// Maps a failed runsc command onto the reasons of runtime_driver.h (exposed for unit tests).
// `op` is the subcommand ("checkpoint", "restore", …) and prefixes the message:
// "runsc checkpoint: exit 128: checkpoint failed: …".
Status ClassifyRunscFailure(const std::string& op, const CommandResult& result);

// The sandbox's memory usage in bytes from `runsc events -stats` output (one stats event, runc's
// format: {"type":"stats","data":{"memory":{"usage":{"usage":N}}}}); kInternal when unreadable.
Result<int64_t> ParseRunscEventsMemory(const std::string& out);

// Checks an OCI bundle the way runsc is about to use it: config.json exists and parses, and its
// root.path is a directory. kInvalidArgument with reason "bad_bundle" otherwise.
Status CheckBundle(const std::string& bundle);

// Whether runsc could hold a sandbox under `root`: true unless the directory is known not to
// exist (runsc creates it at a sandbox's create); the default root ("") and a root that cannot
// be looked at count as "could".
bool RootMayHoldSandbox(const std::string& root);

}  // namespace stasis
