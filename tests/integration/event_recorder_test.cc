// Events against a real kube-apiserver, read back with kubectl: one is created with every
// field the API shows; a repeat is aggregated onto the same object (count 2); field limits
// hold; the spam filter drops; an unreachable API server never blocks the caller.
#include "controller/event_recorder.h"

#include <gtest/gtest.h>

#include <chrono>

#include "controller/rest_config.h"
#include "tests/support/control_plane.h"

namespace stasis {
namespace {

using namespace std::chrono_literals;

const ResourceType kConfigMaps{"", "v1", "configmaps", true};

RestConfig Config() {
  auto config = LoadKubeconfig(testing::ControlPlane::Get().kubeconfig());
  EXPECT_TRUE(config.ok()) << config.status().ToString();
  return *config;
}

// `kubectl get events` for one involved object, as JSON items.
json EventsFor(const std::string& ns, const std::string& name) {
  auto r = testing::ControlPlane::Get().Kubectl(
      {"get", "events", "-n", ns, "--field-selector", "involvedObject.name=" + name, "-o", "json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto parsed = json::parse(r.out, nullptr, false);
  if (parsed.is_discarded()) return json::array();
  return parsed.value("items", json::array());
}

class EventRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    client_ = std::make_unique<KubeClient>(NewCpprestTransport(Config()));
    KubeEventRecorderOptions o;
    o.component = "stasis-controller";
    o.instance = "stasis-controller-0";
    o.host = "node-1";
    recorder_ = std::make_unique<KubeEventRecorder>(*client_, o);
  }

  json MakeConfigMap(const std::string& name) {
    json cm = {{"apiVersion", "v1"},
               {"kind", "ConfigMap"},
               {"metadata", {{"name", name}, {"namespace", "default"}}}};
    auto created = client_->Create(kConfigMaps, "default", cm);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? *created : cm;
  }

  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<KubeEventRecorder> recorder_;
};

TEST_F(EventRecorderTest, EventIsVisibleWithKubectl) {
  json cm = MakeConfigMap("ev-visible");
  recorder_->Event(cm, EventType::kNormal, "Checkpointed", "checkpoint took 1.2s");
  ASSERT_TRUE(recorder_->Flush(20s));

  auto table = testing::ControlPlane::Get().Kubectl({"get", "events", "-n", "default"});
  EXPECT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("Checkpointed"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("configmap/ev-visible"), std::string::npos) << table.out;

  auto items = EventsFor("default", "ev-visible");
  ASSERT_EQ(items.size(), 1u) << items.dump(2);
  const json& e = items[0];
  EXPECT_EQ(e["reason"], "Checkpointed");
  EXPECT_EQ(e["message"], "checkpoint took 1.2s");
  EXPECT_EQ(e["type"], "Normal");
  EXPECT_EQ(e["count"], 1);
  EXPECT_EQ(e["source"]["component"], "stasis-controller");
  EXPECT_EQ(e["source"]["host"], "node-1");
  EXPECT_EQ(e["reportingComponent"], "stasis-controller");
  EXPECT_EQ(e["reportingInstance"], "stasis-controller-0");
  EXPECT_EQ(e["involvedObject"]["kind"], "ConfigMap");
  EXPECT_EQ(e["involvedObject"]["uid"], cm["metadata"]["uid"]);
  EXPECT_FALSE(e.value("firstTimestamp", "").empty());
  // "<object>.<hex nanos>"
  std::string name = e["metadata"]["name"];
  EXPECT_EQ(name.rfind("ev-visible.", 0), 0u) << name;
  EXPECT_EQ(name.find_first_not_of("0123456789abcdef", 11), std::string::npos) << name;
}

TEST_F(EventRecorderTest, RepeatedEventIsAggregatedOntoOneObject) {
  json cm = MakeConfigMap("ev-repeat");
  recorder_->Event(cm, EventType::kWarning, "RestoreFailed", "runsc restore: exit 128");
  ASSERT_TRUE(recorder_->Flush(20s));
  std::this_thread::sleep_for(1100ms);  // so that lastTimestamp (whole seconds) moves
  recorder_->Event(cm, EventType::kWarning, "RestoreFailed", "runsc restore: exit 128");
  ASSERT_TRUE(recorder_->Flush(20s));

  auto items = EventsFor("default", "ev-repeat");
  ASSERT_EQ(items.size(), 1u) << items.dump(2);
  EXPECT_EQ(items[0]["count"], 2);
  EXPECT_EQ(items[0]["type"], "Warning");
  EXPECT_GT(items[0].value("lastTimestamp", ""), items[0].value("firstTimestamp", ""));

  // A different message is a different event.
  recorder_->Event(cm, EventType::kWarning, "RestoreFailed", "runsc restore: exit 1");
  ASSERT_TRUE(recorder_->Flush(20s));
  EXPECT_EQ(EventsFor("default", "ev-repeat").size(), 2u);
  EXPECT_EQ(recorder_->dropped(), 0u);
}

TEST_F(EventRecorderTest, FieldsAreCutToTheApiLimits) {
  json cm = MakeConfigMap("ev-limits");
  std::string message(601, 'x');                 // odd: byte 1024 falls inside an "é"
  for (int i = 0; i < 300; ++i) message += "é";  // two bytes each: a cut must not split one
  recorder_->Event(cm, EventType::kNormal, std::string(200, 'R'), message);
  ASSERT_TRUE(recorder_->Flush(20s));
  auto items = EventsFor("default", "ev-limits");
  ASSERT_EQ(items.size(), 1u) << "the API refused the event";
  std::string got = items[0]["message"];
  EXPECT_LE(got.size(), 1024u);
  EXPECT_GE(got.size(), 1023u);
  EXPECT_EQ(got, message.substr(0, got.size()));
  EXPECT_EQ(items[0]["reason"].get<std::string>().size(), 128u);
}

TEST_F(EventRecorderTest, ClusterScopedObjectsEventsGoToDefault) {
  auto ns = client_->Get(ResourceType{"", "v1", "namespaces", false}, "", "kube-system");
  ASSERT_TRUE(ns.ok()) << ns.status().ToString();
  recorder_->Event(*ns, EventType::kNormal, "Noticed", "cluster-scoped");
  ASSERT_TRUE(recorder_->Flush(20s));
  auto items = EventsFor("default", "kube-system");
  ASSERT_EQ(items.size(), 1u);
  EXPECT_EQ(items[0]["involvedObject"]["kind"], "Namespace");
}

TEST_F(EventRecorderTest, SpamFilterDropsPastTheBurst) {
  KubeEventRecorderOptions o;
  o.component = "stasis-controller";
  o.spam_burst = 3;
  KubeEventRecorder recorder(*client_, o);
  json cm = MakeConfigMap("ev-spam");
  for (int i = 0; i < 5; ++i) {
    recorder.Event(cm, EventType::kNormal, "Tick", "tick " + std::to_string(i));
  }
  ASSERT_TRUE(recorder.Flush(20s));
  EXPECT_EQ(EventsFor("default", "ev-spam").size(), 3u);
  EXPECT_EQ(recorder.dropped(), 2u);
}

TEST_F(EventRecorderTest, UnreachableApiServerNeverBlocksTheCaller) {
  RestConfig config = Config();
  config.server = "https://127.0.0.1:1";  // nothing listens there
  KubeClient dead(NewCpprestTransport(config));
  KubeEventRecorderOptions o;
  o.component = "stasis-controller";
  auto recorder = std::make_unique<KubeEventRecorder>(dead, o);
  json cm = {{"apiVersion", "v1"},
             {"kind", "ConfigMap"},
             {"metadata", {{"name", "ev-dead"}, {"namespace", "default"}}}};
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 2000; ++i) {  // more than the queue holds
    recorder->Event(cm, EventType::kNormal, "Tick", "tick " + std::to_string(i));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  // The queue holds 1000, and the sender may have taken one off it already.
  EXPECT_GE(recorder->dropped(), 2000u - 1000u - 1u);
  start = std::chrono::steady_clock::now();
  recorder->Shutdown(0ms);  // interrupts the 10 s retry wait
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_EQ(recorder->dropped(), 2000u);
}

}  // namespace
}  // namespace stasis
