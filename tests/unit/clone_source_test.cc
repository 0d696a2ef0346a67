#include "reconcilers/node/clone_source.h"

#include <gtest/gtest.h>

#include <string>

#include "api/actor_template.h"

namespace stasis {
namespace {

SnapshotManifest Manifest(const std::string& id, const std::string& taken_at, const std::string& uid = "uid-src",
                          const std::string& scope = "Full") {
  SnapshotManifest m;
  m.id = id;
  m.ns = "ns";
  m.name = "src";
  m.owner_uid = uid;
  m.scope = scope;
  m.trigger = "Suspend";
  m.taken_at = taken_at;
  return m;
}

api::ActorSpec CloneOf(const std::string& source, const std::string& snapshot_id = "") {
  api::ActorSpec spec;
  spec.bundle = "/bundles/counter";
  spec.source = api::ActorSourceRef{source, snapshot_id};
  return spec;
}

SourceObservation Source(std::vector<SnapshotManifest> committed) {
  return SourceObservation{true, "uid-src", std::move(committed)};
}

TEST(CloneSourceTest, TheNewestCommittedFullSnapshotOfTheSourcesLifeIsChosen) {
  auto chosen = ChooseCloneSnapshot(
      CloneOf("src"), Source({Manifest("s3", "2026-12-06T00:00:03Z", "uid-src", "Data"),
                              Manifest("s1", "2026-12-06T00:00:01Z"), Manifest("s2", "2026-12-06T00:00:02Z"),
                              Manifest("s9", "2026-12-06T00:00:09Z", "uid-earlier-life")}));
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->snapshot_id, "s2");
  EXPECT_EQ(chosen->source_name, "src");
  EXPECT_EQ(chosen->source_uid, "uid-src");
  EXPECT_EQ(chosen->trigger, "Suspend");
}

TEST(CloneSourceTest, ANamedSnapshotIsTakenEvenWhenANewerOneExists) {
  auto chosen = ChooseCloneSnapshot(CloneOf("src", "s1"), Source({Manifest("s1", "2026-12-06T00:00:01Z"),
                                                                  Manifest("s2", "2026-12-06T00:00:02Z")}));
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
  EXPECT_EQ(chosen->snapshot_id, "s1");
}

// A warm-pool claim names its member's pause snapshot, on this node's disk; a clone that names
// no snapshot never takes a node-local one (it must be able to start on any node).
TEST(CloneSourceTest, ANodeLocalSnapshotOnlyWhenNamed) {
  SourceObservation source = Source({Manifest("s1", "2026-12-06T00:00:01Z")});
  SnapshotManifest paused = Manifest("p2", "2026-12-06T00:00:02Z");
  paused.trigger = "Pause";
  source.local = {paused};
  auto named = ChooseCloneSnapshot(CloneOf("src", "p2"), source);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  EXPECT_EQ(named->snapshot_id, "p2");
  EXPECT_TRUE(named->local);
  EXPECT_EQ(named->trigger, "Pause");

  auto unnamed = ChooseCloneSnapshot(CloneOf("src"), source);
  ASSERT_TRUE(unnamed.ok()) << unnamed.status().ToString();
  EXPECT_EQ(unnamed->snapshot_id, "s1");
  EXPECT_FALSE(unnamed->local);

  source.local[0].owner_uid = "uid-earlier-life";
  EXPECT_EQ(ChooseCloneSnapshot(CloneOf("src", "p2"), source).status().reason(), kSourceSnapshotUnavailable);
  source.local[0].owner_uid = "uid-src";
  source.local[0].scope = "Data";
  EXPECT_EQ(ChooseCloneSnapshot(CloneOf("src", "p2"), source).status().reason(), kSourceIncompatible);
  source.local.clear();
  auto elsewhere = ChooseCloneSnapshot(CloneOf("src", "p2"), source);
  EXPECT_EQ(elsewhere.status().reason(), kSourceSnapshotUnavailable);
  EXPECT_NE(elsewhere.status().message().find("on this node"), std::string::npos) << elsewhere.status().message();
}

TEST(CloneSourceTest, TheStartKindFollowsTheSourcesLabels) {
  EXPECT_EQ(StartKind(false, {}, {}), "boot");
  EXPECT_EQ(StartKind(true, {{api::kGoldenOfLabel, "t"}}, {}), "golden");
  EXPECT_EQ(StartKind(true, {{api::kWarmPoolOfLabel, "t"}}, {}), "warm");
  EXPECT_EQ(StartKind(true, {{"app", "x"}}, {}), "clone");
  EXPECT_EQ(StartKind(true, {{api::kGoldenOfLabel, "t"}}, {{api::kWarmPoolOfLabel, "t"}}), "refill");
}

TEST(CloneSourceTest, AMissingSourceOrSnapshotIsRetried) {
  auto missing = ChooseCloneSnapshot(CloneOf("src"), SourceObservation{});
  EXPECT_EQ(missing.status().reason(), kSourceNotFound);
  EXPECT_EQ(missing.status().code(), Code::kUnavailable);
  EXPECT_NE(missing.status().message().find("src"), std::string::npos);

  auto none = ChooseCloneSnapshot(CloneOf("src"), Source({Manifest("d", "t", "uid-src", "Data")}));
  EXPECT_EQ(none.status().reason(), kSourceSnapshotUnavailable);
  EXPECT_EQ(none.status().code(), Code::kUnavailable);

  auto not_named = ChooseCloneSnapshot(CloneOf("src", "gone"), Source({Manifest("s1", "t")}));
  EXPECT_EQ(not_named.status().reason(), kSourceSnapshotUnavailable);
  EXPECT_NE(not_named.status().message().find("gone"), std::string::npos);

  auto earlier_life = ChooseCloneSnapshot(CloneOf("src", "s1"), Source({Manifest("s1", "t", "uid-old")}));
  EXPECT_EQ(earlier_life.status().reason(), kSourceSnapshotUnavailable);
}

TEST(CloneSourceTest, WhatThisActorCannotRunWaitsForANewGeneration) {
  SnapshotManifest cuda = Manifest("g", "t");
  cuda.cuda_checkpointed = true;
  auto no_gpu = ChooseCloneSnapshot(CloneOf("src"), Source({cuda}));
  EXPECT_EQ(no_gpu.status().reason(), kSourceIncompatible);
  EXPECT_EQ(no_gpu.status().code(), Code::kFailedPrecondition);
  api::ActorSpec gpu_clone = CloneOf("src");
  gpu_clone.gpu.count = 1;
  EXPECT_TRUE(ChooseCloneSnapshot(gpu_clone, Source({cuda})).ok());

  SnapshotManifest on_image = Manifest("i", "t");
  on_image.image_digest = "sha256:abc";
  EXPECT_EQ(ChooseCloneSnapshot(CloneOf("src"), Source({on_image})).status().reason(), kSourceIncompatible);
  api::ActorSpec image_clone = CloneOf("src");
  image_clone.bundle.clear();
  image_clone.image = "registry.example.com/app:v1";
  auto on_bundle = ChooseCloneSnapshot(image_clone, Source({Manifest("b", "t")}));
  EXPECT_EQ(on_bundle.status().reason(), kSourceIncompatible);
  auto same_image = ChooseCloneSnapshot(image_clone, Source({on_image}));
  ASSERT_TRUE(same_image.ok());
  EXPECT_EQ(same_image->image_digest, "sha256:abc");

  auto data = ChooseCloneSnapshot(CloneOf("src", "d"), Source({Manifest("d", "t", "uid-src", "Data")}));
  EXPECT_EQ(data.status().reason(), kSourceIncompatible);
}

TEST(CloneSourceTest, TheHookIsToldWhoTheActorIsNow) {
  api::Actor a;
  a.metadata.namespace_ = "team";
  a.metadata.name = "clone-1";
  a.metadata.uid = "uid-1";
  EXPECT_EQ(PostRestoreHookEnv(a, "s2", "clone"),
            (std::vector<std::string>{"STASIS_ACTOR_NAMESPACE=team", "STASIS_ACTOR_NAME=clone-1",
                                      "STASIS_ACTOR_UID=uid-1", "STASIS_SNAPSHOT_ID=s2", "STASIS_RESTORE=clone"}));
}

}  // namespace
}  // namespace stasis
