// What the QEMU micro-VM driver's files share about one sandbox: the files in its root, the
// QEMU process that belongs to it, and how a failure is classified and logged. The driver's
// lifecycle (qemu_microvm_driver.cc) and its snapshots (qemu_snapshot.cc) both build on it.
// Invariant: a pid is signalled only after /proc says it is this sandbox's QEMU (its argv
// carries `-name <id>`), so a reused pid is never killed.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "base/status.h"
#include "runtimes/runtime_driver.h"

namespace stasis::qemu {

// Failure classes (Status::reason()), those of runtime_driver.h.
inline constexpr const char* kContainerStopped = "container_stopped";
inline constexpr const char* kVersionMismatch = "version_mismatch";
inline constexpr const char* kTimeout = "timeout";
inline constexpr const char* kNotFoundReason = "not_found";
inline constexpr const char* kBadBundle = "bad_bundle";
inline constexpr const char* kRuntimeError = "runtime_error";

// The sandbox's files, in ref.root.
inline constexpr const char* kMarker = "vm.json";
inline constexpr const char* kPidFile = "qemu.pid";
inline constexpr const char* kQmpSocket = "qmp.sock";
inline constexpr const char* kQemuLog = "qemu.log";
// An image directory's files.
inline constexpr const char* kImageState = "vm.state";
inline constexpr const char* kImageInfo = "vm.json";

using SteadyClock = std::chrono::steady_clock;

long long MillisSince(SteadyClock::time_point since);
// Time left until `until`, never negative.
std::chrono::milliseconds Left(SteadyClock::time_point until);

// One structured log line per driver call (queries at debug level).
void LogCall(const char* op, const std::string& sandbox, const Status& status, long long ms,
             bool query = false);

// kInvalidArgument unless the ref names a sandbox and its root.
Status RequireId(const char* op, const SandboxRef& ref);

// Where the guest's serial console goes: ref.log_path, else <root>/console.log.
std::string LogPathFor(const SandboxRef& ref);
std::filesystem::path QmpSocketPath(const SandboxRef& ref);

// The last non-empty line of a file (QEMU's start-up error), or "".
std::string LastLine(const std::filesystem::path& path);

// Writes `text` to `path` by way of a synced temporary file renamed over it.
Status WriteFileSynced(const std::filesystem::path& path, const std::string& text);

// The pid of ref's live QEMU, or 0.
long QemuPidOf(const SandboxRef& ref);

// The error of a QEMU that went away under `op`: container_stopped, quoting qemu.log.
Status QemuDied(const std::string& op, const SandboxRef& ref, const Status& cause);

// A QMP failure under `op` of a QEMU still alive: kDeadlineExceeded "timeout" when `cause`
// was a deadline, else kInternal "runtime_error".
Status QmpFailed(const std::string& op, const Status& cause);

// SIGKILLs ref's QEMU and waits, up to `timeout`, until it is gone.
Status KillQemu(const SandboxRef& ref, std::chrono::milliseconds timeout);

// QEMU's run states (qapi RunState) as sandbox states.
SandboxState FromRunState(const std::string& s);

}  // namespace stasis::qemu
