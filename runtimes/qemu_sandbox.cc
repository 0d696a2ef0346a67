#include "runtimes/qemu_sandbox.h"

#include <fcntl.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "base/subprocess.h"

namespace stasis::qemu {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

long ReadPid(const fs::path& root) {
  std::ifstream in(root / kPidFile);
  long pid = 0;
  if (!(in >> pid)) return 0;
  return pid;
}

// The NUL-separated arguments of /proc/<pid>/cmdline.
std::vector<std::string> CmdlineOf(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  if (!in) return {};
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  std::string::size_type start = 0;
  while (start < all.size()) {
    const auto end = all.find('\0', start);
    argv.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return argv;
}

// Whether `pid` is a live QEMU started for sandbox `id`: its argv holds "-name" "<id>".
bool IsOurQemu(long pid, const std::string& id) {
  if (pid <= 0 || IsZombie(pid)) return false;
  const std::vector<std::string> argv = CmdlineOf(pid);
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "-name" && argv[i + 1] == id) return true;
  }
  return false;
}

}  // namespace

long long MillisSince(SteadyClock::time_point since) {
  return std::chrono::duration_cast<milliseconds>(SteadyClock::now() - since).count();
}

milliseconds Left(SteadyClock::time_point until) {
  const auto left = std::chrono::duration_cast<milliseconds>(until - SteadyClock::now());
  return left.count() < 0 ? milliseconds(0) : left;
}

void LogCall(const char* op, const std::string& sandbox, const Status& status, long long ms,
             bool query) {
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

fs::path QmpSocketPath(const SandboxRef& ref) { return fs::path(ref.root) / kQmpSocket; }

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

long QemuPidOf(const SandboxRef& ref) {
  const long pid = ReadPid(ref.root);
  return IsOurQemu(pid, ref.id) ? pid : 0;
}

Status QemuDied(const std::string& op, const SandboxRef& ref, const Status& cause) {
  const std::string line = LastLine(fs::path(ref.root) / kQemuLog);
  return Status(Code::kFailedPrecondition,
                "qemu " + op + ": the VM is not running (" + cause.message() + ")" +
                    (line.empty() ? "" : ": " + line),
                kContainerStopped);
}

Status QmpFailed(const std::string& op, const Status& cause) {
  const bool timed_out = cause.code() == Code::kDeadlineExceeded;
  return Status(timed_out ? Code::kDeadlineExceeded : Code::kInternal,
                "qemu " + op + ": " + cause.message(), timed_out ? kTimeout : kRuntimeError);
}

Status KillQemu(const SandboxRef& ref, milliseconds timeout) {
  const long pid = QemuPidOf(ref);
  if (pid == 0) return OkStatus();
  kill(static_cast<pid_t>(pid), SIGKILL);
  const auto until = SteadyClock::now() + timeout;
  while (QemuPidOf(ref) != 0) {
    if (SteadyClock::now() >= until) {
      return Status(Code::kDeadlineExceeded,
                    "qemu delete: pid " + std::to_string(pid) + " still alive after SIGKILL",
                    kTimeout);
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  return OkStatus();
}

SandboxState FromRunState(const std::string& s) {
  if (s == "running") return SandboxState::kRunning;
  if (s == "inmigrate" || s == "prelaunch") return SandboxState::kCreated;
  if (s == "shutdown" || s == "guest-panicked" || s == "internal-error" || s == "io-error") {
    return SandboxState::kStopped;
  }
  return SandboxState::kPaused;  // paused, postmigrate, finish-migrate, suspended, debug, …
}

}  // namespace stasis::qemu
