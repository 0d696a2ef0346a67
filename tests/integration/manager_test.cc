// The Manager against a real kube-apiserver: /readyz answers 503 until every informer has
// synced (and the extra checks pass); reconciles begin only after the sync and the
// caches-synced hook; a stop drains the controllers while the caches and the Lease are still
// live, then hands the Lease back; with leader election the controllers wait for the Lease,
// and losing it ends Run with kAborted.
#include "controller/manager.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "tests/support/control_plane.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using testing::ControlPlane;
using SteadyClock = std::chrono::steady_clock;

const ResourceType kConfigMaps{"", "v1", "configmaps", true};
const ResourceType kLeases{"coordination.k8s.io", "v1", "leases", true};
const ResourceType kGadgets{"manager-test.stasis.dev", "v1", "gadgets", true};

constexpr const char* kGadgetCrd = R"(apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.manager-test.stasis.dev
spec:
  group: manager-test.stasis.dev
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
)";

// Waits until pred() or the timeout; a condition wait on state the test cannot block on.
template <typename Pred>
bool Eventually(Pred pred, std::chrono::milliseconds timeout = 30s) {
  const auto deadline = SteadyClock::now() + timeout;
  while (!pred()) {
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

struct HttpReply {
  int code = 0;
  std::string body;
};

// GET over a raw loopback socket: the endpoint answers one request and closes.
HttpReply Get(int port, const std::string& path) {
  HttpReply r;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return r;
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
  [[maybe_unused]] auto w = write(fd, request.data(), request.size());
  std::string all;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) all.append(buf, static_cast<size_t>(n));
  close(fd);
  const auto split = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.1 ", 0) != 0 || split == std::string::npos) return r;
  r.code = std::stoi(all.substr(9, 3));
  r.body = all.substr(split + 4);
  return r;
}

json ConfigMap(const std::string& name, const std::string& suite) {
  return {{"metadata", {{"name", name}, {"labels", {{"suite", suite}}}}}, {"data", {{"v", "1"}}}};
}

// Records every reconcile with what it saw; `block_key` waits until Release().
class RecordingReconciler : public Reconciler {
 public:
  std::function<void(const Request&)> on_reconcile;  // set before Run
  std::string block_key;

  Result<ReconcileOutcome> Reconcile(const Request& request) override {
    if (on_reconcile) on_reconcile(request);
    std::unique_lock lock(mu_);
    keys_.insert(request.Key());
    times_.push_back(SteadyClock::now());
    if (request.Key() == block_key) {
      blocked_ = true;
      cv_.notify_all();
      cv_.wait_for(lock, 60s, [&] { return released_; });
    }
    return ReconcileOutcome{};
  }
  bool WaitBlocked() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 30s, [&] { return blocked_; });
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  size_t Distinct() {
    std::lock_guard lock(mu_);
    return keys_.size();
  }
  std::vector<SteadyClock::time_point> Times() {
    std::lock_guard lock(mu_);
    return times_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::string> keys_;
  std::vector<SteadyClock::time_point> times_;
  bool blocked_ = false, released_ = false;
};

class ManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = ControlPlane::Get().CreateTestNamespace("manager");
    ASSERT_FALSE(ns_.empty());
    client_ = ControlPlane::Get().NewClient();
  }
  ManagerOptions Options() {
    ManagerOptions o;
    o.name = "manager-test";
    o.kubeconfig = ControlPlane::Get().kubeconfig();
    o.user_agent = "stasis-manager-test";
    o.metrics = &metrics_;
    o.metrics_addr = "127.0.0.1:0";
    o.events.component = "stasis-manager-test";
    return o;
  }
  // Short timings: a takeover at the next half-second retry, a loss 2 s after the last renewal.
  LeaderElectionConfig Election(const std::string& identity) {
    LeaderElectionConfig lc;
    lc.lease_namespace = ns_;
    lc.lease_name = "manager-test";
    lc.identity = identity;
    lc.lease_duration = 3s;
    lc.renew_deadline = 2s;
    lc.retry_period = 500ms;
    return lc;
  }
  InformerOptions ConfigMaps(const std::string& suite, int64_t page_size = 500) {
    InformerOptions io;
    io.type = kConfigMaps;
    io.ns = ns_;
    io.label_selector = "suite=" + suite;
    io.page_size = page_size;
    return io;
  }
  std::unique_ptr<Manager> NewManager(ManagerOptions o) {
    auto m = Manager::New(std::move(o));
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    return m.ok() ? std::move(*m) : nullptr;
  }
  // Stops Run, if it still runs, when it goes out of scope: before the manager and the
  // reconciler it drives (declare it after them), also when an ASSERT returns early.
  struct Running {
    std::atomic<bool>* stop;
    std::future<Status>* run;
    ~Running() {
      *stop = true;
      if (run->valid()) run->wait();
    }
  };
  [[nodiscard]] Running StartRun(Manager& m) {
    run_ = std::async(std::launch::async, [this, &m] { return m.Run(&stop_); });
    return Running{&stop_, &run_};
  }
  // Stops Run and returns what it returned.
  Status StopRun() {
    stop_ = true;
    if (run_.wait_for(60s) != std::future_status::ready) return Status(Code::kDeadlineExceeded, "Run did not return");
    return run_.get();
  }
  json LeaseSpec() {
    auto lease = client_->Get(kLeases, ns_, "manager-test");
    return lease.ok() ? lease->value("spec", json::object()) : json::object();
  }
  std::string Holder() { return LeaseSpec().value("holderIdentity", ""); }

  std::string ns_;
  std::unique_ptr<KubeClient> client_;
  Metrics metrics_;
  std::atomic<bool> stop_{false};
  std::future<Status> run_;
};

// Readiness follows the informers' sync, then the extra checks. The gadgets informer cannot
// sync before its CRD exists, so the 503 is observed for certain, and so is the controller
// that has not started meanwhile.
TEST_F(ManagerTest, ReadyOnlyOnceInformersSyncedAndChecksPass) {
  (void)ControlPlane::Get().Kubectl({"delete", "crd", "gadgets.manager-test.stasis.dev", "--ignore-not-found"});
  ManagerOptions o = Options();
  o.not_synced_message = "gadget cache not synced";
  auto m = NewManager(o);
  ASSERT_TRUE(m);
  InformerOptions io;
  io.type = kGadgets;
  io.ns = ns_;
  io.backoff = BackoffPolicy{100ms, 500ms, 2.0, 0.1};
  m->AddInformer(io);
  RecordingReconciler reconciler;
  m->AddController("gadgets", reconciler, 1);
  std::atomic<bool> extra_ok{false};
  m->AddReadyzCheck([&]() -> Status {
    return extra_ok ? OkStatus() : Status(Code::kUnavailable, "extra check pending");
  });
  auto running = StartRun(*m);

  ASSERT_TRUE(Eventually([&] { return m->port() != 0; }));
  HttpReply r = Get(m->port(), "/readyz");
  EXPECT_EQ(r.code, 503);
  EXPECT_EQ(r.body, "gadget cache not synced");
  EXPECT_EQ(Get(m->port(), "/healthz").code, 200);
  EXPECT_FALSE(m->started());

  auto applied = ControlPlane::Get().Kubectl({"apply", "-f", "-"}, kGadgetCrd);
  ASSERT_TRUE(applied.success()) << applied.err;
  ASSERT_TRUE(ControlPlane::Get()
                  .Kubectl({"wait", "--for=condition=Established", "--timeout=60s",
                            "crd/gadgets.manager-test.stasis.dev"})
                  .success());
  ASSERT_TRUE(Eventually([&] { return Get(m->port(), "/readyz").body == "extra check pending"; }));
  EXPECT_TRUE(m->started());  // the extra checks gate readiness, not the controllers
  extra_ok = true;
  r = Get(m->port(), "/readyz");
  EXPECT_EQ(r.code, 200);
  EXPECT_EQ(r.body, "ok");
  EXPECT_TRUE(StopRun().ok());
  (void)ControlPlane::Get().Kubectl({"delete", "crd", "gadgets.manager-test.stasis.dev"});
}

// The informer lists 20 objects two a page and queues each key as it arrives; no reconcile may
// run before the last page is in and the caches-synced hook has run.
TEST_F(ManagerTest, ReconcilesStartOnlyAfterCachesSynced) {
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("cm-" + std::to_string(i), "sync")).ok());
  }
  auto m = NewManager(Options());
  ASSERT_TRUE(m);
  Informer& informer = m->AddInformer(ConfigMaps("sync", /*page_size=*/2));
  RecordingReconciler reconciler;
  Controller& controller = m->AddController("configmaps", reconciler, 4);
  informer.AddEventHandler(controller.EnqueueHandler());

  std::atomic<int> hooks_run{0}, reconciles_before_hook{-1}, early_reconciles{0};
  std::atomic<bool> hook_saw_synced{false}, started_hook_saw_started{false};
  m->OnCachesSynced([&] {
    hook_saw_synced = informer.HasSynced();
    reconciles_before_hook = static_cast<int>(reconciler.Distinct());
    ++hooks_run;
  });
  m->OnControllersStarted([&] { started_hook_saw_started = m->started(); });
  reconciler.on_reconcile = [&](const Request&) {
    if (!informer.HasSynced() || hooks_run.load() != 1 || !m->Ready().ok()) ++early_reconciles;
  };
  auto running = StartRun(*m);

  ASSERT_TRUE(Eventually([&] { return reconciler.Distinct() == 20; }));
  EXPECT_EQ(early_reconciles.load(), 0);
  EXPECT_EQ(hooks_run.load(), 1);
  EXPECT_TRUE(hook_saw_synced.load());
  EXPECT_EQ(reconciles_before_hook.load(), 0);
  EXPECT_TRUE(started_hook_saw_started.load());
  EXPECT_GE(informer.list_count(), 1);
  EXPECT_TRUE(StopRun().ok());
}

// A stop while an informer cannot sync returns OK without starting anything.
TEST_F(ManagerTest, StopDuringSyncReturnsOk) {
  auto m = NewManager(Options());
  ASSERT_TRUE(m);
  InformerOptions io;
  io.type = ResourceType{"absent.stasis.dev", "v1", "nothings", true};
  io.ns = ns_;
  m->AddInformer(io);
  RecordingReconciler reconciler;
  m->AddController("nothings", reconciler, 1);
  std::atomic<bool> hooked{false};
  m->OnCachesSynced([&] { hooked = true; });
  auto running = StartRun(*m);
  ASSERT_TRUE(Eventually([&] { return m->port() != 0; }));
  EXPECT_EQ(Get(m->port(), "/readyz").code, 503);
  EXPECT_TRUE(StopRun().ok());
  EXPECT_FALSE(m->started());
  EXPECT_FALSE(hooked.load());
}

// The stop order, seen from outside: while a reconcile is still in flight the caches follow
// new writes and the Lease is still held; the Lease is handed back only after it finished, and
// the role's runnable stops after both.
TEST_F(ManagerTest, StopDrainsControllersThenReleasesLeaseThenStopsCaches) {
  ManagerOptions o = Options();
  o.leader_election = Election("manager-a");
  auto m = NewManager(o);
  ASSERT_TRUE(m);
  Informer& informer = m->AddInformer(ConfigMaps("stop"));
  RecordingReconciler reconciler;
  reconciler.block_key = ns_ + "/blocker";
  Controller& controller = m->AddController("stop", reconciler, 2);
  informer.AddEventHandler(controller.EnqueueHandler());
  std::mutex mu;
  std::vector<std::string> order;
  auto note = [&](const std::string& what) {
    std::lock_guard lock(mu);
    order.push_back(what);
  };
  m->AddRunnable("probe", [&] { note("runnable started"); return OkStatus(); },
                 [&] { note("runnable stopped"); });
  m->OnStopping([&] { note("stopping"); });
  auto running = StartRun(*m);
  ASSERT_TRUE(Eventually([&] { return m->started() && Holder() == "manager-a"; }));
  EXPECT_EQ(m->identity(), "manager-a");

  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("blocker", "stop")).ok());
  ASSERT_TRUE(reconciler.WaitBlocked());
  stop_ = true;
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard lock(mu);
    return order.size() == 2;
  }));
  // Draining: the cache still follows the API server, and this process still holds the Lease.
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("during-drain", "stop")).ok());
  EXPECT_TRUE(Eventually([&] { return informer.store().Get(ns_ + "/during-drain") != nullptr; }));
  EXPECT_EQ(Holder(), "manager-a");
  EXPECT_EQ(run_.wait_for(0s), std::future_status::timeout);

  note("reconcile released");
  reconciler.Release();
  ASSERT_EQ(run_.wait_for(30s), std::future_status::ready);
  Status s = run_.get();
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(m->drained());
  EXPECT_EQ(Holder(), "");
  EXPECT_EQ(LeaseSpec().value("leaseDurationSeconds", 0), 1);
  EXPECT_EQ(order, (std::vector<std::string>{"runnable started", "stopping", "reconcile released",
                                             "runnable stopped"}));
}

// Another candidate holds the Lease: the caches sync (a standby is ready) but nothing is
// reconciled until that candidate hands the Lease back.
TEST_F(ManagerTest, ControllersStartOnlyWhenLeading) {
  auto other = LeaderElector::New(*client_, Election("manager-other"));
  ASSERT_TRUE(other.ok());
  (*other)->Start();
  ASSERT_TRUE(Eventually([&] { return (*other)->IsLeader(); }));
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("cm-" + std::to_string(i), "lead")).ok());
  }
  ManagerOptions o = Options();
  o.leader_election = Election("manager-b");
  auto m = NewManager(o);
  ASSERT_TRUE(m);
  Informer& informer = m->AddInformer(ConfigMaps("lead"));
  RecordingReconciler reconciler;
  Controller& controller = m->AddController("lead", reconciler, 2);
  informer.AddEventHandler(controller.EnqueueHandler());
  auto running = StartRun(*m);

  ASSERT_TRUE(Eventually([&] { return m->Ready().ok(); }));
  EXPECT_EQ(Get(m->port(), "/readyz").code, 200);
  EXPECT_FALSE(m->started());
  const auto released = SteadyClock::now();
  (*other)->Stop();  // hands the Lease back
  ASSERT_TRUE(Eventually([&] { return reconciler.Distinct() == 3; }));
  EXPECT_TRUE(m->started());
  EXPECT_EQ(Holder(), "manager-b");
  for (auto t : reconciler.Times()) EXPECT_GE(t, released);
  EXPECT_TRUE(StopRun().ok());
}

// Run sleeps until the next ticker is due rather than polling: a 100 ms ticker keeps its period
// (a loop that slept to its 250 ms stop poll would tick 8 times in 2 s, not about 20).
TEST_F(ManagerTest, TickersKeepTheirPeriodWhileRunSleeps) {
  auto m = NewManager(Options());
  ASSERT_TRUE(m);
  m->AddInformer(ConfigMaps("tick"));
  std::atomic<int> ticks{0};
  m->Every(100ms, [&] { ++ticks; }, /*first_at_start=*/true);
  auto running = StartRun(*m);
  ASSERT_TRUE(Eventually([&] { return ticks.load() > 0; }));
  const int before = ticks.load();
  std::this_thread::sleep_for(2s);
  const int in_two_seconds = ticks.load() - before;
  EXPECT_GE(in_two_seconds, 12);
  EXPECT_LE(in_two_seconds, 21);
  EXPECT_TRUE(StopRun().ok());
}

// Someone else overwrites the Lease: renewals fail until the renew deadline, and Run ends
// with kAborted (the process exits so that a standby takes over).
TEST_F(ManagerTest, LosingTheLeaseEndsRunAborted) {
  ManagerOptions o = Options();
  o.leader_election = Election("manager-c");
  auto m = NewManager(o);
  ASSERT_TRUE(m);
  m->AddInformer(ConfigMaps("lose"));
  RecordingReconciler reconciler;
  m->AddController("lose", reconciler, 1);
  auto running = StartRun(*m);
  ASSERT_TRUE(Eventually([&] { return m->started() && Holder() == "manager-c"; }));

  ASSERT_TRUE(Eventually([&] {  // a renewal may land in between: retry on 409
    auto lease = client_->Get(kLeases, ns_, "manager-test");
    if (!lease.ok()) return false;
    (*lease)["spec"]["holderIdentity"] = "usurper";
    (*lease)["spec"]["leaseDurationSeconds"] = 60;
    return client_->Update(kLeases, *lease).ok();
  }));
  ASSERT_EQ(run_.wait_for(30s), std::future_status::ready);
  Status s = run_.get();
  EXPECT_EQ(s.code(), Code::kAborted) << s.ToString();
  EXPECT_EQ(Holder(), "usurper");  // not ours to release
}

// The event recorder spends a --kube-api-qps budget of its own, as controller-runtime's does:
// at 0.2 requests a second (one at once), an Event written first leaves the controllers' one
// request of the burst untouched, and a request made first leaves the Event's.
TEST_F(ManagerTest, EventsSpendABudgetOfTheirOwn) {
  ManagerOptions o = Options();
  o.kube_api_qps = 0.2;
  o.kube_api_burst = 1;
  auto m = NewManager(std::move(o));
  ASSERT_NE(m, nullptr);
  auto cm = client_->Create(kConfigMaps, ns_, {{"metadata", {{"name", "budget"}}}});
  ASSERT_TRUE(cm.ok()) << cm.status().ToString();

  m->events().Event(*cm, EventType::kNormal, "First", "an Event before any request");
  ASSERT_TRUE(m->events().Flush(2s)) << "the recorder's first request waited";
  auto t0 = SteadyClock::now();
  ASSERT_TRUE(m->client().Get(kConfigMaps, ns_, "budget").ok());
  EXPECT_LT(SteadyClock::now() - t0, 2s) << "the controllers' first request waited for the Event's budget";

  // Both buckets are empty now: a second request of either side waits its 5 s.
  m->events().Event(*cm, EventType::kNormal, "Second", "an Event when both budgets are spent");
  EXPECT_FALSE(m->events().Flush(2s)) << "the recorder's second request did not wait for its own budget";
  m->events().Shutdown(0ms);
}

}  // namespace
}  // namespace stasis
