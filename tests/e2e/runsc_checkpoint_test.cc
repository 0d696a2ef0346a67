// The ground stasis stands on, checked on the pinned runsc with real sandboxes: a counter
// survives checkpoint and restore, with and without -leave-running.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;

// Waits until the counter in `id` reaches at least `at_least`; returns the value seen.
long WaitForCounter(RunscRoot& root, const std::string& id, long at_least) {
  long v = -1;
  for (int i = 0; i < 200; ++i) {
    v = root.ReadCounter(id);
    if (v >= at_least) return v;
    std::this_thread::sleep_for(50ms);
  }
  return v;
}

TEST(RunscCheckpointTest, VersionHasCudaCheckpointPath) {
  auto r = RunCommand({PinnedRunsc(), "checkpoint", "--help"}, 30s);
  ASSERT_TRUE(r.ok());
  EXPECT_NE((r->out + r->err).find("-cuda-checkpoint-path"), std::string::npos);
}

TEST(RunscCheckpointTest, CounterContinuesAfterCheckpointAndRestore) {
  Bundle bundle(CounterArgs());
  RunscRoot root;
  TempDir image("stasis-image-");
  const std::string id = "counter-" + std::to_string(getpid());
  root.Track(id);

  auto run = root.Run({"run", "-detach", "-bundle", bundle.dir().string(), id});
  ASSERT_TRUE(run.success()) << run.Summary() << "\n" << run.err;
  const long before = WaitForCounter(root, id, 15);
  ASSERT_GE(before, 15);

  auto ck = root.Run({"checkpoint", "-image-path", image.path().string(), id});
  ASSERT_TRUE(ck.success()) << ck.Summary() << "\n" << ck.err;
  EXPECT_TRUE(std::filesystem::exists(image.path() / "checkpoint.img"));
  // Without -leave-running the sandbox is gone after a checkpoint: exec must fail.
  EXPECT_EQ(root.ReadCounter(id), -1);

  auto del = root.Run({"delete", "-force", id});
  ASSERT_TRUE(del.success()) << del.err;
  auto restore = root.Run({"restore", "-detach", "-image-path", image.path().string(), "-bundle",
                           bundle.dir().string(), id});
  ASSERT_TRUE(restore.success()) << restore.Summary() << "\n" << restore.err;

  // Continued from where it was: never below the value read before the checkpoint (a fresh
  // boot would start again at 1), and still ticking.
  const long after = WaitForCounter(root, id, before);
  EXPECT_GE(after, before);
  const long later = WaitForCounter(root, id, after + 3);
  EXPECT_GT(later, after);
}

TEST(RunscCheckpointTest, LeaveRunningKeepsTheSandboxAndTheImageRestores) {
  Bundle bundle(CounterArgs());
  RunscRoot root;
  TempDir image("stasis-image-");
  const std::string id = "lr-" + std::to_string(getpid());
  const std::string copy = id + "-restored";
  root.Track(id);
  root.Track(copy);

  ASSERT_TRUE(root.Run({"run", "-detach", "-bundle", bundle.dir().string(), id}).success());
  const long before = WaitForCounter(root, id, 15);
  ASSERT_GE(before, 15);

  auto ck = root.Run({"checkpoint", "-leave-running", "-image-path", image.path().string(), id});
  ASSERT_TRUE(ck.success()) << ck.Summary() << "\n" << ck.err;
  // The original keeps counting.
  const long still = WaitForCounter(root, id, before + 3);
  EXPECT_GT(still, before);

  // The image restores into a second sandbox that continues from the checkpoint.
  auto restore = root.Run({"restore", "-detach", "-image-path", image.path().string(), "-bundle",
                           bundle.dir().string(), copy});
  ASSERT_TRUE(restore.success()) << restore.Summary() << "\n" << restore.err;
  const long restored = WaitForCounter(root, copy, before);
  EXPECT_GE(restored, before);
  EXPECT_GT(WaitForCounter(root, copy, restored + 3), restored);
}

}  // namespace
}  // namespace stasis::testing
