// Every `reason` label value the node agent and the controller export from the start is the
// snake_case of a condition reason (api::MetricReason), so that an alert's label leads to the
// actors' conditions (ConditionReason(label) is one of api/conditions.h's reasons) and back.
// The exceptions are the documented ones (docs/metrics.md): the forced-cleanup label
// "deleted" (the actor is gone, no condition left) and the snapshot store's deletion causes.
#include <fstream>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "api/conditions.h"
#include "reconcilers/cluster/cluster_metrics.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "reconcilers/node/transitions.h"

namespace stasis {
namespace {

const std::string kSource = STASIS_SOURCE_DIR;

// The values of api/conditions.h's kReason* constants, read from the header itself so that a
// reason added there needs no second list here.
std::set<std::string> ConditionReasons() {
  std::ifstream in(kSource + "/api/conditions.h");
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  static const std::regex kConstant(R"re(inline constexpr char kReason\w+\[\] = "(\w+)";)re");
  std::set<std::string> out;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), kConstant); it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1]);
  }
  return out;
}

struct Label {
  std::string family;
  std::string value;
};

// Every non-empty `reason` label of every series in `registry`.
std::vector<Label> ReasonLabels(prometheus::Registry& registry) {
  std::vector<Label> out;
  for (const auto& f : registry.Collect()) {
    for (const auto& m : f.metric) {
      for (const auto& l : m.label) {
        if (l.name == "reason" && !l.value.empty()) out.push_back({f.name, l.value});
      }
    }
  }
  return out;
}

// The documented label values that are no condition reason.
bool IsDocumentedException(const Label& l) {
  if (l.family == "stasis_snapshot_store_deletions_total") return true;  // deletion causes
  return l.family == "stasis_forced_cleanups_total" && l.value == api::kMetricReasonDeleted;
}

// What the test below checks of each label, apart so that its failure can be checked too.
std::vector<std::string> Mismatches(const std::vector<Label>& labels, const std::set<std::string>& reasons) {
  std::vector<std::string> out;
  for (const Label& l : labels) {
    if (IsDocumentedException(l)) continue;
    const std::string reason = ConditionReason(l.value);
    if (!reasons.contains(reason)) {
      out.push_back(l.family + "{reason=\"" + l.value + "\"}: " + reason + " is no condition reason");
    } else if (api::MetricReason(reason) != l.value) {
      out.push_back(l.family + "{reason=\"" + l.value + "\"}: not spelled " + api::MetricReason(reason));
    }
  }
  return out;
}

TEST(MetricReasonsTest, TheHeaderIsRead) {
  const auto reasons = ConditionReasons();
  EXPECT_GT(reasons.size(), 40u);
  EXPECT_TRUE(reasons.contains(api::kReasonDeadlineExceeded));
  EXPECT_TRUE(reasons.contains(api::kReasonNvproxyLiveClients));
  for (const char* r : {api::kReasonImagePullFailed, api::kReasonImageNotFound, api::kReasonUnauthorized,
                        api::kReasonPullingImage, api::kReasonImageNotPresent,
                        api::kReasonSnapshotImageUnavailable, api::kReasonBadImage}) {
    EXPECT_TRUE(reasons.contains(r)) << r;
  }
}

TEST(MetricReasonsTest, MetricReasonIsTheInverseOfConditionReason) {
  EXPECT_EQ(api::MetricReason(api::kReasonDeadlineExceeded), "deadline_exceeded");
  EXPECT_EQ(api::MetricReason(api::kReasonNodeLost), "node_lost");
  EXPECT_EQ(api::MetricReason(api::kReasonStoreAuthFailed), "store_auth_failed");
  EXPECT_EQ(api::MetricReason(""), "");
  // The reasons of actors from images, as their metric labels would read.
  EXPECT_EQ(api::MetricReason(api::kReasonImagePullFailed), "image_pull_failed");
  EXPECT_EQ(api::MetricReason(api::kReasonImageNotFound), "image_not_found");
  EXPECT_EQ(api::MetricReason(api::kReasonUnauthorized), "unauthorized");
  EXPECT_EQ(api::MetricReason(api::kReasonPullingImage), "pulling_image");
  EXPECT_EQ(api::MetricReason(api::kReasonImageNotPresent), "image_not_present");
  EXPECT_EQ(api::MetricReason(api::kReasonSnapshotImageUnavailable), "snapshot_image_unavailable");
  EXPECT_EQ(api::MetricReason(api::kReasonBadImage), "bad_image");
  for (const std::string& r : ConditionReasons()) EXPECT_EQ(ConditionReason(api::MetricReason(r)), r);
}

TEST(MetricReasonsTest, EveryPreRegisteredReasonLabelIsAConditionReason) {
  const auto reasons = ConditionReasons();
  size_t checked = 0;
  for (const char* role : {"node", "controller"}) {
    prometheus::Registry registry;
    std::optional<SnapshotMetrics> node;
    std::optional<ClusterMetrics> controller;
    if (std::string(role) == "node") node.emplace(registry);
    else controller.emplace(registry);
    const auto labels = ReasonLabels(registry);
    for (const std::string& m : Mismatches(labels, reasons)) ADD_FAILURE() << role << ": " << m;
    checked += labels.size();
  }
  EXPECT_GT(checked, 30u) << "the pre-registered series were found";
}

TEST(MetricReasonsTest, AMislabelledSeriesIsCaught) {
  const auto reasons = ConditionReasons();
  const auto found = Mismatches({{"stasis_forced_cleanups_total", "deadline"},
                                 {"stasis_snapshot_operations_total", "store_error"},
                                 {"stasis_forced_cleanups_total", "deadline_exceeded"},
                                 {"stasis_forced_cleanups_total", "deleted"},
                                 {"stasis_snapshot_store_deletions_total", "retention"}},
                                reasons);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_NE(found[0].find("Deadline is no condition reason"), std::string::npos) << found[0];
  EXPECT_NE(found[1].find("StoreError is no condition reason"), std::string::npos) << found[1];
}

// A deletion cause must not read as a condition reason: it would send the operator to a
// condition no actor carries.
TEST(MetricReasonsTest, StoreDeletionCausesAreNoConditionReasons) {
  const auto reasons = ConditionReasons();
  prometheus::Registry registry;
  ClusterMetrics controller(registry);
  size_t causes = 0;
  for (const Label& l : ReasonLabels(registry)) {
    if (l.family != "stasis_snapshot_store_deletions_total") continue;
    ++causes;
    EXPECT_FALSE(reasons.contains(ConditionReason(l.value))) << l.value;
  }
  EXPECT_EQ(causes, 5u);
}

}  // namespace
}  // namespace stasis
