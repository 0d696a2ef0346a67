// `stasis node` end to end, Data snapshots: the actor's data directories are archived instead of
// its memory, and a resume boots the process fresh over the restored data, on the same node or
// another; an archive that fails and a data directory that cannot be kept leave it running. The
// fixture is tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

// 9. Data snapshots (spec.snapshots: Data, dataDirs [/data], /data a bind mount of a host
// directory). The counter keeps its count in /data and logs every boot there. A Data pause
// archives /data from the frozen sandbox and deletes the sandbox; the resume unpacks the
// archive over the host directory (emptied here while paused, so that only the archive can
// bring the data back) and boots fresh: the process restarted, the count continued.
class DataSnapshotTest : public NodeAgentTest {
 protected:
  void SetUp() override {
    NodeAgentTest::SetUp();
    host_data_ = BundleRoot() / "host-data";
    fs::create_directories(host_data_);
    // Each write is a rename, so a freeze never catches a half-written count.
    data_bundle_ = std::make_unique<Bundle>(std::vector<std::string>{
        "/bin/sh", "-c",
        "echo boot >> /data/boots; i=$(cat /data/count 2>/dev/null || echo 0); "
        "while true; do i=$((i+1)); echo $i > /data/count.new; mv /data/count.new /data/count; "
        "echo $i > /tmp/counter; sleep 0.1; done"}, BundleRoot());
    fs::create_symlink("busybox", data_bundle_->dir() / "rootfs" / "bin" / "mv");
    json config = json::parse(ReadFile(data_bundle_->dir() / "config.json"));
    config["mounts"].push_back({{"destination", "/data"}, {"type", "bind"}, {"source", host_data_.string()},
                                {"options", {"rbind", "rw"}}});
    std::ofstream(data_bundle_->dir() / "config.json") << config.dump(2);
  }

  json DataSpec(const std::string& node, const std::string& data_dir = "/data") {
    return {{"bundle", data_bundle_->dir().string()},
            {"nodeName", node},
            {"desiredState", "Running"},
            {"snapshots", {{"onPause", "Data"}, {"onCommit", "Data"}, {"dataDirs", {data_dir}}}}};
  }

  long HostCount() {
    try {
      return std::stol(ReadFile(host_data_ / "count"));
    } catch (...) {
      return -1;
    }
  }
  int Boots() {
    const std::string b = ReadFile(host_data_ / "boots");
    return static_cast<int>(std::count(b.begin(), b.end(), '\n'));
  }
  // What a fresh boot without the archive would find: nothing of the data, and a stray file.
  void WipeHostData() {
    for (const auto& e : fs::directory_iterator(host_data_)) fs::remove_all(e.path());
    std::ofstream(host_data_ / "stray") << "not in the snapshot\n";
  }

  void TearDown() override {
    NodeAgentTest::TearDown();
    for (const auto& m : mounts_) umount2(m.c_str(), MNT_DETACH);
  }

  fs::path host_data_;
  std::unique_ptr<Bundle> data_bundle_;
  std::vector<fs::path> mounts_;  // tmpfs mounts this test made, unmounted after the agents stop
};

TEST_F(DataSnapshotTest, PauseKeepsTheDataAndBootsFresh) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("dc", DataSpec(a->node));
  json x;
  ASSERT_TRUE(WaitStatus("dc", "STATUS_RUNNING", 30s, &x));
  WaitCounter(*a, "dc", 10);
  EXPECT_EQ(Boots(), 1);

  Patch("dc", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitStatus("dc", "STATUS_PAUSED", 30s, &x));
  ExpectAllWorkersFree(a->node);
  json snap = StatusField(x, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << x["status"].dump();
  EXPECT_EQ(snap.value("scope", ""), "Data");
  EXPECT_EQ(snap.value("nodeName", ""), a->node);
  EXPECT_FALSE(snap.value("cudaCheckpointed", true));
  const std::string location = snap.value("location", "");
  const json manifest = json::parse(ReadFile(location + "/manifest.json"));
  EXPECT_EQ(manifest.value("scope", ""), "Data");
  std::set<std::string> files;
  for (const auto& f : manifest["files"]) {
    files.insert(f.value("path", ""));
    ASSERT_FALSE(f.value("chunks", nlohmann::json::array()).empty()) << f.dump();
    EXPECT_EQ(f["chunks"][0].get<std::string>().size(), 64u) << f.dump();
  }
  EXPECT_EQ(files, (std::set<std::string>{"data-0.tar", "data-dirs.json"}));
  EXPECT_THAT(ProcessesMentioning(RunDir(*a, "dc")), ::testing::IsEmpty()) << "the sandbox still runs";
  const long at_pause = HostCount();
  ASSERT_GE(at_pause, 10);
  WipeHostData();

  Patch("dc", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("dc", "STATUS_RUNNING", 30s, &x));
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("booted from the bundle with the data of snapshot " +
                                                 snap.value("id", "")));
  const long after = WaitCounter(*a, "dc", at_pause + 1);
  EXPECT_GT(after, at_pause) << "the count did not continue from the snapshot's data";
  EXPECT_EQ(Boots(), 2) << "a Data resume boots the process fresh";
  EXPECT_FALSE(fs::exists(host_data_ / "stray")) << "the directory was not replaced by the archive";
}

TEST_F(DataSnapshotTest, DataSuspendResumesOnAnotherNode) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  Agent* b = StartAgent(Node("b"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  CreateActor("dm", DataSpec(a->node));
  json x;
  ASSERT_TRUE(WaitStatus("dm", "STATUS_RUNNING", 30s, &x));
  WaitCounter(*a, "dm", 10);

  Patch("dm", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("dm", "STATUS_SUSPENDED", 30s, &x));
  json snap = StatusField(x, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << x["status"].dump();
  EXPECT_EQ(snap.value("scope", ""), "Data");
  EXPECT_EQ(snap.value("nodeName", ""), "");
  EXPECT_EQ(snap.value("location", ""), Committed(store_, "dm") + "/" + snap.value("id", ""));
  EXPECT_TRUE(fs::exists(snap.value("location", "") + "/data-0.tar"));
  EXPECT_THAT(LocalSnapshotsAfterCommit(*a, "dm"), ::testing::IsEmpty()) << "local copy kept after commit";
  ExpectAllWorkersFree(a->node);
  const long at_suspend = HostCount();
  ASSERT_GE(at_suspend, 10);
  WipeHostData();

  Patch("dm", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("dm", "STATUS_RUNNING", 30s, &x));
  EXPECT_EQ(StatusField(x, "nodeName"), json(b->node));
  ExpectHeldBy(b->node, "dm", x);
  const long after = WaitCounter(*b, "dm", at_suspend + 1);
  EXPECT_GT(after, at_suspend);
  EXPECT_EQ(Boots(), 2);
  EXPECT_FALSE(fs::exists(host_data_ / "stray"));
}

// An archive that fails (the node's snapshot directory is a 16 MiB tmpfs; the data directory
// holds 40 MiB of random bytes, so tar meets ENOSPC): DataArchiveFailed, the sandbox is thawed,
// the actor keeps RUNNING and counting, no partial image is left, the worker stays held.
TEST_F(DataSnapshotTest, FailedArchiveThawsAndKeepsRunning) {
  const fs::path root = work_.path() / "root-a";
  fs::create_directories(root);
  ASSERT_EQ(mount("tmpfs", root.c_str(), "tmpfs", 0, "size=16m"), 0) << std::strerror(errno);
  mounts_.push_back(root);
  {
    std::ifstream random("/dev/urandom", std::ios::binary);
    std::ofstream big(host_data_ / "big", std::ios::binary);
    std::vector<char> buf(1 << 20);
    for (int i = 0; i < 40; ++i) {
      random.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      big.write(buf.data(), static_cast<std::streamsize>(buf.size()));
    }
  }
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->root, root.string());
  CreateActor("fa", DataSpec(a->node));
  json x;
  ASSERT_TRUE(WaitStatus("fa", "STATUS_RUNNING", 30s, &x));
  const long before = WaitCounter(*a, "fa", 5);
  Patch("fa", {{"desiredState", "Paused"}});
  // Back to RUNNING with the condition after each failed attempt, and retried with backoff
  // (1 s, 2 s, …): a poll may first meet a retry's PAUSING, which still carries the condition.
  ASSERT_TRUE(WaitActor(
      "fa",
      [](const json& y) { return CondIs(y, "CheckpointFailed", "True") && StatusOf(y) == "STATUS_RUNNING"; },
      30s, "RUNNING with CheckpointFailed", &x));
  EXPECT_EQ(CondReason(x, "CheckpointFailed"), "DataArchiveFailed");
  EXPECT_THAT(CondMessage(x, "CheckpointFailed"), HasSubstr("tar"));
  EXPECT_FALSE(StatusField(x, "latestSnapshot").is_object());
  ExpectHeldBy(a->node, "fa", x);
  // The user gives up on the pause. Once the agent has seen that, no retry is in flight or to
  // come, so what a failed attempt left behind can be checked without racing the next one.
  Patch("fa", {{"desiredState", "Running"}});
  ASSERT_TRUE(WaitActor(
      "fa",
      [](const json& y) {
        return StatusOf(y) == "STATUS_RUNNING" && y.contains("status") &&
               y["status"].value("observedGeneration", 0L) == y["metadata"].value("generation", -1L);
      },
      30s, "RUNNING at the new generation", &x));
  WaitCounter(*a, "fa", before + 10);  // thawed: it counts on
  EXPECT_THAT(PartialDirs(root / "snapshots"), ::testing::IsEmpty());
  EXPECT_THAT(Entries(LocalSnapshots(*a, "fa")), ::testing::IsEmpty());
  ExpectHeldBy(a->node, "fa", x);
}

// A dataDir in the container's own root filesystem (no bind mount) cannot be kept by a fresh
// boot: the pause is refused with the reason, the actor keeps running, nothing is frozen.
TEST_F(DataSnapshotTest, DataDirNotABindMountKeepsRunning) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(a, nullptr);
  CreateActor("nb", DataSpec(a->node, "/tmp"));
  json x;
  ASSERT_TRUE(WaitStatus("nb", "STATUS_RUNNING", 30s, &x));
  const long before = WaitCounter(*a, "nb", 5);
  Patch("nb", {{"desiredState", "Paused"}});
  ASSERT_TRUE(WaitActor("nb", [](const json& y) { return CondIs(y, "CheckpointFailed", "True"); }, 30s,
                        "CheckpointFailed", &x));
  EXPECT_EQ(StatusOf(x), "STATUS_RUNNING");
  EXPECT_EQ(CondReason(x, "CheckpointFailed"), "DataDirUnusable");
  EXPECT_THAT(CondMessage(x, "CheckpointFailed"), HasSubstr("/tmp"));
  EXPECT_THAT(CondMessage(x, "CheckpointFailed"), HasSubstr("root filesystem"));
  EXPECT_FALSE(StatusField(x, "latestSnapshot").is_object());
  ExpectHeldBy(a->node, "nb", x);
  WaitCounter(*a, "nb", before + 5);  // it runs on, not frozen
  EXPECT_THAT(PartialDirs(a->root + "/snapshots"), ::testing::IsEmpty());
}

// The agent died while a Data pause held the sandbox frozen, before any snapshot was complete
// (frozen here with the real `runsc pause`, PAUSING written as that agent had): the next agent
// thaws the sandbox and the workload runs on — not rebooted, nothing lost.
TEST_F(DataSnapshotTest, FrozenMidArchiveIsThawed) {
  Agent* first = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(first, nullptr);
  CreateActor("fz", DataSpec(first->node));
  ASSERT_TRUE(WaitStatus("fz", "STATUS_RUNNING", 30s));
  WaitCounter(*first, "fz", 5);
  first->proc->Kill(SIGKILL);
  ASSERT_TRUE(first->proc->Wait(10s).has_value());
  auto paused = RunCommand({PinnedRunsc(), "-root", RunDir(*first, "fz"), "pause", Id("fz")}, 30s);
  ASSERT_TRUE(paused.ok() && paused->success()) << (paused.ok() ? paused->err : paused.status().ToString());
  const long frozen = HostCount();
  std::this_thread::sleep_for(500ms);
  ASSERT_EQ(HostCount(), frozen) << "not frozen";
  auto r = Kubectl({"patch", "actor", "fz", "-n", ns_, "--subresource=status", "--type=merge", "-p",
                    R"({"status":{"status":"STATUS_PAUSING","transitionStartTime":"2026-01-01T00:00:00Z"}})"});
  ASSERT_TRUE(r.success()) << r.err;

  Agent* second = StartAgent(Node("a"), PinnedRunsc());
  ASSERT_NE(second, nullptr);
  json x;
  ASSERT_TRUE(WaitStatus("fz", "STATUS_RUNNING", 30s, &x));
  EXPECT_EQ(CondReason(x, "Progressing"), "CheckpointInterrupted");
  WaitCounter(*second, "fz", frozen + 5);
  EXPECT_GT(HostCount(), frozen) << "still frozen";
  EXPECT_EQ(Boots(), 1) << "thawed, not booted again";
  EXPECT_FALSE(StatusField(x, "latestSnapshot").is_object());
  ExpectHeldBy(second->node, "fz", x);
}

}  // namespace
}  // namespace stasis::testing
