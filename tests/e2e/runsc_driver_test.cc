// RunscDriver against the pinned runsc with real sandboxes running a counter: the lifecycle
// (run, state, checkpoint, restore, exec, list, delete) and every failure class of
// runtime_driver.h produced for real — except the nvproxy save error, which needs a GPU and is
// produced by the labelled fault wrapper tests/support/runsc-nvproxy-fault.sh beside the real
// runsc; the retry after it goes to the real runsc.
#include "runtimes/runsc_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// Named options (designated initializers would leave members unnamed, which -Wextra flags).
CheckpointOptions Ck(std::string image_dir, bool leave_running = false, std::string cuda_path = "",
                     std::chrono::milliseconds deadline = 10min) {
  CheckpointOptions o;
  o.image_dir = std::move(image_dir);
  o.leave_running = leave_running;
  o.cuda_checkpoint_path = std::move(cuda_path);
  o.deadline = deadline;
  return o;
}

RestoreOptions Rs(std::string image_dir) {
  RestoreOptions o;
  o.image_dir = std::move(image_dir);
  return o;
}

long long MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

class RunscDriverTest : public ::testing::Test {
 protected:
  RunscDriverTest() : bundle_(CounterArgs()), images_("stasis-images-"), driver_(PinnedRunsc()) {}
  // Through the driver first, so that the root's null-netns mount is released and RunscRoot
  // can remove the directory.
  ~RunscDriverTest() override {
    for (const auto& ref : refs_) (void)driver_.Delete(ref);
  }

  // A sandbox ref under this test's runsc root, force-deleted when the test ends.
  SandboxRef Ref(const std::string& suffix) {
    const std::string id =
        std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()).substr(0, 20) +
        "-" + std::to_string(getpid()) + "-" + suffix;
    SandboxRef ref{id, root_.dir().string(), bundle_.dir().string(),
                   (root_.dir() / (id + ".log")).string()};
    root_.Track(id);
    refs_.push_back(ref);
    return ref;
  }

  std::string Image(const std::string& name) { return (images_.path() / name).string(); }

  long ReadCounter(const SandboxRef& ref) {
    auto r = driver_.Exec(ref, {"/bin/cat", "/tmp/counter"}, 30s);
    if (!r.ok() || r->exit_code != 0) return -1;
    try {
      return std::stol(r->out);
    } catch (...) {
      return -1;
    }
  }

  long WaitForCounter(const SandboxRef& ref, long at_least) {
    long v = -1;
    for (int i = 0; i < 200; ++i) {
      v = ReadCounter(ref);
      if (v >= at_least) return v;
      std::this_thread::sleep_for(50ms);
    }
    return v;
  }

  // Waits for the driver to report `want`; returns how long it took, or -1.
  long long WaitForState(const SandboxRef& ref, SandboxState want,
                         std::chrono::seconds limit = 20s) {
    const auto start = Clock::now();
    while (Clock::now() - start < limit) {
      auto s = driver_.State(ref);
      if (s.ok() && *s == want) return MsSince(start);
      std::this_thread::sleep_for(20ms);
    }
    return -1;
  }

  // Waits until runsc itself (not the driver's zombie check) says stopped: what a retry meets.
  bool WaitForRunscStopped(const std::string& id) {
    for (int i = 0; i < 400; ++i) {
      auto r = root_.Run({"state", id});
      if (r.success() && r.err.find("\"status\": \"stopped\"") != std::string::npos) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  void StartCounter(const SandboxRef& ref, RuntimeDriver& driver) {
    const Status run = driver.Run(ref, 60s);
    ASSERT_TRUE(run.ok()) << run.ToString();
    ASSERT_GE(WaitForCounter(ref, 10), 10);
  }

  // Whether a mount on <root>/null-netns exists (runsc makes it for -network=none).
  bool NullNetnsMounted() {
    std::ifstream in("/proc/self/mountinfo");
    const std::string needle = " " + (root_.dir() / "null-netns").string() + " ";
    for (std::string line; std::getline(in, line);) {
      if (line.find(needle) != std::string::npos) return true;
    }
    return false;
  }

  Bundle bundle_;
  RunscRoot root_;
  std::vector<SandboxRef> refs_;
  TempDir images_;
  RunscDriver driver_;
};

TEST_F(RunscDriverTest, VersionAndCudaSupport) {
  auto r = RunCommand({PinnedRunsc(), "--version"}, 30s);
  ASSERT_TRUE(r.ok() && r->success());
  auto version = driver_.Version();
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_FALSE(version->empty());
  EXPECT_EQ(r->out.rfind("runsc version " + *version + "\n", 0), 0u) << r->out;
  auto cuda = driver_.SupportsCudaCheckpoint();
  ASSERT_TRUE(cuda.ok()) << cuda.status().ToString();
  EXPECT_TRUE(*cuda);
}

TEST_F(RunscDriverTest, RunCheckpointDeleteRestoreContinuesTheCounter) {
  const SandboxRef ref = Ref("a");
  auto state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kNotFound);

  auto t = Clock::now();
  ASSERT_TRUE(driver_.Run(ref, 60s).ok());
  const long long run_ms = MsSince(t);
  state = driver_.State(ref);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(*state, SandboxState::kRunning);
  const long before = WaitForCounter(ref, 15);
  ASSERT_GE(before, 15);

  t = Clock::now();
  const Status ck = driver_.Checkpoint(ref, Ck(Image("ck1")));
  const long long checkpoint_ms = MsSince(t);
  ASSERT_TRUE(ck.ok()) << ck.ToString();
  for (const char* f : {"checkpoint.img", "pages_meta.img", "pages.img"}) {
    EXPECT_TRUE(fs::exists(fs::path(Image("ck1")) / f)) << f;
  }
  EXPECT_GT(fs::file_size(fs::path(Image("ck1")) / "checkpoint.img"), 0u);

  // Without -leave-running the sandbox is killed by the save: stopped (the driver sees the
  // zombie at once; runsc itself only once the process is reaped).
  auto right_after = driver_.State(ref);
  ASSERT_TRUE(right_after.ok());
  const long long stopped_ms = WaitForState(ref, SandboxState::kStopped);
  EXPECT_GE(stopped_ms, 0) << "still " << ToString(*driver_.State(ref));
  EXPECT_EQ(ReadCounter(ref), -1);

  ASSERT_TRUE(driver_.Delete(ref).ok());
  state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kNotFound);

  t = Clock::now();
  const Status restore = driver_.Restore(ref, Rs(Image("ck1")));
  const long long restore_ms = MsSince(t);
  ASSERT_TRUE(restore.ok()) << restore.ToString();
  state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kRunning);
  const long after = WaitForCounter(ref, before);
  EXPECT_GE(after, before);  // continued, not rebooted (a fresh boot starts at 1)
  EXPECT_GT(WaitForCounter(ref, after + 3), after);

  std::cout << "[timing] run_ms=" << run_ms << " checkpoint_ms=" << checkpoint_ms
            << " state_right_after=" << ToString(*right_after) << " stopped_after_ms=" << stopped_ms
            << " restore_ms=" << restore_ms << " image_bytes="
            << fs::file_size(fs::path(Image("ck1")) / "pages.img") +
                   fs::file_size(fs::path(Image("ck1")) / "checkpoint.img")
            << "\n";
  RecordProperty("checkpoint_ms", std::to_string(checkpoint_ms));
  RecordProperty("restore_ms", std::to_string(restore_ms));
}

TEST_F(RunscDriverTest, LeaveRunningCheckpointKeepsItRunning) {
  const SandboxRef ref = Ref("a");
  ASSERT_NO_FATAL_FAILURE(StartCounter(ref, driver_));
  const long before = ReadCounter(ref);
  const auto t = Clock::now();
  const Status ck = driver_.Checkpoint(ref, Ck(Image("lr"), true));
  const long long ms = MsSince(t);
  ASSERT_TRUE(ck.ok()) << ck.ToString();
  EXPECT_TRUE(fs::exists(fs::path(Image("lr")) / "checkpoint.img"));
  auto state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kRunning);
  EXPECT_GT(WaitForCounter(ref, before + 3), before);
  std::cout << "[timing] leave_running_checkpoint_ms=" << ms << "\n";
}

TEST_F(RunscDriverTest, ExecListAndDelete) {
  const SandboxRef ref = Ref("a");
  ASSERT_NO_FATAL_FAILURE(StartCounter(ref, driver_));

  auto exec = driver_.Exec(ref, {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, 30s);
  ASSERT_TRUE(exec.ok()) << exec.status().ToString();
  EXPECT_EQ(exec->exit_code, 3);
  EXPECT_EQ(exec->out, "out\n");
  EXPECT_EQ(exec->err, "err\n");
  // A binary missing in the container is the process's outcome (runsc's 128 and its text),
  // which is what a preflight needs to quote, not a driver error.
  auto missing =
      driver_.Exec(ref, {"/usr/local/bin/cuda-checkpoint", "--get-state", "--pid", "1"}, 30s);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_NE(missing->exit_code, 0);
  EXPECT_THAT(missing->err, HasSubstr("/usr/local/bin/cuda-checkpoint"));

  auto list = driver_.List(ref.root);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, std::vector<std::string>{ref.id});

  EXPECT_TRUE(NullNetnsMounted());
  ASSERT_TRUE(driver_.Delete(ref).ok());
  auto state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kNotFound);
  // The last container of the root is gone: so is runsc's null-netns mount.
  EXPECT_FALSE(NullNetnsMounted());
  EXPECT_FALSE(fs::exists(root_.dir() / "null-netns"));
  EXPECT_TRUE(driver_.Delete(ref).ok());  // missing: still OK
  list = driver_.List(ref.root);
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());  // runsc prints `null`

  auto gone = driver_.Exec(ref, {"/bin/true"}, 30s);
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
  EXPECT_EQ(gone.status().reason(), "not_found");
  const Status ck = driver_.Checkpoint(ref, Ck(Image("none")));
  EXPECT_EQ(ck.code(), Code::kNotFound);
  EXPECT_EQ(ck.reason(), "not_found");
}

// The seed's retry: a checkpoint without -leave-running kills the sandbox; the next one fails.
TEST_F(RunscDriverTest, CheckpointOfAStoppedSandboxIsContainerStopped) {
  const SandboxRef ref = Ref("a");
  ASSERT_NO_FATAL_FAILURE(StartCounter(ref, driver_));
  ASSERT_TRUE(driver_.Checkpoint(ref, Ck(Image("first"))).ok());
  ASSERT_TRUE(WaitForRunscStopped(ref.id));
  auto state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kStopped);

  const Status retry = driver_.Checkpoint(ref, Ck(Image("second")));
  EXPECT_EQ(retry.code(), Code::kFailedPrecondition);
  EXPECT_EQ(retry.reason(), "container_stopped");
  EXPECT_THAT(retry.message(), HasSubstr("checkpoint failed: cannot checkpoint container \"" +
                                         ref.id + "\" in state stopped"));
}

TEST_F(RunscDriverTest, BadBundleIsBadBundle) {
  // Caught before runsc: no config.json.
  SandboxRef ref = Ref("a");
  TempDir empty("stasis-empty-bundle-");
  ref.bundle = empty.path().string();
  Status s = driver_.Run(ref, 60s);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.reason(), "bad_bundle");

  // Caught by runsc: a root filesystem without the program.
  Bundle hollow(CounterArgs());
  fs::remove_all(hollow.dir() / "rootfs" / "bin");
  ref = Ref("b");
  ref.bundle = hollow.dir().string();
  s = driver_.Run(ref, 60s);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.reason(), "bad_bundle");
  EXPECT_THAT(s.message(), HasSubstr("failed to load /bin/sh"));
  auto state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kNotFound);  // runsc cleaned up its half-made container
}

TEST_F(RunscDriverTest, ATooShortDeadlineIsTimeout) {
  const SandboxRef ref = Ref("a");
  ASSERT_NO_FATAL_FAILURE(StartCounter(ref, driver_));
  const Status ck = driver_.Checkpoint(ref, Ck(Image("t"), false, "", 1ms));
  EXPECT_EQ(ck.code(), Code::kDeadlineExceeded);
  EXPECT_EQ(ck.reason(), "timeout");
  EXPECT_THAT(ck.message(), HasSubstr("runsc checkpoint: timed out"));

  const SandboxRef other = Ref("b");
  const Status run = driver_.Run(other, 1ms);
  EXPECT_EQ(run.code(), Code::kDeadlineExceeded);
  EXPECT_EQ(run.reason(), "timeout");
  EXPECT_TRUE(driver_.Delete(other).ok());
}

TEST_F(RunscDriverTest, RestoreOfAnImageFromAnotherVersionIsVersionMismatch) {
  const SandboxRef ref = Ref("a");
  ASSERT_NO_FATAL_FAILURE(StartCounter(ref, driver_));
  ASSERT_TRUE(driver_.Checkpoint(ref, Ck(Image("orig"))).ok());
  ASSERT_TRUE(driver_.Delete(ref).ok());
  fs::copy(Image("orig"), Image("patched"));
  ASSERT_NO_FATAL_FAILURE(
      PatchRunscVersion(fs::path(Image("patched")) / "checkpoint.img", "release-19990101.0"));

  const Status s = driver_.Restore(ref, Rs(Image("patched")));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.reason(), "version_mismatch");
  EXPECT_THAT(s.message(), HasSubstr("runsc version does not match across checkpoint restore, "
                                     "checkpoint: release-19990101.0 current: " +
                                     *driver_.Version()));
  auto state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kNotFound);  // a failed restore destroys what it created

  // The version was the only difference: the original image restores.
  const Status ok = driver_.Restore(ref, Rs(Image("orig")));
  EXPECT_TRUE(ok.ok()) << ok.ToString();
}

// The seed failure chain, with the GPU-only save error injected by the labelled fault wrapper
// (a test double beside the real runsc) and the retry by the real runsc.
TEST_F(RunscDriverTest, NvproxyLiveClientsKillsTheSandboxAndTheRealRetryIsContainerStopped) {
  ASSERT_EQ(setenv("STASIS_REAL_RUNSC", PinnedRunsc().c_str(), 1), 0);
  ASSERT_EQ(unsetenv("STASIS_FAULT_MODE"), 0);  // default: fail checkpoints without the CUDA flag
  RunscDriver faulty(std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-nvproxy-fault.sh");
  const SandboxRef ref = Ref("a");
  ASSERT_NO_FATAL_FAILURE(StartCounter(ref, faulty));  // everything but checkpoint passes through
  const std::string exact = "checkpoint failed: checkpointing container \"" + ref.id +
                            "\": encoding error: can't save with live nvproxy clients";

  // With -leave-running the failed save leaves the workload running.
  Status s = faulty.Checkpoint(ref, Ck(Image("lr"), true));
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.reason(), "nvproxy_live_clients");
  auto state = faulty.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kRunning);
  const long alive = ReadCounter(ref);
  EXPECT_GT(WaitForCounter(ref, alive + 3), alive);

  // With -cuda-checkpoint-path the wrapper forwards to the real runsc (nothing to toggle on a
  // CPU sandbox): the flag's argv is accepted.
  s = faulty.Checkpoint(ref, Ck(Image("cuda"), true, "/usr/local/bin/cuda-checkpoint"));
  EXPECT_TRUE(s.ok()) << s.ToString();

  // The seed: a direct checkpoint of a GPU sandbox without the CUDA toggle.
  const auto t = Clock::now();
  s = faulty.Checkpoint(ref, Ck(Image("direct")));
  const long long fault_ms = MsSince(t);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition);
  EXPECT_EQ(s.reason(), "nvproxy_live_clients");
  EXPECT_EQ(s.message(), "runsc checkpoint: exit 128: " + exact);
  // The sandbox is dead, and the failed attempt's files are left in the image directory.
  state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kStopped);
  EXPECT_EQ(ReadCounter(ref), -1);
  EXPECT_TRUE(fs::exists(fs::path(Image("direct")) / "checkpoint.img"));

  // The retry, by the REAL runsc, into a fresh directory: exactly the seed's second error.
  const Status retry = driver_.Checkpoint(ref, Ck(Image("retry")));
  EXPECT_EQ(retry.code(), Code::kFailedPrecondition);
  EXPECT_EQ(retry.reason(), "container_stopped");
  EXPECT_EQ(retry.message(),
            "runsc checkpoint: exit 128: checkpoint failed: cannot checkpoint container \"" +
                ref.id + "\" in state stopped");

  // Clean-up works from there.
  EXPECT_TRUE(driver_.Delete(ref).ok());
  state = driver_.State(ref);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(*state, SandboxState::kNotFound);
  std::cout << "[timing] nvproxy_fault_checkpoint_ms=" << fault_ms << "\n";
}

TEST_F(RunscDriverTest, FaultWrapperAlwaysModeFailsEvenWithTheCudaPath) {
  ASSERT_EQ(setenv("STASIS_REAL_RUNSC", PinnedRunsc().c_str(), 1), 0);
  ASSERT_EQ(setenv("STASIS_FAULT_MODE", "nvproxy-always", 1), 0);
  RunscDriver faulty(std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-nvproxy-fault.sh");
  const SandboxRef ref = Ref("a");
  ASSERT_NO_FATAL_FAILURE(StartCounter(ref, faulty));
  const Status s = faulty.Checkpoint(ref, Ck(Image("x"), true, "/wrong/cuda-checkpoint"));
  EXPECT_EQ(s.reason(), "nvproxy_live_clients");
  unsetenv("STASIS_FAULT_MODE");
}

}  // namespace
}  // namespace stasis::testing
