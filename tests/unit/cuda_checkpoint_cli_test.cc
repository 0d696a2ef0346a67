// stasis-cuda-checkpoint's command line, run as a real process: argument errors, help, a
// missing libcuda, an old driver (a stand-in libcuda that reports R550), and the CLI logic
// of each command against a stand-in that reports R580 and logs the driver calls it gets.
// The stand-ins are labelled in tests/support/fake_libcuda_*.c; whether the helper really
// checkpoints a GPU process is proven on a GPU by hack/gpu-helper-proof.sh, not here.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api/names.h"
#include "base/subprocess.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

const std::string kHelper = std::string(STASIS_BINARY_DIR) + "/stasis-cuda-checkpoint";
const std::string kOldDriverDir = std::string(STASIS_BINARY_DIR) + "/tests/fake-libcuda-r550";
const std::string kR580Dir = std::string(STASIS_BINARY_DIR) + "/tests/fake-libcuda-r580";

// The helper's exit statuses (cmd/stasis-cuda-checkpoint/args.h, docs/gpu.md).
constexpr int kExitCudaError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitLockTimeout = 3;
constexpr int kExitNoDriver = 4;
constexpr int kExitOldDriver = 255;

class CudaCheckpointCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // RunCommand appends our variables to the inherited environment; drop an inherited
    // LD_LIBRARY_PATH so the only one the helper sees is the test's.
    unsetenv("LD_LIBRARY_PATH");
  }

  void SetUp() override {
    char pattern[] = "/tmp/stasis-cuda-cli-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
    empty_lib_dir_ = dir_ / "empty";
    fs::create_directory(empty_lib_dir_);
    log_ = dir_ / "calls.log";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs the helper with LD_LIBRARY_PATH=lib_dir plus `env`.
  CommandResult Run(std::vector<std::string> args, const std::string& lib_dir,
                    std::vector<std::string> env = {}) {
    args.insert(args.begin(), kHelper);
    CommandOptions options;
    options.extra_env = std::move(env);
    options.extra_env.push_back("LD_LIBRARY_PATH=" + lib_dir);
    auto result = RunCommand(args, 30s, options);
    EXPECT_TRUE(result.ok()) << result.status().ToString();
    return result.ok() ? *result : CommandResult{};
  }
  // Runs the helper against the R580 stand-in, which logs its calls to log_.
  CommandResult RunR580(std::vector<std::string> args, std::vector<std::string> env = {}) {
    env.push_back("FAKE_LIBCUDA_LOG=" + log_.string());
    return Run(std::move(args), kR580Dir, std::move(env));
  }
  // The driver calls the stand-in saw, one per line, "init" left out.
  std::string Calls() const {
    std::ifstream in(log_);
    std::string line, calls;
    while (std::getline(in, line)) {
      if (line.rfind("init ", 0) != 0) calls += line + "\n";
    }
    return calls;
  }

  fs::path dir_, empty_lib_dir_, log_;
};

// The one-line contract: a failure prints exactly one line on stderr, nothing on stdout.
void ExpectOneLineError(const CommandResult& r, int exit_code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, exit_code) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("stasis-cuda-checkpoint: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "missing '" << needle << "' in: " << r.err;
}

TEST_F(CudaCheckpointCliTest, HelpListsEveryCommandAndTheDefaultTimeout) {
  for (const char* flag : {"--help", "-h"}) {
    CommandResult r = Run({flag}, empty_lib_dir_);
    EXPECT_EQ(r.exit_code, 0) << flag;
    EXPECT_EQ(r.err, "");
    for (const char* text :
         {"--get-state --pid", "--toggle --pid", "--action lock|checkpoint|restore|unlock --pid",
          "[--timeout <ms>]", "--get-restore-tid --pid", "--timeout", "default 30000", "R570"}) {
      EXPECT_NE(r.out.find(text), std::string::npos) << "help lacks '" << text << "'";
    }
  }
}

TEST_F(CudaCheckpointCliTest, BadCommandLinesAreRefusedBeforeLoadingTheDriver) {
  // With no libcuda reachable, a message about the command line (exit 2) proves that parsing
  // happens first: a bad command line never costs a driver attach.
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "no command given"},
      {{"--pid", "5"}, "no command given"},
      {{"--toggle"}, "--pid is required"},
      {{"--get-state", "--pid"}, "--pid needs a value"},
      {{"--get-state", "--pid", "abc"}, "invalid process ID 'abc'"},
      {{"--get-state", "--pid", "0"}, "invalid process ID '0'"},
      {{"--get-state", "--pid", "-3"}, "invalid process ID '-3'"},
      {{"--get-state", "--pid", "99999999999"}, "invalid process ID '99999999999'"},
      {{"--get-state", "--pid", "12x"}, "invalid process ID '12x'"},
      {{"--get-state", "--toggle", "--pid", "1"}, "only one of"},
      {{"--action", "lock", "--action", "unlock", "--pid", "1"}, "only one of"},
      {{"--action", "freeze", "--pid", "1"}, "unknown action 'freeze'"},
      {{"--action"}, "--action needs a value"},
      {{"--get-state", "--pid", "1", "--timeout", "5"},
       "--timeout applies only to --toggle and --action lock"},
      {{"--action", "unlock", "--pid", "1", "-t", "5"}, "--timeout applies only"},
      {{"--action", "lock", "--pid", "1", "--timeout", "-1"}, "invalid timeout '-1'"},
      {{"--toggle", "--pid", "1", "--timeout", "4294967296"}, "invalid timeout '4294967296'"},
      {{"--toggle", "--pid", "1", "--device-map", "a=b"}, "invalid --device-map entry 'a=b'"},
      {{"--action", "restore", "--pid", "1", "-d", "GPU-0a1b2c3d-0000-4000-8000-00000000000a"}, "invalid --device-map entry"},
      {{"--action", "restore", "--pid", "1", "-d", "GPU-0a1b2c3d-0000-4000-8000-00000000000a=GPU-0a1b2c3d-0000-4000-8000-00000000000b,"}, "invalid --device-map entry ''"},
      {{"--action", "restore", "--pid", "1", "-d", "GPU-0a1b2c3d-0000-4000-8000-00000000000a=GPU-0a1b2c3d-0000-4000-8000-00000000000"}, "invalid --device-map entry"},
      {{"--action", "restore", "--pid", "1", "-d", "GPU-0a1b2c3d-0000-4000-8000-00000000000a=GPU-0a1b2c3d-0000-4000-8000-00000000000b,GPU-0a1b2c3d-0000-4000-8000-00000000000a=GPU-0a1b2c3d-0000-4000-8000-00000000000a"}, "names a GPU twice"},
      {{"--action", "restore", "--pid", "1", "-d", "GPU-0a1b2c3d-0000-4000-8000-00000000000a=GPU-0a1b2c3d-0000-4000-8000-00000000000b,GPU-0a1b2c3d-0000-4000-8000-00000000000b=GPU-0a1b2c3d-0000-4000-8000-00000000000b"}, "names a GPU twice"},
      {{"--action", "lock", "--pid", "1", "--device-map", "GPU-0a1b2c3d-0000-4000-8000-00000000000a=GPU-0a1b2c3d-0000-4000-8000-00000000000b"}, "--device-map applies only to --action restore and --toggle"},
      {{"--get-state", "--pid", "1", "-d", "GPU-0a1b2c3d-0000-4000-8000-00000000000a=GPU-0a1b2c3d-0000-4000-8000-00000000000b"}, "--device-map applies only"},
      {{"--action", "restore", "--pid", "1", "--device-map"}, "--device-map needs a value"},
      {{"--get-state", "--pid", "1", "--pid=2"}, "unknown argument '--pid=2'"},
      // A value with a newline must not break the one-line contract.
      {{"--action", "lo\nck", "--pid", "1"}, "unknown action 'lo ck'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.args));
    ExpectOneLineError(Run(c.args, empty_lib_dir_), kExitUsage, c.message);
  }
}

TEST_F(CudaCheckpointCliTest, MissingLibcudaIsReportedInOneLine) {
  // On a machine with a driver installed the ld.so cache finds the real library whatever
  // LD_LIBRARY_PATH says, so "missing" cannot be produced there.
  if (void* real = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(real);
    GTEST_SKIP() << "a real libcuda.so.1 is installed on this machine";
  }
  CommandResult r = Run({"--get-state", "--pid", "1"}, empty_lib_dir_);
  ExpectOneLineError(r, kExitNoDriver, "cannot load libcuda.so.1");
  EXPECT_NE(r.err.find("No such file"), std::string::npos) << r.err;  // dlerror()'s reason
}

TEST_F(CudaCheckpointCliTest, DriverOlderThanR570IsRefused) {
  // Stand-in: reports driver API 12040 (CUDA 12.4, R550) and nothing else.
  for (const char* command : {"--get-state", "--toggle"}) {
    CommandResult r = Run({command, "--pid", "1"}, kOldDriverDir);
    ExpectOneLineError(r, kExitOldDriver, "insufficient driver");
    EXPECT_NE(r.err.find("CUDA 12.4 (driver API version 12040)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("R570 or newer"), std::string::npos) << r.err;
  }
}

TEST_F(CudaCheckpointCliTest, GetStatePrintsTheStateWord) {
  for (const char* state : {"running", "locked", "checkpointed", "failed"}) {
    CommandResult r =
        RunR580({"--get-state", "--pid", "42"}, {std::string("FAKE_LIBCUDA_STATE=") + state});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, std::string(state) + "\n");
    EXPECT_EQ(r.err, "");
  }
  EXPECT_EQ(Calls(), "get_state pid=42\nget_state pid=42\nget_state pid=42\nget_state pid=42\n");
}

TEST_F(CudaCheckpointCliTest, GetStateReportsTheDriverError) {
  // 3 is what the driver returns for a process without a CUDA context (NVML-only, say):
  // runsc drops such a PID on a non-zero exit.
  CommandResult r = RunR580({"--get-state", "--pid", "42"}, {"FAKE_LIBCUDA_FAIL=get_state=3"});
  ExpectOneLineError(r, kExitCudaError,
                     "could not get the CUDA state of process ID 42: \"initialization error\" "
                     "(CUresult 3)");
}

TEST_F(CudaCheckpointCliTest, ToggleOfARunningProcessLocksWithTheDefaultTimeoutThenCheckpoints) {
  CommandResult r = RunR580({"--toggle", "--pid", "42"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(Calls(), "get_state pid=42\nlock pid=42 timeout_ms=30000\ncheckpoint pid=42\n");
}

TEST_F(CudaCheckpointCliTest, ToggleOfACheckpointedProcessRestoresThenUnlocks) {
  CommandResult r = RunR580({"--toggle", "-p", "42"}, {"FAKE_LIBCUDA_STATE=checkpointed"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Calls(), "get_state pid=42\nrestore pid=42\nunlock pid=42\n");
}

// R580's GPU remap (--device-map, as NVIDIA's tool spells it): the pairs reach the driver's
// restore call in order, for --action restore and for a toggle that restores; a toggle that
// would checkpoint refuses a map instead of ignoring it.
TEST_F(CudaCheckpointCliTest, ADeviceMapReachesTheDriversRestore) {
  const std::string a = "GPU-0a1b2c3d-0000-4000-8000-00000000000a", b = "GPU-0a1b2c3d-0000-4000-8000-00000000000b";
  CommandResult r = RunR580({"--action", "restore", "--pid", "42", "--device-map", a + "=" + b},
                            {"FAKE_LIBCUDA_STATE=checkpointed"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Calls(), "restore pid=42 device_map=" + a + "=" + b + "\n");
  fs::remove(log_);
  r = RunR580({"--toggle", "--pid", "42", "-d", a + "=" + b + "," + b + "=" + a}, {"FAKE_LIBCUDA_STATE=checkpointed"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Calls(), "get_state pid=42\nrestore pid=42 device_map=" + a + "=" + b + "," + b + "=" + a +
                         "\nunlock pid=42\n");
  fs::remove(log_);
  r = RunR580({"--toggle", "--pid", "42", "-d", a + "=" + b});
  ExpectOneLineError(r, kExitUsage, "process ID 42 is running: --device-map applies to a restore");
  EXPECT_EQ(Calls(), "get_state pid=42\n") << "nothing locked or checkpointed";
}

TEST_F(CudaCheckpointCliTest, ToggleTimeoutReachesTheLock) {
  EXPECT_EQ(RunR580({"--toggle", "--pid", "42", "--timeout", "500"}).exit_code, 0);
  EXPECT_EQ(RunR580({"--toggle", "--pid", "43", "-t", "0"}).exit_code, 0);
  EXPECT_EQ(Calls(),
            "get_state pid=42\nlock pid=42 timeout_ms=500\ncheckpoint pid=42\n"
            "get_state pid=43\nlock pid=43 timeout_ms=0\ncheckpoint pid=43\n");
}

TEST_F(CudaCheckpointCliTest, ALockTimeoutExitsThreeAndDoesNotCheckpoint) {
  CommandResult r = RunR580({"--toggle", "--pid", "42"}, {"FAKE_LIBCUDA_FAIL=lock=600"});
  ExpectOneLineError(r, kExitLockTimeout,
                     "lock of process ID 42 timed out after 30000 ms waiting for its GPU work; "
                     "the process is still running");
  EXPECT_EQ(Calls(), "get_state pid=42\nlock pid=42 timeout_ms=30000\n");

  r = RunR580({"--action", "lock", "--pid", "7", "--timeout", "1000"},
              {"FAKE_LIBCUDA_FAIL=lock=600"});
  ExpectOneLineError(r, kExitLockTimeout, "timed out after 1000 ms");
}

TEST_F(CudaCheckpointCliTest, AFailedCheckpointUnlocksTheProcessAgain) {
  CommandResult r = RunR580({"--toggle", "--pid", "42"}, {"FAKE_LIBCUDA_FAIL=checkpoint=2"});
  ExpectOneLineError(r, kExitCudaError,
                     "could not checkpoint process ID 42: \"out of memory\" (CUresult 2); "
                     "unlocked it again, the process is running");
  EXPECT_EQ(Calls(),
            "get_state pid=42\nlock pid=42 timeout_ms=30000\ncheckpoint pid=42\n"
            "get_state pid=42\nunlock pid=42\n");
}

TEST_F(CudaCheckpointCliTest, AFailedRestoreIsReportedAndNotUnlocked) {
  CommandResult r = RunR580({"--toggle", "--pid", "42"},
                            {"FAKE_LIBCUDA_STATE=checkpointed", "FAKE_LIBCUDA_FAIL=restore=2"});
  ExpectOneLineError(r, kExitCudaError,
                     "could not restore process ID 42: \"out of memory\" (CUresult 2)");
  EXPECT_EQ(Calls(), "get_state pid=42\nrestore pid=42\n");
}

TEST_F(CudaCheckpointCliTest, AFailedUnlockAfterRestoreSaysTheProcessIsLocked) {
  CommandResult r = RunR580({"--toggle", "--pid", "42"},
                            {"FAKE_LIBCUDA_STATE=checkpointed", "FAKE_LIBCUDA_FAIL=unlock=304"});
  ExpectOneLineError(r, kExitCudaError,
                     "restored process ID 42 but could not unlock it: \"OS call failed or "
                     "operation not supported on this OS\" (CUresult 304); the process is left "
                     "locked");
}

TEST_F(CudaCheckpointCliTest, ToggleRefusesLockedAndFailedProcesses) {
  CommandResult r = RunR580({"--toggle", "--pid", "42"}, {"FAKE_LIBCUDA_STATE=locked"});
  ExpectOneLineError(r, kExitCudaError, "process ID 42 is locked");
  r = RunR580({"--toggle", "--pid", "42"}, {"FAKE_LIBCUDA_STATE=failed"});
  ExpectOneLineError(r, kExitCudaError, "process ID 42 is in the failed CUDA state");
  // Neither guess is made: nothing but the state query reached the driver.
  EXPECT_EQ(Calls(), "get_state pid=42\nget_state pid=42\n");
}

TEST_F(CudaCheckpointCliTest, EachActionIsExactlyOneDriverCall) {
  struct Case {
    const char* action;
    const char* initial_state;
    const char* call;
  };
  for (const Case& c : {Case{"lock", "running", "lock pid=9 timeout_ms=30000"},
                        Case{"checkpoint", "locked", "checkpoint pid=9"},
                        Case{"restore", "checkpointed", "restore pid=9"},
                        Case{"unlock", "locked", "unlock pid=9"}}) {
    fs::remove(log_);
    CommandResult r = RunR580({"--action", c.action, "--pid", "9"},
                              {std::string("FAKE_LIBCUDA_STATE=") + c.initial_state});
    EXPECT_EQ(r.exit_code, 0) << c.action << ": " << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(Calls(), std::string(c.call) + "\n");
  }
}

TEST_F(CudaCheckpointCliTest, AnIllegalActionReportsTheDriversRefusal) {
  CommandResult r = RunR580({"--action", "unlock", "--pid", "9"});  // unlock on RUNNING
  ExpectOneLineError(
      r, kExitCudaError,
      "could not unlock process ID 9: \"the operation cannot be performed in the present "
      "state\" (CUresult 401)");
}

TEST_F(CudaCheckpointCliTest, GetRestoreTidPrintsTheThreadId) {
  CommandResult r = RunR580({"--get-restore-tid", "--pid", "100"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "107\n");  // the stand-in answers pid + 7
}

TEST_F(CudaCheckpointCliTest, ACudaInitFailureIsReported) {
  CommandResult r = RunR580({"--get-state", "--pid", "1"}, {"FAKE_LIBCUDA_FAIL=init=100"});
  ExpectOneLineError(r, kExitCudaError,
                     "error initializing CUDA: \"no CUDA-capable device is detected\" "
                     "(CUresult 100)");
}

TEST(CudaCheckpointCdiTest, MountsTheHelperReadOnlyAtTheApiDefaultPath) {
  // The CDI spec and the API default must name the same path, or runsc's -cuda-checkpoint-path
  // points at nothing and every CUDA process is silently skipped (reference/runsc.md §6.5).
  std::ifstream in(std::string(STASIS_SOURCE_DIR) + "/manifests/cdi/stasis-cuda-checkpoint.yaml");
  ASSERT_TRUE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string spec = text.str();
  for (const std::string& line :
       {std::string("containerPath: ") + api::kDefaultCudaCheckpointPath,
        std::string("hostPath: /usr/lib/stasis/cuda-checkpoint/stasis-cuda-checkpoint"),
        std::string("containerPath: ") + api::kCudaCheckpointPrivateDir,
        std::string("kind: stasis.dev/cuda-checkpoint"), std::string("- name: helper"),
        std::string(R"(options: ["ro", "nosuid", "nodev", "bind"])")}) {
    EXPECT_NE(spec.find(line), std::string::npos) << "CDI spec lacks: " << line;
  }
}

// The shipped helper's interpreter and RPATH are where the node agent and the CDI spec put its
// private directory, and lib/ holds that loader: otherwise it starts in no container at all.
TEST(CudaCheckpointSelfContainedTest, InterpreterAndRpathAreThePrivateDirectory) {
  const std::string helper = std::string(STASIS_BINARY_DIR) + "/cuda-checkpoint/stasis-cuda-checkpoint";
  auto program = RunCommand({"readelf", "--program-headers", "--dynamic", helper}, 30s);
  ASSERT_TRUE(program.ok() && program->success()) << (program.ok() ? program->err : program.status().ToString());
  EXPECT_NE(program->out.find(std::string("[Requesting program interpreter: ") +
                              api::kCudaCheckpointPrivateLoader + "]"),
            std::string::npos)
      << program->out;
  EXPECT_NE(program->out.find(std::string("(RPATH)              Library rpath: [") +
                              api::kCudaCheckpointPrivateDir + "/lib]"),
            std::string::npos)
      << "DT_RPATH (not RUNPATH) at the private lib/:\n" << program->out;
  const std::string loader = std::string(api::kCudaCheckpointPrivateLoader);
  EXPECT_TRUE(fs::exists(std::string(STASIS_BINARY_DIR) + "/cuda-checkpoint/lib/" +
                         loader.substr(loader.rfind('/') + 1)));
  // Run on its own loader, as the kernel would run it in a container.
  auto help = RunCommand({std::string(STASIS_BINARY_DIR) + "/cuda-checkpoint/lib/" + loader.substr(loader.rfind('/') + 1),
                          "--library-path", std::string(STASIS_BINARY_DIR) + "/cuda-checkpoint/lib", helper, "--help"},
                         30s);
  ASSERT_TRUE(help.ok());
  EXPECT_EQ(help->exit_code, 0) << help->err;
}

TEST(CudaCheckpointArm64Test, CrossCompilesToAnAarch64Executable) {
  // hack/test.sh installs the cross compiler (hack/install-deps.sh). Without it this fails
  // (a unit test never installs packages, and a skip would count as a pass it is not).
  ASSERT_EQ(system("command -v aarch64-linux-gnu-gcc >/dev/null 2>&1"), 0)
      << "aarch64-linux-gnu-gcc is not installed: run hack/install-deps.sh "
         "(packages gcc-aarch64-linux-gnu libc6-dev-arm64-cross)";
  char pattern[] = "/tmp/stasis-cuda-arm64-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const fs::path out = fs::path(pattern) / "stasis-cuda-checkpoint";
  // STASIS_NO_INSTALL: a unit test never installs packages; a half-installed toolchain (no
  // libc6-dev-arm64-cross) fails here with the script's message naming the package.
  CommandOptions options;
  options.extra_env = {"STASIS_NO_INSTALL=1"};
  auto r = RunCommand(
      {std::string(STASIS_SOURCE_DIR) + "/hack/build-cuda-checkpoint-arm64.sh", out.string()}, 120s,
      options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 0) << r->err;
  // Read the ELF header ourselves rather than trusting the script's own check.
  std::ifstream in(out, std::ios::binary);
  unsigned char header[20] = {};
  in.read(reinterpret_cast<char*>(header), sizeof header);
  ASSERT_EQ(in.gcount(), 20);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(header), 4),
            "\x7f"
            "ELF");
  EXPECT_EQ(header[4], 2);                         // ELFCLASS64
  EXPECT_EQ(header[18] | (header[19] << 8), 183);  // EM_AARCH64
  fs::remove_all(pattern);
}

}  // namespace
}  // namespace stasis
