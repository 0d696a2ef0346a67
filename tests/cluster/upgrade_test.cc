// An upgrade of a deployed stasis while actors run: a new image (hack/image.sh --version, built
// by hack/test.sh into build-image/image-upgrade) rolled out to the node agent's DaemonSet and
// the controller's Deployment with `kubectl set image`. No actor restarts, no snapshot is lost,
// and Prometheus (Kubernetes discovery, ClusterTest::StartPrometheus) keeps scraping: the
// controller without a gap, the agent for all but the seconds its pod is replaced.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "base/subprocess.h"
#include "tests/support/cluster_fixture.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// The version of an image archive named stasis-VERSION.oci.tar (hack/image.sh), or "".
std::string VersionOf(const fs::path& archive) {
  const std::string name = archive.filename().string(), prefix = "stasis-", suffix = ".oci.tar";
  if (!name.starts_with(prefix) || !name.ends_with(suffix) || name.size() <= prefix.size() + suffix.size()) return "";
  return name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
}

// The longest stretch of [start, end], in seconds, in which `expr` (queried every step) has no
// sample with a value of at least 1.
double LongestGap(const PrometheusServer& prom, const std::string& expr, double start, double end) {
  auto r = prom.QueryRange(expr, start, end, 1);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return end - start;
  std::vector<double> times;
  for (const auto& series : (*r)["result"]) {
    for (const auto& v : series["values"]) {
      if (std::stod(v[1].get<std::string>()) >= 1) times.push_back(v[0].get<double>());
    }
  }
  std::sort(times.begin(), times.end());
  double gap = 0, last = start;
  for (double t : times) {
    gap = std::max(gap, t - last);
    last = t;
  }
  return std::max(gap, end - last);
}

TEST_F(ClusterTest, AnUpgradeKeepsActorsSnapshotsAndMetrics) {
  const fs::path archive = ImageArchive("image-upgrade");
  ASSERT_FALSE(archive.empty());
  const std::string version = VersionOf(archive), image = "docker.io/library/stasis:" + version;
  ASSERT_FALSE(version.empty()) << archive << " is not named stasis-VERSION.oci.tar";
  ASSERT_NE(version, "0.1.0") << "the upgrade image must be another version";
  auto prom = StartPrometheus();
  ASSERT_NE(prom, nullptr);
  ASSERT_TRUE(Eventually([&] { return UpTargets(*prom, "stasis-node").size() == 1 &&
                                      UpTargets(*prom, "stasis-controller").size() == 2; }, 120s));

  // One actor of each resting kind and one running: SUSPENDED (in the store), PAUSED (its
  // snapshot on the node) and RUNNING (its sandbox on the node, holding the one worker).
  for (const auto& [name, desired, status] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"saved", "Suspended", "STATUS_SUSPENDED"}, {"sleeper", "Paused", "STATUS_PAUSED"},
           {"runner", "Running", "STATUS_RUNNING"}}) {
    SetActor(name, "Running");
    ASSERT_TRUE(Reaches(name, "STATUS_RUNNING")) << name << ": " << StatusOf(name);
    SetActor(name, desired);
    ASSERT_TRUE(Reaches(name, status)) << name << ": " << StatusOf(name);
  }
  const std::string saved_on = Get("actor/saved", "{.status.latestSnapshot.id}");
  const std::string sleeper_on = Get("actor/sleeper", "{.status.latestSnapshot.id}");
  const long pid = SandboxPid("runner");
  long counter = -1;
  ASSERT_TRUE(Eventually([&] { return (counter = Counter("runner")) > 0; }, 30s));
  ASSERT_GT(pid, 0);

  const double start = UnixNow();
  ASSERT_TRUE(Hack({"cluster.sh", "import", archive.string(), image}, 300s).success());
  ASSERT_TRUE(Kubectl({"-n", "stasis-system", "set", "image", "daemonset/stasis-node-cpu", "stasis-node=" + image})
                  .success());
  ASSERT_TRUE(Kubectl({"-n", "stasis-system", "set", "image", "deployment/stasis-controller",
                       "stasis-controller=" + image})
                  .success());
  auto rolled = Kubectl({"-n", "stasis-system", "rollout", "status", "deployment/stasis-controller", "--timeout=240s"},
                        300s);
  ASSERT_TRUE(rolled.success()) << rolled.out << rolled.err;
  ASSERT_TRUE(AgentReady(240s));
  // Both roles answer as the new version.
  ASSERT_TRUE(Eventually([&] {
    auto r = prom->Query("count by (job) (stasis_build_info{version=\"" + version + "\"} == 1)", UnixNow());
    return r.ok() && (*r)["result"].size() == 2;
  }, 90s)) << "Prometheus never saw both roles at " << version;
  const double end = UnixNow();
  std::cout << "[ measure  ] upgrade rolled out in " << end - start << " s\n";

  // Nothing restarted, nothing lost.
  EXPECT_EQ(StatusOf("runner"), "STATUS_RUNNING");
  long now_pid = -1;
  EXPECT_TRUE(Eventually([&] { return (now_pid = SandboxPid("runner")) > 0; }, 30s));
  EXPECT_EQ(now_pid, pid) << "the running actor's sandbox was restarted";
  long now = -1;
  EXPECT_TRUE(Eventually([&] { return (now = Counter("runner")) > counter; }, 30s)) << now << " after " << counter;
  EXPECT_EQ(StatusOf("sleeper"), "STATUS_PAUSED");
  EXPECT_EQ(Get("actor/sleeper", "{.status.latestSnapshot.id}"), sleeper_on);
  EXPECT_EQ(StatusOf("saved"), "STATUS_SUSPENDED");
  EXPECT_EQ(Get("actor/saved", "{.status.latestSnapshot.id}"), saved_on);
  // The new agent resumes both snapshots the old one made.
  SetActor("runner", "Suspended");
  ASSERT_TRUE(Reaches("runner", "STATUS_SUSPENDED"));
  for (const char* name : {"sleeper", "saved"}) {
    SetActor(name, "Running");
    ASSERT_TRUE(Reaches(name, "STATUS_RUNNING")) << name << ": " << StatusOf(name);
    SetActor(name, "Suspended");
    ASSERT_TRUE(Reaches(name, "STATUS_SUSPENDED")) << name << ": " << StatusOf(name);
  }

  // The metrics across the roll: the controller scraped at every step (a surge replica is Ready
  // before an old one goes), the leader's actor gauges back within the Lease's hand-over and
  // their 5 s period, the agent's scrapes gone only while its one pod was replaced.
  const double controller_gap = LongestGap(*prom, "sum(up{job=\"stasis-controller\"})", start, end);
  const double gauge_gap = LongestGap(*prom, "max(stasis_actors{job=\"stasis-controller\",status=\"STATUS_PAUSED\"})",
                                      start, end);
  const double agent_gap = LongestGap(*prom, "sum(up{job=\"stasis-node\"})", start, end);
  std::cout << "[ measure  ] longest gap: controller scrapes " << controller_gap << " s, leader's gauges "
            << gauge_gap << " s, agent scrapes " << agent_gap << " s\n";
  EXPECT_LE(controller_gap, 2.0 * kScrapeSeconds + 1);
  EXPECT_LE(gauge_gap, 20.0);
  EXPECT_LE(agent_gap, 60.0);
  // A replaced pod may answer its scrapes until its grace period ends (rollout status returns
  // once the new replicas are available, not once the old ones are gone), so 0.1.0 may still be
  // scraped for up to the roles' terminationGracePeriodSeconds (controller 30 s, agent 60 s)
  // and one scrape after.
  std::string old_series;
  EXPECT_TRUE(Eventually([&] {
    auto old = prom->Query("stasis_build_info{version=\"0.1.0\"} == 1", UnixNow());
    if (!old.ok()) return false;
    old_series = (*old)["result"].dump();
    return (*old)["result"].empty();
  }, 90s)) << "a role still runs 0.1.0: " << old_series;
}

}  // namespace
}  // namespace stasis::testing
