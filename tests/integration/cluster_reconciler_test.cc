// The cluster reconciler's node-loss checks against a real kube-apiserver, with a fake clock
// and hand-filled caches: a cache that lags the API server (its watch reconnecting after an
// outage) must not get a live node's actors force-cleaned, and a replica that has just become
// leader gives every node a whole lease duration before it counts as lost. The same actors are
// cleaned once the Lease the API server holds really has not changed for its duration. A
// node's clock minutes off neither loses it while it renews nor keeps it alive after.
// The binder's reports: an actor it cannot place gets Ready=False (NoFreeWorker or
// Unschedulable, the candidates counted) and one FailedBinding Event per message, however often
// it is reconciled; a binding replaces that condition and is a Bound Event.
#include "reconcilers/cluster/cluster_reconciler.h"

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "api/json_mapping.h"
#include "base/time.h"
#include "controller/event_recorder.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/node_heartbeat.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_clock.h"
#include "tests/support/metric_samples.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::ControlPlane;
using testing::FakeClock;

class ClusterReconcilerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), "");
  }

  ClusterReconcilerTest()
      : client_(ControlPlane::Get().NewClient()),
        metrics_(registry_),
        recorder_(*client_, RecorderOptions()),
        reconciler_(ClusterReconcilerOptions{}, *client_, actors_, workers_, leases_, metrics_,
                    &recorder_, clock_) {
    for (auto& [name, index] : ClusterActorIndexes()) actors_.AddIndex(name, std::move(index));
  }

  static KubeEventRecorderOptions RecorderOptions() {
    KubeEventRecorderOptions o;
    o.component = "stasis-controller";
    return o;
  }

  void SetUp() override {
    ns_ = "crt-" + std::to_string(counter_++);
    ASSERT_EQ(ControlPlane::Get().Kubectl({"create", "namespace", ns_}).exit_code, 0);
  }

  // A RUNNING actor pinned to `node` holding a worker there, in the API and in the cache.
  void RunningActor(const std::string& name, const std::string& node) {
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec", {{"bundle", "/var/lib/stasis/bundles/counter"}, {"nodeName", node}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, a).ok());
    auto r = client_->Patch(kActorType, ns_, name, PatchType::kMerge,
                            {{"status",
                              {{"status", "STATUS_RUNNING"},
                               {"nodeName", node},
                               {"workerName", node + "-slot0"}}}},
                            "status");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    actors_.Upsert(std::make_shared<const json>(*r));
  }

  json LeaseObject(const std::string& node, Clock::SystemTimePoint renew) const {
    return {{"apiVersion", "coordination.k8s.io/v1"},
            {"kind", "Lease"},
            {"metadata", {{"name", NodeLeaseName(node)}, {"namespace", "stasis-system"}}},
            {"spec",
             {{"holderIdentity", node},
              {"leaseDurationSeconds", 10},
              {"renewTime", FormatMicroTime(renew)}}}};
  }

  // The node's heartbeat Lease as the API server holds it, renewed at `renew`.
  void ServerLease(const std::string& node, Clock::SystemTimePoint renew) {
    json lease = LeaseObject(node, renew);
    auto got = client_->Get(kLeaseType, "stasis-system", NodeLeaseName(node));
    if (got.ok()) {
      auto r = client_->Patch(kLeaseType, "stasis-system", NodeLeaseName(node), PatchType::kMerge,
                              {{"spec", lease["spec"]}});
      ASSERT_TRUE(r.ok()) << r.status().ToString();
    } else {
      ASSERT_TRUE(client_->Create(kLeaseType, "stasis-system", lease).ok());
    }
  }

  // The Lease as the API server holds it now, in the controller's cache (as its informer
  // delivers it: with its resourceVersion). A stale cache is one not updated since.
  void CachedLease(const std::string& node) {
    auto got = client_->Get(kLeaseType, "stasis-system", NodeLeaseName(node));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    leases_.Upsert(std::make_shared<const json>(*got));
  }

  std::string StatusOf(const std::string& name) {
    auto a = client_->Get(kActorType, ns_, name);
    return a.ok() ? a->value("/status/status"_json_pointer, std::string()) : "<" + a.status().ToString() + ">";
  }

  std::string StuckReason(const std::string& name) {
    auto a = client_->Get(kActorType, ns_, name);
    if (!a.ok()) return "";
    for (const auto& c : a->value("/status/conditions"_json_pointer, json::array())) {
      if (c.value("type", "") == "Stuck" && c.value("status", "") == "True") return c.value("reason", "");
    }
    return "";
  }

  // stasis_forced_cleanups_total{reason} (-1: no such series).
  double ForcedCleanups(const std::string& reason) {
    return testing::SampleValue(registry_, "stasis_forced_cleanups_total", "reason", reason);
  }

  // A live node whose workers are in the cache (`held`: held by actors elsewhere).
  void NodeWithWorkers(const std::string& node, int free, int held, int gpus = 0) {
    ServerLease(node, clock_.WallNow());
    CachedLease(node);
    for (int i = 0; i < free + held; ++i) {
      json devices = json::array();
      for (int g = 0; g < gpus; ++g) devices.push_back("GPU-" + node + std::to_string(i) + "-" + std::to_string(g));
      json status = {{"phase", "Free"}};
      if (i >= free) status = {{"phase", "Held"}, {"actorRef", {{"namespace", ns_}, {"name", "other" + std::to_string(i)}}}};
      workers_.Upsert(std::make_shared<const json>(json{{"apiVersion", "stasis.dev/v1alpha1"},
                                                        {"kind", "Worker"},
                                                        {"metadata", {{"name", node + "-w" + std::to_string(i)}}},
                                                        {"spec", {{"nodeName", node}, {"devices", devices}}},
                                                        {"status", status}}));
    }
  }

  void UnpinnedActor(const std::string& name, int gpus = 0) {
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec", {{"bundle", "/var/lib/stasis/bundles/counter"}, {"gpu", {{"count", gpus}}}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, a).ok());
  }

  // The actor as the API server holds it now, in the cache; then changed (the label team=TEAM)
  // behind the cache's back: a stale cache.
  void CachedThenLabelled(const std::string& name, const std::string& team) {
    auto seen = client_->Get(kActorType, ns_, name);
    ASSERT_TRUE(seen.ok()) << seen.status().ToString();
    actors_.Upsert(std::make_shared<const json>(*seen));
    auto touched = client_->Patch(kActorType, ns_, name, PatchType::kMerge, {{"metadata", {{"labels", {{"team", team}}}}}});
    ASSERT_TRUE(touched.ok()) << touched.status().ToString();
  }

  json Actor(const std::string& name) {
    auto a = client_->Get(kActorType, ns_, name);
    EXPECT_TRUE(a.ok()) << a.status().ToString();
    return a.ok() ? *a : json::object();
  }

  static json Ready(const json& actor) {
    for (const auto& c : actor.value("/status/conditions"_json_pointer, json::array())) {
      if (c.value("type", "") == "Ready") return c;
    }
    return json::object();
  }

  // The Events about `name` in the test's namespace, as `kubectl get events` lists them.
  json EventsFor(const std::string& name) {
    EXPECT_TRUE(recorder_.Flush(20s));
    auto r = ControlPlane::Get().Kubectl(
        {"get", "events", "-n", ns_, "--field-selector", "involvedObject.name=" + name, "-o", "json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    auto parsed = json::parse(r.out, nullptr, false);
    return parsed.is_discarded() ? json::array() : parsed.value("items", json::array());
  }

  static std::vector<std::string> Reasons(const json& events) {
    std::vector<std::string> out;
    for (const auto& e : events) {
      out.push_back(e.value("reason", "") + "/" + e.value("type", "") + " x" + std::to_string(e.value("count", 0)));
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void Reconcile(const std::string& name) {
    // The cache follows the API for the actor itself (the reconcile decides on a quorum read).
    auto live = client_->Get(kActorType, ns_, name);
    ASSERT_TRUE(live.ok());
    actors_.Upsert(std::make_shared<const json>(*live));
    auto r = reconciler_.Reconcile(Request{ns_, name});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }

  static inline int counter_ = 0;
  std::string ns_;
  std::unique_ptr<KubeClient> client_;
  FakeClock clock_;
  prometheus::Registry registry_;
  ClusterMetrics metrics_;
  ObjectStore actors_, workers_, leases_, nodes_;
  KubeEventRecorder recorder_;
  ClusterReconciler reconciler_;
};

TEST_F(ClusterReconcilerTest, AStaleCacheDoesNotCostALiveNodeItsActors) {
  reconciler_.StartedLeading();
  clock_.Advance(60s);  // leading for longer than any lease here
  RunningActor("a1", "stale-n1");
  // The cache shows a renewal, then nothing for longer than the 10 s lease (its watch
  // reconnecting after an outage); the agent has renewed since, on the server.
  ServerLease("stale-n1", clock_.WallNow());
  CachedLease("stale-n1");
  ASSERT_EQ(reconciler_.NodeAlive("stale-n1"), std::optional<bool>(true));  // first sight: the timer starts
  clock_.Advance(11s);
  ServerLease("stale-n1", clock_.WallNow());
  ASSERT_EQ(reconciler_.NodeAlive("stale-n1"), std::optional<bool>(false));  // what the cache says
  Reconcile("a1");
  EXPECT_EQ(StatusOf("a1"), "STATUS_RUNNING");
  EXPECT_EQ(StuckReason("a1"), "");

  // Once the server's Lease has not changed for its duration either, the node is lost.
  clock_.Advance(11s);
  Reconcile("a1");
  EXPECT_EQ(StatusOf("a1"), "STATUS_FAILED");
  EXPECT_EQ(StuckReason("a1"), "NodeLost");
  EXPECT_EQ(ForcedCleanups("node_lost"), 1) << "counted under the Stuck reason (docs/metrics.md)";
}

TEST_F(ClusterReconcilerTest, ANewLeaderGivesEveryNodeALeaseDurationFirst) {
  // The Lease stopped changing long ago, as this replica watched it as a follower (an
  // API-server outage the new leader just came through): no node counts as lost until this
  // replica has led for its 10 s lease duration.
  RunningActor("a2", "grace-n2");
  ServerLease("grace-n2", clock_.WallNow());
  CachedLease("grace-n2");
  ASSERT_EQ(reconciler_.NodeAlive("grace-n2"), std::optional<bool>(true));
  clock_.Advance(60s);
  reconciler_.StartedLeading();
  clock_.Advance(9s);
  Reconcile("a2");
  EXPECT_EQ(StatusOf("a2"), "STATUS_RUNNING");
  EXPECT_EQ(StuckReason("a2"), "");

  clock_.Advance(2s);
  Reconcile("a2");
  EXPECT_EQ(StatusOf("a2"), "STATUS_FAILED");
  EXPECT_EQ(StuckReason("a2"), "NodeLost");
}

TEST_F(ClusterReconcilerTest, DeletionWaitsForAConfirmedNodeLoss) {
  reconciler_.StartedLeading();
  clock_.Advance(60s);
  RunningActor("a3", "del-n3");
  ASSERT_TRUE(client_->Patch(kActorType, ns_, "a3", PatchType::kMerge,
                             {{"metadata", {{"finalizers", {"stasis.dev/actor-cleanup"}}}}})
                  .ok());
  ASSERT_TRUE(client_->Delete(kActorType, ns_, "a3").ok());
  ServerLease("del-n3", clock_.WallNow());
  CachedLease("del-n3");
  ASSERT_EQ(reconciler_.NodeAlive("del-n3"), std::optional<bool>(true));
  clock_.Advance(11s);
  ServerLease("del-n3", clock_.WallNow());
  Reconcile("a3");  // the agent is alive: it finishes the deletion, not the controller
  EXPECT_EQ(StatusOf("a3"), "STATUS_RUNNING");

  clock_.Advance(11s);
  Reconcile("a3");
  auto gone = client_->Get(kActorType, ns_, "a3");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kNotFound);
}

// Expiry is judged by observed change, not by the node's renewTime against this controller's
// clock: nodes whose clocks are 5 minutes behind and ahead keep their actors while they renew
// (every 5 s of a 10 s lease), and lose them 10 s after their last renewal.
TEST_F(ClusterReconcilerTest, ASkewedNodeClockIsNeitherLostNorImmortal) {
  reconciler_.StartedLeading();
  clock_.Advance(60s);
  const std::vector<std::pair<std::string, std::chrono::minutes>> nodes = {{"behind-n4", -5min},
                                                                           {"ahead-n5", 5min}};
  for (const auto& [node, skew] : nodes) RunningActor("on-" + node, node);
  for (int beat = 0; beat < 6; ++beat) {
    for (const auto& [node, skew] : nodes) {
      ServerLease(node, clock_.WallNow() + skew);
      CachedLease(node);
      Reconcile("on-" + node);
      EXPECT_EQ(StatusOf("on-" + node), "STATUS_RUNNING") << node << " beat " << beat;
    }
    clock_.Advance(5s);
  }
  // The agents stop renewing.
  clock_.Advance(6s);
  for (const auto& [node, skew] : nodes) {
    Reconcile("on-" + node);
    EXPECT_EQ(StatusOf("on-" + node), "STATUS_FAILED") << node;
    EXPECT_EQ(StuckReason("on-" + node), "NodeLost") << node;
  }
}

// The binder sends a GPU actor only to a node with a free worker holding enough GPUs, and a CPU
// actor only to a CPU slot (never to a GPU another actor could use); an actor no worker suits
// stays unbound.
TEST_F(ClusterReconcilerTest, BindsGpuActorsToGpuWorkersAndCpuActorsToSlots) {
  for (const auto& [node, devices] : std::vector<std::pair<std::string, json>>{
           {"bind-cpu", json::array()}, {"bind-gpu", json::array({"GPU-bind-0"})}}) {
    ServerLease(node, clock_.WallNow());
    CachedLease(node);
    json w = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Worker"},
              {"metadata", {{"name", node + "-w0"}}},
              {"spec", {{"nodeName", node}, {"devices", devices}}},
              {"status", {{"phase", "Free"}}}};
    workers_.Upsert(std::make_shared<const json>(w));
  }
  auto unpinned = [&](const std::string& name, int gpus) {
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec", {{"bundle", "/var/lib/stasis/bundles/counter"}, {"gpu", {{"count", gpus}}}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, a).ok());
  };
  auto node_of = [&](const std::string& name) {
    auto a = client_->Get(kActorType, ns_, name);
    return a.ok() ? a->value("/status/nodeName"_json_pointer, std::string()) : "<" + a.status().ToString() + ">";
  };
  unpinned("gpu", 1);
  unpinned("cpu", 0);
  unpinned("two-gpus", 2);
  Reconcile("gpu");
  Reconcile("cpu");
  Reconcile("two-gpus");
  EXPECT_EQ(node_of("gpu"), "bind-gpu");
  EXPECT_EQ(node_of("cpu"), "bind-cpu");
  EXPECT_EQ(node_of("two-gpus"), "") << "no worker holds two GPUs";
}

// A bind is decided on the cache and written with the cached resourceVersion as its
// precondition: an actor changed since the cache saw it is not bound on that stale copy (a
// conflict, nothing written), and is bound once the cache holds the change, which is kept.
TEST_F(ClusterReconcilerTest, ABindOnAStaleCacheConflictsAndBindsOnceTheCacheCatchesUp) {
  NodeWithWorkers("stale-bind-n1", 1, 0);
  UnpinnedActor("late");
  CachedThenLabelled("late", "a");

  auto stale = reconciler_.Reconcile(Request{ns_, "late"});
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_TRUE(stale->requeue) << "a conflict is looked at again, not counted as an error";
  EXPECT_EQ(Actor("late").value("/status/nodeName"_json_pointer, std::string()), "") << "bound on a stale copy";
  EXPECT_FALSE(Actor("late")["metadata"]["labels"].contains(api::kNodeLabel));

  Reconcile("late");  // the cache caught up
  const json bound = Actor("late");
  EXPECT_EQ(bound.value("/status/nodeName"_json_pointer, std::string()), "stale-bind-n1");
  EXPECT_EQ(bound["metadata"]["labels"].value(api::kNodeLabel, ""), "stale-bind-n1");
  EXPECT_EQ(bound["metadata"]["labels"].value("team", ""), "a") << "the change the cache missed was lost";
}

// The same for the binder's other write, Ready=False when it cannot place an actor: on a
// stale copy it is refused and tried again soon, not counted as an error; then written.
TEST_F(ClusterReconcilerTest, AnUnplacedReportOnAStaleCacheIsTriedAgainNotAnError) {
  NodeWithWorkers("stale-full-n1", 0, 1);
  UnpinnedActor("waits");
  CachedThenLabelled("waits", "b");

  auto stale = reconciler_.Reconcile(Request{ns_, "waits"});
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_TRUE(stale->requeue);
  EXPECT_EQ(Ready(Actor("waits")).value("reason", ""), "") << "written on a stale copy";

  Reconcile("waits");
  EXPECT_EQ(Ready(Actor("waits")).value("reason", ""), api::kReasonNoFreeWorker);
}

// An unpinned actor on a cluster whose every worker is held waits with Ready=False
// NoFreeWorker and one FailedBinding Event, however often it is reconciled; a new count is a
// new message and a new Event; it binds when a worker frees, with a Bound Event, and the
// binder's condition is replaced.
TEST_F(ClusterReconcilerTest, ReportsAnActorItCannotPlaceOnceAndBindsWhenAWorkerFrees) {
  NodeWithWorkers("full-n1", 0, 2);
  UnpinnedActor("waiter");
  for (int i = 0; i < 4; ++i) {
    Reconcile("waiter");
    clock_.Advance(1s);
  }
  json a = Actor("waiter");
  json ready = Ready(a);
  EXPECT_EQ(ready.value("status", ""), "False") << a.dump(2);
  EXPECT_EQ(ready.value("reason", ""), "NoFreeWorker");
  EXPECT_EQ(ready.value("message", ""), "0/2 workers free: 2 held");
  EXPECT_EQ(ready.value("observedGeneration", -1), a["metadata"].value("generation", -2));
  EXPECT_EQ(a.value("/status/nodeName"_json_pointer, std::string()), "");
  json events = EventsFor("waiter");
  EXPECT_EQ(Reasons(events), std::vector<std::string>{"FailedBinding/Warning x1"}) << events.dump(2);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].value("message", ""), "0/2 workers free: 2 held");

  // Another node, all held too: the count changes, so does the message, once.
  NodeWithWorkers("full-n2", 0, 1);
  Reconcile("waiter");
  Reconcile("waiter");
  EXPECT_EQ(Ready(Actor("waiter")).value("message", ""), "0/3 workers free: 3 held");
  EXPECT_EQ(Reasons(EventsFor("waiter")),
            (std::vector<std::string>{"FailedBinding/Warning x1", "FailedBinding/Warning x1"}));

  // A worker of full-n2 frees.
  NodeWithWorkers("full-n2", 1, 0);
  Reconcile("waiter");
  a = Actor("waiter");
  EXPECT_EQ(a.value("/status/nodeName"_json_pointer, std::string()), "full-n2");
  EXPECT_EQ(a.value("/metadata/labels/stasis.dev~1node"_json_pointer, std::string()), "full-n2");
  ready = Ready(a);
  EXPECT_EQ(ready.value("reason", ""), "Bound") << a.dump(2);
  EXPECT_EQ(ready.value("status", ""), "False");
  EXPECT_EQ(ready.value("observedGeneration", -1), a["metadata"].value("generation", -2));
  events = EventsFor("waiter");
  EXPECT_EQ(Reasons(events), (std::vector<std::string>{"Bound/Normal x1", "FailedBinding/Warning x1",
                                                       "FailedBinding/Warning x1"}));
  for (const auto& e : events) {
    if (e.value("reason", "") == "Bound") {
      EXPECT_EQ(e.value("message", ""), "bound to node full-n2 (1/1 suitable workers free)");
    }
  }
  // Bound, it is its node agent's: more reconciles write and say nothing.
  const std::string rv = a["metadata"].value("resourceVersion", "");
  Reconcile("waiter");
  EXPECT_EQ(Actor("waiter")["metadata"].value("resourceVersion", ""), rv);
}

// No live node has a worker with the GPUs a GPU actor asks for: Unschedulable, with the count.
TEST_F(ClusterReconcilerTest, AGpuActorWithNoGpuWorkerIsUnschedulable) {
  NodeWithWorkers("cpu-only", 2, 0);
  UnpinnedActor("wants-gpu", 1);
  Reconcile("wants-gpu");
  Reconcile("wants-gpu");
  json a = Actor("wants-gpu");
  json ready = Ready(a);
  EXPECT_EQ(ready.value("status", ""), "False") << a.dump(2);
  EXPECT_EQ(ready.value("reason", ""), "Unschedulable");
  EXPECT_EQ(ready.value("message", ""), "0/1 live nodes have a worker with 1 GPU");
  EXPECT_EQ(a.value("/status/nodeName"_json_pointer, std::string()), "");
  json events = EventsFor("wants-gpu");
  EXPECT_EQ(Reasons(events), std::vector<std::string>{"FailedBinding/Warning x1"}) << events.dump(2);
}

// A cordoned node takes no new actor, and an actor its draining agent suspended moves away;
// the annotation stasis.dev/drain: "false" keeps the actors of a cordoned node where they are.
TEST_F(ClusterReconcilerTest, ACordonedNodeTakesNoNewActorsAndItsSuspendedActorsMove) {
  reconciler_.UseNodes(nodes_);
  NodeWithWorkers("drain-n1", 3, 0);
  NodeWithWorkers("drain-n2", 2, 0);
  auto node = [&](bool cordoned, const std::string& annotation) {
    json n = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "drain-n1"}}},
              {"spec", {{"unschedulable", cordoned}}}};
    if (!annotation.empty()) n["metadata"]["annotations"]["stasis.dev/drain"] = annotation;
    nodes_.Upsert(std::make_shared<const json>(n));
  };
  auto suspended_on_n1 = [&](const std::string& name) {
    UnpinnedActor(name);
    auto r = client_->Patch(kActorType, ns_, name, PatchType::kMerge,
                            {{"status", {{"status", "STATUS_SUSPENDED"}, {"nodeName", "drain-n1"}}}}, "status");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  };
  auto node_of = [&](const std::string& name) { return Actor(name).value("/status/nodeName"_json_pointer, std::string()); };

  node(true, "false");  // cordoned, actors kept
  UnpinnedActor("fresh");
  Reconcile("fresh");
  EXPECT_EQ(node_of("fresh"), "drain-n2") << "drain-n1 has more free workers but is cordoned";
  suspended_on_n1("kept");
  Reconcile("kept");
  EXPECT_EQ(node_of("kept"), "drain-n1") << "its agent resumes it there";

  node(true, "");  // cordoned: drains
  actors_.Upsert(std::make_shared<const json>(Actor("fresh")));  // bound: promised a worker of drain-n2
  suspended_on_n1("moved");
  Reconcile("moved");
  EXPECT_EQ(node_of("moved"), "drain-n2");
  bool said = false;
  for (const auto& e : EventsFor("moved")) {
    if (e.value("reason", "") != "Bound") continue;
    said = true;
    EXPECT_EQ(e.value("message", ""),
              "bound to node drain-n2 (1/2 suitable workers free), away from node drain-n1, which is draining");
  }
  EXPECT_TRUE(said) << "a Bound Event";

  // Nowhere else to go: it waits where it is, the reason said, until a node takes it.
  node(false, "true");
  NodeWithWorkers("drain-n2", 0, 2);
  suspended_on_n1("stranded");
  Reconcile("stranded");
  json a = Actor("stranded");
  EXPECT_EQ(a.value("/status/nodeName"_json_pointer, std::string()), "drain-n1");
  EXPECT_EQ(Ready(a).value("reason", ""), "NoFreeWorker") << a.dump(2);
  EXPECT_EQ(Ready(a).value("message", ""), "0/2 workers free: 2 held");
}

}  // namespace
}  // namespace stasis
