// The resume's intent record (reconcilers/node/resume_intent.h): what it holds, when it speaks
// for an actor, and what reading through it changes.
#include "reconcilers/node/resume_intent.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace stasis {
namespace {

namespace fs = std::filesystem;

api::Actor PausedActor() {
  api::Actor a;
  a.metadata.namespace_ = "ns";
  a.metadata.name = "a";
  a.metadata.uid = "uid-1";
  a.metadata.resource_version = "41";
  a.status.status = api::ActorState::kPaused;
  return a;
}

api::ActorStatus Resuming() {
  api::ActorStatus s;
  s.status = api::ActorState::kResuming;
  s.node_name = "n1";
  s.worker_name = "n1-gpu0";
  s.sandbox_id = "ns-a-1234";
  return s;
}

class ResumeIntentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/stasis-intent-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(ResumeIntentTest, RecordsTheWriteItStandsFor) {
  const ResumeIntent i = IntentOf(PausedActor(), Resuming());
  EXPECT_EQ(i.actor_uid, "uid-1");
  EXPECT_EQ(i.resource_version, "41") << "the version the RESUMING write is conditioned on";
  EXPECT_EQ(i.worker_name, "n1-gpu0");
  EXPECT_EQ(i.sandbox_id, "ns-a-1234");
  EXPECT_EQ(i.node_name, "n1");
  EXPECT_FALSE(i.cloned_from.has_value());
}

TEST_F(ResumeIntentTest, RoundTripsThroughItsFileBesideTheSandboxRoot) {
  api::ActorStatus s = Resuming();
  s.cloned_from = api::ClonedFrom{"golden", "uid-g", "20261207T000000Z-abcdef"};
  const ResumeIntent i = IntentOf(PausedActor(), s);
  const std::string path = IntentPath((dir_ / "run" / "ns-a-1234").string());
  EXPECT_EQ(path, (dir_ / "run" / "ns-a-1234.resuming").string());
  fs::create_directories(dir_ / "run");
  ASSERT_TRUE(WriteIntent(path, i).ok());
  EXPECT_FALSE(fs::exists(path + ".tmp")) << "renamed over, not left beside";
  auto read = ReadIntent(path);
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, i);
  RemoveIntent(path);
  EXPECT_FALSE(ReadIntent(path).has_value());
}

TEST_F(ResumeIntentTest, AWriteMakesItsDirectoryAndReportsWhatItCannotWrite) {
  EXPECT_TRUE(WriteIntent((dir_ / "run" / "x.resuming").string(), IntentOf(PausedActor(), Resuming())).ok())
      << "the first resume of a node finds no run/ directory yet";
  std::ofstream(dir_ / "file") << "a file where the directory should be";
  const Status s = WriteIntent((dir_ / "file" / "x.resuming").string(), IntentOf(PausedActor(), Resuming()));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("x.resuming"), std::string::npos) << s.ToString();
}

TEST_F(ResumeIntentTest, AnUnreadableOrIncompleteRecordSpeaksForNothing) {
  const std::string path = (dir_ / "x.resuming").string();
  std::ofstream(path) << "{not json";
  EXPECT_FALSE(ReadIntent(path).has_value());
  std::ofstream(path, std::ios::trunc) << R"({"actorUid":"uid-1","resourceVersion":"41","sandboxId":"s"})";
  EXPECT_FALSE(ReadIntent(path).has_value()) << "no worker: a recovery could not keep the sandbox's devices";
}

TEST_F(ResumeIntentTest, AppliesOnlyToTheSameActorAtTheVersionTheResumeStartedFrom) {
  const ResumeIntent i = IntentOf(PausedActor(), Resuming());
  EXPECT_TRUE(IntentApplies(i, PausedActor()));
  api::Actor moved = PausedActor();
  moved.metadata.resource_version = "42";  // RESUMING landed, or anything else was written
  EXPECT_FALSE(IntentApplies(i, moved));
  api::Actor other = PausedActor();
  other.metadata.uid = "uid-2";  // deleted and created again under the same name
  EXPECT_FALSE(IntentApplies(i, other));
  api::Actor running = PausedActor();
  running.status.status = api::ActorState::kRunning;
  EXPECT_FALSE(IntentApplies(i, running)) << "only a resting actor is what a resume starts from";
  for (auto resting : {api::ActorState::kSuspended, api::ActorState::kUnspecified, api::ActorState::kFailed}) {
    api::Actor a = PausedActor();
    a.status.status = resting;
    EXPECT_TRUE(IntentApplies(i, a)) << api::ToString(resting);
  }
}

TEST_F(ResumeIntentTest, ReadingThroughItShowsTheResumingWrite) {
  api::ActorStatus s = Resuming();
  s.cloned_from = api::ClonedFrom{"golden", "uid-g", "snap"};
  api::Actor a = PausedActor();
  a.status.latest_snapshot = api::Snapshot{};
  a.status.latest_snapshot->id = "kept";
  Overlay(IntentOf(a, s), a);
  EXPECT_EQ(a.status.status, api::ActorState::kResuming);
  EXPECT_EQ(a.status.worker_name, "n1-gpu0");
  EXPECT_EQ(a.status.sandbox_id, "ns-a-1234");
  EXPECT_EQ(a.status.node_name, "n1");
  ASSERT_TRUE(a.status.cloned_from.has_value());
  EXPECT_EQ(a.status.cloned_from->snapshot_id, "snap");
  ASSERT_TRUE(a.status.latest_snapshot.has_value());
  EXPECT_EQ(a.status.latest_snapshot->id, "kept") << "what the write does not set is left as read";
}

}  // namespace
}  // namespace stasis
