// The node agent's actor reconciler starting transitions from its cache (no quorum read): a real
// kube-apiserver, the pinned runsc with a real sandbox running a counter, and an actor cache
// the test fills by hand — fresh, or deliberately stale, as a watch that lags the agent's own
// writes would leave it. A stale cache must cost a read, never a repeated or undone transition
// and never a worker held by an actor at rest — nor may a worker release that failed after the
// PAUSED write (a fault injected into the client's transport for that one request).
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/json_mapping.h"
#include "controller/rest_config.h"
#include "controller/transport.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/node_workers.h"
#include "runtimes/runsc_driver.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/control_plane.h"
#include "tests/support/sandbox.h"
#include "reconcilers/node/sandbox_id.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::ControlPlane;

constexpr char kNode[] = "cache-node";

// The real transport to the real API server, except that while armed, the requests `match`
// picks fail as a dropped connection would. A failure of exactly one request at exactly one
// moment of a reconcile cannot be produced against the server itself; everything else the
// reconciler sends goes through.
class FaultyTransport : public Transport {
 public:
  explicit FaultyTransport(std::unique_ptr<Transport> real) : real_(std::move(real)) {}
  void Arm(std::function<bool(const HttpRequest&)> match) {
    std::lock_guard lock(mu_);
    match_ = std::move(match);
  }
  void Disarm() { Arm(nullptr); }
  int failed() {
    std::lock_guard lock(mu_);
    return failed_;
  }
  Result<HttpResponse> Do(const HttpRequest& request) override {
    {
      std::lock_guard lock(mu_);
      if (match_ && match_(request)) {
        ++failed_;
        return Status(Code::kUnavailable, request.method + " " + request.path + ": injected: connection reset");
      }
    }
    return real_->Do(request);
  }
  Result<HttpResponse> Stream(const HttpRequest& request, const std::function<bool(std::string_view)>& on_line,
                              const std::atomic<bool>* cancel) override {
    return real_->Stream(request, on_line, cancel);
  }
  std::string Host() const override { return real_->Host(); }

 private:
  std::unique_ptr<Transport> real_;
  std::mutex mu_;
  std::function<bool(const HttpRequest&)> match_;
  int failed_ = 0;
};

std::unique_ptr<KubeClient> FaultyClient(FaultyTransport** faults) {
  auto config = LoadKubeconfig(ControlPlane::Get().kubeconfig());
  if (!config.ok()) std::abort();
  auto transport = std::make_unique<FaultyTransport>(NewCpprestTransport(*config));
  *faults = transport.get();
  return std::make_unique<KubeClient>(std::move(transport));
}
constexpr char kActor[] = "counter";

class ActorCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), "");
  }

  ActorCacheTest()
      : client_(FaultyClient(&faults_)),
        bundle_(testing::CounterArgs()),
        root_("stasis-cache-"),
        driver_(testing::PinnedRunsc()),
        snapshot_metrics_(registry_),
        snapshots_((root_.path() / "snapshots").string(), (root_.path() / "store").string()),
        workers_(*client_, kNode, {{}}, &snapshot_metrics_) {}

  void SetUp() override {
    ns_ = "cache-" + std::to_string(counter_++);
    ASSERT_EQ(ControlPlane::Get().Kubectl({"create", "namespace", ns_}).exit_code, 0);
    fs::create_directories(root_.path() / "snapshots");
    fs::create_directories(root_.path() / "store");
    ASSERT_TRUE(workers_.Register().ok());
    ActorReconcilerOptions o;
    o.node = kNode;
    o.root = root_.path().string();
    o.bundle_roots.roots = {testing::TestBundleRoot().string()};
    reconciler_ = std::make_unique<ActorReconciler>(
        o, *client_, [this](const std::string&) { return cached_; }, driver_, snapshots_, workers_,
        snapshot_metrics_, nullptr);
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", kActor}, {"namespace", ns_}}},
              {"spec", {{"bundle", bundle_.dir().string()}, {"nodeName", kNode}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, a).ok());
  }

  void TearDown() override {
    // The sandbox, if one is left, and the worker: the node is shared by the tests.
    SandboxRef ref;
    ref.id = SandboxIdFor(ns_, kActor);
    ref.root = (root_.path() / "run" / ref.id).string();
    (void)driver_.Delete(ref);
    (void)workers_.Free(Ref());
  }

  api::ActorRef Ref() const { return api::ActorRef{ns_, kActor}; }
  json Live() {
    auto r = client_->Get(kActorType, ns_, kActor);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json{};
  }
  std::string StatusOf(const json& a) { return a.value("/status/status"_json_pointer, ""); }
  std::string SnapshotOf(const json& a) { return a.value("/status/latestSnapshot/id"_json_pointer, ""); }
  void Cache(const json& a) { cached_ = std::make_shared<const json>(a); }
  void Desire(const std::string& state) {
    ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge,
                               {{"spec", {{"desiredState", state}}}})
                    .ok());
  }
  // Reconciles from a fresh cache until the API server shows `want`.
  void Settle(const std::string& want) {
    for (int i = 0; i < 6 && StatusOf(Live()) != want; ++i) {
      Cache(Live());
      (void)reconciler_->Reconcile(Request{ns_, kActor});
    }
    ASSERT_EQ(StatusOf(Live()), want);
  }
  long Counter() {
    auto r = driver_.Exec(SandboxRef{SandboxIdFor(ns_, kActor), (root_.path() / "run" / SandboxIdFor(ns_, kActor)).string(), "", ""},
                          {"cat", "/tmp/counter"}, 30s);
    if (!r.ok() || r->exit_code != 0) return -1;
    try {
      return std::stol(r->out);
    } catch (...) {
      return -1;
    }
  }
  size_t LocalSnapshots() { return snapshots_.ListLocal(ns_, kActor).size(); }

  static inline int counter_ = 0;
  FaultyTransport* faults_ = nullptr;  // owned by client_
  std::unique_ptr<KubeClient> client_;
  testing::Bundle bundle_;
  testing::TempDir root_;
  RunscDriver driver_;
  prometheus::Registry registry_;
  SnapshotMetrics snapshot_metrics_;
  SnapshotStore snapshots_;
  NodeWorkers workers_;
  std::unique_ptr<ActorReconciler> reconciler_;
  ObjectPtr cached_;
  std::string ns_;
};

// The cache still shows RUNNING wanting Paused after this agent paused the actor: the
// checkpoint it would start is refused by its first write, and the read after it finds the
// actor at rest. One snapshot, the same one.
TEST_F(ActorCacheTest, StalePauseIsNotCheckpointedAgain) {
  Settle("STATUS_RUNNING");
  Desire("Paused");
  const json stale = Live();
  ASSERT_EQ(StatusOf(stale), "STATUS_RUNNING");
  Cache(stale);
  auto r = reconciler_->Reconcile(Request{ns_, kActor});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json paused = Live();
  ASSERT_EQ(StatusOf(paused), "STATUS_PAUSED");
  const std::string snapshot = SnapshotOf(paused);
  ASSERT_FALSE(snapshot.empty());
  EXPECT_FALSE(workers_.HeldBy(Ref()).has_value());

  Cache(stale);  // the watch has not caught up
  r = reconciler_->Reconcile(Request{ns_, kActor});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json after = Live();
  EXPECT_EQ(StatusOf(after), "STATUS_PAUSED");
  EXPECT_EQ(SnapshotOf(after), snapshot);
  EXPECT_EQ(LocalSnapshots(), 1u);
  EXPECT_EQ(after["metadata"]["resourceVersion"], paused["metadata"]["resourceVersion"]) << "nothing written";
  EXPECT_FALSE(workers_.HeldBy(Ref()).has_value());
}

// The cache shows PAUSED wanting Running, but the user has asked for Paused again since: the
// resume claims a worker before its first write, which is refused; the worker goes back (an
// actor at rest holds none), and no sandbox is started.
TEST_F(ActorCacheTest, StaleResumeOfAnActorAtRestGivesItsWorkerBack) {
  Settle("STATUS_RUNNING");
  Desire("Paused");
  Settle("STATUS_PAUSED");
  const std::string snapshot = SnapshotOf(Live());
  Desire("Running");
  const json stale = Live();
  Desire("Paused");

  Cache(stale);
  auto r = reconciler_->Reconcile(Request{ns_, kActor});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json after = Live();
  EXPECT_EQ(StatusOf(after), "STATUS_PAUSED");
  EXPECT_EQ(SnapshotOf(after), snapshot);
  EXPECT_EQ(after["status"]["observedGeneration"], after["metadata"]["generation"]);
  EXPECT_FALSE(workers_.HeldBy(Ref()).has_value()) << "a worker held by an actor at rest";
  EXPECT_EQ(Counter(), -1) << "a sandbox runs for a paused actor";
}

// The cache shows PAUSED wanting Running after this agent has resumed it: the worker it holds
// stays its own, and the running sandbox is neither restored again nor restarted.
TEST_F(ActorCacheTest, StaleResumeOfAnActorAlreadyRunningKeepsItRunning) {
  Settle("STATUS_RUNNING");
  Desire("Paused");
  Settle("STATUS_PAUSED");
  Desire("Running");
  const json stale = Live();
  Settle("STATUS_RUNNING");
  const auto worker = workers_.HeldBy(Ref());
  ASSERT_TRUE(worker.has_value());
  long before = -1;
  for (int i = 0; i < 50 && before < 0; ++i, std::this_thread::sleep_for(100ms)) before = Counter();
  ASSERT_GE(before, 0);
  const std::string rv = Live()["metadata"]["resourceVersion"];

  Cache(stale);
  auto r = reconciler_->Reconcile(Request{ns_, kActor});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const json after = Live();
  EXPECT_EQ(StatusOf(after), "STATUS_RUNNING");
  EXPECT_EQ(after["metadata"]["resourceVersion"], rv) << "nothing written";
  const auto still = workers_.HeldBy(Ref());
  ASSERT_TRUE(still.has_value());
  EXPECT_EQ(still->metadata.name, worker->metadata.name);
  EXPECT_GE(Counter(), before) << "the counter went back: the sandbox was restored or restarted";
}

// A fresh cache: the pause and the resume each start from it and finish.
TEST_F(ActorCacheTest, FreshCacheStartsPauseAndResume) {
  Settle("STATUS_RUNNING");
  Desire("Paused");
  Cache(Live());
  ASSERT_TRUE(reconciler_->Reconcile(Request{ns_, kActor}).ok());
  EXPECT_EQ(StatusOf(Live()), "STATUS_PAUSED");
  Desire("Running");
  Cache(Live());
  ASSERT_TRUE(reconciler_->Reconcile(Request{ns_, kActor}).ok());
  EXPECT_EQ(StatusOf(Live()), "STATUS_RUNNING");
  EXPECT_TRUE(workers_.HeldBy(Ref()).has_value());
}

// The worker's release after the PAUSED write fails (the API server unreachable for that
// moment): the actor is at rest in the cache, where a reconcile neither reads nor writes — but
// the failed release marked it, so the retry reads it and gives the worker back.
TEST_F(ActorCacheTest, AFailedWorkerReleaseAfterThePauseIsSettledByTheRetry) {
  Settle("STATUS_RUNNING");
  ASSERT_TRUE(workers_.HeldBy(Ref()).has_value());
  Desire("Paused");
  faults_->Arm([](const HttpRequest& r) {
    return r.method == "PATCH" && r.path.find("/workers/") != std::string::npos;
  });
  Cache(Live());
  auto r = reconciler_->Reconcile(Request{ns_, kActor});
  faults_->Disarm();
  EXPECT_FALSE(r.ok()) << "a failed release must make the reconcile be retried";
  EXPECT_GE(faults_->failed(), 1);
  const json paused = Live();
  ASSERT_EQ(StatusOf(paused), "STATUS_PAUSED") << "the pause itself completed";
  ASSERT_TRUE(workers_.HeldBy(Ref()).has_value()) << "the injected failure should have kept the worker";
  EXPECT_FALSE(fs::exists(root_.path() / "run" / SandboxIdFor(ns_, kActor)))
      << "the stopped sandbox is deleted even when the release failed";

  Cache(paused);  // the watch has caught up: the cache shows the actor at rest
  r = reconciler_->Reconcile(Request{ns_, kActor});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(workers_.HeldBy(Ref()).has_value()) << "a worker held by an actor at rest";
  const json after = Live();
  EXPECT_EQ(StatusOf(after), "STATUS_PAUSED");
  EXPECT_EQ(SnapshotOf(after), SnapshotOf(paused));
  EXPECT_EQ(LocalSnapshots(), 1u);
}

}  // namespace
}  // namespace stasis
