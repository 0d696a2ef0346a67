// `stasis node` end to end with an object store (a real SeaweedFS, hack/object-store.sh) as
// --snapshot-store s3://bucket/prefix: an actor suspended on node a is committed to the store
// and resumes on node b, which has never seen it, its counter continued; a store that is down
// leaves the snapshot on the node (PAUSED, CommitFailed), and the commit completes by itself
// when the store is back. With --snapshot-store-compression zstd and an encryption key, the
// store holds only sealed objects, and a node with another key leaves the actor SUSPENDED with
// the reason (SnapshotKeyMismatch, both key ids named) — never a restore — while the node with
// the right key resumes it. `stasis controller --retain 1` on the same store keeps only the
// newest committed snapshot. The fixture is tests/support/object_store_node_fixture.h; the
// store's faults (refused credentials, a missing bucket, a node gone for good, a store down at
// resume) are in node_object_store_faults_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "api/conditions.h"
#include "snapshots/s3_client.h"
#include "tests/support/background_process.h"
#include "tests/support/control_plane.h"
#include "tests/support/object_store_node_fixture.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

TEST_F(ObjectStoreNodeTest, SuspendedToTheObjectStoreResumesOnAnotherNode) {
  Agent* a = StartStoreAgent("a");
  Agent* b = StartStoreAgent("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  json actor;
  const long before = RunThenSuspend(*a, "mover", 10, &actor);
  ASSERT_EQ(StatusOf(actor), "STATUS_SUSPENDED");
  const json snap = StatusField(actor, "latestSnapshot");
  ASSERT_TRUE(snap.is_object()) << actor["status"].dump();
  const std::string id = snap.value("id", "");
  EXPECT_EQ(snap.value("location", ""), StoreUrl() + ns_ + "/mover/" + id + "/");
  EXPECT_EQ(snap.value("nodeName", ""), "") << "a committed snapshot belongs to no node";
  S3Client client(object_store_->endpoint(), object_store_->bucket());
  EXPECT_TRUE(client.HeadObject(ns_ + "/" + ns_ + "/mover/" + id + "/manifest.json").ok())
      << "the manifest object is in the store";
  ExpectAllWorkersFree(a->node);

  Patch("mover", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitStatus("mover", "STATUS_RUNNING", 60s, &actor));
  EXPECT_EQ(StatusField(actor, "nodeName"), json(b->node));
  const long after = WaitCounter(*b, "mover", before);
  EXPECT_GE(after, before) << "restored on " << b->node << " from the store but the counter restarted";
  EXPECT_TRUE(fs::exists(fs::path(b->root) / "store-cache" / ns_ / "mover" / id / "manifest.json"))
      << "node b restored from its verified download";
}

TEST_F(ObjectStoreNodeTest, AStoreDownRestsPausedAndTheCommitCompletesWhenItIsBack) {
  Agent* a = StartStoreAgent("a");
  ASSERT_NE(a, nullptr);
  CreateActor("st", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("st", "STATUS_RUNNING", 30s));
  WaitCounter(*a, "st", 5);
  ASSERT_EQ(object_store_->Stop(), "");
  Patch("st", {{"desiredState", "Suspended"}});
  json x;
  ASSERT_TRUE(WaitActor("st", [](const json& y) {
    return StatusOf(y) == "STATUS_PAUSED" && CondIs(y, "CommitFailed", "True");
  }, 60s, "PAUSED with CommitFailed", &x));
  EXPECT_EQ(StatusField(x, "latestSnapshot").value("nodeName", ""), a->node) << "the snapshot is safe on the node";
  ASSERT_EQ(object_store_->Restart(), "");
  ASSERT_TRUE(WaitStatus("st", "STATUS_SUSPENDED", 180s, &x)) << "the commit is retried until the store is back";
  EXPECT_EQ(StatusField(x, "latestSnapshot").value("nodeName", ""), "");
}

TEST_F(ObjectStoreNodeTest, AnEncryptedSnapshotResumesOnlyWhereItsKeyIs) {
  Agent* a = StartStoreAgent("a", {"--snapshot-store-compression=zstd:1", "--snapshot-store-encryption-key", KeyFile("key-a", '1')});
  Agent* b = StartStoreAgent("b", {"--snapshot-store-encryption-key", KeyFile("key-b", '2')});
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  json actor;
  const long before = RunThenSuspend(*a, "sealed", 5, &actor);
  ASSERT_EQ(StatusOf(actor), "STATUS_SUSPENDED");
  const std::string id = StatusField(actor, "latestSnapshot").value("id", "");
  S3Client client(object_store_->endpoint(), object_store_->bucket());
  auto manifest = client.GetObject(ns_ + "/" + ns_ + "/sealed/" + id + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status().ToString();
  EXPECT_THAT(*manifest, ::testing::HasSubstr("\"sealedManifest\""));
  EXPECT_THAT(*manifest, ::testing::Not(::testing::HasSubstr("pages")));

  Patch("sealed", {{"nodeName", b->node}, {"desiredState", "Running"}});
  ASSERT_TRUE(WaitActor("sealed", [](const json& y) {
    return CondReason(y, "Ready") == api::kReasonSnapshotKeyMismatch;
  }, 60s, "Ready=False SnapshotKeyMismatch", &actor)) << actor["status"].dump();
  EXPECT_EQ(StatusOf(actor), "STATUS_SUSPENDED") << "rests where it was, retried; never failed";
  EXPECT_THAT(CondMessage(actor, "Ready"), ::testing::HasSubstr("was encrypted with key id "));
  EXPECT_THAT(CondMessage(actor, "Ready"), ::testing::HasSubstr("; this agent has key id "));
  EXPECT_TRUE(Entries(fs::path(b->root) / "store-cache" / ns_ / "sealed").empty()) << "nothing downloaded on b";
  ExpectAllWorkersFree(b->node);

  Patch("sealed", {{"nodeName", a->node}});
  ASSERT_TRUE(WaitStatus("sealed", "STATUS_RUNNING", 60s, &actor)) << actor["status"].dump();
  EXPECT_GE(WaitCounter(*a, "sealed", before), before) << "restored with its key, the counter continued";
}

// The controller reaches the same object store as the agents (--snapshot-store s3://…, the
// standard environment) and keeps the newest committed snapshot of an actor suspended three
// times; the one left is its latestSnapshot, and it resumes.
TEST_F(ObjectStoreNodeTest, TheControllerKeepsTheNewestSnapshotInTheObjectStore) {
  Agent* a = StartStoreAgent("a");
  ASSERT_NE(a, nullptr);
  BackgroundProcess controller({kStasis, "controller", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                "--metrics-addr", "127.0.0.1:0", "--leader-elect", "false", "--snapshot-store",
                                StoreUrl(), "--retain", "1", "--snapshot-gc-grace", "1h"},
                               (work_.path() / "controller.log").string(), StoreEnv());
  CreateActor("kept", CounterSpec(a->node));
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(WaitStatus("kept", "STATUS_RUNNING", 60s));
    Patch("kept", {{"desiredState", "Suspended"}});
    json x;
    ASSERT_TRUE(WaitStatus("kept", "STATUS_SUSPENDED", 60s, &x));
    ids.push_back(StatusField(x, "latestSnapshot").value("id", ""));
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (Committed("kept") != std::set<std::string>{ids.back()} && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(200ms);
    }
    EXPECT_EQ(Committed("kept"), std::set<std::string>{ids.back()}) << "after suspend " << i + 1;
    Patch("kept", {{"desiredState", "Running"}});
  }
  ASSERT_TRUE(WaitStatus("kept", "STATUS_RUNNING", 60s)) << "the snapshot retention kept resumes";
}

}  // namespace
}  // namespace stasis::testing
