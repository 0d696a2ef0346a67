// QemuMicrovmDriver against the real QEMU (software emulation unless STASIS_MICROVM_ACCEL says
// kvm; see tests/support/microvm.h) booting the Debian-kernel + busybox bundle whose guest prints
// a counter on its serial console: run, state, list, checkpoint, restore (the counter continues
// in the same boot), a second driver instance finding the VM (an agent restart), a QEMU killed
// mid-snapshot (classified container_stopped, then cleaned by Delete), and restore refusals.
// Every test deletes its VMs; the fixture checks that no QEMU of its root is left.
#include "runtimes/qemu_microvm_driver.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/microvm.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

QemuMicrovmOptions Options() {
  QemuMicrovmOptions o;
  o.accel = MicrovmTestAccel();
  return o;
}

CheckpointOptions Ck(std::string image_dir, bool leave_running = false) {
  CheckpointOptions o;
  o.image_dir = std::move(image_dir);
  o.leave_running = leave_running;
  o.deadline = 120s;
  return o;
}

RestoreOptions Rs(std::string image_dir) {
  RestoreOptions o;
  o.image_dir = std::move(image_dir);
  o.deadline = 120s;
  return o;
}

class QemuMicrovmDriverTest : public ::testing::Test {
 protected:
  QemuMicrovmDriverTest() : dir_("stasis-microvm-"), driver_(Options()) {}
  ~QemuMicrovmDriverTest() override {
    for (const auto& ref : refs_) {
      EXPECT_TRUE(driver_.Delete(ref).ok());
      EXPECT_EQ(driver_.QemuPid(ref), 0) << "a QEMU outlived the test";
    }
  }

  SandboxRef Ref(const std::string& name) {
    SandboxRef ref;
    ref.id = "vm-" + std::to_string(getpid()) + "-" + name;
    ref.root = (dir_.path() / "run" / ref.id).string();
    ref.bundle = MicrovmTestBundle();
    ref.log_path = (dir_.path() / "logs" / (ref.id + ".log")).string();
    refs_.push_back(ref);
    return ref;
  }
  std::string Image(const std::string& name) { return (dir_.path() / "images" / name).string(); }

  // Waits until the guest's counter reaches `at_least`; returns it (or -1 on timeout).
  long WaitCount(const SandboxRef& ref, long at_least, std::chrono::seconds timeout = 120s) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      const long n = LastCount(ref.log_path);
      if (n >= at_least) return n;
      std::this_thread::sleep_for(100ms);
    }
    return -1;
  }

  TempDir dir_;
  QemuMicrovmDriver driver_;
  std::vector<SandboxRef> refs_;
};

TEST_F(QemuMicrovmDriverTest, RunCheckpointRestoreTheCounterContinuesInTheSameBoot) {
  const SandboxRef ref = Ref("life");
  auto missing = driver_.State(ref);
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, SandboxState::kNotFound);

  ASSERT_TRUE(driver_.Run(ref, 120s).ok());
  EXPECT_EQ(*driver_.State(ref), SandboxState::kRunning);
  auto listed = driver_.List(ref.root);
  ASSERT_TRUE(listed.ok());
  EXPECT_THAT(*listed, ElementsAre(ref.id));
  ASSERT_GE(WaitCount(ref, 3), 3) << "the guest never counted";
  // No guest agent: the driver offers no CUDA checkpoint (and so no exec) at all.
  EXPECT_EQ(driver_.CudaCheckpoint(), nullptr);

  // An agent restart: a fresh driver finds the VM from its files alone.
  QemuMicrovmDriver restarted(Options());
  EXPECT_EQ(*restarted.State(ref), SandboxState::kRunning);
  EXPECT_THAT(*restarted.List(ref.root), ElementsAre(ref.id));

  ASSERT_TRUE(driver_.Checkpoint(ref, Ck(Image("one"))).ok());
  const long at_checkpoint = LastCount(ref.log_path);
  EXPECT_EQ(*driver_.State(ref), SandboxState::kStopped);  // the VM quit once the image was safe
  EXPECT_GT(fs::file_size(fs::path(Image("one")) / "vm.state"), 1u << 20);
  std::ifstream info_in(fs::path(Image("one")) / "vm.json");
  const auto info = nlohmann::json::parse(info_in);
  EXPECT_EQ(info["qemuVersion"], *driver_.Version());
  EXPECT_EQ(info["memoryMiB"], 256);

  ASSERT_TRUE(driver_.Delete(ref).ok());
  EXPECT_EQ(*driver_.State(ref), SandboxState::kNotFound);
  EXPECT_TRUE(driver_.List(ref.root)->empty());

  std::this_thread::sleep_for(1s);  // nothing counts while the VM is gone
  EXPECT_EQ(LastCount(ref.log_path), at_checkpoint);
  ASSERT_TRUE(driver_.Restore(ref, Rs(Image("one"))).ok());
  EXPECT_EQ(*driver_.State(ref), SandboxState::kRunning);
  const long resumed = WaitCount(ref, at_checkpoint + 3);
  EXPECT_GE(resumed, at_checkpoint + 3) << "the counter did not continue after the restore";
  EXPECT_EQ(BootCount(ref.log_path), 1) << "the guest booted again instead of resuming";

  // Delete kills it; a second Delete of nothing succeeds.
  const long pid = driver_.QemuPid(ref);
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(driver_.Delete(ref).ok());
  EXPECT_EQ(driver_.QemuPid(ref), 0);
  EXPECT_EQ(*driver_.State(ref), SandboxState::kNotFound);
  EXPECT_TRUE(driver_.Delete(ref).ok());
}

TEST_F(QemuMicrovmDriverTest, LeaveRunningKeepsTheGuestCountingAndRefusalsAreClassified) {
  const SandboxRef ref = Ref("keep");
  ASSERT_TRUE(driver_.Run(ref, 120s).ok());
  ASSERT_GE(WaitCount(ref, 2), 2);
  // A second VM with the same id is refused; the first is untouched.
  auto again = driver_.Run(ref, 60s);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.message(), HasSubstr("already exists"));

  ASSERT_TRUE(driver_.Checkpoint(ref, Ck(Image("keep"), /*leave_running=*/true)).ok());
  EXPECT_EQ(*driver_.State(ref), SandboxState::kRunning);
  const long after = LastCount(ref.log_path);
  EXPECT_GE(WaitCount(ref, after + 2), after + 2)
      << "the guest stopped counting after -leave-running";
  // An image directory is never overwritten.
  auto twice = driver_.Checkpoint(ref, Ck(Image("keep"), true));
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.reason(), "runtime_error");
  EXPECT_EQ(*driver_.State(ref), SandboxState::kRunning);
  ASSERT_TRUE(driver_.Delete(ref).ok());

  // Restores refused before QEMU starts: another QEMU's image, a bundle of another shape.
  fs::copy(Image("keep"), Image("other-version"));
  {
    std::ifstream in(fs::path(Image("other-version")) / "vm.json");
    auto j = nlohmann::json::parse(in);
    j["qemuVersion"] = "qemu-0.0.1";
    std::ofstream(fs::path(Image("other-version")) / "vm.json") << j.dump();
  }
  auto mismatch = driver_.Restore(ref, Rs(Image("other-version")));
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.reason(), "version_mismatch");
  EXPECT_EQ(*driver_.State(ref), SandboxState::kNotFound);

  TempDir bigger("stasis-microvm-bundle-");
  for (const char* f : {"vmlinuz", "initramfs.gz"})
    fs::copy(fs::path(MicrovmTestBundle()) / f, bigger.path() / f);
  std::ofstream(bigger.path() / "microvm.json")
      << R"({"kernel": "vmlinuz", "initramfs": "initramfs.gz", "memoryMiB": 512})";
  SandboxRef other = ref;
  other.bundle = bigger.path().string();
  auto shape = driver_.Restore(other, Rs(Image("keep")));
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.reason(), "bad_bundle");
  EXPECT_THAT(shape.message(), HasSubstr("memoryMiB/vcpus"));

  // A kernel QEMU cannot load: bad_bundle quoting QEMU, and nothing of the sandbox is left.
  std::ofstream(bigger.path() / "garbage") << "not a kernel";
  std::ofstream(bigger.path() / "microvm.json") << R"({"kernel": "garbage"})";
  auto unloadable = driver_.Run(other, 60s);
  ASSERT_FALSE(unloadable.ok());
  EXPECT_EQ(unloadable.reason(), "bad_bundle") << unloadable.ToString();
  EXPECT_THAT(unloadable.message(), HasSubstr("invalid kernel header"));
  EXPECT_EQ(*driver_.State(other), SandboxState::kNotFound);
  EXPECT_EQ(driver_.QemuPid(other), 0);

  std::ofstream(bigger.path() / "microvm.json") << R"({"kernel": "../vmlinuz"})";
  auto bad = driver_.Run(other, 60s);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_EQ(bad.reason(), "bad_bundle");
}

TEST_F(QemuMicrovmDriverTest, QemuKilledMidSnapshotIsContainerStoppedAndDeleteCleansUp) {
  const SandboxRef ref = Ref("killed");
  ASSERT_TRUE(driver_.Run(ref, 120s).ok());
  ASSERT_GE(WaitCount(ref, 2), 2);
  const long pid = driver_.QemuPid(ref);
  ASSERT_GT(pid, 0);

  const fs::path stream = fs::path(Image("killed")) / "vm.state";
  auto checkpoint =
      std::async(std::launch::async, [&] { return driver_.Checkpoint(ref, Ck(Image("killed"))); });
  // The stream file appears just before QEMU starts writing it: kill QEMU then.
  const auto until = Clock::now() + 60s;
  while (!fs::exists(stream) && Clock::now() < until) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(fs::exists(stream));
  ASSERT_EQ(kill(static_cast<pid_t>(pid), SIGKILL), 0);

  const Status s = checkpoint.get();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(s.reason(), "container_stopped") << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("the VM is not running"));
  EXPECT_EQ(*driver_.State(ref), SandboxState::kStopped);
  EXPECT_THAT(*driver_.List(ref.root), ElementsAre(ref.id));  // listed until deleted, like runsc

  ASSERT_TRUE(driver_.Delete(ref).ok());
  EXPECT_EQ(*driver_.State(ref), SandboxState::kNotFound);
  EXPECT_TRUE(driver_.List(ref.root)->empty());
  // A checkpoint of what is gone is not_found, not a crash.
  auto gone = driver_.Checkpoint(ref, Ck(Image("after")));
  EXPECT_EQ(gone.reason(), "not_found");
}

}  // namespace
}  // namespace stasis::testing
