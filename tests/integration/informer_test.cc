// The informer against a real kube-apiserver: initial sync, a watch that survives an API
// server restart with no missed and no phantom events, and 410 Gone → relist with delete
// notifications for what vanished meanwhile.
#include "controller/informer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "tests/support/control_plane.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;
using testing::ControlPlane;

const ResourceType kConfigMaps{"", "v1", "configmaps", true};

std::unique_ptr<KubeClient> NewClient() { return testing::ControlPlane::Get().NewClient(); }

json ConfigMap(const std::string& name, const std::string& value) {
  return {{"metadata", {{"name", name}, {"labels", {{"suite", "informer"}}}}},
          {"data", {{"v", value}}}};
}

InformerOptions Options(const std::string& ns) {
  InformerOptions o;
  o.type = kConfigMaps;
  o.ns = ns;
  o.label_selector = "suite=informer";
  return o;
}

// Records every notification per key, to check for missed and phantom events.
struct Recorder {
  std::mutex mu;
  std::map<std::string, std::vector<std::string>> events;  // key → "add"/"update"/"delete"
  EventHandler Handler() {
    return {[this](const ObjectPtr& o) { Record(*o, "add"); },
            [this](const ObjectPtr&, const ObjectPtr& n) { Record(*n, "update"); },
            [this](const ObjectPtr& o) { Record(*o, "delete"); }};
  }
  void Record(const json& o, const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    events[ObjectKey(o)].push_back(what);
  }
  std::vector<std::string> For(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    return events[key];
  }
};

// Waits until pred() or 30 s.
bool Eventually(const std::function<bool()>& pred) {
  for (int i = 0; i < 300; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(100ms);
  }
  return pred();
}

// The cache equals a fresh list: same keys, same resourceVersions.
void ExpectCacheMatchesList(KubeClient& client, const Informer& informer, const std::string& ns) {
  ListOptions lo;
  lo.label_selector = "suite=informer";
  auto list = client.List(kConfigMaps, ns, lo);
  ASSERT_TRUE(list.ok());
  std::map<std::string, std::string> want, got;
  for (const auto& item : (*list)["items"]) want[ObjectKey(item)] = item["metadata"]["resourceVersion"];
  for (const auto& obj : informer.store().List()) got[ObjectKey(*obj)] = (*obj)["metadata"]["resourceVersion"];
  EXPECT_EQ(got, want);
}

class InformerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ns_ = ControlPlane::Get().CreateTestNamespace("informer");
    ASSERT_FALSE(ns_.empty());
    client_ = NewClient();
  }
  // Runs the informer on a thread until the returned guard goes. Held in a local declared after
  // the informer, it goes first, so the thread never outlives the informer it runs (a stop only
  // in TearDown left it running on a destroyed informer after the test body).
  [[nodiscard]] std::shared_ptr<void> Start(Informer& informer) {
    stop_ = false;
    thread_ = std::thread([&] { informer.Run(&stop_); });
    std::shared_ptr<void> running(nullptr, [this](void*) { StopInformer(); });
    EXPECT_TRUE(informer.WaitForSync(&stop_, 30s));
    return running;
  }
  void StopInformer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  void TearDown() override { StopInformer(); }

  std::string ns_;
  std::unique_ptr<KubeClient> client_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(InformerTest, SyncsPagedListAndIndexes) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("cm-" + std::to_string(i), i % 2 ? "odd" : "even")).ok());
  }
  InformerOptions o = Options(ns_);
  o.page_size = 7;  // force several pages
  Informer informer(*client_, o);
  informer.AddIndex("v", IndexByField("/data/v"));
  Recorder rec;
  informer.AddEventHandler(rec.Handler());
  auto running = Start(informer);
  EXPECT_EQ(informer.store().size(), 25u);
  EXPECT_EQ(informer.store().ByIndex("v", "odd").size(), 12u);
  EXPECT_EQ(rec.For(ns_ + "/cm-3"), std::vector<std::string>{"add"});
  ExpectCacheMatchesList(*client_, informer, ns_);
}

// The cache holds no metadata.managedFields (dropped while parsing, lists and watch events
// alike).
TEST_F(InformerTest, CachesWithoutManagedFields) {
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("listed", "1")).ok());
  auto live = client_->Get(kConfigMaps, ns_, "listed");
  ASSERT_TRUE(live.ok());
  ASSERT_TRUE((*live)["metadata"].contains("managedFields"));  // the server does send them
  Informer informer(*client_, Options(ns_));
  auto running = Start(informer);
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("watched", "1")).ok());
  ASSERT_TRUE(Eventually([&] { return informer.store().Get(ns_ + "/watched") != nullptr; }));
  ASSERT_TRUE(client_->Patch(kConfigMaps, ns_, "listed", PatchType::kMerge, {{"data", {{"v", "2"}}}}).ok());
  ASSERT_TRUE(Eventually([&] {
    auto x = informer.store().Get(ns_ + "/listed");
    return x && (*x)["data"]["v"] == "2";
  }));
  for (const std::string name : {"listed", "watched"}) {
    ObjectPtr cached = informer.store().Get(ns_ + "/" + name);
    ASSERT_TRUE(cached);
    EXPECT_FALSE((*cached)["metadata"].contains("managedFields")) << name;
    EXPECT_EQ((*cached)["data"]["v"], name == "listed" ? "2" : "1");
  }
}

TEST_F(InformerTest, WatchSurvivesApiServerRestart) {
  Informer informer(*client_, Options(ns_));
  Recorder rec;
  informer.AddEventHandler(rec.Handler());
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("before", "1")).ok());
  auto running = Start(informer);
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("during", "1")).ok());
  ASSERT_TRUE(Eventually([&] { return informer.store().Get(ns_ + "/during") != nullptr; }));

  ControlPlane::Get().RestartApiServer();

  {
    // The client's pooled connection died with the old server: the create goes out again on a
    // new one (cpprest_transport.cc), never fails for it.
    auto created = client_->Create(kConfigMaps, ns_, ConfigMap("after", "1"));
    ASSERT_TRUE(created.ok()) << created.status().ToString();
  }
  ASSERT_TRUE(client_->Delete(kConfigMaps, ns_, "before").ok());
  ASSERT_TRUE(client_->Patch(kConfigMaps, ns_, "during", PatchType::kMerge, {{"data", {{"v", "2"}}}}).ok());
  ASSERT_TRUE(Eventually([&] {
    auto d = informer.store().Get(ns_ + "/during");
    return informer.store().Get(ns_ + "/after") && !informer.store().Get(ns_ + "/before") && d &&
           (*d)["data"]["v"] == "2";
  }));
  ExpectCacheMatchesList(*client_, informer, ns_);
  // No missed and no phantom events: exactly what happened, once each.
  EXPECT_EQ(rec.For(ns_ + "/before"), (std::vector<std::string>{"add", "delete"}));
  EXPECT_EQ(rec.For(ns_ + "/during"), (std::vector<std::string>{"add", "update"}));
  EXPECT_EQ(rec.For(ns_ + "/after"), std::vector<std::string>{"add"});
}

// Compacts etcd at its current revision through etcd's HTTP gateway, so that any older
// resourceVersion is gone for good.
void CompactEtcd() {
  std::ifstream port_file(ControlPlane::Get().dir() + "/etcd.port");
  std::string port;
  port_file >> port;
  const std::string base = "http://127.0.0.1:" + port;
  auto range = RunCommand({"curl", "-fsS", "-X", "POST", base + "/v3/kv/range", "-d", R"({"key":"Lw=="})"}, 10s);
  ASSERT_TRUE(range.ok() && range->success());
  auto rev = json::parse(range->out)["header"]["revision"].get<std::string>();
  auto compact = RunCommand({"curl", "-fsS", "-X", "POST", base + "/v3/kv/compaction", "-d",
                             json{{"revision", rev}, {"physical", true}}.dump()},
                            30s);
  ASSERT_TRUE(compact.ok() && compact->success()) << (compact.ok() ? compact->err : "");
}

TEST_F(InformerTest, GoneLeadsToRelistWithDeleteNotifications) {
  Informer informer(*client_, Options(ns_));
  Recorder rec;
  informer.AddEventHandler(rec.Handler());
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("keep", "1")).ok());
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("doomed", "1")).ok());
  auto running = Start(informer);
  EXPECT_EQ(informer.list_count(), 1);
  running.reset();  // stopped
  const std::string old_rv = informer.last_resource_version();

  // While the informer is away: one object vanishes, one changes, one appears; then history
  // before now is compacted away and the API server's watch cache starts afresh.
  ASSERT_TRUE(client_->Delete(kConfigMaps, ns_, "doomed").ok());
  ASSERT_TRUE(client_->Patch(kConfigMaps, ns_, "keep", PatchType::kMerge, {{"data", {{"v", "2"}}}}).ok());
  ASSERT_TRUE(client_->Create(kConfigMaps, ns_, ConfigMap("new", "1")).ok());
  for (int i = 0; i < 5; ++i) {  // move the revision past the compaction point
    ASSERT_TRUE(client_->Create(kConfigMaps, "default", ConfigMap("filler-" + ns_ + std::to_string(i), "x")).ok());
  }
  CompactEtcd();
  ControlPlane::Get().RestartApiServer();

  // The old resourceVersion is gone: the informer's watch from it comes back 410 (the only
  // thing that makes it list again), and the relist reconciles what changed meanwhile.
  running = Start(informer);
  ASSERT_TRUE(Eventually([&] { return informer.list_count() == 2; })) << informer.list_count();
  ASSERT_TRUE(Eventually([&] { return informer.store().Get(ns_ + "/new") != nullptr; }));
  EXPECT_EQ(informer.store().Get(ns_ + "/doomed"), nullptr);
  EXPECT_EQ(rec.For(ns_ + "/doomed"), (std::vector<std::string>{"add", "delete"}));
  EXPECT_EQ(rec.For(ns_ + "/keep"), (std::vector<std::string>{"add", "update"}));
  EXPECT_EQ(rec.For(ns_ + "/new"), std::vector<std::string>{"add"});
  ExpectCacheMatchesList(*client_, informer, ns_);
}

}  // namespace
}  // namespace stasis
