// QemuMicrovmDriver's process lifecycle: starting a sandbox's QEMU, asking its state,
// freezing and thawing it, killing it and removing its files. Checkpoint and Restore are in
// qemu_snapshot.cc.
#include "runtimes/qemu_microvm_driver.h"


#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/subprocess.h"
#include "runtimes/microvm_bundle.h"
#include "runtimes/qemu_argv.h"
#include "runtimes/qemu_qmp.h"
#include "runtimes/qemu_sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using namespace qemu;  // NOLINT: the driver's own vocabulary

// "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)" → "qemu-7.2.22".
std::optional<std::string> ParseVersion(const std::string& out) {
  constexpr std::string_view kPrefix = "QEMU emulator version ";
  const auto at = out.find(kPrefix);
  if (at == std::string::npos) return std::nullopt;
  std::string v = out.substr(at + kPrefix.size());
  v = v.substr(0, v.find_first_of(" \n("));
  if (v.empty()) return std::nullopt;
  return "qemu-" + v;
}

// A fresh root for sandbox ref: its directories, no stale pidfile or socket, and its marker.
Status PrepareRoot(const char* op, const SandboxRef& ref, const MicrovmBundle& bundle,
                   const std::string& log_path) {
  const fs::path root = ref.root;
  std::error_code ec;
  if (fs::exists(root / kMarker, ec)) {
    return Status(Code::kInternal,
                  std::string("qemu ") + op + ": sandbox " + ref.id + " already exists",
                  kRuntimeError);
  }
  fs::create_directories(root, ec);
  if (!fs::path(log_path).parent_path().empty())
    fs::create_directories(fs::path(log_path).parent_path(), ec);
  if (ec)
    return Status(Code::kInternal, "cannot create " + root.string() + ": " + ec.message(),
                  kRuntimeError);
  for (const char* f : {kPidFile, kQmpSocket}) fs::remove(root / f, ec);
  return WriteFileSynced(root / kMarker,
                         nlohmann::json{{"id", ref.id}, {"bundle", bundle.dir}}.dump() + "\n");
}

// Runs the daemonizing QEMU; its parent exits once the daemon has set up its sockets.
Status StartQemu(const char* op, const std::vector<std::string>& argv, const fs::path& root,
                 milliseconds timeout) {
  CommandOptions co;
  co.cwd = root.string();
  // The daemon's stdio goes to /dev/null once it is up; until then errors land here.
  co.output_path = (root / kQemuLog).string();
  auto r = RunCommand(argv, timeout, co);
  if (!r.ok()) {
    return Status(Code::kInternal,
                  std::string("qemu ") + op + ": cannot start QEMU: " + r.status().message(),
                  kRuntimeError);
  }
  if (r->success()) return OkStatus();
  const std::string line = LastLine(root / kQemuLog);
  const std::string message = std::string("qemu ") + op + ": " +
                              r->Summary().substr(0, r->Summary().find(':')) +
                              (line.empty() ? "" : ": " + line);
  if (r->timed_out) return Status(Code::kDeadlineExceeded, message, kTimeout);
  // The files the bundle names exist (checked by LoadMicrovmBundle); QEMU refusing them means
  // their content.
  if (line.find("kernel") != std::string::npos || line.find("initrd") != std::string::npos) {
    return Status(Code::kInvalidArgument, message, kBadBundle);
  }
  return Status(Code::kInternal, message, kRuntimeError);
}

}  // namespace

QemuMicrovmDriver::QemuMicrovmDriver(QemuMicrovmOptions options) : options_(std::move(options)) {}

long QemuMicrovmDriver::QemuPid(const SandboxRef& ref) const { return QemuPidOf(ref); }

Status QemuMicrovmDriver::Launch(const char* op, const SandboxRef& ref, bool incoming,
                                 milliseconds deadline, bool* created) {
  *created = false;
  const auto until = SteadyClock::now() + deadline;
  auto bundle = LoadMicrovmBundle(ref.bundle);
  if (!bundle.ok()) return bundle.status();
  const std::string log_path = LogPathFor(ref);
  if (Status s = PrepareRoot(op, ref, *bundle, log_path); !s.ok()) return s;
  *created = true;
  const auto argv = QemuArgv({options_.qemu, options_.accel, log_path, incoming}, ref, *bundle);
  if (Status s = StartQemu(op, argv, ref.root, Left(until)); !s.ok()) return s;
  // QMP answers once the daemon is up.
  auto qmp = QmpClient::Connect(QmpSocketPath(ref).string(), Left(until));
  if (!qmp.ok()) {
    if (!QemuPid(ref)) return QemuDied(op, ref, qmp.status());
    return QmpFailed(op, qmp.status());
  }
  return OkStatus();
}

Status QemuMicrovmDriver::Run(const SandboxRef& ref, milliseconds deadline) {
  const auto start = SteadyClock::now();
  Status status = RequireId("run", ref);
  bool created = false;
  if (status.ok()) status = Launch("run", ref, /*incoming=*/false, deadline, &created);
  if (!status.ok() && created) (void)Remove(ref);  // a half-started VM is not left behind
  LogCall("run", ref.id, status, MillisSince(start));
  return status;
}

Result<SandboxState> QemuMicrovmDriver::State(const SandboxRef& ref) {
  const auto start = SteadyClock::now();
  if (Status s = RequireId("state", ref); !s.ok()) return s;
  std::error_code ec;
  Status status;
  SandboxState state = SandboxState::kNotFound;
  if (fs::exists(fs::path(ref.root) / kMarker, ec)) {
    if (!QemuPid(ref)) {
      state = SandboxState::kStopped;
    } else {
      auto qmp = QmpClient::Connect(QmpSocketPath(ref).string(), options_.query);
      Result<nlohmann::json> r = qmp.ok() ? (*qmp)->Execute("query-status", nullptr, options_.query)
                                          : Result<nlohmann::json>(qmp.status());
      if (r.ok()) {
        state = FromRunState(r->value("status", ""));
      } else if (!QemuPid(ref)) {
        state = SandboxState::kStopped;  // it exited while we asked
      } else {
        status = QmpFailed("state", r.status());
      }
    }
  }
  LogCall("state", ref.id, status, MillisSince(start), /*query=*/true);
  if (!status.ok()) return status;
  return state;
}

Status QemuMicrovmDriver::Simple(const char* op, const char* command, const SandboxRef& ref) {
  const auto start = SteadyClock::now();
  Status status = RequireId(op, ref);
  if (status.ok()) {
    auto qmp = QmpClient::Connect(QmpSocketPath(ref).string(), options_.query);
    if (!qmp.ok()) {
      status = QemuPid(ref) ? Status(Code::kInternal,
                                     std::string("qemu ") + op + ": " + qmp.status().message(),
                                     kRuntimeError)
                            : QemuDied(op, ref, qmp.status());
    } else if (auto r = (*qmp)->Execute(command, nullptr, options_.query); !r.ok()) {
      status = QemuPid(ref) ? Status(Code::kInternal,
                                     std::string("qemu ") + op + ": " + r.status().message(),
                                     kRuntimeError)
                            : QemuDied(op, ref, r.status());
    }
  }
  LogCall(op, ref.id, status, MillisSince(start));
  return status;
}

Status QemuMicrovmDriver::Freeze(const SandboxRef& ref) { return Simple("freeze", "stop", ref); }

Status QemuMicrovmDriver::Thaw(const SandboxRef& ref) { return Simple("thaw", "cont", ref); }

Status QemuMicrovmDriver::Remove(const SandboxRef& ref) {
  if (Status s = KillQemu(ref, options_.remove); !s.ok()) return s;
  std::error_code ec;
  for (const char* f : {kPidFile, kQmpSocket, kMarker}) fs::remove(fs::path(ref.root) / f, ec);
  return OkStatus();
}

Status QemuMicrovmDriver::Delete(const SandboxRef& ref) {
  const auto start = SteadyClock::now();
  Status status = RequireId("delete", ref);
  if (status.ok()) status = Remove(ref);
  LogCall("delete", ref.id, status, MillisSince(start));
  return status;
}

Result<std::vector<std::string>> QemuMicrovmDriver::List(const std::string& root) {
  if (root.empty()) return Status(Code::kInvalidArgument, "qemu list: no root", kRuntimeError);
  std::vector<std::string> ids;
  std::ifstream in(fs::path(root) / kMarker);
  if (!in) return ids;
  try {
    ids.push_back(nlohmann::json::parse(in).at("id").get<std::string>());
  } catch (const std::exception& e) {
    return Status(Code::kInternal,
                  "qemu list: unreadable " + (fs::path(root) / kMarker).string() + ": " + e.what(),
                  kRuntimeError);
  }
  return ids;
}

Result<std::string> QemuMicrovmDriver::Version() {
  {
    std::lock_guard lock(cache_mu_);
    if (version_) return *version_;
  }
  const auto start = SteadyClock::now();
  Status status;
  std::string version;
  auto r = RunCommand({options_.qemu, "--version"}, options_.query);
  if (!r.ok()) {
    status = Status(Code::kInternal,
                    "qemu --version: cannot start " + options_.qemu + ": " + r.status().message(),
                    kRuntimeError);
  } else if (!r->success()) {
    status = Status(Code::kInternal, "qemu --version: " + r->Summary(), kRuntimeError);
  } else if (auto v = ParseVersion(r->out)) {
    version = *v;
  } else {
    status = Status(Code::kInternal, "qemu --version: unexpected output \"" + r->out + "\"",
                    kRuntimeError);
  }
  LogCall("version", "", status, MillisSince(start), /*query=*/true);
  if (!status.ok()) return status;
  std::lock_guard lock(cache_mu_);
  version_ = version;
  return version;
}

}  // namespace stasis
