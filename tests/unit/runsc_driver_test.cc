// RunscDriver's pure parts: the failure classification on runsc's exact texts, the bundle check,
// and the argv it builds (recorded by a stand-in script; the real runsc is exercised in
// tests/e2e/runsc_driver_test.cc).
#include "runtimes/runsc_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::TempDir;

CommandResult Failed(const std::string& err, int exit_code = 128) {
  CommandResult r;
  r.exit_code = exit_code;
  r.err = err;
  return r;
}

struct Case {
  std::string err;
  Code code;
  std::string reason;
};

RestoreOptions Rs(std::string image_dir) {
  RestoreOptions o;
  o.image_dir = std::move(image_dir);
  return o;
}

// `runsc events -stats` prints one stats event in runc's format; its memory usage is the
// expected size of a checkpoint image (the free-space check).
TEST(RunscEventsTest, MemoryUsageIsReadFromTheStatsEvent) {
  EXPECT_EQ(ParseRunscEventsMemory(
                R"({"type":"stats","id":"a","data":{"cpu":{"usage":{"total":1}},"memory":{"usage":{"usage":12345678,"max":0}}}})")
                .value(),
            12345678);
  EXPECT_EQ(ParseRunscEventsMemory("").status().code(), Code::kInternal);
  EXPECT_EQ(ParseRunscEventsMemory(R"({"type":"stats","data":{}})").status().code(), Code::kInternal);
}

TEST(ClassifyRunscFailureTest, ExactRunscTextsMapToTheReasons) {
  const std::vector<Case> cases = {
      {"checkpoint failed: checkpointing container \"pause\": encoding error: can't save with live "
       "nvproxy clients\n",
       Code::kFailedPrecondition, "nvproxy_live_clients"},
      {"checkpoint failed: cannot checkpoint container \"pause\" in state stopped\n",
       Code::kFailedPrecondition, "container_stopped"},
      {"kill failed: sandbox is not running\n", Code::kFailedPrecondition, "container_stopped"},
      {"starting container: restoring container \"v2\": runsc version does not match across "
       "checkpoint restore, checkpoint: release-20260622.0 current: go-160fafc42237\n",
       Code::kFailedPrecondition, "version_mismatch"},
      {"FetchSpec failed: loading container: file does not exist\n", Code::kNotFound, "not_found"},
      {"loading container: file does not exist\n", Code::kNotFound, "not_found"},
      {"FetchSpec failed: reading spec: error opening spec file \"/b/config.json\": open "
       "/b/config.json: no such file or directory\n",
       Code::kInvalidArgument, "bad_bundle"},
      {"FetchSpec failed: reading spec: error unmarshaling spec from file \"/b/config.json\": "
       "unexpected end of JSON input\n",
       Code::kInvalidArgument, "bad_bundle"},
      {"running container: creating container: cannot create gofer process: error initializing "
       "gofer confs: failed to stat mount \"/b/rootfs\" to see if it were a directory: stat "
       "/b/rootfs: no such file or directory\n",
       Code::kInvalidArgument, "bad_bundle"},
      {"running container: creating container: cannot create sandbox: cannot read client sync "
       "file: waiting for sandbox to start: EOF\n",
       Code::kInvalidArgument, "bad_bundle"},
      {"running container: starting container: starting root container: starting sandbox: "
       "creating process: failed to load /bin/sh: no such file or directory\n",
       Code::kInvalidArgument, "bad_bundle"},
      {"checkpoint failed: checkpointing container \"c1\": connecting to control server at PID "
       "30819: connection refused\n",
       Code::kInternal, "runtime_error"},
      {"", Code::kInternal, "runtime_error"},
  };
  for (const auto& c : cases) {
    const Status s = ClassifyRunscFailure("checkpoint", Failed(c.err));
    EXPECT_EQ(s.code(), c.code) << c.err;
    EXPECT_EQ(s.reason(), c.reason) << c.err;
  }
}

TEST(ClassifyRunscFailureTest, MessageQuotesTheLastStderrLine) {
  const Status s = ClassifyRunscFailure(
      "checkpoint", Failed("W1202 some warning\ncheckpoint failed: checkpointing container \"a\": "
                           "encoding error: can't save with live nvproxy clients\n"));
  EXPECT_EQ(
      s.message(),
      "runsc checkpoint: exit 128: checkpoint failed: checkpointing container \"a\": encoding "
      "error: can't save with live nvproxy clients");
}

// The exact stderr of this runsc's checkpoint of a live CUDA context without
// -cuda-checkpoint-path on the H200 (docs/gpu-runsc-results.md, step 2a; trace shortened): the
// reason is the same as the pinned release's "can't save with live nvproxy clients", and the
// message quotes the error line, not the last frame of the Go stack under it.
TEST(ClassifyRunscFailureTest, NvproxyPmaSaveFailureWithGoStack) {
  const Status s = ClassifyRunscFailure(
      "checkpoint",
      Failed("checkpoint failed: checkpointing container \"gpu1\": encoding error: Can't save pma "
             "with non-MemoryFile of type *nvproxy.frontendFDMemmapFile:\n"
             "goroutine 139 [running]:\n"
             "gvisor.dev/gvisor/pkg/state.safely.func1()\n"
             "\tgvisor.dev/gvisor@v0.0.0-20260905035102-160fafc42237/pkg/state/state.go:309 +0x19e\n"
             "panic({0x131b780?, 0x234ce781190?})\n"
             "\truntime/panic.go:860 +0x13a\n"
             "\tgvisor.dev/gvisor@v0.0.0-20260905035102-160fafc42237/pkg/urpc/urpc.go:472 +0x6b\n"));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.reason(), "nvproxy_live_clients");
  EXPECT_EQ(s.message(),
            "runsc checkpoint: exit 128: checkpoint failed: checkpointing container \"gpu1\": "
            "encoding error: Can't save pma with non-MemoryFile of type *nvproxy.frontendFDMemmapFile");
}

TEST(ClassifyRunscFailureTest, TimeoutWinsOverAnyText) {
  CommandResult r =
      Failed("checkpoint failed: cannot checkpoint container \"a\" in state stopped", -1);
  r.timed_out = true;
  const Status s = ClassifyRunscFailure("checkpoint", r);
  EXPECT_EQ(s.code(), Code::kDeadlineExceeded);
  EXPECT_EQ(s.reason(), "timeout");
  EXPECT_THAT(s.message(), HasSubstr("runsc checkpoint: timed out"));
}

TEST(CheckBundleTest, ConfigAndRootfsMustBeUsable) {
  TempDir dir;
  const fs::path b = dir.path();
  auto reason_of = [&] { return CheckBundle(b.string()); };
  EXPECT_EQ(reason_of().reason(), "bad_bundle");
  EXPECT_THAT(reason_of().message(), HasSubstr("cannot read config.json"));
  std::ofstream(b / "config.json") << "{";
  EXPECT_THAT(reason_of().message(), HasSubstr("config.json:"));
  std::ofstream(b / "config.json") << R"({"root": {"path": "rootfs"}})";
  EXPECT_THAT(reason_of().message(), HasSubstr("is not a directory"));
  std::ofstream(b / "rootfs") << "a file";
  EXPECT_THAT(reason_of().message(), HasSubstr("is not a directory"));
  fs::remove(b / "rootfs");
  fs::create_directory(b / "rootfs");
  EXPECT_TRUE(reason_of().ok());
  EXPECT_EQ(CheckBundle((b / "missing").string()).code(), Code::kInvalidArgument);
  EXPECT_EQ(CheckBundle("").code(), Code::kInvalidArgument);
}

// A stand-in for the runsc binary that records its argv, one argument a line, and answers the
// queries with canned output. It tests only the argv the driver builds.
class ArgvTest : public ::testing::Test {
 protected:
  ArgvTest() {
    script_ = dir_.path() / "fake-runsc";
    std::ofstream(script_)
        << "#!/bin/sh\n"
           "printf '%s\\n' \"$@\" > "
        << (dir_.path() / "argv").string()
        << "\n"
           "for a; do case \"$a\" in\n"
           "  --version) echo 'runsc version release-20260622.0'; echo 'spec: 1.2.1'; exit 0;;\n"
           "  --help) echo '  -cuda-checkpoint-path string' >&2; exit 128;;\n"
           "  list) echo "
           "'[{\"id\":\"a\",\"status\":\"running\"},{\"id\":\"b\",\"status\":\"stopped\"}]'; exit "
           "0;;\n"
           "  state) echo '{\"id\":\"x\",\"status\":\"paused\",\"pid\":-1}'; exit 0;;\n"
           "esac; done\n"
           "exit 0\n";
    fs::permissions(script_, fs::perms::owner_all);
    bundle_ = dir_.path() / "bundle";
    fs::create_directories(bundle_ / "rootfs");
    std::ofstream(bundle_ / "config.json") << R"({"root": {"path": "rootfs"}})";
  }

  std::vector<std::string> LastArgv() {
    std::ifstream in(dir_.path() / "argv");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  SandboxRef Ref() {
    return {"sb1", (dir_.path() / "root").string(), bundle_.string(),
            (dir_.path() / "logs" / "sb1.log").string()};
  }

  TempDir dir_;
  fs::path script_, bundle_;
};

// No root directory, no sandbox: the delete a resume does of a leftover asks runsc nothing.
TEST_F(ArgvTest, DeleteWithoutARootStartsNoRunsc) {
  RunscDriver driver(script_.string(), {"-network=none"});
  const SandboxRef ref = Ref();
  ASSERT_FALSE(fs::exists(ref.root));
  ASSERT_TRUE(driver.Delete(ref).ok());
  EXPECT_TRUE(LastArgv().empty());
  EXPECT_FALSE(RootMayHoldSandbox(ref.root));
  EXPECT_TRUE(RootMayHoldSandbox(""));
  fs::create_directories(ref.root);
  EXPECT_TRUE(RootMayHoldSandbox(ref.root));
  ASSERT_TRUE(driver.Delete(ref).ok());
  EXPECT_THAT(LastArgv(), ElementsAre("-root", ref.root, "-network=none", "delete", "-force", "sb1"));
}

// An image's rootfs is shared by its actors: run and restore put the sandbox's writes in its
// own root, after the operator's flags (the last -overlay2 wins), and nothing else changes.
TEST_F(ArgvTest, ASharedRootfsGetsItsOverlayInTheSandboxRootOnRunAndRestore) {
  RunscDriver driver(script_.string(), {"-network=none", "-overlay2=root:self"});
  SandboxRef ref = Ref();
  ref.shared_rootfs = true;
  const std::string overlay = "-overlay2=root:dir=" + ref.root;
  ASSERT_TRUE(driver.Run(ref, 10s).ok());
  EXPECT_THAT(LastArgv(), ElementsAre("-root", ref.root, "-network=none", "-overlay2=root:self", overlay, "run",
                                      "-detach", "-bundle", bundle_.string(), "sb1"));
  ASSERT_TRUE(driver.Restore(ref, Rs("/img/1")).ok());
  EXPECT_THAT(LastArgv(), ElementsAre("-root", ref.root, "-network=none", "-overlay2=root:self", overlay,
                                      "restore", "-detach", "-image-path", "/img/1", "-bundle", bundle_.string(),
                                      "sb1"));
  CheckpointOptions ck;
  ck.image_dir = "/img/2";
  ASSERT_TRUE(driver.Checkpoint(ref, ck).ok());
  EXPECT_THAT(LastArgv(), ElementsAre("-root", ref.root, "-network=none", "-overlay2=root:self", "checkpoint",
                                      "-image-path", "/img/2", "sb1"));
}

TEST_F(ArgvTest, EveryCommandHasRootThenGlobalsThenTheSubcommand) {
  RunscDriver driver(script_.string(), {"-network=none", "-debug"});
  const SandboxRef ref = Ref();
  const std::string root = ref.root;

  ASSERT_TRUE(driver.Run(ref, 10s).ok());
  EXPECT_THAT(LastArgv(), ElementsAre("-root", root, "-network=none", "-debug", "run", "-detach",
                                      "-bundle", bundle_.string(), "sb1"));
  EXPECT_TRUE(fs::exists(ref.log_path));  // the sandbox's output goes there

  CheckpointOptions ck;
  ck.image_dir = "/img/1";
  ASSERT_TRUE(driver.Checkpoint(ref, ck).ok());
  EXPECT_THAT(LastArgv(), ElementsAre("-root", root, "-network=none", "-debug", "checkpoint",
                                      "-image-path", "/img/1", "sb1"));
  ck.leave_running = true;
  ck.cuda_checkpoint_path = "/usr/local/bin/cuda-checkpoint";
  ASSERT_TRUE(driver.Checkpoint(ref, ck).ok());
  EXPECT_THAT(LastArgv(),
              ElementsAre("-root", root, "-network=none", "-debug", "checkpoint", "-image-path",
                          "/img/1", "-leave-running", "-cuda-checkpoint-path",
                          "/usr/local/bin/cuda-checkpoint", "sb1"));

  ASSERT_TRUE(driver.Restore(ref, Rs("/img/1")).ok());
  EXPECT_THAT(LastArgv(),
              ElementsAre("-root", root, "-network=none", "-debug", "restore", "-detach",
                          "-image-path", "/img/1", "-bundle", bundle_.string(), "sb1"));

  auto exec = driver.Exec(ref, {"/bin/cat", "/tmp/counter"}, 10s);
  ASSERT_TRUE(exec.ok());
  EXPECT_THAT(LastArgv(), ElementsAre("-root", root, "-network=none", "-debug", "exec", "sb1",
                                      "/bin/cat", "/tmp/counter"));

  fs::create_directories(root);  // runsc made it at the sandbox's create
  ASSERT_TRUE(driver.Delete(ref).ok());
  EXPECT_THAT(LastArgv(),
              ElementsAre("-root", root, "-network=none", "-debug", "delete", "-force", "sb1"));

  auto state = driver.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kPaused);
  EXPECT_THAT(LastArgv(), ElementsAre("-root", root, "-network=none", "-debug", "state", "sb1"));

  auto list = driver.List(root);
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, ElementsAre("a", "b"));
  EXPECT_THAT(LastArgv(),
              ElementsAre("-root", root, "-network=none", "-debug", "list", "-format", "json"));

  auto version = driver.Version();
  ASSERT_TRUE(version.ok());
  EXPECT_EQ(*version, "release-20260622.0");
  auto cuda = driver.SupportsCudaCheckpoint();
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  EXPECT_TRUE(*cuda);
}

TEST_F(ArgvTest, ABadBundleNeverReachesRunsc) {
  RunscDriver driver(script_.string());
  SandboxRef ref = Ref();
  ref.bundle = (dir_.path() / "no-bundle").string();
  const Status s = driver.Run(ref, 10s);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.reason(), "bad_bundle");
  EXPECT_FALSE(fs::exists(dir_.path() / "argv"));
  EXPECT_EQ(driver.Restore(ref, Rs("/img")).reason(), "bad_bundle");
}

TEST(RunscDriverTest, AMissingBinaryIsARuntimeErrorNotANotFoundSandbox) {
  RunscDriver driver("/nonexistent/runsc");
  auto state = driver.State({"sb1", "/tmp/none", "", ""});
  EXPECT_EQ(state.status().code(), Code::kInternal);
  EXPECT_EQ(state.status().reason(), "runtime_error");
  EXPECT_THAT(state.status().message(), HasSubstr("cannot start runsc"));
}

}  // namespace
}  // namespace stasis
