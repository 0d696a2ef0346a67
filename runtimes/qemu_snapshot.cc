// QemuMicrovmDriver's snapshots: Checkpoint (stop, migrate to a file descriptor passed over
// QMP, then quit or cont) and Restore (check the image's shape and QEMU version, start QEMU
// with -incoming defer, feed it the image the same way, cont).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "runtimes/microvm_bundle.h"
#include "runtimes/qemu_microvm_driver.h"
#include "runtimes/qemu_qmp.h"
#include "runtimes/qemu_sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using namespace qemu;  // NOLINT: the driver's own vocabulary

constexpr int64_t kUnlimitedBandwidth = int64_t{1} << 40;  // bytes/s: 1 TiB/s, i.e. no cap

// What must hold before a checkpoint talks to QEMU at all.
Status CheckpointPreconditions(const SandboxRef& ref, const CheckpointOptions& options) {
  if (Status s = RequireId("checkpoint", ref); !s.ok()) return s;
  if (options.image_dir.empty()) {
    return Status(Code::kInvalidArgument, "qemu checkpoint: no image directory", kRuntimeError);
  }
  if (!options.cuda_checkpoint_path.empty()) {
    return Status(
        Code::kFailedPrecondition,
        "qemu checkpoint: CUDA checkpoints need a guest agent, which micro-VMs do not have yet",
        kRuntimeError);
  }
  std::error_code ec;
  if (!fs::exists(fs::path(ref.root) / kMarker, ec)) {
    return Status(Code::kNotFound, "qemu checkpoint: no sandbox " + ref.id, kNotFoundReason);
  }
  if (!QemuPidOf(ref)) {
    return QemuDied("checkpoint", ref, Status(Code::kUnavailable, "QEMU has exited"));
  }
  return OkStatus();
}

// A checkpoint step's failure. A lost connection with QEMU gone is the VM dying under the
// checkpoint; with QEMU alive it is QMP failing, and the VM is left as it was (running)
// where it can be.
Status StepFailed(const SandboxRef& ref, const Status& s, const char* step) {
  if (!QemuPidOf(ref)) return QemuDied("checkpoint", ref, s);
  return QmpFailed(std::string("checkpoint: ") + step, s);
}

// A checkpoint's QMP connection, each command bounded by the query timeout and the deadline.
struct CheckpointSession {
  const SandboxRef& ref;
  const QemuMicrovmOptions& options;
  SteadyClock::time_point until;
  std::unique_ptr<QmpClient> qmp;

  milliseconds Timeout() const { return std::min(Left(until), options.query); }
  Result<nlohmann::json> Execute(const char* command, const nlohmann::json& args = nullptr,
                                 int fd = -1) {
    return qmp->Execute(command, args, Timeout(), fd);
  }
};

Status Connect(CheckpointSession& session) {
  auto c = QmpClient::Connect(QmpSocketPath(session.ref).string(), session.Timeout());
  if (c.ok()) {
    session.qmp = std::move(*c);
    return OkStatus();
  }
  if (!QemuPidOf(session.ref)) return QemuDied("checkpoint", session.ref, c.status());
  return Status(Code::kDeadlineExceeded, "qemu checkpoint: " + c.status().message(), kTimeout);
}

// Stops a running guest: the image is the state at one instant, and the guest's clock does
// not run on while the stream is written. *stopped: whether `stop` succeeded.
Status StopGuest(CheckpointSession& session, bool* stopped) {
  auto st = session.Execute("query-status");
  if (!st.ok()) return StepFailed(session.ref, st.status(), "query-status");
  if (FromRunState(st->value("status", "")) == SandboxState::kStopped) {
    return QemuDied("checkpoint", session.ref,
                    Status(Code::kUnavailable, "run state " + st->value("status", "")));
  }
  auto r = session.Execute("stop");
  *stopped = r.ok();
  if (!r.ok()) return StepFailed(session.ref, r.status(), "stop");
  return OkStatus();
}

// Hands QEMU `image_fd` and starts the migration into it.
Status StartMigration(CheckpointSession& session, int image_fd) {
  // QEMU caps a migration at 128 MiB/s by default, to spare a live guest and the network;
  // this one goes to a local file from a stopped guest, so the disk is the only limit.
  auto r = session.Execute("migrate-set-parameters", {{"max-bandwidth", kUnlimitedBandwidth}});
  if (r.ok()) r = session.Execute("getfd", {{"fdname", "stasis-image"}}, image_fd);
  if (r.ok()) r = session.Execute("migrate", {{"uri", "fd:stasis-image"}});
  if (!r.ok()) return StepFailed(session.ref, r.status(), "migrate");
  return OkStatus();
}

// Polls the migration until it completes, fails, or the deadline passes (then it is
// cancelled, and the guest runs on).
Status AwaitMigration(CheckpointSession& session) {
  for (;;) {
    auto q = session.Execute("query-migrate");
    if (!q.ok()) return StepFailed(session.ref, q.status(), "query-migrate");
    const std::string s = q->value("status", "");
    if (s == "completed") return OkStatus();
    if (s == "failed" || s == "cancelled") {
      return Status(
          Code::kInternal,
          "qemu checkpoint: migration " + s + ": " + q->value("error-desc", "no reason given"),
          kRuntimeError);
    }
    if (Left(session.until).count() == 0) {
      (void)session.qmp->Execute("migrate_cancel", nullptr, session.options.query);
      return Status(Code::kDeadlineExceeded,
                    "qemu checkpoint: the migration did not finish in time", kTimeout);
    }
    std::this_thread::sleep_for(std::min(session.options.migrate_poll, Left(session.until)));
  }
}

// Migrates the stopped guest into <image_dir>/vm.state, synced.
Status MigrateToImage(CheckpointSession& session, const std::string& image_dir) {
  std::error_code ec;
  fs::create_directories(image_dir, ec);
  const fs::path state_path = fs::path(image_dir) / kImageState;
  const int image_fd = open(state_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  if (image_fd < 0) {
    return Status(Code::kInternal,
                  "qemu checkpoint: " + state_path.string() + ": " + std::strerror(errno),
                  kRuntimeError);
  }
  Status status = StartMigration(session, image_fd);
  if (status.ok()) status = AwaitMigration(session);
  if (status.ok() && fsync(image_fd) != 0) {
    status = Status(Code::kInternal, std::string("qemu checkpoint: fsync: ") + std::strerror(errno),
                    kRuntimeError);
  }
  close(image_fd);
  return status;
}

// <image_dir>/vm.json: the VM's shape and the QEMU that made the image, for a restore to check.
Status WriteImageInfo(const std::string& image_dir, const Result<std::string>& version,
                      const std::string& accel, const std::string& bundle_dir) {
  nlohmann::json info = {{"qemuVersion", version.ok() ? *version : ""},
                         {"accel", accel},
                         {"machine", "microvm"}};
  if (auto b = LoadMicrovmBundle(bundle_dir); b.ok()) {
    info["memoryMiB"] = b->memory_mib;
    info["vcpus"] = b->vcpus;
  }
  return WriteFileSynced(fs::path(image_dir) / kImageInfo, info.dump() + "\n");
}

// After the image: a complete one without leave_running ends the VM (like runsc checkpoint
// without -leave-running); otherwise a guest this checkpoint stopped runs on as it was.
Status FinishCheckpoint(CheckpointSession& session, const CheckpointOptions& options,
                        bool stopped, Status status) {
  if (!session.qmp || !QemuPidOf(session.ref)) return status;
  if (status.ok() && !options.leave_running) {
    (void)session.qmp->Execute("quit", nullptr, session.options.query);
    session.qmp.reset();
    const auto quit_until = SteadyClock::now() + session.options.remove;
    while (QemuPidOf(session.ref) && SteadyClock::now() < quit_until)
      std::this_thread::sleep_for(milliseconds(20));
    if (QemuPidOf(session.ref)) (void)KillQemu(session.ref, session.options.remove);
  } else if (stopped) {
    if (auto r = session.qmp->Execute("cont", nullptr, session.options.query);
        !r.ok() && status.ok()) {
      status = StepFailed(session.ref, r.status(), "cont");
    }
  }
  return status;
}

// <image_dir>/vm.json, parsed; bad_bundle when it is missing or not JSON.
Result<nlohmann::json> ReadImageInfo(const std::string& image_dir) {
  std::ifstream in(fs::path(image_dir) / kImageInfo);
  try {
    if (!in) throw std::runtime_error("cannot read " + std::string(kImageInfo));
    return nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return Status(Code::kInvalidArgument, std::string("qemu restore: image: ") + e.what(),
                  kBadBundle);
  }
}

// The image's shape must be the bundle's: a migration stream loaded into a VM of another
// memory size or vCPU count fails deep inside QEMU, and another QEMU's may load wrongly.
Status CheckImageFits(const nlohmann::json& info, const MicrovmBundle& bundle,
                      const std::string& version) {
  if (info.value("qemuVersion", "") != version) {
    return Status(Code::kFailedPrecondition,
                  "qemu restore: the image was made by " + info.value("qemuVersion", "?") +
                      ", this is " + version,
                  kVersionMismatch);
  }
  if (info.value("memoryMiB", int64_t{-1}) != bundle.memory_mib ||
      info.value("vcpus", int64_t{-1}) != bundle.vcpus) {
    return Status(Code::kInvalidArgument,
                  "qemu restore: the bundle's memoryMiB/vcpus (" + std::to_string(bundle.memory_mib) +
                      "/" + std::to_string(bundle.vcpus) + ") are not the image's (" +
                      info.value("memoryMiB", nlohmann::json(nullptr)).dump() + "/" +
                      info.value("vcpus", nlohmann::json(nullptr)).dump() + ")",
                  kBadBundle);
  }
  return OkStatus();
}

// Passes the image to an -incoming defer QEMU and starts loading it.
Status FeedImage(QmpClient& qmp, const fs::path& state_path, SteadyClock::time_point until) {
  const int fd = open(state_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status(Code::kInternal,
                  "qemu restore: " + state_path.string() + ": " + std::strerror(errno),
                  kRuntimeError);
  }
  auto r = qmp.Execute("getfd", {{"fdname", "stasis-image"}}, Left(until), fd);
  close(fd);  // QEMU holds its own copy now
  if (r.ok()) r = qmp.Execute("migrate-incoming", {{"uri", "fd:stasis-image"}}, Left(until));
  if (!r.ok()) return Status(Code::kInternal, "qemu restore: " + r.status().message(), kRuntimeError);
  return OkStatus();
}

// QEMU loads the stream in the background; a stream it cannot load makes it exit. Returns
// the run state it settles in.
Result<std::string> AwaitIncoming(QmpClient& qmp, const SandboxRef& ref, milliseconds poll,
                                  SteadyClock::time_point until) {
  const Status too_late(Code::kDeadlineExceeded,
                        "qemu restore: loading the image did not finish in time", kTimeout);
  for (;;) {
    auto r = qmp.Execute("query-status", nullptr, Left(until));
    if (!r.ok()) {
      if (r.status().code() == Code::kDeadlineExceeded) return too_late;
      const std::string line = LastLine(fs::path(ref.root) / kQemuLog);
      return Status(Code::kInternal,
                    "qemu restore: loading the image failed" + (line.empty() ? "" : ": " + line),
                    kRuntimeError);
    }
    const std::string run_state = r->value("status", "");
    if (run_state != "inmigrate") return run_state;
    if (Left(until).count() == 0) return too_late;
    std::this_thread::sleep_for(std::min(poll, Left(until)));
  }
}

}  // namespace

Status QemuMicrovmDriver::Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) {
  const auto start = SteadyClock::now();
  CheckpointSession session{ref, options_, start + options.deadline, nullptr};
  Status status = CheckpointPreconditions(ref, options);
  if (status.ok()) status = Connect(session);
  bool stopped = false;
  if (status.ok()) status = StopGuest(session, &stopped);
  if (status.ok()) status = MigrateToImage(session, options.image_dir);
  if (status.ok()) status = WriteImageInfo(options.image_dir, Version(), options_.accel, ref.bundle);
  status = FinishCheckpoint(session, options, stopped, std::move(status));
  LogCall("checkpoint", ref.id, status, MillisSince(start));
  return status;
}

Status QemuMicrovmDriver::CheckRestorable(const SandboxRef& ref, const std::string& image_dir) {
  if (image_dir.empty()) {
    return Status(Code::kInvalidArgument, "qemu restore: no image directory", kRuntimeError);
  }
  auto info = ReadImageInfo(image_dir);
  if (!info.ok()) return info.status();
  std::error_code ec;
  if (!fs::is_regular_file(fs::path(image_dir) / kImageState, ec)) {
    return Status(Code::kInvalidArgument,
                  "qemu restore: image has no " + std::string(kImageState), kBadBundle);
  }
  auto bundle = LoadMicrovmBundle(ref.bundle);
  if (!bundle.ok()) return bundle.status();
  auto version = Version();
  if (!version.ok()) return version.status();
  return CheckImageFits(*info, *bundle, *version);
}

Status QemuMicrovmDriver::Restore(const SandboxRef& ref, const RestoreOptions& options) {
  const auto start = SteadyClock::now();
  const auto until = start + options.deadline;
  Status status = RequireId("restore", ref);
  if (status.ok()) status = CheckRestorable(ref, options.image_dir);
  bool created = false;
  if (status.ok()) status = Launch("restore", ref, /*incoming=*/true, Left(until), &created);
  std::unique_ptr<QmpClient> qmp;
  if (status.ok()) {
    auto c = QmpClient::Connect(QmpSocketPath(ref).string(), Left(until));
    if (c.ok())
      qmp = std::move(*c);
    else
      status = Status(Code::kInternal, "qemu restore: " + c.status().message(), kRuntimeError);
  }
  if (status.ok()) status = FeedImage(*qmp, fs::path(options.image_dir) / kImageState, until);
  Result<std::string> run_state = status.ok() ? AwaitIncoming(*qmp, ref, options_.migrate_poll, until)
                                              : Result<std::string>(status);
  if (!run_state.ok()) status = run_state.status();
  // The image was taken of a stopped VM, so it arrives stopped.
  if (status.ok() && *run_state != "running") {
    auto r = qmp->Execute("cont", nullptr, Left(until));
    if (!r.ok())
      status =
          Status(Code::kInternal, "qemu restore: cont: " + r.status().message(), kRuntimeError);
  }
  qmp.reset();
  if (!status.ok() && created) (void)Remove(ref);  // a half-restored VM is not left behind
  LogCall("restore", ref.id, status, MillisSince(start));
  return status;
}

}  // namespace stasis
