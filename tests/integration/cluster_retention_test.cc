// The cluster reconciler's retention with a minimum age, against a real kube-apiserver, a real
// store directory and a fake clock: an actor at rest whose extra snapshot is too young is not
// marked done but looked at again when it comes of age, and then it goes; latestSnapshot stays.
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "base/time.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/cluster/cluster_reconciler.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_clock.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::ControlPlane;
using testing::FakeClock;

class ClusterRetentionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), ""); }

  ClusterRetentionTest()
      : client_(ControlPlane::Get().NewClient()), metrics_(registry_), agent_(local_.path().string(), store_.path().string()),
        controller_view_("", store_.path().string()) {}

  // A snapshot committed as an agent commits it, taken at `taken_at`.
  void Commit(const std::string& id, Time taken_at) {
    auto dir = agent_.BeginLocal(ns_, "keeper", id);
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    std::ofstream(fs::path(*dir) / "pages.img") << "pages of " << id;
    SnapshotManifest m;
    m.id = id;
    m.ns = ns_;
    m.name = "keeper";
    m.scope = "Full";
    m.trigger = "Suspend";
    m.taken_at = FormatTime(taken_at);
    ASSERT_TRUE(agent_.CompleteLocal(m).ok());
    ASSERT_TRUE(agent_.Commit(ns_, "keeper", id).ok());
  }

  std::set<std::string> Committed() const {
    std::set<std::string> ids;
    for (const auto& m : controller_view_.ListCommitted(ns_, "keeper")) ids.insert(m.id);
    return ids;
  }

  // A SUSPENDED actor whose latestSnapshot is `latest`, in the API and in the cache.
  void SuspendedActor(const std::string& latest) {
    json a = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "Actor"},
              {"metadata", {{"name", "keeper"}, {"namespace", ns_}}},
              {"spec", {{"bundle", "/var/lib/stasis/bundles/counter"}, {"desiredState", "Suspended"}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, a).ok());
    auto r = client_->Patch(kActorType, ns_, "keeper", PatchType::kMerge,
                            {{"status",
                              {{"status", "STATUS_SUSPENDED"},
                               {"latestSnapshot",
                                {{"id", latest}, {"location", controller_view_.StorePath(ns_, "keeper", latest)}}}}}},
                            "status");
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    actors_.Upsert(std::make_shared<const json>(*r));
  }

  std::string ns_ = "crr-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed());
  std::unique_ptr<KubeClient> client_;
  prometheus::Registry registry_;
  ClusterMetrics metrics_;
  FakeClock clock_;
  ObjectStore actors_, workers_, leases_;
  testing::TempDir local_{"stasis-crr-local-"}, store_{"stasis-crr-store-"};
  SnapshotStore agent_, controller_view_;
};

TEST_F(ClusterRetentionTest, AYoungSnapshotIsDeletedWhenItComesOfAge) {
  ASSERT_EQ(ControlPlane::Get().Kubectl({"create", "namespace", ns_}).exit_code, 0);
  const Time now = std::chrono::floor<std::chrono::seconds>(clock_.WallNow());
  // s1 (latestSnapshot) and s2 are a day old, s3 ten minutes, s4 (the newest) one.
  Commit("s1", now - 24h);
  Commit("s2", now - 24h + 1s);
  Commit("s3", now - 10min);
  Commit("s4", now - 1min);
  SuspendedActor("s1");
  ClusterReconcilerOptions o;
  o.retain = 1;
  o.retain_min_age = 1h;
  ClusterReconciler reconciler(o, *client_, actors_, workers_, leases_, metrics_, nullptr, clock_, &controller_view_);

  auto first = reconciler.Reconcile(Request{ns_, "keeper"});
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(Committed(), (std::set<std::string>{"s1", "s3", "s4"})) << "s2 is old enough; s3 is not";
  // Looked at again when s3 is an hour old: 50 minutes from now.
  EXPECT_EQ(first->requeue_after, std::chrono::milliseconds(50min));

  clock_.Advance(50min);
  auto second = reconciler.Reconcile(Request{ns_, "keeper"});
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(Committed(), (std::set<std::string>{"s1", "s4"}));
  EXPECT_EQ(second->requeue_after, std::chrono::milliseconds(0)) << "nothing is waiting to come of age";
  double deleted = -1;
  for (const auto& f : registry_.Collect()) {
    if (f.name != "stasis_snapshot_store_deletions_total") continue;
    for (const auto& m : f.metric) {
      if (m.label.size() == 1 && m.label[0].value == kDeletionRetention) deleted = m.counter.value;
    }
  }
  EXPECT_EQ(deleted, 2);
}

}  // namespace
}  // namespace stasis
