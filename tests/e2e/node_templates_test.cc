// `stasis controller` and `stasis node` end to end, ActorTemplates: the controller takes a
// template's golden snapshot through a golden actor once its readiness gate passes (Full, even
// when the template's snapshots say Data), fills actors created with templateRef in from the
// template, and they start from the golden snapshot — counters continuing from it, each with
// its own hostname; a template change takes a new golden and leaves started actors alone; a
// gate that never passes is reported and holds nothing; a golden snapshot deleted from the
// store is taken again; a warm pool serves an actor and refills, and never takes the last free
// worker. The fixture is tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/control_plane.h"
#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using ::testing::HasSubstr;

class NodeTemplatesTest : public NodeAgentTest {
 protected:
  void SetUp() override {
    NodeAgentTest::SetUp();
    // The hook sets the hostname: sethostname(2) needs CAP_SYS_ADMIN in the sandbox's kernel.
    bundle_ = std::make_unique<Bundle>(CounterArgs(), BundleRoot(),
                                       std::vector<std::string>{"CAP_KILL", "CAP_SYS_ADMIN"});
    fs::create_directories(store_);  // the controller checks the store it is given at start
    controller_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{kStasis, "controller", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                 "--metrics-addr", "127.0.0.1:0", "--leader-elect=false", "--snapshot-store", store_},
        (work_.path() / "controller.log").string());
  }

  void TearDown() override {
    Kubectl({"delete", "actortemplates", "--all", "-n", ns_, "--wait=false"});
    NodeAgentTest::TearDown();
    if (controller_) controller_->Stop(10s);
  }

  // The counter's template; with `data_snapshots`, its actors' snapshots are Data (which the
  // golden ignores: it is always Full).
  json TemplateSpec(const json& gate_command, int timeout_seconds = 60, bool data_snapshots = false) {
    json spec = {{"actor",
             {{"bundle", bundle_->dir().string()},
              {"hooks",
               {{"postRestore",
                 {{"command", {"/bin/sh", "-c", "hostname \"$STASIS_ACTOR_NAME\""}}, {"timeoutSeconds", 20}}}}}}},
            {"readinessGate", {{"command", gate_command}, {"timeoutSeconds", timeout_seconds}, {"periodSeconds", 1}}}};
    if (data_snapshots) {
      spec["actor"]["snapshots"] = {{"onPause", "Data"}, {"onCommit", "Data"}, {"dataDirs", {"/data"}}};
    }
    return spec;
  }

  void CreateTemplate(const std::string& name, const json& spec) {
    json t = {{"apiVersion", "stasis.dev/v1alpha1"},
              {"kind", "ActorTemplate"},
              {"metadata", {{"name", name}, {"namespace", ns_}}},
              {"spec", spec}};
    auto r = Kubectl({"apply", "-f", "-"}, t.dump());
    ASSERT_TRUE(r.success()) << r.Summary() << "\n" << r.err;
  }

  json GetTemplate(const std::string& name) {
    auto r = Kubectl({"get", "actortemplate", name, "-n", ns_, "-o", "json"});
    return r.success() ? json::parse(r.out) : json();
  }

  bool WaitTemplate(const std::string& name, const std::string& reason, std::chrono::seconds timeout, json* out) {
    return WaitTemplateWhere(
        name, [&](const json& t) { return CondReason(t, "GoldenReady") == reason; }, timeout, out,
        "GoldenReady " + reason);
  }

  bool WaitTemplateWhere(const std::string& name, const std::function<bool(const json&)>& pred,
                         std::chrono::seconds timeout, json* out = nullptr, const std::string& what = "the condition") {
    const auto start = std::chrono::steady_clock::now();
    json t;
    while (std::chrono::steady_clock::now() - start < timeout) {
      t = GetTemplate(name);
      if (!t.is_null() && pred(t)) {
        if (out) *out = t;
        return true;
      }
      std::this_thread::sleep_for(kPoll);
    }
    ADD_FAILURE() << "template " << name << ": never " << what << "; last seen:\n"
                  << t.dump(2) << "\ncontroller log:\n"
                  << ReadFile(work_.path() / "controller.log") << AgentLogs();
    return false;
  }

  void CreateFromTemplate(const std::string& name, const std::string& tmpl, const std::string& node) {
    CreateActor(name, {{"templateRef", {{"name", tmpl}}}, {"nodeName", node}, {"desiredState", "Running"}});
  }


  // The golden snapshot's id in a template's status ("" while it has none).
  static std::string GoldenId(const json& t) {
    const json g = StatusField(t, "golden");
    return g.is_object() ? g.value("snapshotID", "") : "";
  }


  // The template's warm-pool members, as the API has them now.
  std::vector<json> Members(const std::string& tmpl) {
    auto r = Kubectl({"get", "actors", "-n", ns_, "-l", "stasis.dev/warm-pool-of=" + tmpl, "-o", "json"});
    if (!r.success()) return {};
    return json::parse(r.out).value("items", json::array()).get<std::vector<json>>();
  }

  bool WaitWarmReady(const std::string& tmpl, int n, std::chrono::seconds timeout) {
    return WaitTemplateWhere(
        tmpl, [n](const json& t) { return StatusField(t, "warmReady").is_number() && StatusField(t, "warmReady") == n; },
        timeout, nullptr, "warmReady " + std::to_string(n));
  }

  const json kCountAtLeast50 = {"/bin/sh", "-c", "test \"$(cat /tmp/counter)\" -ge 50"};
  std::unique_ptr<BackgroundProcess> controller_;
};

// The counter's template, gated at count ≥ 50, its snapshots Data: the golden actor is bound,
// runs, passes its gate, is suspended Full and recorded; five actors from the template start
// from it with their counters past 50 and their own hostnames.
TEST_F(NodeTemplatesTest, AGoldenIsTakenAtTheGateAndFiveActorsStartFromIt) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 6);
  ASSERT_NE(a, nullptr);
  CreateTemplate("counter", TemplateSpec(kCountAtLeast50, 60, /*data_snapshots=*/true));
  json t;
  ASSERT_TRUE(WaitTemplate("counter", "GoldenSnapshotTaken", 90s, &t));
  const json golden = StatusField(t, "golden");
  ASSERT_TRUE(golden.is_object()) << t.dump(2);
  const std::string golden_actor = golden.value("actorName", "");
  EXPECT_EQ(golden_actor, "counter-golden-1");
  json g = GetActor(golden_actor);
  ASSERT_FALSE(g.is_null());
  EXPECT_EQ(StatusOf(g), "STATUS_SUSPENDED");
  EXPECT_EQ(StatusField(g, "latestSnapshot").value("scope", ""), "Full") << "a golden is Full whatever onPause says";
  EXPECT_EQ(StatusField(g, "latestSnapshot").value("id", ""), golden.value("snapshotID", ""));
  EXPECT_TRUE(CondIs(g, "ReadinessGate", "True")) << g["status"].dump();
  ExpectAllWorkersFree(a->node);

  for (int i = 0; i < 5; ++i) CreateFromTemplate("from-" + std::to_string(i), "counter", a->node);
  for (int i = 0; i < 5; ++i) {
    const std::string name = "from-" + std::to_string(i);
    json actor;
    ASSERT_TRUE(WaitStatus(name, "STATUS_RUNNING", 90s, &actor));
    const long first = FirstCounter(*a, name);
    EXPECT_GE(first, 50) << name << " did not start from the golden snapshot";
    EXPECT_EQ(InSandbox(*a, name, {"/bin/hostname"}), name);
    EXPECT_EQ(actor["spec"].value("bundle", ""), bundle_->dir().string()) << "filled in from the template";
    EXPECT_EQ(actor["spec"]["source"].value("actorName", ""), golden_actor);
    EXPECT_EQ(StatusField(actor, "clonedFrom").value("snapshotID", ""), golden.value("snapshotID", ""));
  }
}

// A template change (a new generation) takes a new golden; the actor started from the old one
// runs on, and the old golden actor stays while that actor could still start from it.
TEST_F(NodeTemplatesTest, ATemplateChangeTakesANewGoldenAndLeavesStartedActorsAlone) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 3);
  ASSERT_NE(a, nullptr);
  CreateTemplate("counter", TemplateSpec({"/bin/sh", "-c", "test -e /tmp/counter"}));
  json t;
  ASSERT_TRUE(WaitTemplate("counter", "GoldenSnapshotTaken", 90s, &t));
  CreateFromTemplate("old", "counter", a->node);
  json old;
  ASSERT_TRUE(WaitStatus("old", "STATUS_RUNNING", 90s, &old));

  json spec = TemplateSpec({"/bin/sh", "-c", "test -e /tmp/counter"});
  spec["actor"]["timeouts"] = {{"restoreSeconds", 120}};
  CreateTemplate("counter", spec);
  ASSERT_TRUE(WaitActor("counter-golden-2", [](const json& x) { return StatusOf(x) == "STATUS_SUSPENDED"; }, 90s,
                        "the new golden actor suspended"));
  ASSERT_TRUE(WaitTemplate("counter", "GoldenSnapshotTaken", 30s, &t));
  EXPECT_EQ(StatusField(t, "golden").value("actorName", ""), "counter-golden-2");
  EXPECT_EQ(StatusField(t, "golden").value("generation", 0), 2);
  old = GetActor("old");
  EXPECT_EQ(StatusOf(old), "STATUS_RUNNING");
  EXPECT_EQ(StatusField(old, "clonedFrom").value("actorName", ""), "counter-golden-1");
  EXPECT_FALSE(GetActor("counter-golden-1").is_null()) << "old may start from it again until it has a snapshot";

  CreateFromTemplate("new", "counter", a->node);
  json fresh;
  ASSERT_TRUE(WaitStatus("new", "STATUS_RUNNING", 90s, &fresh));
  EXPECT_EQ(StatusField(fresh, "clonedFrom").value("actorName", ""), "counter-golden-2");
  EXPECT_EQ(fresh["spec"]["timeouts"].value("restoreSeconds", 0), 120);

  // Once the old actor has a snapshot of its own, nobody needs the old golden.
  Patch("old", {{"desiredState", "Suspended"}});
  ASSERT_TRUE(WaitStatus("old", "STATUS_SUSPENDED", 30s));
  ASSERT_TRUE(WaitActor("counter-golden-1", [](const json& x) { return x.is_null(); }, 60s, "the old golden deleted"));
}

// A gate that never passes: the template says so, the golden actor is deleted (its worker
// freed) and no other is made for that generation.
TEST_F(NodeTemplatesTest, AGateThatNeverPassesIsReportedAndHoldsNothing) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 2);
  ASSERT_NE(a, nullptr);
  CreateTemplate("never", TemplateSpec({"/bin/sh", "-c", "exit 1"}, /*timeout_seconds=*/3));
  json t;
  ASSERT_TRUE(WaitTemplate("never", "ReadinessGateFailed", 90s, &t));
  EXPECT_THAT(CondMessage(t, "GoldenReady"), HasSubstr("never-golden-1"));
  EXPECT_FALSE(StatusField(t, "golden").is_object());
  ASSERT_TRUE(WaitActor("never-golden-1", [](const json& x) { return x.is_null(); }, 60s, "the golden actor deleted"));
  ExpectAllWorkersFree(a->node);
  std::this_thread::sleep_for(3s);  // and no new attempt at this generation
  EXPECT_TRUE(GetActor("never-golden-1").is_null());
  EXPECT_EQ(CondReason(GetTemplate("never"), "GoldenReady"), "ReadinessGateFailed");
}

// The golden snapshot deleted from the store: the template notices (it checks the store at
// least every 30 s), takes the golden again, and an actor from the template starts from it.
TEST_F(NodeTemplatesTest, AGoldenDeletedFromTheStoreIsTakenAgain) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 3);
  ASSERT_NE(a, nullptr);
  CreateTemplate("counter", TemplateSpec({"/bin/sh", "-c", "test -e /tmp/counter"}));
  json t;
  ASSERT_TRUE(WaitTemplate("counter", "GoldenSnapshotTaken", 90s, &t));
  const std::string first_id = GoldenId(t);
  const std::string dir = Committed(store_, "counter-golden-1") + "/" + first_id;
  ASSERT_TRUE(fs::exists(dir + "/manifest.json")) << dir;
  fs::remove_all(dir);

  // The retake may be quicker than a poll: wait for the new golden, then look for the Event.
  std::string second_id;
  ASSERT_TRUE(WaitTemplateWhere(
      "counter",
      [&](const json& x) {
        second_id = GoldenId(x);
        return CondReason(x, "GoldenReady") == "GoldenSnapshotTaken" && !second_id.empty() && second_id != first_id;
      },
      90s));
  std::string events;
  for (int i = 0; i < 50 && events.find("GoldenSnapshotMissing") == std::string::npos; ++i) {
    events = Kubectl({"get", "events", "-n", ns_, "--field-selector", "involvedObject.kind=ActorTemplate", "-o",
                      "custom-columns=REASON:.reason,MESSAGE:.message"})
                 .out;
    std::this_thread::sleep_for(kPoll);
  }
  EXPECT_THAT(events, HasSubstr("GoldenSnapshotMissing"));
  EXPECT_THAT(events, HasSubstr(first_id));
  CreateFromTemplate("late", "counter", a->node);
  json late;
  ASSERT_TRUE(WaitStatus("late", "STATUS_RUNNING", 120s, &late));
  EXPECT_EQ(StatusField(late, "clonedFrom").value("snapshotID", ""), second_id);
}

// A warm pool of 3: its members are restored from the golden and paused (holding no worker); an
// actor created from the template claims one and starts by resuming the member's pause snapshot
// on its node — its counter continues from the member's, its hostname its own — and the pool
// refills; the claimed member is deleted once its claimer runs.
TEST_F(NodeTemplatesTest, AWarmPoolServesAnActorAndRefills) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 4);
  ASSERT_NE(a, nullptr);
  json spec = TemplateSpec(kCountAtLeast50);
  spec["warm"] = 3;
  CreateTemplate("counter", spec);
  ASSERT_TRUE(WaitWarmReady("counter", 3, 180s));
  std::vector<json> members = Members("counter");
  ASSERT_EQ(members.size(), 3u);
  for (const auto& m : members) {
    EXPECT_EQ(StatusOf(m), "STATUS_PAUSED") << m.dump(2);
    EXPECT_EQ(StatusField(m, "latestSnapshot").value("nodeName", ""), a->node);
  }
  ExpectAllWorkersFree(a->node);

  CreateFromTemplate("claimer", "counter", a->node);
  json actor;
  ASSERT_TRUE(WaitStatus("claimer", "STATUS_RUNNING", 60s, &actor));
  const std::string member = actor["spec"]["source"].value("actorName", "");
  EXPECT_THAT(member, ::testing::StartsWith("counter-warm-"));
  const json cloned = StatusField(actor, "clonedFrom");
  EXPECT_EQ(cloned.value("actorName", ""), member);
  EXPECT_EQ(cloned.value("snapshotID", ""), actor["spec"]["source"].value("snapshotID", ""));
  bool was_member = false;
  for (const auto& m : members) {
    if (m["metadata"].value("name", "") != member) continue;
    was_member = true;
    EXPECT_EQ(StatusField(m, "latestSnapshot").value("id", ""), cloned.value("snapshotID", ""))
        << "the member's pause snapshot";
  }
  EXPECT_TRUE(was_member) << member;
  EXPECT_GE(FirstCounter(*a, "claimer"), 50) << "resumed from the member (past the golden's gate), not booted";
  EXPECT_EQ(InSandbox(*a, "claimer", {"/bin/hostname"}), "claimer") << "the postRestore hook ran in the claimer";

  ASSERT_TRUE(WaitActor(member, [](const json& x) { return x.is_null(); }, 60s, "the claimed member deleted"));
  ASSERT_TRUE(WaitWarmReady("counter", 3, 120s)) << "the pool refills";
  EXPECT_EQ(StatusOf(GetActor("claimer")), "STATUS_RUNNING");
  const std::string agent_metrics = ScrapeMetrics(a->proc->Log());
  EXPECT_GE(MetricValue(agent_metrics, "stasis_actor_start_seconds_count{kind=\"warm\"}"), 1) << agent_metrics;
  EXPECT_GE(MetricValue(agent_metrics, "stasis_actor_start_seconds_count{kind=\"refill\"}"), 4)
      << "three members and the claimed one's replacement";
  const std::string controller_metrics = ScrapeMetrics(controller_->Log());
  const std::string series = "{namespace=\"" + ns_ + "\",result=\"hit\",template=\"counter\"}";
  EXPECT_EQ(MetricValue(controller_metrics, "stasis_warm_pool_claims_total" + series), 1)
      << ReadFile(work_.path() / "controller.log");
  EXPECT_EQ(MetricValue(controller_metrics,
                        "stasis_warm_pool_ready{namespace=\"" + ns_ + "\",template=\"counter\"}"), 3);
}

// Two workers, one held by an actor that is not pooled: the golden is taken (it is no pool
// member), but no member takes the last free worker — a second plain actor gets it. Once both
// plain actors are gone, the pool fills.
TEST_F(NodeTemplatesTest, APoolNeverTakesTheLastFreeWorker) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 2);
  ASSERT_NE(a, nullptr);
  CreateActor("plain-1", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("plain-1", "STATUS_RUNNING", 30s));
  json spec = TemplateSpec({"/bin/sh", "-c", "test -e /tmp/counter"});
  spec["warm"] = 2;
  CreateTemplate("counter", spec);
  ASSERT_TRUE(WaitTemplate("counter", "GoldenSnapshotTaken", 90s, nullptr));
  ASSERT_TRUE(WaitActor(
      "counter-warm-0", [](const json& x) { return CondReason(x, "Ready") == "NoFreeWorker"; }, 30s,
      "the member refused the last free worker"));
  EXPECT_THAT(CondMessage(GetActor("counter-warm-0"), "Ready"), HasSubstr("last free worker"));
  CreateActor("plain-2", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("plain-2", "STATUS_RUNNING", 30s));
  for (const auto& m : Members("counter")) EXPECT_EQ(StatusField(m, "workerName"), nullptr) << m.dump(2);

  for (const char* plain : {"plain-1", "plain-2"}) {
    ASSERT_TRUE(Kubectl({"delete", "actor", plain, "-n", ns_, "--wait=true", "--timeout=30s"}).success());
  }
  ASSERT_TRUE(WaitWarmReady("counter", 2, 120s));
  ExpectAllWorkersFree(a->node);
}

}  // namespace
}  // namespace stasis::testing
