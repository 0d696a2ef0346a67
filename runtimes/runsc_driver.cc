#include "runtimes/runsc_driver.h"

#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

namespace stasis {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kNvproxyLiveClients = "nvproxy_live_clients";
constexpr const char* kContainerStopped = "container_stopped";
constexpr const char* kVersionMismatch = "version_mismatch";
constexpr const char* kTimeout = "timeout";
constexpr const char* kNotFoundReason = "not_found";
constexpr const char* kBadBundle = "bad_bundle";
constexpr const char* kRuntimeError = "runtime_error";

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

long long Millis(Clock::time_point since) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
}

// One line per runsc call. Queries (state, list) are frequent and go to debug when they succeed.
void LogCall(const char* op, const std::string& sandbox, const Status& status, long long ms,
             bool query = false) {
  if (status.ok()) {
    spdlog::log(query ? spdlog::level::debug : spdlog::level::info,
                "component=runsc op={} sandbox={} result=ok duration_ms={}", op, sandbox, ms);
  } else {
    spdlog::warn(
        "component=runsc op={} sandbox={} result=error reason={} duration_ms={} error=\"{}\"", op,
        sandbox, status.reason(), ms, status.message());
  }
}

Status StartFailure(const std::string& op, const Status& status) {
  // runsc itself could not be started: a broken installation, not a missing sandbox (the
  // kNotFound RunCommand uses for a missing binary must not read as "no such sandbox").
  return Status(Code::kInternal, "runsc " + op + ": cannot start runsc: " + status.message(),
                kRuntimeError);
}

// Where a detached sandbox's stdio goes when the caller named no log: beside its state.
std::string LogPathFor(const SandboxRef& ref) {
  if (!ref.log_path.empty()) return ref.log_path;
  return (fs::path(ref.root) / (ref.id + ".log")).string();
}

Status PrepareOutput(const SandboxRef& ref, const std::string& log_path) {
  std::error_code ec;
  if (!ref.root.empty()) fs::create_directories(ref.root, ec);
  const fs::path parent = fs::path(log_path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  if (ec) {
    return Status(Code::kInternal, "cannot create " + parent.string() + ": " + ec.message(),
                  kRuntimeError);
  }
  return OkStatus();
}

Status RequireId(const char* op, const SandboxRef& ref) {
  if (ref.id.empty() || ref.root.empty()) {
    return Status(Code::kInvalidArgument,
                  std::string("runsc ") + op + ": sandbox id and root are required", kRuntimeError);
  }
  return OkStatus();
}

Result<SandboxState> ParseState(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    const std::string status = j.at("status").get<std::string>();
    const long pid = j.value("pid", -1L);
    SandboxState state;
    if (status == "creating" || status == "created")
      state = SandboxState::kCreated;
    else if (status == "running")
      state = SandboxState::kRunning;
    else if (status == "paused")
      state = SandboxState::kPaused;
    else if (status == "stopped")
      state = SandboxState::kStopped;
    else
      return Status(Code::kInternal, "runsc state: unknown status \"" + status + "\"",
                    kRuntimeError);
    if (state != SandboxState::kStopped && pid > 0 && IsZombie(pid)) state = SandboxState::kStopped;
    return state;
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("runsc state: unreadable output: ") + e.what(),
                  kRuntimeError);
  }
}

}  // namespace

namespace {

// The line of runsc's stderr that says what failed. Usually the last; but a save that fails in
// the sentry ends with the Go stack of the recovered panic ("…: encoding error: Can't save pma
// …:\ngoroutine 139 [running]:\n<frames>"), and then it is the line before the stack.
std::string RunscErrorLine(const std::string& err) {
  std::vector<std::string> lines;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.rfind("goroutine ", 0) == 0 && line.find(" [") != std::string::npos) {
      if (lines.empty()) break;
      std::string before = lines.back();
      if (!before.empty() && before.back() == ':') before.pop_back();
      return before;
    }
    if (!line.empty()) lines.push_back(line);
  }
  return lines.empty() ? "" : lines.back();
}

}  // namespace

Status ClassifyRunscFailure(const std::string& op, const CommandResult& result) {
  std::string head = result.Summary();
  head = head.substr(0, head.find(':'));  // "exit 128", "timed out", "killed by signal 9"
  const std::string line = RunscErrorLine(result.err);
  const std::string message = "runsc " + op + ": " + head + (line.empty() ? "" : ": " + line);
  const std::string_view err = result.err;
  if (result.timed_out) return Status(Code::kDeadlineExceeded, message, kTimeout);
  // The exact strings of runsc.md §7 and §8; order matters where texts could overlap.
  if (Contains(err, "can't save with live nvproxy clients")) {
    return Status(Code::kFailedPrecondition, message, kNvproxyLiveClients);
  }
  // The same failure in runsc builds whose nvproxy saves device memory mappings by itself
  // (docs/runsc-version.md): a live CUDA context's mapping cannot be saved; the sandbox is dead.
  if (Contains(err, "Can't save pma with non-MemoryFile of type *nvproxy.")) {
    return Status(Code::kFailedPrecondition, message, kNvproxyLiveClients);
  }
  if (Contains(err, "runsc version does not match across checkpoint restore")) {
    return Status(Code::kFailedPrecondition, message, kVersionMismatch);
  }
  if (Contains(err, "in state stopped") || Contains(err, "sandbox is not running")) {
    return Status(Code::kFailedPrecondition, message, kContainerStopped);
  }
  if (Contains(err, "loading container")) return Status(Code::kNotFound, message, kNotFoundReason);
  // The bundle, its spec or its root filesystem cannot be used (or is not the one that was
  // checkpointed: a spec field that differs on restore).
  for (std::string_view s : {"reading spec", "error opening spec file", "error unmarshaling spec",
                             "cannot read", "failed to load", "failed to stat mount",
                             "does not match across checkpoint restore for container"}) {
    if (Contains(err, s)) return Status(Code::kInvalidArgument, message, kBadBundle);
  }
  if (Contains(err, "not found")) return Status(Code::kNotFound, message, kNotFoundReason);
  return Status(Code::kInternal, message, kRuntimeError);
}

Status CheckBundle(const std::string& bundle) {
  auto bad = [&](const std::string& why) {
    return Status(Code::kInvalidArgument, "bad bundle " + bundle + ": " + why, kBadBundle);
  };
  if (bundle.empty()) return bad("no bundle directory given");
  std::error_code ec;
  if (!fs::is_directory(bundle, ec)) return bad("not a directory");
  const fs::path config = fs::path(bundle) / "config.json";
  std::ifstream in(config);
  if (!in) return bad("cannot read config.json");
  nlohmann::json spec;
  try {
    spec = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    return bad(std::string("config.json: ") + e.what());
  }
  if (!spec.is_object() || !spec.contains("root") || !spec["root"].is_object() ||
      !spec["root"].contains("path") || !spec["root"]["path"].is_string()) {
    return bad("config.json has no root.path");
  }
  fs::path rootfs = spec["root"]["path"].get<std::string>();
  if (rootfs.is_relative()) rootfs = fs::path(bundle) / rootfs;
  if (!fs::is_directory(rootfs, ec))
    return bad("root filesystem " + rootfs.string() + " is not a directory");
  return OkStatus();
}

RunscDriver::RunscDriver(std::string runsc_path, std::vector<std::string> global_flags,
                         RunscDeadlines deadlines)
    : runsc_path_(std::move(runsc_path)),
      global_flags_(std::move(global_flags)),
      deadlines_(deadlines) {}

std::vector<std::string> RunscDriver::Argv(const std::string& root,
                                           const std::vector<std::string>& args) const {
  std::vector<std::string> argv = {runsc_path_};
  if (!root.empty()) {
    argv.push_back("-root");
    argv.push_back(root);
  }
  argv.insert(argv.end(), global_flags_.begin(), global_flags_.end());
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::vector<std::string> RunscDriver::WithRootOverlay(const SandboxRef& ref, std::vector<std::string> args) {
  if (!ref.shared_rootfs) return args;
  // runsc's default root overlay ("root:self") keeps its upper layer in a file inside the
  // rootfs directory: with one rootfs shared by every actor of an image, each sandbox would
  // write its filestore into the shared cache. Here it goes to the sandbox's own root (runsc
  // unlinks it at once; a checkpoint saves its contents), after the operator's flags so it wins.
  args.insert(args.begin(), "-overlay2=root:dir=" + ref.root);
  return args;
}

Result<CommandResult> RunscDriver::Call(const char* op, const std::string& sandbox,
                                        std::vector<std::string> argv,
                                        std::chrono::milliseconds deadline,
                                        const CommandOptions& options) {
  spdlog::debug("component=runsc op={} sandbox={} argv_len={} deadline_ms={}", op, sandbox,
                argv.size(), deadline.count());
  auto r = RunCommand(argv, deadline, options);
  if (!r.ok()) return StartFailure(op, r.status());
  return r;
}

Status RunscDriver::Run(const SandboxRef& ref, std::chrono::milliseconds deadline) {
  const auto start = Clock::now();
  Status status = RequireId("run", ref);
  if (status.ok()) status = CheckBundle(ref.bundle);
  const std::string log_path = LogPathFor(ref);
  if (status.ok()) status = PrepareOutput(ref, log_path);
  if (status.ok()) {
    CommandOptions options;
    options.output_path = log_path;  // the sandbox keeps the container's stdio
    options.join_cgroups = sandbox_cgroups_;
    auto r = Call("run", ref.id,
                  Argv(ref.root, WithRootOverlay(ref, {"run", "-detach", "-bundle", ref.bundle, ref.id})),
                  deadline, options);
    if (!r.ok())
      status = r.status();
    else if (!r->success())
      status = ClassifyRunscFailure("run", *r);
  }
  LogCall("run", ref.id, status, Millis(start));
  return status;
}

Result<SandboxState> RunscDriver::State(const SandboxRef& ref) {
  const auto start = Clock::now();
  if (Status s = RequireId("state", ref); !s.ok()) return s;
  auto r = Call("state", ref.id, Argv(ref.root, {"state", ref.id}), deadlines_.query);
  Status status;
  Result<SandboxState> state = SandboxState::kNotFound;
  if (!r.ok()) {
    status = r.status();
  } else if (r->success()) {
    state = ParseState(r->out);
    status = state.status();
  } else {
    status = ClassifyRunscFailure("state", *r);
    // A sandbox that does not exist is an answer, not an error.
    if (status.code() == Code::kNotFound) status = OkStatus();
  }
  LogCall("state", ref.id, status, Millis(start), /*query=*/true);
  if (!status.ok()) return status;
  return state;
}

Status RunscDriver::Checkpoint(const SandboxRef& ref, const CheckpointOptions& options) {
  const auto start = Clock::now();
  Status status = RequireId("checkpoint", ref);
  if (status.ok() && options.image_dir.empty()) {
    status = Status(Code::kInvalidArgument, "runsc checkpoint: no image directory", kRuntimeError);
  }
  if (status.ok()) {
    std::vector<std::string> args = {"checkpoint", "-image-path", options.image_dir};
    if (options.leave_running) args.push_back("-leave-running");
    if (!options.cuda_checkpoint_path.empty()) {
      args.push_back("-cuda-checkpoint-path");
      args.push_back(options.cuda_checkpoint_path);
    }
    args.push_back(ref.id);
    auto r = Call("checkpoint", ref.id, Argv(ref.root, args), options.deadline);
    if (!r.ok())
      status = r.status();
    else if (!r->success())
      status = ClassifyRunscFailure("checkpoint", *r);
  }
  LogCall("checkpoint", ref.id, status, Millis(start));
  return status;
}

Status RunscDriver::Restore(const SandboxRef& ref, const RestoreOptions& options) {
  const auto start = Clock::now();
  Status status = RequireId("restore", ref);
  if (status.ok() && options.image_dir.empty()) {
    status = Status(Code::kInvalidArgument, "runsc restore: no image directory", kRuntimeError);
  }
  if (status.ok()) status = CheckBundle(ref.bundle);
  const std::string log_path = LogPathFor(ref);
  if (status.ok()) status = PrepareOutput(ref, log_path);
  if (status.ok()) {
    CommandOptions command_options;
    command_options.output_path = log_path;  // the sandbox keeps the container's stdio
    command_options.join_cgroups = sandbox_cgroups_;
    auto r = Call("restore", ref.id,
                  Argv(ref.root, WithRootOverlay(ref, {"restore", "-detach", "-image-path", options.image_dir,
                                                       "-bundle", ref.bundle, ref.id})),
                  options.deadline, command_options);
    if (!r.ok())
      status = r.status();
    else if (!r->success())
      status = ClassifyRunscFailure("restore", *r);
  }
  LogCall("restore", ref.id, status, Millis(start));
  return status;
}

Status RunscDriver::WaitRestored(const SandboxRef& ref, std::chrono::milliseconds deadline) {
  const auto start = Clock::now();
  Status status = RequireId("wait", ref);
  if (status.ok()) {
    // Returns once the CUDA toggle back and the background page loading are done, with the
    // restore's error (`post restore work failed: …`, after which runsc has killed the sandbox).
    auto r = Call("wait", ref.id, Argv(ref.root, {"wait", "-restore", ref.id}), deadline);
    if (!r.ok())
      status = r.status();
    else if (!r->success())
      status = ClassifyRunscFailure("wait -restore", *r);
  }
  LogCall("wait-restore", ref.id, status, Millis(start));
  return status;
}

Status RunscDriver::Simple(const char* op, const SandboxRef& ref) {
  const auto start = Clock::now();
  Status status = RequireId(op, ref);
  if (status.ok()) {
    auto r = Call(op, ref.id, Argv(ref.root, {op, ref.id}), deadlines_.query);
    if (!r.ok())
      status = r.status();
    else if (!r->success())
      status = ClassifyRunscFailure(op, *r);
  }
  LogCall(op, ref.id, status, Millis(start));
  return status;
}

Result<int64_t> ParseRunscEventsMemory(const std::string& out) {
  try {
    return nlohmann::json::parse(out).at("data").at("memory").at("usage").at("usage").get<int64_t>();
  } catch (const std::exception& e) {
    return Status(Code::kInternal, std::string("runsc events: unreadable output: ") + e.what(), kRuntimeError);
  }
}

Result<int64_t> RunscDriver::MemoryUsage(const SandboxRef& ref) {
  const auto start = Clock::now();
  if (Status s = RequireId("events", ref); !s.ok()) return s;
  auto r = Call("events", ref.id, Argv(ref.root, {"events", "-stats", ref.id}), deadlines_.query);
  Result<int64_t> usage = Status(Code::kInternal, "runsc events: no answer", kRuntimeError);
  if (!r.ok()) {
    usage = r.status();
  } else if (!r->success()) {
    usage = ClassifyRunscFailure("events", *r);
  } else {
    usage = ParseRunscEventsMemory(r->out);
  }
  LogCall("events", ref.id, usage.status(), Millis(start), /*query=*/true);
  return usage;
}

Status RunscDriver::Freeze(const SandboxRef& ref) { return Simple("pause", ref); }

Status RunscDriver::Thaw(const SandboxRef& ref) { return Simple("resume", ref); }

Result<ExecResult> RunscDriver::Exec(const SandboxRef& ref, const std::vector<std::string>& argv,
                                     std::chrono::milliseconds deadline) {
  return Exec(ref, ExecRequest{argv, {}, deadline});
}

Result<ExecResult> RunscDriver::Exec(const SandboxRef& ref, const ExecRequest& request) {
  const auto start = Clock::now();
  Status status = RequireId("exec", ref);
  if (status.ok() && request.argv.empty()) {
    status = Status(Code::kInvalidArgument, "runsc exec: empty argv", kRuntimeError);
  }
  ExecResult result;
  if (status.ok()) {
    std::vector<std::string> args = {"exec"};
    for (const auto& e : request.env) {
      args.push_back("-env");
      args.push_back(e);
    }
    args.push_back(ref.id);
    args.insert(args.end(), request.argv.begin(), request.argv.end());
    auto r = Call("exec", ref.id, Argv(ref.root, args), request.deadline);
    if (!r.ok()) {
      status = r.status();
    } else {
      // runsc exits 128 on its own failures, and so may the process: tell them apart by
      // runsc's texts about the container. Anything else is the process's outcome.
      const std::string& err = r->err;
      if (r->timed_out ||
          (r->exit_code == 128 &&
           (Contains(err, "loading container") || Contains(err, "cannot execute in container") ||
            Contains(err, "sandbox is not running") ||
            Contains(err, "connecting to control server")))) {
        status = ClassifyRunscFailure("exec", *r);
      } else {
        result.exit_code = r->term_signal != 0 ? 128 + r->term_signal : r->exit_code;
        result.out = r->out;
        result.err = r->err;
      }
    }
  }
  LogCall("exec", ref.id, status, Millis(start));
  if (!status.ok()) return status;
  return result;
}

Status RunscDriver::Delete(const SandboxRef& ref) {
  const auto start = Clock::now();
  Status status = RequireId("delete", ref);
  if (status.ok() && !RootMayHoldSandbox(ref.root)) {
    // runsc keeps a sandbox's state under its -root, which it creates at the first create: no
    // root, nothing runsc could find to delete — and no runsc process started (tens of ms,
    // on every resume's path) to say so.
    spdlog::debug("component=runsc op=delete sandbox={} result=absent root={}", ref.id, ref.root);
    return OkStatus();
  }
  if (status.ok()) {
    // One id per call: with -force, ids after a missing one would be skipped (runsc.md §5).
    auto r =
        Call("delete", ref.id, Argv(ref.root, {"delete", "-force", ref.id}), deadlines_.remove);
    if (!r.ok()) {
      status = r.status();
    } else if (!r->success()) {
      status = ClassifyRunscFailure("delete", *r);
      if (status.code() == Code::kNotFound) status = OkStatus();  // already gone
    }
  }
  if (status.ok()) ReleaseRootIfEmpty(ref.root);
  LogCall("delete", ref.id, status, Millis(start));
  return status;
}

bool RootMayHoldSandbox(const std::string& root) {
  if (root.empty()) return true;  // runsc's default root: not this agent's to judge
  std::error_code ec;
  const bool exists = fs::exists(root, ec);
  return exists || ec;  // an unreadable root is asked about
}

void RunscDriver::ReleaseRootIfEmpty(const std::string& root) {
  // With -network=none runsc bind-mounts a shared empty network namespace on <root>/null-netns
  // at the first create and never unmounts it: every actor root would leak a mount (and could
  // not be removed: EBUSY). Once no container is left under the root it pins nothing; the next
  // create in this root makes a new one.
  const fs::path netns = fs::path(root) / "null-netns";
  std::error_code ec;
  if (!fs::exists(netns, ec)) return;
  auto left = List(root);
  if (!left.ok() || !left->empty()) return;
  if (umount2(netns.c_str(), MNT_DETACH) != 0 && errno != EINVAL) {
    spdlog::warn("component=runsc op=release_root root={} result=error error=\"umount {}: {}\"",
                 root, netns.string(), std::strerror(errno));
    return;
  }
  if (unlink(netns.c_str()) != 0 && errno != ENOENT) {
    spdlog::warn("component=runsc op=release_root root={} result=error error=\"unlink {}: {}\"",
                 root, netns.string(), std::strerror(errno));
    return;
  }
  spdlog::debug("component=runsc op=release_root root={} result=ok", root);
}

Result<std::vector<std::string>> RunscDriver::List(const std::string& root) {
  const auto start = Clock::now();
  Status status;
  std::vector<std::string> ids;
  if (root.empty()) status = Status(Code::kInvalidArgument, "runsc list: no root", kRuntimeError);
  if (status.ok()) {
    auto r = Call("list", "", Argv(root, {"list", "-format", "json"}), deadlines_.query);
    if (!r.ok()) {
      status = r.status();
    } else if (!r->success()) {
      status = ClassifyRunscFailure("list", *r);
    } else {
      try {
        const auto j = nlohmann::json::parse(r->out);
        if (j.is_array()) {  // `null` when there is none
          for (const auto& c : j) ids.push_back(c.at("id").get<std::string>());
        } else if (!j.is_null()) {
          throw std::runtime_error("not an array");
        }
      } catch (const std::exception& e) {
        status = Status(Code::kInternal, std::string("runsc list: unreadable output: ") + e.what(),
                        kRuntimeError);
      }
    }
  }
  LogCall("list", root, status, Millis(start), /*query=*/true);
  if (!status.ok()) return status;
  return ids;
}

Result<std::string> RunscDriver::Version() {
  {
    std::lock_guard lock(cache_mu_);
    if (version_) return *version_;
  }
  const auto start = Clock::now();
  Status status;
  std::string version;
  auto r = Call("version", "", Argv("", {"--version"}), deadlines_.query);
  if (!r.ok()) {
    status = r.status();
  } else if (!r->success()) {
    status = ClassifyRunscFailure("--version", *r);
  } else {
    // "runsc version <v>\nspec: <oci version>\n"
    std::istringstream in(r->out);
    std::string first;
    std::getline(in, first);
    constexpr std::string_view kPrefix = "runsc version ";
    if (first.rfind(kPrefix, 0) == 0 && first.size() > kPrefix.size()) {
      version = first.substr(kPrefix.size());
      while (!version.empty() && (version.back() == ' ' || version.back() == '\r'))
        version.pop_back();
    } else {
      status = Status(Code::kInternal, "runsc --version: unexpected output \"" + first + "\"",
                      kRuntimeError);
    }
  }
  LogCall("version", "", status, Millis(start), /*query=*/true);
  if (!status.ok()) return status;
  std::lock_guard lock(cache_mu_);
  version_ = version;
  return version;
}

Result<bool> RunscDriver::SupportsCudaCheckpoint() {
  {
    std::lock_guard lock(cache_mu_);
    if (supports_cuda_) return *supports_cuda_;
  }
  const auto start = Clock::now();
  Status status;
  bool supported = false;
  // `checkpoint --help` exits non-zero by design ("help requested"): only its text counts.
  auto r = Call("checkpoint_help", "", Argv("", {"checkpoint", "--help"}), deadlines_.query);
  if (!r.ok()) {
    status = r.status();
  } else if (r->timed_out || r->term_signal != 0) {
    status = ClassifyRunscFailure("checkpoint --help", *r);
  } else {
    supported = Contains(r->out + r->err, "-cuda-checkpoint-path");
  }
  LogCall("checkpoint_help", "", status, Millis(start), /*query=*/true);
  if (!status.ok()) return status;
  std::lock_guard lock(cache_mu_);
  supports_cuda_ = supported;
  return supported;
}

}  // namespace stasis
