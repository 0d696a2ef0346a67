// The binder's decision, table by table: where an unpinned actor goes, and when it goes
// nowhere, the reason (NoFreeWorker: suitable workers exist on live nodes but are held or
// promised; Unschedulable: no live node could ever run it) and the counts in the message.
#include "reconcilers/cluster/placement.h"

#include <gtest/gtest.h>

#include "api/actor_template.h"
#include "api/conditions.h"

namespace stasis {
namespace {

api::Worker W(const std::string& node, int i, bool free, int gpus = 0) {
  api::Worker w;
  w.metadata.name = node + "-w" + std::to_string(i);
  w.spec.node_name = node;
  for (int g = 0; g < gpus; ++g) w.spec.devices.push_back("GPU-" + w.metadata.name + "-" + std::to_string(g));
  if (!free) {
    w.status.phase = api::WorkerPhase::kHeld;
    w.status.actor_ref = api::ActorRef{"ns", "holder-" + w.metadata.name};
  }
  return w;
}

api::Actor A(const std::string& name, int gpus = 0, const std::string& bound_to = "") {
  api::Actor a;
  a.metadata.namespace_ = "ns";
  a.metadata.name = name;
  a.spec.gpu.count = gpus;
  a.status.node_name = bound_to;
  return a;
}

TEST(PlacementTest, TheLiveNodeWithTheMostFreeSuitableWorkers) {
  PlacementInput in;
  in.workers = {W("n1", 0, true), W("n2", 0, true), W("n2", 1, true), W("n2", 2, false), W("dead", 0, true),
                W("dead", 1, true), W("dead", 2, true)};
  in.live_nodes = {"n1", "n2"};
  Placement p = Place(A("a"), in);
  EXPECT_EQ(p.node, "n2");
  EXPECT_EQ(p.free, 2);
  EXPECT_EQ(p.suitable, 3);
  EXPECT_EQ(p.reason, "");

  // Two actors already bound to n2 and waiting for a worker there take its two free ones.
  in.actors = {A("b", 0, "n2"), A("c", 0, "n2")};
  EXPECT_EQ(Place(A("a"), in).node, "n1");
  // A node its agent found full is avoided.
  in.actors.clear();
  in.avoid = "n2";
  EXPECT_EQ(Place(A("a"), in).node, "n1");
}

TEST(PlacementTest, EveryWorkerHeldIsNoFreeWorkerWithTheCounts) {
  PlacementInput in;
  in.workers = {W("n1", 0, false), W("n2", 0, false), W("n2", 1, false)};
  in.live_nodes = {"n1", "n2"};
  Placement p = Place(A("a"), in);
  EXPECT_EQ(p.node, "");
  EXPECT_EQ(p.reason, api::kReasonNoFreeWorker);
  EXPECT_EQ(p.message, "0/3 workers free: 3 held");

  // One frees but is promised to an actor bound there: the message does not change when the
  // agent then claims it (no new Event for every waiting actor).
  in.workers[0] = W("n1", 0, true);
  in.actors = {A("b", 0, "n1")};
  p = Place(A("a"), in);
  EXPECT_EQ(p.reason, api::kReasonNoFreeWorker);
  EXPECT_EQ(p.message, "0/3 workers free: 3 held or promised to actors bound to their node");

  // GPU workers are not candidates for a CPU actor, nor actors of the other kind promises.
  in.workers.push_back(W("n2", 9, true, 1));
  in.actors.push_back(A("gpu", 1, "n1"));
  EXPECT_EQ(Place(A("a"), in).message, "0/3 workers free: 3 held or promised to actors bound to their node");
}

TEST(PlacementTest, NoWorkerThatCouldEverRunItIsUnschedulable) {
  PlacementInput in;
  in.workers = {W("n1", 0, true), W("n2", 0, true, 1), W("n3", 0, true, 2)};
  in.live_nodes = {"n1", "n2"};
  Placement p = Place(A("a", 2), in);
  EXPECT_EQ(p.node, "");
  EXPECT_EQ(p.reason, api::kReasonUnschedulable);
  EXPECT_EQ(p.message, "0/2 live nodes have a worker with 2 GPUs");
  EXPECT_EQ(Place(A("b", 1), in).node, "n2");

  in.workers = {W("g", 0, false, 1)};
  in.live_nodes = {"g"};
  EXPECT_EQ(Place(A("cpu"), in).message, "0/1 live nodes have a CPU worker");
  EXPECT_EQ(Place(A("gpu", 1), in).reason, api::kReasonNoFreeWorker) << "a held GPU worker frees one day";

  in.live_nodes.clear();
  p = Place(A("a"), in);
  EXPECT_EQ(p.reason, api::kReasonUnschedulable);
  EXPECT_EQ(p.message, "0/1 nodes live: no node agent has renewed its heartbeat");
}

TEST(PlacementTest, APausedActorGoesOnlyToTheNodeOfItsSnapshot) {
  PlacementInput in;
  in.workers = {W("n1", 0, true), W("n1", 1, true), W("n2", 0, false)};
  in.live_nodes = {"n1", "n2"};
  api::Actor a = A("a");
  a.status.latest_snapshot = api::Snapshot{};
  a.status.latest_snapshot->id = "s1";
  a.status.latest_snapshot->node_name = "n2";
  Placement p = Place(a, in);
  EXPECT_EQ(p.node, "n2") << "even with its only worker held: its agent reports that";
  EXPECT_EQ(p.free, 0);
  EXPECT_EQ(p.suitable, 1);

  in.live_nodes = {"n1"};
  p = Place(a, in);
  EXPECT_EQ(p.node, "");
  EXPECT_EQ(p.reason, api::kReasonUnschedulable);
  EXPECT_EQ(p.message, "its snapshot s1 is on node n2, which is not live (0/1 live nodes hold it); it can resume only there");
}

// A cordoned or draining node takes no new actor, however many free workers it has; a paused
// actor's snapshot still places it on its own node (the agent there commits it if it drains).
TEST(PlacementTest, AClosedNodeTakesNoNewActors) {
  PlacementInput in;
  in.workers = {W("n1", 0, true), W("n1", 1, true), W("n1", 2, true), W("n2", 0, true)};
  in.live_nodes = {"n1", "n2"};
  ASSERT_EQ(Place(A("a"), in).node, "n1");
  in.closed_nodes = {"n1"};
  Placement p = Place(A("a"), in);
  EXPECT_EQ(p.node, "n2");
  EXPECT_EQ(p.free, 1);

  in.closed_nodes = {"n1", "n2"};
  p = Place(A("a"), in);
  EXPECT_EQ(p.node, "");
  EXPECT_EQ(p.reason, api::kReasonUnschedulable);
  EXPECT_EQ(p.message, "0/2 live nodes have a CPU worker and take new actors (2 cordoned or draining)");

  api::Actor paused = A("p");
  paused.status.latest_snapshot = api::Snapshot{};
  paused.status.latest_snapshot->id = "s1";
  paused.status.latest_snapshot->node_name = "n1";
  EXPECT_EQ(Place(paused, in).node, "n1");
}

// A warm-pool member is a spare: it goes only where it leaves a free worker to others.
TEST(PlacementTest, AWarmPoolMemberNeverTakesTheLastFreeWorker) {
  PlacementInput in;
  in.workers = {W("n1", 0, true), W("n2", 0, true), W("n2", 1, false)};
  in.live_nodes = {"n1", "n2"};
  api::Actor member = A("t-warm-0");
  member.metadata.labels[api::kWarmPoolOfLabel] = "t";
  Placement p = Place(member, in);
  EXPECT_EQ(p.node, "");
  EXPECT_EQ(p.reason, api::kReasonNoFreeWorker);
  EXPECT_NE(p.message.find("last free worker"), std::string::npos) << p.message;
  EXPECT_EQ(Place(A("a"), in).node, "n1") << "an actor that is not pooled takes it";

  in.workers.push_back(W("n1", 1, true));
  EXPECT_EQ(Place(member, in).node, "n1");
  // Bound and waiting actors count against the spare rule too.
  in.actors = {A("b", 0, "n1")};
  EXPECT_EQ(Place(member, in).node, "");
}

// A suspended GPU actor whose snapshot holds a CUDA context goes only to a worker of the GPU
// model and driver it was taken on; one taken before identities were recorded goes anywhere.
TEST(PlacementTest, ACudaSnapshotGoesOnlyToAGpuOfItsModelAndDriver) {
  const api::GpuIdentity h200{"NVIDIA H200", "580.95.05", "13.0"};
  PlacementInput in;
  in.workers = {W("h100", 0, true, 1), W("h100", 1, true, 1), W("old", 0, true, 1), W("h200", 0, true, 1),
                W("bare", 0, true, 1)};
  in.workers[0].spec.gpu = in.workers[1].spec.gpu = {"NVIDIA H100 80GB HBM3", "580.95.05", "13.0"};
  in.workers[2].spec.gpu = {"NVIDIA H200", "570.86.15", "12.8"};
  in.workers[3].spec.gpu = h200;
  in.live_nodes = {"h100", "old", "h200", "bare"};
  api::Actor a = A("a", 1);
  a.status.latest_snapshot = api::Snapshot{};
  a.status.latest_snapshot->id = "s1";
  a.status.latest_snapshot->cuda_checkpointed = true;
  a.status.latest_snapshot->gpu = h200;
  EXPECT_FALSE(WorkerSuits(in.workers[0], a)) << "another model";
  EXPECT_FALSE(WorkerSuits(in.workers[2], a)) << "another driver";
  EXPECT_FALSE(WorkerSuits(in.workers[4], a)) << "a worker that publishes no identity";
  EXPECT_TRUE(WorkerSuits(in.workers[3], a));
  EXPECT_EQ(Place(a, in).node, "h200") << "not h100, though it has the most free workers";

  in.workers[3] = W("h200", 0, false, 1);
  in.workers[3].spec.gpu = h200;
  Placement p = Place(a, in);
  EXPECT_EQ(p.reason, api::kReasonNoFreeWorker);
  in.live_nodes.erase("h200");
  p = Place(a, in);
  EXPECT_EQ(p.reason, api::kReasonUnschedulable);
  EXPECT_EQ(p.message,
            "0/3 live nodes have a worker with 1 GPU of NVIDIA H200, driver 580.95.05 (the snapshot it restores "
            "holds a CUDA context taken there)");

  // Without a CUDA context, or without a recorded identity, any GPU worker will do.
  a.status.latest_snapshot->cuda_checkpointed = false;
  EXPECT_EQ(Place(a, in).node, "h100");
  a.status.latest_snapshot->cuda_checkpointed = true;
  a.status.latest_snapshot->gpu = {};
  EXPECT_EQ(Place(a, in).node, "h100");
}

// A clone without a snapshot of its own restores its source's: the source's latest snapshot
// (found in the cache) places it, unless the clone names another of the source's snapshots.
TEST(PlacementTest, ACloneOfACudaSnapshotGoesWhereItsSourcesSnapshotCanBeRestored) {
  PlacementInput in;
  in.workers = {W("h100", 0, true, 1), W("h100", 1, true, 1), W("h200", 0, true, 1)};
  in.workers[0].spec.gpu = in.workers[1].spec.gpu = {"NVIDIA H100 80GB HBM3", "580.95.05", "13.0"};
  in.workers[2].spec.gpu = {"NVIDIA H200", "580.95.05", "13.0"};
  in.live_nodes = {"h100", "h200"};
  api::Actor golden = A("golden", 1);
  golden.status.latest_snapshot = api::Snapshot{};
  golden.status.latest_snapshot->id = "g1";
  golden.status.latest_snapshot->cuda_checkpointed = true;
  golden.status.latest_snapshot->gpu = in.workers[2].spec.gpu;
  api::Actor other_ns = golden;
  other_ns.metadata.namespace_ = "other";
  other_ns.status.latest_snapshot->gpu = in.workers[0].spec.gpu;
  in.actors = {other_ns, golden};
  api::Actor clone = A("clone", 1);
  clone.spec.source = api::ActorSourceRef{"golden", ""};
  EXPECT_EQ(RestoresOnto(clone, in.actors), &in.actors[1].status.latest_snapshot->gpu);
  EXPECT_EQ(Place(clone, in).node, "h200");
  clone.spec.source->snapshot_id = "g1";
  EXPECT_EQ(Place(clone, in).node, "h200");
  clone.spec.source->snapshot_id = "g0";  // an older snapshot: not in the cache, any GPU
  EXPECT_EQ(RestoresOnto(clone, in.actors), nullptr);
  EXPECT_EQ(Place(clone, in).node, "h100");
}

TEST(PlacementTest, GpuMismatchSaysWhatDiffers) {
  const api::GpuIdentity h200{"NVIDIA H200", "580.95.05", "13.0"};
  EXPECT_EQ(api::GpuMismatch(h200, h200), "");
  EXPECT_EQ(api::GpuMismatch(h200, {"NVIDIA H200", "580.95.05", "13.1"}), "") << "the CUDA version is not compared";
  EXPECT_EQ(api::GpuMismatch({}, {}), "") << "no identity recorded: as before";
  EXPECT_EQ(api::GpuMismatch(h200, {"NVIDIA H200", "570.86.15", "12.8"}),
            "the snapshot was taken on NVIDIA H200, driver 580.95.05; this GPU is NVIDIA H200, driver 570.86.15");
  EXPECT_EQ(api::GpuMismatch(h200, {}),
            "the snapshot was taken on NVIDIA H200, driver 580.95.05; this GPU publishes no identity");
}

// What requeues the actors waiting to bind: a worker that is Free afterwards and was not, or
// offers something else; never a claim, a deletion or a write that changes nothing.
TEST(PlacementTest, OnlyAWorkerFreedOrChangedWhileFreeMayUnblockABind) {
  auto worker = [](const std::string& phase, const std::string& gpu = "") {
    nlohmann::json w = {{"metadata", {{"name", "n1-slot0"}, {"labels", {{"stasis.dev/node", "n1"}}}}},
                        {"spec", {{"nodeName", "n1"}, {"devices", nlohmann::json::array()}}},
                        {"status", {{"phase", phase}}}};
    if (!gpu.empty()) w["spec"]["devices"].push_back({{"uuid", gpu}});
    return w;
  };
  const auto free = worker("Free"), held = worker("Held"), free_gpu = worker("Free", "GPU-1");
  EXPECT_TRUE(WorkerChangeMayUnblock(nullptr, &free)) << "a new free worker";
  EXPECT_TRUE(WorkerChangeMayUnblock(&held, &free)) << "a worker freed";
  EXPECT_TRUE(WorkerChangeMayUnblock(&free, &free_gpu)) << "a free worker offering another device";
  auto relabelled = free;
  relabelled["metadata"]["labels"]["pool"] = "a";
  EXPECT_TRUE(WorkerChangeMayUnblock(&free, &relabelled)) << "a free worker relabelled";

  EXPECT_FALSE(WorkerChangeMayUnblock(&free, &held)) << "a claim";
  EXPECT_FALSE(WorkerChangeMayUnblock(nullptr, &held)) << "a new worker already held";
  EXPECT_FALSE(WorkerChangeMayUnblock(&free, nullptr)) << "a worker deleted";
  EXPECT_FALSE(WorkerChangeMayUnblock(&held, &held)) << "a held worker rewritten";
  auto rewritten = free;
  rewritten["metadata"]["resourceVersion"] = "42";
  EXPECT_FALSE(WorkerChangeMayUnblock(&free, &rewritten)) << "a free worker rewritten without change";
}

}  // namespace
}  // namespace stasis
