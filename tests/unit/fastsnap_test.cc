// The fast-snapshot path end to end on one machine, as real processes: a workload
// (tests/support/fastsnap_workload.c) preloading build/cuda-checkpoint/libstasis-fastsnap.so
// over the test stand-in libcuda of tests/support/fake_libcuda_vmm.c (device memory simulated
// in host memory, labelled there), and stasis-cuda-checkpoint --toggle against the same
// stand-in. What a real driver does with the same calls is a question for a GPU run.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kBin = STASIS_BINARY_DIR;
const std::string kHelper = kBin + "/stasis-cuda-checkpoint";
const std::string kLibrary = kBin + "/cuda-checkpoint/libstasis-fastsnap.so";
const std::string kWorkload = kBin + "/tests/fastsnap_workload";
const std::string kStandIn = kBin + "/tests/fake-libcuda-vmm";
constexpr size_t kSmallBytes = 64 << 10;  // the workload's one allocation under 2 MiB

// The workload as a child with its stdin and stdout on pipes: one command line in, one reply
// line out. Its stderr (the library's log) goes to a file for failure messages.
class Workload {
 public:
  Workload(bool preload, const fs::path& log, const std::vector<std::string>& env = {})
      : log_(log) {
    int in[2], out[2];
    EXPECT_EQ(pipe(in), 0);
    EXPECT_EQ(pipe(out), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      FILE* err = fopen(log.c_str(), "w");
      if (err != nullptr) dup2(fileno(err), 2);
      close(in[1]);
      close(out[0]);
      unsetenv("LD_PRELOAD");
      if (preload) setenv("LD_PRELOAD", kLibrary.c_str(), 1);
      for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
      execl(kWorkload.c_str(), kWorkload.c_str(), (char*)nullptr);
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Workload() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    close(to_);
    close(from_);
  }
  pid_t pid() const { return pid_; }

  // The next line it prints, or "" when none comes within `deadline` (a hang or a crash).
  std::string ReadLine(std::chrono::milliseconds deadline = 10s) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (buffer_.find('\n') == std::string::npos) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      struct pollfd p = {from_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char chunk[256];
      ssize_t n = read(from_, chunk, sizeof chunk);
      if (n <= 0) return "";
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    size_t nl = buffer_.find('\n');
    std::string line = buffer_.substr(0, nl);
    buffer_.erase(0, nl + 1);
    return line;
  }
  std::string Ask(const std::string& command, std::chrono::milliseconds deadline = 10s) {
    std::string line = command + "\n";
    EXPECT_EQ(write(to_, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    return ReadLine(deadline);
  }
  // The bytes of tracked (>= 2 MiB) allocations it reported at start.
  size_t Ready() {
    std::string line = ReadLine();
    EXPECT_EQ(line.rfind("ready tracked=", 0), 0u) << line << "\n" << Log();
    return line.rfind("ready tracked=", 0) == 0 ? std::stoull(line.substr(14)) : 0;
  }
  size_t Live() {
    std::string line = Ask("live");
    EXPECT_EQ(line.rfind("live ", 0), 0u) << line;
    return line.rfind("live ", 0) == 0 ? std::stoull(line.substr(5)) : 0;
  }
  unsigned long Launches() {
    std::string line = Ask("launches");
    EXPECT_EQ(line.rfind("launches ", 0), 0u) << line;
    return line.rfind("launches ", 0) == 0 ? std::stoul(line.substr(9)) : 0;
  }
  std::string Log() const {
    std::ifstream in(log_);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

 private:
  fs::path log_;
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
  std::string buffer_;
};

class FastsnapTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    unsetenv("LD_LIBRARY_PATH");
    unsetenv("LD_PRELOAD");
  }
  void SetUp() override {
    char pattern[] = "/tmp/stasis-fastsnap-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    calls_ = dir_ / "calls.log";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // stasis-cuda-checkpoint --toggle --pid <pid>, the stand-in's state machine starting in
  // `state` (the helper runs in its own process, so the state is the test's to say).
  CommandResult Toggle(pid_t pid, const std::string& state, std::vector<std::string> env = {}) {
    CommandOptions options;
    options.extra_env = std::move(env);
    options.extra_env.push_back("LD_LIBRARY_PATH=" + kStandIn);
    options.extra_env.push_back("FAKE_LIBCUDA_STATE=" + state);
    options.extra_env.push_back("FAKE_LIBCUDA_LOG=" + calls_.string());
    auto result = RunCommand({kHelper, "--toggle", "--pid", std::to_string(pid)}, 60s, options);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : CommandResult{};
  }
  // The checkpoint calls the helper made, "init" left out, then forgotten.
  std::string TakeCalls() {
    std::ifstream in(calls_);
    std::string line, calls;
    while (std::getline(in, line)) {
      if (line.rfind("init ", 0) != 0) calls += line + "\n";
    }
    fs::remove(calls_);
    return calls;
  }
  std::string Checkpointed(pid_t pid) {
    const std::string p = std::to_string(pid);
    return "get_state pid=" + p + "\nlock pid=" + p + " timeout_ms=30000\ncheckpoint pid=" + p + "\n";
  }
  std::string Restored(pid_t pid) {
    const std::string p = std::to_string(pid);
    return "get_state pid=" + p + "\nrestore pid=" + p + "\nunlock pid=" + p + "\n";
  }

  fs::path dir_, calls_;
};

std::string Staged(size_t bytes) { return "fast-snapshot: staged " + std::to_string(bytes) + " bytes in "; }
std::string Unstaged(size_t bytes) { return "fast-snapshot: unstaged " + std::to_string(bytes) + " bytes in "; }

TEST_F(FastsnapTest, ToggleStagesReleasesAndPutsBackAtTheSameAddresses) {
  Workload w(true, dir_ / "workload.err");
  const size_t tracked = w.Ready();
  ASSERT_EQ(tracked, (8u + 4u + 6u) << 20);  // cuMemAlloc_v2, VMM, cuGetProcAddress's alloc
  ASSERT_EQ(w.Live(), tracked + kSmallBytes);

  CommandResult stage = Toggle(w.pid(), "running");
  EXPECT_EQ(stage.exit_code, 0) << stage.err;
  EXPECT_EQ(stage.out, "");
  EXPECT_EQ(stage.err.rfind(Staged(tracked), 0), 0u) << stage.err;
  EXPECT_EQ(std::count(stage.err.begin(), stage.err.end(), '\n'), 1) << stage.err;
  EXPECT_EQ(TakeCalls(), Checkpointed(w.pid()));
  // Only the small allocation, which the driver's own checkpoint moves, still holds memory.
  EXPECT_EQ(w.Live(), kSmallBytes) << w.Log();

  CommandResult unstage = Toggle(w.pid(), "checkpointed");
  EXPECT_EQ(unstage.exit_code, 0) << unstage.err;
  EXPECT_EQ(unstage.err.rfind(Unstaged(tracked), 0), 0u) << unstage.err;
  EXPECT_EQ(TakeCalls(), Restored(w.pid()));
  EXPECT_EQ(w.Live(), tracked + kSmallBytes);
  EXPECT_EQ(w.Ask("check"), "check ok") << w.Log();

  // A second round reuses the arena and the kept reservations.
  EXPECT_EQ(Toggle(w.pid(), "running").err.rfind(Staged(tracked), 0), 0u);
  EXPECT_EQ(Toggle(w.pid(), "checkpointed").err.rfind(Unstaged(tracked), 0), 0u);
  EXPECT_EQ(w.Ask("check"), "check ok") << w.Log();

  // The workload frees with what it got at start: the pointers, and the VMM handle that the
  // unstages replaced under it. Everything tracked is gone afterwards.
  EXPECT_EQ(w.Ask("free"), "freed 0 0 0 0 0");
  EXPECT_EQ(w.Live(), kSmallBytes);
  EXPECT_EQ(Toggle(w.pid(), "running").err, "fast-snapshot: fallback: no tracked device memory to stage\n");
}

TEST_F(FastsnapTest, WithoutTheLibraryTheToggleIsThePlainOne) {
  Workload w(false, dir_ / "workload.err");
  const size_t tracked = w.Ready();
  CommandResult stage = Toggle(w.pid(), "running");
  EXPECT_EQ(stage.exit_code, 0);
  EXPECT_EQ(stage.out, "");
  EXPECT_EQ(stage.err, "");
  EXPECT_EQ(TakeCalls(), Checkpointed(w.pid()));
  EXPECT_EQ(w.Live(), tracked + kSmallBytes);  // nothing released: the driver moves it all
  CommandResult restore = Toggle(w.pid(), "checkpointed");
  EXPECT_EQ(restore.exit_code, 0);
  EXPECT_EQ(restore.out, "");
  EXPECT_EQ(restore.err, "");
  EXPECT_EQ(TakeCalls(), Restored(w.pid()));
  EXPECT_EQ(w.Ask("check"), "check ok");
}

TEST_F(FastsnapTest, ManagedMemoryAndIpcFallBackToThePlainPathWithTheProcessIntact) {
  struct Case {
    std::string command, reason;
  };
  for (const Case& c : {Case{"managed", "managed memory (cuMemAllocManaged)"},
                        Case{"ipc", "CUDA IPC export (cuIpcGetMemHandle)"}}) {
    SCOPED_TRACE(c.command);
    Workload w(true, dir_ / "workload.err");
    const size_t tracked = w.Ready();
    ASSERT_EQ(w.Ask(c.command), c.command + " 0");
    const size_t live = w.Live();
    CommandResult stage = Toggle(w.pid(), "running");
    EXPECT_EQ(stage.exit_code, 0) << stage.err;
    EXPECT_EQ(stage.err, "fast-snapshot: fallback: " + c.reason + "\n");
    EXPECT_EQ(TakeCalls(), Checkpointed(w.pid()));
    EXPECT_EQ(w.Live(), live);
    EXPECT_GE(live, tracked);
    // The gate is open again: the workload's copies run at once.
    EXPECT_EQ(w.Ask("check", 2s), "check ok");
    CommandResult restore = Toggle(w.pid(), "checkpointed");
    EXPECT_EQ(restore.exit_code, 0) << restore.err;
    EXPECT_EQ(restore.err, "");  // "idle": nothing was staged
    EXPECT_EQ(TakeCalls(), Restored(w.pid()));
    EXPECT_EQ(w.Ask("check"), "check ok");
  }
}

TEST_F(FastsnapTest, AProcessThatCanNeverStageGetsTheDriversOwnAllocator) {
  Workload served(true, dir_ / "served.err");
  served.Ready();
  EXPECT_EQ(served.Ask("alloc-big"), "alloc 0 driver=0") << "served through VMM while the fast path is possible";
  Workload unsupported(true, dir_ / "unsupported.err");
  unsupported.Ready();
  ASSERT_EQ(unsupported.Ask("managed"), "managed 0");
  EXPECT_EQ(unsupported.Ask("alloc-big"), "alloc 0 driver=" + std::to_string(4u << 20))
      << "a process that will take the plain path gets the driver's allocations";
}

TEST_F(FastsnapTest, AStageThatFailsMidwayPutsBackWhatItReleasedAndFallsBack) {
  // The second release fails: the first allocation is already unmapped and released.
  Workload w(true, dir_ / "workload.err", {"FAKE_LIBCUDA_VMM_UNMAPS=1"});
  const size_t tracked = w.Ready();
  CommandResult stage = Toggle(w.pid(), "running");
  EXPECT_EQ(stage.exit_code, 0) << stage.err;
  EXPECT_EQ(stage.err.rfind("fast-snapshot: fallback: cuMemUnmap failed (CUresult 1) at 0x", 0), 0u)
      << stage.err;
  EXPECT_EQ(TakeCalls(), Checkpointed(w.pid()));  // the plain path ran
  EXPECT_EQ(w.Live(), tracked + kSmallBytes);
  EXPECT_EQ(w.Ask("check", 2s), "check ok") << w.Log();
}

TEST_F(FastsnapTest, TheGateHoldsLaunchesWhileStagedAndReleasesThemAfter) {
  Workload w(true, dir_ / "workload.err");
  const size_t tracked = w.Ready();
  ASSERT_EQ(w.Ask("launch-start"), "launching");
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (w.Launches() < 3 && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(5ms);
  ASSERT_GE(w.Launches(), 3u);

  CommandResult stage = Toggle(w.pid(), "running");
  ASSERT_EQ(stage.err.rfind(Staged(tracked), 0), 0u) << stage.err << w.Log();
  // Held: no launch completes while staged. A launch let through would write buffer A, whose
  // memory is now unmapped: the workload would die of SIGSEGV and stop answering.
  const unsigned long held = w.Launches();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(w.Launches(), held);
  EXPECT_EQ(w.Live(), kSmallBytes);

  ASSERT_EQ(Toggle(w.pid(), "checkpointed").err.rfind(Unstaged(tracked), 0), 0u);
  const auto resumed_until = std::chrono::steady_clock::now() + 5s;
  while (w.Launches() <= held && std::chrono::steady_clock::now() < resumed_until) {
    std::this_thread::sleep_for(5ms);
  }
  EXPECT_GT(w.Launches(), held);
  EXPECT_EQ(w.Ask("launch-stop").rfind("stopped ", 0), 0u);
  EXPECT_EQ(w.Ask("check"), "check ok") << w.Log();
}

// Entry points the library cannot gate: a variant newer than its table of a name it wraps, and
// a copy it does not know (the stand-in's, with arguments in every register class and on the
// stack). cudart 13 resolves every entry point at start: resolving one must cost nothing.
TEST_F(FastsnapTest, AnUngatedEntryPointResolvedCostsNothingAndCalledTakesThePlainPath) {
  Workload w(true, dir_ / "workload.err");
  const size_t tracked = w.Ready();
  // Pinned host memory is not the fast path's: its lookup gets the driver's own definition.
  ASSERT_EQ(w.Ask("resolve-new"), "resolved 0 0 indirect, host 0 direct") << w.Log();
  EXPECT_NE(w.Log().find("cuGetProcAddress(cuMemcpyDtoH, version 90000, flags 0): a variant the "
                         "library does not wrap; a call takes the process to the plain path"),
            std::string::npos) << w.Log();
  EXPECT_NE(w.Log().find("cuGetProcAddress(cuMemcpyFutureAsync, version 13000, flags 0): an entry "
                         "point the library does not know"),
            std::string::npos) << w.Log();
  EXPECT_EQ(Toggle(w.pid(), "running").err.rfind(Staged(tracked), 0), 0u);
  EXPECT_EQ(Toggle(w.pid(), "checkpointed").err.rfind(Unstaged(tracked), 0), 0u);
  TakeCalls();

  // Every argument arrives through the trampolines (a lost one fails the stand-in's call).
  ASSERT_EQ(w.Ask("call-new"), "called 0 0 ok") << w.Log();
  CommandResult stage = Toggle(w.pid(), "running");
  EXPECT_EQ(stage.exit_code, 0) << stage.err;
  EXPECT_EQ(stage.err, "fast-snapshot: fallback: cuMemcpyFutureAsync called: an entry point the "
                       "library does not gate\n");
  EXPECT_EQ(TakeCalls(), Checkpointed(w.pid()));
  EXPECT_EQ(w.Live(), tracked + kSmallBytes);
  EXPECT_EQ(Toggle(w.pid(), "checkpointed").exit_code, 0);
  EXPECT_EQ(w.Ask("check"), "check ok") << w.Log();

  Workload plain(false, dir_ / "plain.err");
  plain.Ready();
  EXPECT_EQ(plain.Ask("resolve-new"), "resolved 0 0 direct, host 0 direct");
  EXPECT_EQ(plain.Ask("call-new"), "called 0 0 ok");
}

TEST_F(FastsnapTest, AnUngatedCallWaitsWhileStagedAndRunsAfterTheUnstage) {
  Workload w(true, dir_ / "workload.err");
  const size_t tracked = w.Ready();
  ASSERT_EQ(w.Ask("resolve-new"), "resolved 0 0 indirect, host 0 direct");
  ASSERT_EQ(Toggle(w.pid(), "running").err.rfind(Staged(tracked), 0), 0u);
  // Held: the call copies buffer A, unmapped while staged; let through, the workload would die of
  // SIGSEGV and never answer.
  EXPECT_EQ(w.Ask("call-new", 300ms), "");
  ASSERT_EQ(Toggle(w.pid(), "checkpointed").err.rfind(Unstaged(tracked), 0), 0u);
  EXPECT_EQ(w.ReadLine(), "called 0 0 ok") << w.Log();
  EXPECT_EQ(w.Ask("check"), "check ok");
  EXPECT_EQ(Toggle(w.pid(), "running").err, "fast-snapshot: fallback: cuMemcpyFutureAsync called: "
                                            "an entry point the library does not gate\n");
}

TEST_F(FastsnapTest, AFailedLockOrCheckpointAfterAStagePutsTheMemoryBack) {
  struct Case {
    std::string fail;
    int exit_code;
    std::string error;
  };
  for (const Case& c :
       {Case{"checkpoint=2", 1, "could not checkpoint process ID"},
        Case{"lock=600", 3, "timed out after 30000 ms waiting for its GPU work"}}) {
    SCOPED_TRACE(c.fail);
    Workload w(true, dir_ / "workload.err");
    const size_t tracked = w.Ready();
    CommandResult r = Toggle(w.pid(), "running", {"FAKE_LIBCUDA_FAIL=" + c.fail});
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    // Staged, put back, then the plain path's own error line, unchanged.
    std::istringstream lines(r.err);
    std::string staged, unstaged, error;
    std::getline(lines, staged);
    std::getline(lines, unstaged);
    std::getline(lines, error);
    EXPECT_EQ(staged.rfind(Staged(tracked), 0), 0u) << r.err;
    EXPECT_EQ(unstaged.rfind(Unstaged(tracked), 0), 0u) << r.err;
    EXPECT_EQ(error.rfind("stasis-cuda-checkpoint: ", 0), 0u) << r.err;
    EXPECT_NE(error.find(c.error), std::string::npos) << r.err;
    EXPECT_EQ(w.Live(), tracked + kSmallBytes);
    EXPECT_EQ(w.Ask("check", 2s), "check ok") << w.Log();
  }
}

TEST_F(FastsnapTest, StatusReportsTrackedMemoryAndAPeerWithAnotherUidIsRefused) {
  // Changing uid needs root; the suite runs as root like the rest of stasis's process tests.
  ASSERT_EQ(geteuid(), 0u) << "this case needs root to connect as another uid";
  Workload w(true, dir_ / "workload.err");
  const size_t tracked = w.Ready();
  auto ask = [&](uid_t uid) -> std::string {
    int fds[2];
    if (pipe(fds) != 0) return "pipe failed";
    pid_t child = fork();
    if (child == 0) {
      close(fds[0]);
      if (uid != 0 && setresuid(uid, uid, uid) != 0) _exit(2);
      int fd = socket(AF_UNIX, SOCK_STREAM, 0);
      struct sockaddr_un addr = {};
      addr.sun_family = AF_UNIX;
      int len = snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "stasis-fastsnap.%d", w.pid());
      socklen_t addr_len = static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + len);
      if (connect(fd, reinterpret_cast<sockaddr*>(&addr), addr_len) != 0) _exit(3);
      // A refused peer may find the connection closed before it writes: no reply either way.
      char reply[256];
      ssize_t n = send(fd, "status\n", 7, MSG_NOSIGNAL) == 7 ? read(fd, reply, sizeof reply) : 0;
      if (n > 0 && write(fds[1], reply, static_cast<size_t>(n)) != n) _exit(5);
      _exit(0);
    }
    close(fds[1]);
    std::string reply;
    char chunk[256];
    ssize_t n;
    while ((n = read(fds[0], chunk, sizeof chunk)) > 0) reply.append(chunk, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    return reply;
  };
  EXPECT_EQ(ask(0), "ok " + std::to_string(tracked) + " 3\n");
  EXPECT_EQ(ask(65534), "");  // closed without a reply
  ASSERT_EQ(w.Ask("managed"), "managed 0");
  EXPECT_EQ(ask(0), "unsupported managed memory (cuMemAllocManaged)\n");
}

TEST_F(FastsnapTest, TheTimeoutOptionIsForToggleOnlyAndDocumented) {
  auto run = [](std::vector<std::string> args) {
    args.insert(args.begin(), kHelper);
    auto result = RunCommand(args, 30s);
    EXPECT_TRUE(result.ok());
    return result.ok() ? *result : CommandResult{};
  };
  CommandResult help = run({"--help"});
  EXPECT_NE(help.out.find("--fast-snapshot-timeout-ms <ms>"), std::string::npos);
  EXPECT_NE(help.out.find("default 60000"), std::string::npos);
  CommandResult wrong = run({"--get-state", "--pid", "1", "--fast-snapshot-timeout-ms", "5"});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("--fast-snapshot-timeout-ms applies only to --toggle"), std::string::npos);
  CommandResult zero = run({"--toggle", "--pid", "1", "--fast-snapshot-timeout-ms", "0"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_NE(zero.err.find("invalid fast-snapshot timeout '0'"), std::string::npos);
}

}  // namespace
}  // namespace stasis
