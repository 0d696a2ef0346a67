// `stasis node` end to end when the object store (a real SeaweedFS) is not what the agent
// needs: credentials it refuses, a bucket that does not exist, a store that is down when node b
// resumes or stops in the middle of its download, and the node that took the snapshot killed
// for good. In each the snapshot is never
// lost: a commit the store refuses leaves the actor PAUSED on its complete node-local snapshot
// with CommitFailed naming what the store said, and the commit completes once the fault is
// fixed; a resume the store cannot serve rests SUSPENDED on the committed snapshot and completes
// once the store is back. The fixture is tests/support/object_store_node_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "base/subprocess.h"
#include "snapshots/s3_client.h"
#include "tests/support/object_store_node_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace std::chrono_literals;

// Bytes on disk (allocated blocks) of the files under `dir`.
int64_t AllocatedBytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    struct stat st {};
    if (it->is_regular_file(ec) && stat(it->path().c_str(), &st) == 0) total += int64_t{st.st_blocks} * 512;
  }
  return total;
}

class ObjectStoreFaultsTest : public ObjectStoreNodeTest {
 protected:
  // The store's environment with another secret key: every request's signature is refused.
  static std::vector<std::string> WrongSecretEnv() {
    std::vector<std::string> env = StoreEnv();
    for (auto& v : env) {
      if (v.rfind("AWS_SECRET_ACCESS_KEY=", 0) == 0) v = "AWS_SECRET_ACCESS_KEY=" + std::string(kWrongSecret);
    }
    return env;
  }
  // Runs actor `name` on `a` until its counter reaches 5, then asks for Suspended, which the
  // store refuses: the actor must rest PAUSED with CommitFailed. Returns the counter before
  // the suspend; *actor holds the PAUSED actor.
  long RunThenFailToCommit(Agent& a, const std::string& name, json* actor) {
    CreateActor(name, CounterSpec(a.node));
    EXPECT_TRUE(WaitStatus(name, "STATUS_RUNNING", 30s));
    const long before = WaitCounter(a, name, 5);
    Patch(name, {{"desiredState", "Suspended"}});
    EXPECT_TRUE(WaitActor(name, [](const json& y) {
      return StatusOf(y) == "STATUS_PAUSED" && CondIs(y, "CommitFailed", "True");
    }, 60s, "PAUSED with CommitFailed", actor));
    return before;
  }
  // The snapshot the actor rests on is complete on a's disk (its manifest written last).
  void ExpectCompleteOnNode(const Agent& a, const std::string& name, const json& actor) {
    const json snap = StatusField(actor, "latestSnapshot");
    EXPECT_EQ(snap.value("nodeName", ""), a.node) << "the snapshot is safe on the node";
    EXPECT_TRUE(fs::exists(fs::path(LocalSnapshots(a, name)) / snap.value("id", "") / "manifest.json"))
        << "a complete local snapshot";
  }
  // Once committed: SUSPENDED on the same snapshot, in the store, CommitFailed gone; then it
  // resumes on `a` with its counter continued from `before`.
  void ExpectCommittedThenResumes(Agent& a, const std::string& name, const std::string& id, long before,
                                  const std::string& bucket = "") {
    json x;
    ASSERT_TRUE(WaitStatus(name, "STATUS_SUSPENDED", 180s, &x)) << "the commit completes once the fault is fixed";
    EXPECT_EQ(StatusField(x, "latestSnapshot").value("id", ""), id) << "the same snapshot, committed";
    EXPECT_EQ(StatusField(x, "latestSnapshot").value("nodeName", ""), "");
    EXPECT_TRUE(Cond(x, "CommitFailed").is_null()) << x["status"].dump();
    EXPECT_EQ(Committed(name, bucket), std::set<std::string>{id});
    Patch(name, {{"desiredState", "Running"}});
    ASSERT_TRUE(WaitStatus(name, "STATUS_RUNNING", 60s, &x));
    EXPECT_GE(WaitCounter(a, name, before), before) << "restored from the store, the counter continued";
  }
  // Creates `bucket` with a signed PUT, as an operator would (curl's own SigV4, as
  // hack/object-store.sh does); "" when done.
  static std::string CreateBucket(const std::string& bucket) {
    const S3Endpoint& e = object_store_->endpoint();
    auto r = RunCommand({"curl", "-sS", "--fail", "--max-time", "10", "--aws-sigv4", "aws:amz:" + e.region + ":s3",
                         "--user", e.credentials.access_key_id + ":" + e.credentials.secret_access_key, "-X", "PUT",
                         e.url + "/" + bucket},
                        30s);
    if (!r.ok()) return r.status().ToString();
    return r->success() ? "" : r->Summary() + " " + r->err;
  }

  static constexpr char kWrongSecret[] = "not-the-secret-key-of-this-store";
};

// An agent whose secret key the store refuses: the suspend rests PAUSED on the complete local
// snapshot with CommitFailed=True StoreAuthFailed (the store's SignatureDoesNotMatch quoted, the
// secret never), nothing in the store. The agent restarted on the same root with the right key
// commits that same snapshot by itself, and the actor resumes with its counter continued.
TEST_F(ObjectStoreFaultsTest, RefusedCredentialsRestPausedUntilTheAgentHasTheRightOnes) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), WrongSecretEnv(), 2, StoreUrl());
  ASSERT_NE(a, nullptr);
  json x;
  const long before = RunThenFailToCommit(*a, "creds", &x);
  ASSERT_EQ(StatusOf(x), "STATUS_PAUSED") << x["status"].dump();
  EXPECT_EQ(CondReason(x, "CommitFailed"), "StoreAuthFailed") << "the credentials were refused, said so";
  EXPECT_THAT(CondMessage(x, "CommitFailed"), HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(CondMessage(x, "CommitFailed"), Not(HasSubstr(kWrongSecret)));
  ExpectCompleteOnNode(*a, "creds", x);
  EXPECT_TRUE(Committed("creds").empty()) << "nothing reached the store";
  ExpectAllWorkersFree(a->node);
  const std::string id = StatusField(x, "latestSnapshot").value("id", "");

  a->proc->Stop(10s);  // the operator fixes the Secret and restarts the agent
  Agent* fixed = StartStoreAgent("a");
  ASSERT_NE(fixed, nullptr);
  ExpectCommittedThenResumes(*fixed, "creds", id, before);
}

// A store URL whose bucket does not exist (buckets are never created implicitly): PAUSED with
// CommitFailed=True StoreBucketMissing naming the bucket. Once an operator creates the bucket
// the running agent's retried commit completes it — no restart — and the actor resumes.
TEST_F(ObjectStoreFaultsTest, AMissingBucketRestsPausedUntilTheBucketExists) {
  const std::string bucket = "stasis-made-late";
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), StoreEnv(), 2, "s3://" + bucket + "/" + ns_ + "/");
  ASSERT_NE(a, nullptr);
  json x;
  const long before = RunThenFailToCommit(*a, "nobucket", &x);
  ASSERT_EQ(StatusOf(x), "STATUS_PAUSED") << x["status"].dump();
  EXPECT_EQ(CondReason(x, "CommitFailed"), "StoreBucketMissing");
  EXPECT_THAT(CondMessage(x, "CommitFailed"), HasSubstr("NoSuchBucket"));
  EXPECT_THAT(CondMessage(x, "CommitFailed"), HasSubstr("s3://" + bucket + "/"));
  ExpectCompleteOnNode(*a, "nobucket", x);
  ExpectAllWorkersFree(a->node);
  const std::string id = StatusField(x, "latestSnapshot").value("id", "");

  ASSERT_EQ(CreateBucket(bucket), "");
  ExpectCommittedThenResumes(*a, "nobucket", id, before, bucket);
}

// Node a suspends the actor into the store and is then killed (SIGKILL) and never comes back:
// bound to node b, the actor resumes there from the store alone, its counter continued.
TEST_F(ObjectStoreFaultsTest, ASnapshotOutlivesItsNodeKilledForGood) {
  Agent* a = StartStoreAgent("a");
  Agent* b = StartStoreAgent("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  json x;
  const long before = RunThenSuspend(*a, "orphan", 5, &x);
  ASSERT_EQ(StatusOf(x), "STATUS_SUSPENDED");
  const std::string id = StatusField(x, "latestSnapshot").value("id", "");
  a->proc->Kill(SIGKILL);
  ASSERT_TRUE(a->proc->Wait(10s).has_value());

  Patch("orphan", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("orphan", "STATUS_RUNNING", 60s, &x));
  EXPECT_EQ(StatusField(x, "nodeName"), json(b->node));
  EXPECT_EQ(StatusField(x, "latestSnapshot").value("id", ""), id);
  EXPECT_GE(WaitCounter(*b, "orphan", before), before) << "resumed on b without a; the counter restarted";
  EXPECT_FALSE(a->proc->Running()) << "node a stayed dead";
}

// The store is down when node b resumes the actor. A stop in the middle of the download cannot
// be timed from outside (the snapshot of a counter downloads in well under a second on
// loopback), so the store is stopped before the resume starts: the manifest's read fails.
// The actor rests SUSPENDED on the same committed snapshot with Ready=False StoreUnreachable,
// no worker held and nothing half-downloaded on b; once the store is back the retried resume
// completes with the counter continued.
TEST_F(ObjectStoreFaultsTest, AStoreDownAtResumeRestsSuspendedAndResumesWhenItIsBack) {
  Agent* a = StartStoreAgent("a");
  Agent* b = StartStoreAgent("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  json x;
  const long before = RunThenSuspend(*a, "away", 5, &x);
  ASSERT_EQ(StatusOf(x), "STATUS_SUSPENDED");
  const json snap = StatusField(x, "latestSnapshot");
  ASSERT_EQ(object_store_->Stop(), "");

  Patch("away", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitActor("away", [](const json& y) {
    return CondReason(y, "Ready") == "StoreUnreachable" && StatusOf(y) != "STATUS_RESUMING";
  }, 120s, "Ready=False StoreUnreachable", &x));
  EXPECT_EQ(StatusOf(x), "STATUS_SUSPENDED") << "rests where it was, retried; never failed";
  EXPECT_EQ(StatusField(x, "latestSnapshot"), snap) << "the snapshot is unchanged";
  EXPECT_THAT(CondMessage(x, "Ready"), HasSubstr("no answer from the object store"));
  ExpectAllWorkersFree(b->node);
  EXPECT_THAT(PartialDirs(b->root), ::testing::IsEmpty());

  ASSERT_EQ(object_store_->Restart(), "");
  ASSERT_TRUE(WaitStatus("away", "STATUS_RUNNING", 180s, &x)) << "the resume is retried until the store is back";
  EXPECT_EQ(StatusField(x, "nodeName"), json(b->node));
  EXPECT_GE(WaitCounter(*b, "away", before), before) << "restored from the store, the counter continued";
}

// The store stopped in the middle of node b's download: the store process is frozen the moment
// b's partial copy appears (so the transfer is cut mid-way, whatever the machine's speed), then
// stopped. The resume fails as the store's, rests SUSPENDED on the unchanged snapshot with no
// worker held and no partial copy left, and completes once the store is back.
TEST_F(ObjectStoreFaultsTest, AStoreStoppedMidDownloadRestsSuspendedAndResumesWhenItIsBack) {
  // 256 MiB of random bytes in a sandbox tmpfs: a download that lasts long enough to be cut.
  Bundle big(CounterArgs(), BundleRoot());
  json config = json::parse(ReadFile(big.dir() / "config.json"));
  config["mounts"].push_back({{"destination", "/fill"}, {"type", "tmpfs"}, {"source", "tmpfs"},
                              {"options", {"nosuid", "size=272m"}}});
  config["process"]["args"][2] =
      "/bin/busybox head -c 256m /dev/urandom > /fill/data; " + config["process"]["args"][2].get<std::string>();
  std::ofstream(big.dir() / "config.json") << config.dump(2);
  Agent* a = StartStoreAgent("a");
  Agent* b = StartStoreAgent("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  json spec = CounterSpec(a->node);
  spec["bundle"] = big.dir().string();
  CreateActor("big", spec);
  json x;
  ASSERT_TRUE(WaitStatus("big", "STATUS_RUNNING", 60s, &x));
  const long before = WaitCounter(*a, "big", 3);
  Patch("big", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("big", "STATUS_SUSPENDED", 120s, &x));
  const json snap = StatusField(x, "latestSnapshot");
  ASSERT_GT(snap.value("sizeBytes", int64_t{0}), int64_t{256} << 20) << snap.dump();

  const long weed = std::stol(ReadFile(fs::path(object_store_->dir()) / "weed.pid"));
  Patch("big", {{"nodeName", b->node}, {"desiredState", "Running"}});
  // The partial copy's files are made at their full size, sparse: blocks on disk are bytes that
  // arrived. Frozen once 1 MiB has, so the cut is in the middle of the transfer.
  int64_t arrived = 0;
  for (int i = 0; i < 12000 && arrived < (int64_t{1} << 20); ++i) {
    arrived = 0;
    for (const std::string& dir : PartialDirs(b->root)) arrived += AllocatedBytes(dir);
    if (arrived < (int64_t{1} << 20)) std::this_thread::sleep_for(5ms);
  }
  ASSERT_EQ(kill(static_cast<pid_t>(weed), SIGSTOP), 0);
  ASSERT_GE(arrived, int64_t{1} << 20) << "b's download never started";
  ASSERT_LT(arrived, snap.value("sizeBytes", int64_t{0})) << "the download ended before the cut";
  ASSERT_EQ(object_store_->Stop(), "");

  ASSERT_TRUE(WaitActor("big", [](const json& y) {
    return CondReason(y, "Ready") == "StoreUnreachable" && StatusOf(y) != "STATUS_RESUMING";
  }, 180s, "Ready=False StoreUnreachable", &x));
  EXPECT_EQ(StatusOf(x), "STATUS_SUSPENDED") << "rests where it was, retried; never failed";
  EXPECT_EQ(StatusField(x, "latestSnapshot"), snap) << "the snapshot is unchanged";
  ExpectAllWorkersFree(b->node);
  EXPECT_THAT(PartialDirs(b->root), ::testing::IsEmpty()) << "the cut download's partial copy is removed";

  ASSERT_EQ(object_store_->Restart(), "");
  EXPECT_EQ(Committed("big"), std::set<std::string>{snap.value("id", "")}) << "nothing lost in the store";
  ASSERT_TRUE(WaitStatus("big", "STATUS_RUNNING", 180s, &x)) << "the resume is retried until the store is back";
  EXPECT_EQ(StatusField(x, "nodeName"), json(b->node));
  EXPECT_GE(WaitCounter(*b, "big", before), before) << "restored from the store, the counter continued";
}

}  // namespace
}  // namespace stasis::testing
