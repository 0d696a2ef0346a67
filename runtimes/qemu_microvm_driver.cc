#include "runtimes/qemu_microvm_driver.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "runtimes/microvm_bundle.h"
#include "runtimes/qemu_qmp.h"
#include "base/subprocess.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kContainerStopped = "container_stopped";
constexpr const char* kVersionMismatch = "version_mismatch";
constexpr const char* kTimeout = "timeout";
constexpr const char* kNotFoundReason = "not_found";
constexpr const char* kBadBundle = "bad_bundle";
constexpr const char* kRuntimeError = "runtime_error";

constexpr const char* kMarker = "vm.json";
constexpr const char* kPidFile = "qemu.pid";
constexpr const char* kQmpSocket = "qmp.sock";
constexpr const char* kQemuLog = "qemu.log";
constexpr const char* kImageState = "vm.state";
constexpr const char* kImageInfo = "vm.json";
constexpr int64_t kUnlimitedBandwidth = int64_t{1} << 40;  // bytes/s: 1 TiB/s, i.e. no cap

long long MillisSince(Clock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - since).count();
}

milliseconds Left(Clock::time_point until) {
  const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
  return left.count() < 0 ? milliseconds(0) : left;
}

void LogCall(const char* op, const std::string& sandbox, const Status& status, long long ms,
             bool query = false) {
  if (status.ok()) {
    spdlog::log(query ? spdlog::level::debug : spdlog::level::info,
                "component=qemu op={} sandbox={} result=ok duration_ms={}", op, sandbox, ms);
  } else {
    spdlog::warn(
        "component=qemu op={} sandbox={} result=error reason={} duration_ms={} error=\"{}\"", op,
        sandbox, status.reason(), ms, status.message());
  }
}

Status RequireId(const char* op, const SandboxRef& ref) {
  if (ref.id.empty() || ref.root.empty()) {
    return Status(Code::kInvalidArgument,
                  std::string("qemu ") + op + ": sandbox id and root are required", kRuntimeError);
  }
  return OkStatus();
}

std::string LogPathFor(const SandboxRef& ref) {
  if (!ref.log_path.empty()) return ref.log_path;
  return (fs::path(ref.root) / "console.log").string();
}

// The last non-empty line of a file (QEMU's start-up error), or "".
std::string LastLine(const fs::path& path) {
  std::ifstream in(path);
  std::string line, last;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (!line.empty()) last = line;
  }
  return last;
}

Status WriteFileSynced(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) {
    return Status(Code::kInternal, tmp.string() + ": " + std::strerror(errno), kRuntimeError);
  }
  const bool ok =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  close(fd);
  std::error_code ec;
  if (ok) fs::rename(tmp, path, ec);
  if (!ok || ec) {
    fs::remove(tmp, ec);
    return Status(Code::kInternal, "cannot write " + path.string(), kRuntimeError);
  }
  return OkStatus();
}

// Whether `pid` is a live QEMU started for sandbox `id`: its argv holds "-name" "<id>".
bool IsOurQemu(long pid, const std::string& id) {
  if (pid <= 0 || IsZombie(pid)) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  if (!in) return false;
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::string::size_type start = 0;
  while (start < all.size()) {
    const auto end = all.find('\0', start);
    argv.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-name" && argv[i + 1] == id) return true;
  }
  return false;
}

// A value inside a QEMU option list: a ',' is written ",,".
std::string QemuOptValue(const std::string& v) {
  std::string out;
  for (char ch : v) {
    out += ch;
    if (ch == ',') out += ',';
  }
  return out;
}

long ReadPid(const fs::path& root) {
  std::ifstream in(root / kPidFile);
  long pid = 0;
  if (!(in >> pid)) return 0;
  return pid;
}

// QEMU's run states (qapi RunState) as sandbox states.
SandboxState FromRunState(const std::string& s) {
  if (s == "running") return SandboxState::kRunning;
  if (s == "inmigrate" || s == "prelaunch") return SandboxState::kCreated;
  if (s == "shutdown" || s == "guest-panicked" || s == "internal-error" || s == "io-error") {
    return SandboxState::kStopped;
  }
  return SandboxState::kPaused;  // paused, postmigrate, finish-migrate, suspended, debug, …
}

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

}  // namespace

QemuMicrovmDriver::QemuMicrovmDriver(QemuMicrovmOptions options) : options_(std::move(options)) {}

long QemuMicrovmDriver::QemuPid(const SandboxRef& ref) const {
  const long pid = ReadPid(ref.root);
  return IsOurQemu(pid, ref.id) ? pid : 0;
}

Status QemuMicrovmDriver::Died(const std::string& op, const SandboxRef& ref,
                               const Status& cause) const {
  const std::string line = LastLine(fs::path(ref.root) / kQemuLog);
  return Status(Code::kFailedPrecondition,
                "qemu " + op + ": the VM is not running (" + cause.message() + ")" +
                    (line.empty() ? "" : ": " + line),
                kContainerStopped);
}

Status QemuMicrovmDriver::Launch(const char* op, const SandboxRef& ref, bool incoming,
                                 milliseconds deadline, bool* created) {
  *created = false;
  const auto until = Clock::now() + deadline;
  auto bundle = LoadMicrovmBundle(ref.bundle);
  if (!bundle.ok()) return bundle.status();
  const fs::path root = ref.root;
  std::error_code ec;
  if (fs::exists(root / kMarker, ec)) {
    return Status(Code::kInternal,
                  std::string("qemu ") + op + ": sandbox " + ref.id + " already exists",
                  kRuntimeError);
  }
  const std::string log_path = LogPathFor(ref);
  fs::create_directories(root, ec);
  if (!fs::path(log_path).parent_path().empty())
    fs::create_directories(fs::path(log_path).parent_path(), ec);
  if (ec)
    return Status(Code::kInternal, "cannot create " + root.string() + ": " + ec.message(),
                  kRuntimeError);
  for (const char* f : {kPidFile, kQmpSocket}) fs::remove(root / f, ec);
  if (Status s = WriteFileSynced(
          root / kMarker, nlohmann::json{{"id", ref.id}, {"bundle", bundle->dir}}.dump() + "\n");
      !s.ok())
    return s;
  *created = true;

  // Paths QEMU opens come from the validated bundle and our own root; the QMP socket and the
  // pidfile are relative to the root (cwd), which keeps the socket path short. The serial
  // chardev appends, so a restored VM's console continues the actor's log.
  // Option and value pairs, one per line.
  // clang-format off
  std::vector<std::string> argv = {
      options_.qemu,
      "-name", ref.id,
      "-machine", "microvm,acpi=off",
      "-accel", options_.accel,
      "-m", std::to_string(bundle->memory_mib),
      "-smp", std::to_string(bundle->vcpus),
      "-nodefaults", "-no-user-config", "-display", "none",
      "-kernel", bundle->kernel,
      "-append", bundle->cmdline,
      "-chardev", "file,id=console,append=on,path=" + QemuOptValue(log_path),
      "-serial", "chardev:console",
      "-qmp", std::string("unix:") + kQmpSocket + ",server=on,wait=off",
      "-pidfile", kPidFile,
      "-no-reboot",
      "-daemonize",
  };
  // clang-format on

  if (!bundle->initramfs.empty()) {
    argv.push_back("-initrd");
    argv.push_back(bundle->initramfs);
  }
  if (incoming) {
    argv.push_back("-incoming");
    argv.push_back("defer");
  }
  CommandOptions co;
  co.cwd = root.string();
  // The daemon's stdio goes to /dev/null once it is up; until then errors land here.
  co.output_path = (root / kQemuLog).string();
  auto r = RunCommand(argv, Left(until), co);
  if (!r.ok()) {
    return Status(Code::kInternal,
                  std::string("qemu ") + op + ": cannot start QEMU: " + r.status().message(),
                  kRuntimeError);
  }
  if (!r->success()) {
    const std::string line = LastLine(root / kQemuLog);
    const std::string message = std::string("qemu ") + op + ": " +
                                r->Summary().substr(0, r->Summary().find(':')) +
                                (line.empty() ? "" : ": " + line);
    if (r->timed_out) return Status(Code::kDeadlineExceeded, message, kTimeout);
    // The files the bundle names exist (checked above); QEMU refusing them means their content.
    if (line.find("kernel") != std::string::npos || line.find("initrd") != std::string::npos) {
      return Status(Code::kInvalidArgument, message, kBadBundle);
    }
    return Status(Code::kInternal, message, kRuntimeError);
  }
  // The parent exits once the daemon has set up its sockets; QMP answers from then on.
  auto qmp = QmpClient::Connect((root / kQmpSocket).string(), Left(until));
  if (!qmp.ok()) {
    if (!QemuPid(ref)) return Died(op, ref, qmp.status());
    return Status(
        qmp.status().code() == Code::kDeadlineExceeded ? Code::kDeadlineExceeded : Code::kInternal,
        std::string("qemu ") + op + ": " + qmp.status().message(),
        qmp.status().code() == Code::kDeadlineExceeded ? kTimeout : kRuntimeError);
  }
  return OkStatus();
}

Status QemuMicrovmDriver::Run(const SandboxRef& ref, milliseconds deadline) {
  const auto start = Clock::now();
  Status status = RequireId("run", ref);
  bool created = false;
  if (status.ok()) status = Launch("run", ref, /*incoming=*/false, deadline, &created);
  if (!status.ok() && created) (void)Remove(ref);  // a half-started VM is not left behind
  LogCall("run", ref.id, status, MillisSince(start));
  return status;
}

Result<SandboxState> QemuMicrovmDriver::State(const SandboxRef& ref) {
  const auto start = Clock::now();
  if (Status s = RequireId("state", ref); !s.ok()) return s;
  const fs::path root = ref.root;
  std::error_code ec;
  Status status;
  SandboxState state = SandboxState::kNotFound;
  if (fs::exists(root / kMarker, ec)) {
    if (!QemuPid(ref)) {
      state = SandboxState::kStopped;
    } else {
      auto qmp = QmpClient::Connect((root / kQmpSocket).string(), options_.query);
      Result<nlohmann::json> r = qmp.ok() ? (*qmp)->Execute("query-status", nullptr, options_.query)
                                          : Result<nlohmann::json>(qmp.status());
      if (r.ok()) {
        state = FromRunState(r->value("status", ""));
      } else if (!QemuPid(ref)) {
        state = SandboxState::kStopped;  // it exited while we asked
      } else {
        status = Status(r.status().code() == Code::kDeadlineExceeded ? Code::kDeadlineExceeded
                                                                     : Code::kInternal,
                        "qemu state: " + r.status().message(),
                        r.status().code() == Code::kDeadlineExceeded ? kTimeout : kRuntimeError);
      }
    }
  }
  LogCall("state", ref.id, status, MillisSince(start), /*query=*/true);
  if (!status.ok()) return status;
  return state;
}

Status QemuMicrovmDriver::Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) {
  const auto start = Clock::now();
  const auto until = start + options.deadline;
  const fs::path root = ref.root;
  Status status = RequireId("checkpoint", ref);
  if (status.ok() && options.image_dir.empty()) {
    status = Status(Code::kInvalidArgument, "qemu checkpoint: no image directory", kRuntimeError);
  }
  if (status.ok() && !options.cuda_checkpoint_path.empty()) {
    status = Status(
        Code::kFailedPrecondition,
        "qemu checkpoint: CUDA checkpoints need a guest agent, which micro-VMs do not have yet",
        kRuntimeError);
  }
  std::error_code ec;
  if (status.ok() && !fs::exists(root / kMarker, ec)) {
    status = Status(Code::kNotFound, "qemu checkpoint: no sandbox " + ref.id, kNotFoundReason);
  }
  if (status.ok() && !QemuPid(ref)) {
    status = Died("checkpoint", ref, Status(Code::kUnavailable, "QEMU has exited"));
  }
  std::unique_ptr<QmpClient> qmp;
  if (status.ok()) {
    auto c =
        QmpClient::Connect((root / kQmpSocket).string(), std::min(Left(until), options_.query));
    if (c.ok()) {
      qmp = std::move(*c);
    } else if (!QemuPid(ref)) {
      status = Died("checkpoint", ref, c.status());
    } else {
      status =
          Status(Code::kDeadlineExceeded, "qemu checkpoint: " + c.status().message(), kTimeout);
    }
  }
  // From here a lost connection with QEMU gone is the VM dying under the checkpoint; with QEMU
  // alive it is QMP failing, and the VM is left as it was (running) where it can be.
  auto failed = [&](const Status& s, const char* step) {
    if (!QemuPid(ref)) return Died("checkpoint", ref, s);
    if (s.code() == Code::kDeadlineExceeded) {
      return Status(Code::kDeadlineExceeded,
                    std::string("qemu checkpoint: ") + step + ": " + s.message(), kTimeout);
    }
    return Status(Code::kInternal, std::string("qemu checkpoint: ") + step + ": " + s.message(),
                  kRuntimeError);
  };
  bool stopped = false;
  int image_fd = -1;
  if (status.ok()) {
    auto st = qmp->Execute("query-status", nullptr, std::min(Left(until), options_.query));
    if (!st.ok()) {
      status = failed(st.status(), "query-status");
    } else if (FromRunState(st->value("status", "")) == SandboxState::kStopped) {
      status = Died("checkpoint", ref,
                    Status(Code::kUnavailable, "run state " + st->value("status", "")));
    }
  }
  if (status.ok()) {
    // Stopped first: the image is the state at one instant, and the guest's clock does not run
    // on while the stream is written.
    auto r = qmp->Execute("stop", nullptr, std::min(Left(until), options_.query));
    if (!r.ok()) status = failed(r.status(), "stop");
    stopped = r.ok();
  }
  if (status.ok()) {
    fs::create_directories(options.image_dir, ec);
    const fs::path state_path = fs::path(options.image_dir) / kImageState;
    image_fd = open(state_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (image_fd < 0) {
      status = Status(Code::kInternal,
                      "qemu checkpoint: " + state_path.string() + ": " + std::strerror(errno),
                      kRuntimeError);
    }
  }
  if (status.ok()) {
    // QEMU caps a migration at 128 MiB/s by default, to spare a live guest and the network;
    // this one goes to a local file from a stopped guest, so the disk is the only limit.
    auto r = qmp->Execute("migrate-set-parameters", {{"max-bandwidth", kUnlimitedBandwidth}},
                          std::min(Left(until), options_.query));
    if (r.ok()) {
      r = qmp->Execute("getfd", {{"fdname", "stasis-image"}}, std::min(Left(until), options_.query),
                       image_fd);
    }
    if (r.ok())
      r = qmp->Execute("migrate", {{"uri", "fd:stasis-image"}},
                       std::min(Left(until), options_.query));
    if (!r.ok()) status = failed(r.status(), "migrate");
  }
  if (status.ok()) {
    for (;;) {
      auto q = qmp->Execute("query-migrate", nullptr, std::min(Left(until), options_.query));
      if (!q.ok()) {
        status = failed(q.status(), "query-migrate");
        break;
      }
      const std::string s = q->value("status", "");
      if (s == "completed") break;
      if (s == "failed" || s == "cancelled") {
        status = Status(
            Code::kInternal,
            "qemu checkpoint: migration " + s + ": " + q->value("error-desc", "no reason given"),
            kRuntimeError);
        break;
      }
      if (Left(until).count() == 0) {
        // Give the VM back: cancel the stream and let the guest run on (below).
        (void)qmp->Execute("migrate_cancel", nullptr, options_.query);
        status = Status(Code::kDeadlineExceeded,
                        "qemu checkpoint: the migration did not finish in time", kTimeout);
        break;
      }
      std::this_thread::sleep_for(std::min(options_.migrate_poll, Left(until)));
    }
  }
  if (image_fd >= 0) {
    if (status.ok() && fsync(image_fd) != 0) {
      status =
          Status(Code::kInternal, std::string("qemu checkpoint: fsync: ") + std::strerror(errno),
                 kRuntimeError);
    }
    close(image_fd);
  }
  if (status.ok()) {
    auto version = Version();
    nlohmann::json info = {{"qemuVersion", version.ok() ? *version : ""},
                           {"accel", options_.accel},
                           {"machine", "microvm"}};
    if (auto b = LoadMicrovmBundle(ref.bundle); b.ok()) {
      info["memoryMiB"] = b->memory_mib;
      info["vcpus"] = b->vcpus;
    }
    status = WriteFileSynced(fs::path(options.image_dir) / kImageInfo, info.dump() + "\n");
  }
  if (qmp && QemuPid(ref)) {
    if (status.ok() && !options.leave_running) {
      // The image is complete: the VM is done (like runsc checkpoint without -leave-running).
      (void)qmp->Execute("quit", nullptr, options_.query);
      qmp.reset();
      const auto quit_until = Clock::now() + options_.remove;
      while (QemuPid(ref) && Clock::now() < quit_until)
        std::this_thread::sleep_for(milliseconds(20));
      if (QemuPid(ref)) (void)Kill(ref);
    } else if (stopped) {
      // Either the caller keeps the VM (leave_running) or the checkpoint failed with the VM
      // alive: it runs on as it was.
      if (auto r = qmp->Execute("cont", nullptr, options_.query); !r.ok() && status.ok()) {
        status = failed(r.status(), "cont");
      }
    }
  }
  LogCall("checkpoint", ref.id, status, MillisSince(start));
  return status;
}

Status QemuMicrovmDriver::Restore(const SandboxRef& ref, const RestoreOptions& options) {
  const auto start = Clock::now();
  const auto until = start + options.deadline;
  const fs::path root = ref.root;
  Status status = RequireId("restore", ref);
  if (status.ok() && options.image_dir.empty()) {
    status = Status(Code::kInvalidArgument, "qemu restore: no image directory", kRuntimeError);
  }
  const fs::path state_path = fs::path(options.image_dir) / kImageState;
  if (status.ok()) {
    // The image's shape must be the bundle's: a migration stream loaded into a VM of another
    // memory size or vCPU count fails deep inside QEMU, and another QEMU's may load wrongly.
    nlohmann::json info;
    std::ifstream in(fs::path(options.image_dir) / kImageInfo);
    try {
      if (!in) throw std::runtime_error("cannot read " + std::string(kImageInfo));
      info = nlohmann::json::parse(in);
    } catch (const std::exception& e) {
      status = Status(Code::kInvalidArgument, std::string("qemu restore: image: ") + e.what(),
                      kBadBundle);
    }
    std::error_code ec;
    if (status.ok() && !fs::is_regular_file(state_path, ec)) {
      status = Status(Code::kInvalidArgument,
                      "qemu restore: image has no " + std::string(kImageState), kBadBundle);
    }
    auto bundle = status.ok() ? LoadMicrovmBundle(ref.bundle) : Result<MicrovmBundle>(status);
    if (!bundle.ok()) status = bundle.status();
    auto version = status.ok() ? Version() : Result<std::string>(status);
    if (!version.ok()) status = version.status();
    if (status.ok() && info.value("qemuVersion", "") != *version) {
      status = Status(Code::kFailedPrecondition,
                      "qemu restore: the image was made by " + info.value("qemuVersion", "?") +
                          ", this is " + *version,
                      kVersionMismatch);
    }
    if (status.ok() && (info.value("memoryMiB", int64_t{-1}) != bundle->memory_mib ||
                        info.value("vcpus", int64_t{-1}) != bundle->vcpus)) {
      status = Status(Code::kInvalidArgument,
                      "qemu restore: the bundle's memoryMiB/vcpus (" +
                          std::to_string(bundle->memory_mib) + "/" + std::to_string(bundle->vcpus) +
                          ") are not the image's (" +
                          info.value("memoryMiB", nlohmann::json(nullptr)).dump() + "/" +
                          info.value("vcpus", nlohmann::json(nullptr)).dump() + ")",
                      kBadBundle);
    }
  }
  bool created = false;
  if (status.ok()) status = Launch("restore", ref, /*incoming=*/true, Left(until), &created);
  std::unique_ptr<QmpClient> qmp;
  if (status.ok()) {
    auto c = QmpClient::Connect((root / kQmpSocket).string(), Left(until));
    if (c.ok())
      qmp = std::move(*c);
    else
      status = Status(Code::kInternal, "qemu restore: " + c.status().message(), kRuntimeError);
  }
  if (status.ok()) {
    const int fd = open(state_path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      status = Status(Code::kInternal,
                      "qemu restore: " + state_path.string() + ": " + std::strerror(errno),
                      kRuntimeError);
    } else {
      auto r = qmp->Execute("getfd", {{"fdname", "stasis-image"}}, Left(until), fd);
      close(fd);  // QEMU holds its own copy now
      if (r.ok()) r = qmp->Execute("migrate-incoming", {{"uri", "fd:stasis-image"}}, Left(until));
      if (!r.ok())
        status = Status(Code::kInternal, "qemu restore: " + r.status().message(), kRuntimeError);
    }
  }
  // QEMU loads the stream in the background; a stream it cannot load makes it exit.
  std::string run_state = "inmigrate";
  while (status.ok() && run_state == "inmigrate") {
    auto r = qmp->Execute("query-status", nullptr, Left(until));
    if (!r.ok()) {
      const std::string line = LastLine(root / kQemuLog);
      status =
          r.status().code() == Code::kDeadlineExceeded
              ? Status(Code::kDeadlineExceeded,
                       "qemu restore: loading the image did not finish in time", kTimeout)
              : Status(Code::kInternal,
                       "qemu restore: loading the image failed" + (line.empty() ? "" : ": " + line),
                       kRuntimeError);
      break;
    }
    run_state = r->value("status", "");
    if (run_state == "inmigrate") {
      if (Left(until).count() == 0) {
        status = Status(Code::kDeadlineExceeded,
                        "qemu restore: loading the image did not finish in time", kTimeout);
        break;
      }
      std::this_thread::sleep_for(std::min(options_.migrate_poll, Left(until)));
    }
  }
  // The image was taken of a stopped VM, so it arrives stopped.
  if (status.ok() && run_state != "running") {
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

Status QemuMicrovmDriver::Simple(const char* op, const char* command, const SandboxRef& ref) {
  const auto start = Clock::now();
  Status status = RequireId(op, ref);
  if (status.ok()) {
    auto qmp = QmpClient::Connect((fs::path(ref.root) / kQmpSocket).string(), options_.query);
    if (!qmp.ok()) {
      status = QemuPid(ref) ? Status(Code::kInternal,
                                     std::string("qemu ") + op + ": " + qmp.status().message(),
                                     kRuntimeError)
                            : Died(op, ref, qmp.status());
    } else if (auto r = (*qmp)->Execute(command, nullptr, options_.query); !r.ok()) {
      status = QemuPid(ref) ? Status(Code::kInternal,
                                     std::string("qemu ") + op + ": " + r.status().message(),
                                     kRuntimeError)
                            : Died(op, ref, r.status());
    }
  }
  LogCall(op, ref.id, status, MillisSince(start));
  return status;
}

Status QemuMicrovmDriver::Freeze(const SandboxRef& ref) { return Simple("freeze", "stop", ref); }

Status QemuMicrovmDriver::Thaw(const SandboxRef& ref) { return Simple("thaw", "cont", ref); }

Status QemuMicrovmDriver::Kill(const SandboxRef& ref) {
  const long pid = QemuPid(ref);
  if (pid == 0) return OkStatus();
  kill(static_cast<pid_t>(pid), SIGKILL);
  const auto until = Clock::now() + options_.remove;
  while (QemuPid(ref) != 0) {
    if (Clock::now() >= until) {
      return Status(Code::kDeadlineExceeded,
                    "qemu delete: pid " + std::to_string(pid) + " still alive after SIGKILL",
                    kTimeout);
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return OkStatus();
}

Status QemuMicrovmDriver::Remove(const SandboxRef& ref) {
  if (Status s = Kill(ref); !s.ok()) return s;
  std::error_code ec;
  for (const char* f : {kPidFile, kQmpSocket, kMarker}) fs::remove(fs::path(ref.root) / f, ec);
  return OkStatus();
}

Status QemuMicrovmDriver::Delete(const SandboxRef& ref) {
  const auto start = Clock::now();
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
  const auto start = Clock::now();
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
