// `stasis node` end to end, errors of the host itself (reconcilers/node/host_errors.h), each
// produced for real under the real runsc: the agent's log directory read-only (a read-only bind
// mount: root ignores permissions), a --root so long that runsc's lock file passes PATH_MAX, and
// the snapshot directory on a full tmpfs. Each ends in a condition with its reason (Host*, or
// InsufficientSpace for the full tmpfs: the free-space check refuses before runsc runs) and a
// Warning Event; the transient host errors are tried --host-error-attempts times, then not again
// until the spec changes; the permanent one fails the start at once. Nothing is lost: a refused
// checkpoint leaves the actor RUNNING, its counter going on. The fixture is
// tests/support/node_agent_fixture.h; every mount is undone in TearDown, whatever failed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/node_agent_fixture.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kGaveUp[] = "not retried until the spec changes";

class HostErrorsTest : public NodeAgentTest {
 protected:
  void TearDown() override {
    NodeAgentTest::TearDown();
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) umount2(it->c_str(), MNT_DETACH);
  }

  // `dir` read-only: a bind mount of itself, remounted ro.
  void MountReadOnly(const std::string& dir) {
    fs::create_directories(dir);
    ASSERT_EQ(mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr), 0) << std::strerror(errno);
    mounts_.push_back(dir);
    ASSERT_EQ(mount(nullptr, dir.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr), 0) << std::strerror(errno);
  }

  // A tmpfs of `bytes` on `dir`, filled up by one file (returned).
  std::string MountFullTmpfs(const std::string& dir, size_t bytes) {
    fs::create_directories(dir);
    const std::string opts = "size=" + std::to_string(bytes);
    EXPECT_EQ(mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()), 0) << std::strerror(errno);
    mounts_.push_back(dir);
    const std::string fill = dir + "/fill";
    std::ofstream out(fill, std::ios::binary);
    const std::string block(4096, 'x');
    while (out.write(block.data(), block.size())) {
    }
    return fill;
  }

  // runsc calls of `op` on the actor's sandbox that failed, from the agent's log.
  int FailedCalls(const Agent& a, const std::string& op, const std::string& actor) {
    const std::string log = ReadFile(a.proc->log_path());
    const std::string line = "component=runsc op=" + op + " sandbox=" + Id(actor) + " result=error";
    int n = 0;
    for (size_t at = log.find(line); at != std::string::npos; at = log.find(line, at + 1)) ++n;
    return n;
  }

  // How many times Warning Events of the actor with that reason were recorded: repeats of one
  // message are one Event object with a count (the recorder sends in the background).
  static int Times(const std::vector<json>& events) {
    int n = 0;
    for (const auto& e : events) n += e.value("count", 1);
    return n;
  }

  // The Warning Events of the actor with that reason.
  std::vector<json> Warnings(const std::string& actor, const std::string& reason, size_t at_least) {
    std::vector<json> out;
    for (int i = 0; i < 50; ++i) {
      out.clear();
      auto r = Kubectl({"get", "events", "-n", ns_, "-o", "json"});
      if (r.success()) {
        for (const auto& e : json::parse(r.out).value("items", json::array())) {
          if (e["involvedObject"].value("name", "") == actor && e.value("reason", "") == reason &&
              e.value("type", "") == "Warning") {
            out.push_back(e);
          }
        }
      }
      if (out.size() >= at_least) break;
      std::this_thread::sleep_for(200ms);
    }
    return out;
  }

  std::vector<std::string> mounts_;
};

// (a) The agent's log directory is read-only: every start fails opening the sandbox's log. The
// actor is not started and not failed (an operator can fix it); Ready=False HostPathNotWritable
// names the file; three attempts (--host-error-attempts 3), then the condition says it gave up,
// and no fourth. One Event for the failure, one for giving up. Writable again and the spec
// touched (a new generation), it runs.
TEST_F(HostErrorsTest, LogDirReadOnly) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 2, "", {"--host-error-attempts", "3"});
  ASSERT_NE(a, nullptr);
  MountReadOnly(a->root + "/logs");
  CreateActor("a1", CounterSpec(a->node));
  json x;
  ASSERT_TRUE(WaitActor("a1", [](const json& y) { return CondMessage(y, "Ready").rfind(kGaveUp, 0) == 0; }, 60s,
                        "given up", &x));
  EXPECT_EQ(CondReason(x, "Ready"), "HostPathNotWritable");
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("/logs/" + Id("a1") + ".log: Read-only file system"));
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("failed 3 times in a row"));
  EXPECT_NE(StatusOf(x), "STATUS_RUNNING");
  EXPECT_NE(StatusOf(x), "STATUS_FAILED");
  std::this_thread::sleep_for(5s);  // longer than the next backoff (4 s): no fourth attempt
  EXPECT_EQ(FailedCalls(*a, "run", "a1"), 3) << AgentLogs();
  const auto events = Warnings("a1", "ResumeFailed", 2);
  ASSERT_EQ(events.size(), 2u) << json(events).dump(2);
  EXPECT_EQ(Times(events), 2) << "a retry that fails the same way says nothing new: " << json(events).dump(2);
  EXPECT_THAT(events[0].value("message", "") + events[1].value("message", ""), HasSubstr("Read-only file system"));
  EXPECT_THAT(events[0].value("message", "") + events[1].value("message", ""), HasSubstr(kGaveUp));
  ExpectAllWorkersFree(a->node);

  ASSERT_EQ(umount2((a->root + "/logs").c_str(), 0), 0) << std::strerror(errno);
  mounts_.clear();
  Patch("a1", {{"timeouts", {{"checkpointSeconds", 60}, {"restoreSeconds", 61}}}});
  ASSERT_TRUE(WaitStatus("a1", "STATUS_RUNNING", 30s, &x));
  EXPECT_EQ(CondReason(x, "Ready"), "Running");
  WaitCounter(*a, "a1", 3);
}

// (b) A --root so long that runsc's lock file beside the sandbox's state passes PATH_MAX (runsc:
// "cannot lock container metadata file: … file name too long"): no retry can shorten it, so the
// start fails the actor at the first attempt, with HostPathTooLong and an Event.
TEST_F(HostErrorsTest, RootPathTooLong) {
  const size_t id = Id("a1").size();
  // The log (<root>/logs/<id>.log) still fits in PATH_MAX; the lock file
  // (<root>/run/<id>/<id>_sandbox:<id>.lock) does not.
  const size_t want = 4065 - id;
  std::string root = (work_.path() / "long").string();
  while (root.size() + 201 < want) root += "/" + std::string(200, 'r');
  root += "/" + std::string(want - root.size() - 1, 's');
  ASSERT_EQ(root.size(), want);
  ASSERT_GT(root.size() + 20 + 3 * id, 4095u);
  fs::create_directories(root);
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 2, "", {"--root", root});
  ASSERT_NE(a, nullptr);
  CreateActor("a1", CounterSpec(a->node));
  json x;
  ASSERT_TRUE(WaitStatus("a1", "STATUS_FAILED", 30s, &x));
  EXPECT_EQ(CondReason(x, "Ready"), "HostPathTooLong");
  EXPECT_THAT(CondMessage(x, "Ready"), StartsWith(std::string(kGaveUp) + " (an error of the host no retry can fix)"));
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("cannot lock container metadata file"));
  const auto events = Warnings("a1", "ResumeFailed", 1);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(Times(events), 1);
  EXPECT_THAT(events[0].value("message", ""), StartsWith(kGaveUp));
  std::this_thread::sleep_for(3s);  // past the first backoff: never retried
  const std::string log = ReadFile(a->proc->log_path());
  const std::string line = "component=runsc op=run sandbox=" + Id("a1") + " result=error";
  EXPECT_EQ(log.find(line), log.rfind(line)) << "one attempt only";
  EXPECT_NE(log.find(line), std::string::npos);
  EXPECT_THAT(log, HasSubstr("file name too long"));
  ExpectAllWorkersFree(a->node);
}

// (c) The snapshot directory is a full tmpfs: the free-space check (the sandbox's memory, from
// `runsc events -stats`, plus the margin) refuses the checkpoint before runsc is asked. The
// actor stays RUNNING, its counter going on, CheckpointFailed=True InsufficientSpace with the
// figures and a Warning Event; `runsc checkpoint` never runs, nothing is left on disk. With
// room again (the tmpfs gone) and the spec touched, it pauses, and resumes where it was.
TEST_F(HostErrorsTest, SnapshotDiskFull) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 2, "", {"--host-error-attempts", "2"});
  ASSERT_NE(a, nullptr);
  json spec = CounterSpec(a->node);
  spec["checkpointPolicy"] = "LeaveRunningThenStop";
  CreateActor("a1", spec);
  ASSERT_TRUE(WaitStatus("a1", "STATUS_RUNNING", 30s));
  const long before = WaitCounter(*a, "a1", 3);
  const std::string snapshots = a->root + "/snapshots";
  MountFullTmpfs(snapshots, 2 << 20);
  Patch("a1", {{"desiredState", "Paused"}});
  json x;
  ASSERT_TRUE(WaitActor("a1", [](const json& y) { return CondReason(y, "CheckpointFailed") == "InsufficientSpace"; },
                        60s, "refused for want of space", &x));
  EXPECT_EQ(StatusOf(x), "STATUS_RUNNING");
  EXPECT_THAT(CondMessage(x, "CheckpointFailed"), HasSubstr("bytes free; the checkpoint needs"));
  EXPECT_THAT(CondMessage(x, "CheckpointFailed"), ::testing::Not(HasSubstr("memory unknown")))
      << "runsc events -stats answered the sandbox's memory";
  ExpectHeldBy(a->node, "a1", x);
  WaitCounter(*a, "a1", before + 10);  // the workload ran on
  EXPECT_EQ(FailedCalls(*a, "checkpoint", "a1"), 0) << AgentLogs();
  EXPECT_THAT(ReadFile(a->proc->log_path()), ::testing::Not(HasSubstr("op=checkpoint sandbox=" + Id("a1"))))
      << "runsc checkpoint was never asked";
  EXPECT_FALSE(Warnings("a1", "CheckpointFailed", 1).empty());
  EXPECT_THAT(PartialDirs(a->root), ::testing::IsEmpty());

  ASSERT_EQ(umount2(snapshots.c_str(), MNT_DETACH), 0);
  std::erase(mounts_, snapshots);
  Patch("a1", {{"timeouts", {{"checkpointSeconds", 61}, {"restoreSeconds", 60}}}});
  ASSERT_TRUE(WaitStatus("a1", "STATUS_PAUSED", 60s, &x));
  const long paused_at = before + 10;
  Patch("a1", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("a1", "STATUS_RUNNING", 60s));
  EXPECT_GE(WaitCounter(*a, "a1", paused_at), paused_at) << "resumed where it was";
}

}  // namespace
}  // namespace stasis::testing
