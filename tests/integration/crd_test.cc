// The Actor and Worker CRDs on a real kube-apiserver: they install and become Established,
// the samples are accepted, the printer columns and selectable fields work, the server's
// defaults equal the C++ defaults, every bad object of the shared table is refused with the
// message the C++ validator gives, and unknown fields survive a read-modify-write by api/.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/json_mapping.h"
#include "api/names.h"
#include "api/template_json.h"
#include "api/validation.h"
#include "tests/support/bad_actors.h"
#include "tests/support/control_plane.h"

namespace stasis::api {
namespace {

using nlohmann::json;
using stasis::testing::BadActors;
using stasis::testing::BadActorTemplates;
using stasis::testing::BadObject;
using stasis::testing::BadWorkers;
using stasis::testing::BadWrite;
using stasis::testing::ControlPlane;
using stasis::testing::kBadObjectNamespace;

const std::string kCrdDir = std::string(STASIS_SOURCE_DIR) + "/manifests/crd/";
const std::string kSampleDir = std::string(STASIS_SOURCE_DIR) + "/manifests/samples/";
const std::string kNs = kBadObjectNamespace;

CommandResult Kubectl(const std::vector<std::string>& args, const std::string& stdin_data = "") {
  return ControlPlane::Get().Kubectl(args, stdin_data);
}

std::string Show(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout: " + r.out + "\nstderr: " + r.err;
}

json GetJson(const std::vector<std::string>& args) {
  std::vector<std::string> full = args;
  full.insert(full.end(), {"-o", "json"});
  CommandResult r = Kubectl(full);
  EXPECT_EQ(r.exit_code, 0) << Show(r);
  Result<json> j = ParseJson(r.out);
  EXPECT_TRUE(j.ok()) << r.out;
  return j.ok() ? *j : json();
}

json GetActor(const std::string& name) { return GetJson({"get", "actor", name, "-n", kNs}); }

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Names printed by `kubectl get … -o name`, without the resource prefix.
std::vector<std::string> Names(const CommandResult& r) {
  std::vector<std::string> names;
  for (const std::string& line : Lines(r.out)) {
    names.push_back(line.substr(line.find('/') + 1));
  }
  return names;
}

void Create(const json& object) {
  CommandResult r = Kubectl({"create", "-f", "-"}, object.dump());
  ASSERT_EQ(r.exit_code, 0) << Show(r) << "\n" << object.dump();
}

void PatchStatus(const std::string& resource, const std::string& name, const json& patch,
                 bool namespaced = true) {
  std::vector<std::string> args = {"patch",        resource, name,        "--subresource=status",
                                   "--type=merge", "-p",     patch.dump()};
  if (namespaced) args.insert(args.end(), {"-n", kNs});
  CommandResult r = Kubectl(args);
  ASSERT_EQ(r.exit_code, 0) << Show(r);
}

json MinimalActor(const std::string& name, const std::string& node_name = "") {
  json a = {{"apiVersion", kApiVersion},
            {"kind", kActorKind},
            {"metadata", {{"name", name}, {"namespace", kNs}}},
            {"spec", {{"bundle", "/var/lib/stasis/bundles/counter"}}}};
  if (!node_name.empty()) a["spec"]["nodeName"] = node_name;
  return a;
}

class CrdTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    CommandResult r = Kubectl({"apply", "-f", kCrdDir + "actors.stasis.dev.yaml", "-f",
                               kCrdDir + "actortemplates.stasis.dev.yaml", "-f",
                               kCrdDir + "workers.stasis.dev.yaml"});
    ASSERT_EQ(r.exit_code, 0) << Show(r);
    r = Kubectl({"wait", "--for", "condition=established", "--timeout=60s", "crd/actors.stasis.dev",
                 "crd/actortemplates.stasis.dev", "crd/workers.stasis.dev"});
    ASSERT_EQ(r.exit_code, 0) << Show(r);
    // Established is the server's view; kubectl's discovery can lag a moment behind it.
    for (int i = 0; i < 100; ++i) {
      if (Kubectl({"get", "actors", "-A"}).exit_code == 0 &&
          Kubectl({"get", "actortemplates", "-A"}).exit_code == 0 &&
          Kubectl({"get", "workers"}).exit_code == 0) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    r = Kubectl({"create", "namespace", kNs});
    ASSERT_TRUE(r.exit_code == 0 || r.err.find("AlreadyExists") != std::string::npos) << Show(r);
  }
};

TEST_F(CrdTest, CrdsAreEstablishedWithTheirNames) {
  for (const char* crd : {"actors.stasis.dev", "actortemplates.stasis.dev", "workers.stasis.dev"}) {
    json j = GetJson({"get", "crd", crd});
    bool established = false;
    bool names_accepted = false;
    for (const json& c : j["status"]["conditions"]) {
      if (c["type"] == "Established") established = c["status"] == "True";
      if (c["type"] == "NamesAccepted") names_accepted = c["status"] == "True";
    }
    EXPECT_TRUE(established) << crd;
    EXPECT_TRUE(names_accepted) << crd;
  }
  json actors = GetJson({"get", "crd", "actors.stasis.dev"});
  EXPECT_EQ(actors["spec"]["scope"], "Namespaced");
  EXPECT_EQ(actors["status"]["acceptedNames"]["shortNames"], json::array({"act"}));
  EXPECT_EQ(GetJson({"get", "crd", "workers.stasis.dev"})["spec"]["scope"], "Cluster");
  EXPECT_EQ(GetJson({"get", "crd", "workers.stasis.dev"})["status"]["acceptedNames"]["shortNames"],
            json::array({"wkr"}));
  // The short names work.
  CommandResult r = Kubectl({"get", "act", "-n", kNs});
  EXPECT_EQ(r.exit_code, 0) << Show(r);
  r = Kubectl({"get", "wkr"});
  EXPECT_EQ(r.exit_code, 0) << Show(r);
}

// kubectl explain serves the CRDs' descriptions (every field has one: CrdDescriptionsTest).
TEST_F(CrdTest, KubectlExplainDescribesTheFields) {
  CommandResult r = Kubectl({"explain", "actors.spec.snapshots.onPause"});
  EXPECT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_THAT(r.out, ::testing::HasSubstr("What a Pause snapshot holds")) << Show(r);
  r = Kubectl({"explain", "workers.status.actorRef.name"});
  EXPECT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_THAT(r.out, ::testing::HasSubstr("Name of the Actor holding this worker")) << Show(r);
}

TEST_F(CrdTest, SamplesAreAcceptedAndReadByTheCppTypes) {
  for (const char* sample :
       {"actor-cpu.yaml", "actor-gpu.yaml", "actor-microvm.yaml", "actor-image.yaml",
        "actor-clone.yaml", "actortemplate.yaml", "actor-from-template.yaml"}) {
    SCOPED_TRACE(sample);
    CommandResult r = Kubectl({"apply", "-n", kNs, "-f", kSampleDir + sample});
    ASSERT_EQ(r.exit_code, 0) << Show(r);
  }
  CommandResult r = Kubectl({"apply", "-f", kSampleDir + "worker.yaml"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);

  for (const char* name : {"counter", "cuda-counter", "counter-vm", "counter-image", "counter-clone",
                           "counter-from-template"}) {
    json stored = GetActor(name);
    EXPECT_TRUE(ValidateActor(stored).empty()) << name;
    Result<Actor> a = ActorFromJson(stored);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_EQ(a->metadata.name, name);
    EXPECT_EQ(a->metadata.namespace_, kNs);
    EXPECT_EQ(a->metadata.generation, 1);
    EXPECT_FALSE(a->metadata.uid.empty());
    EXPECT_TRUE(a->metadata.creation_timestamp.has_value());
  }
  EXPECT_EQ(ActorFromJson(GetActor("counter-vm"))->spec.runtime, Runtime::kMicrovm);
  Actor gpu = *ActorFromJson(GetActor("cuda-counter"));
  EXPECT_EQ(gpu.spec.gpu.count, 1);
  EXPECT_EQ(gpu.spec.checkpoint_policy, CheckpointPolicy::kLeaveRunningThenStop);
  EXPECT_EQ(gpu.spec.snapshots.on_commit, SnapshotScope::kData);
  EXPECT_EQ(gpu.spec.snapshots.data_dirs, (std::vector<std::string>{"/data", "/models"}));
  Actor image = *ActorFromJson(GetActor("counter-image"));
  EXPECT_EQ(image.spec.image, "registry.example.com/team-a/counter:v1");
  EXPECT_TRUE(image.spec.bundle.empty());
  EXPECT_EQ(EffectivePullPolicy(image.spec), PullPolicy::kIfNotPresent);
  EXPECT_EQ(image.spec.env, (std::vector<EnvVar>{{"COUNTER_START", "0"}}));
  Actor clone = *ActorFromJson(GetActor("counter-clone"));
  ASSERT_TRUE(clone.spec.source.has_value());
  EXPECT_EQ(clone.spec.source->actor_name, "counter");
  EXPECT_TRUE(clone.spec.source->snapshot_id.empty());
  ASSERT_TRUE(clone.spec.hooks.post_restore.has_value());
  EXPECT_EQ(clone.spec.hooks.post_restore->command.front(), "/bin/sh");
  Actor from = *ActorFromJson(GetActor("counter-from-template"));
  ASSERT_TRUE(from.spec.template_ref.has_value());
  EXPECT_EQ(from.spec.template_ref->name, "counter-template");
  json tpl = GetJson({"get", "actortemplate", "counter-template", "-n", kNs});
  EXPECT_TRUE(ValidateActorTemplate(tpl).empty());
  Result<ActorTemplate> t = ActorTemplateFromJson(tpl);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  ASSERT_TRUE(t->spec.readiness_gate.has_value());
  EXPECT_EQ(t->spec.actor.bundle, "/var/lib/stasis/bundles/counter");

  Result<Worker> w = WorkerFromJson(GetJson({"get", "worker", "node-a-gpu0"}));
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w->spec.node_name, "node-a");
  EXPECT_EQ(w->metadata.labels.at(kNodeLabel), "node-a");
  EXPECT_TRUE(w->metadata.namespace_.empty());
}

TEST_F(CrdTest, ServerDefaultsEqualCppDefaults) {
  const json minimal = MinimalActor("defaults");
  Create(minimal);
  json stored = GetActor("defaults");
  Result<Actor> typed = ActorFromJson(minimal);
  ASSERT_TRUE(typed.ok());
  EXPECT_EQ(stored["spec"], ActorTypedJson(*typed)["spec"]) << stored["spec"].dump(2);

  // The same for a Worker's status.phase.
  Create({{"apiVersion", kApiVersion},
          {"kind", kWorkerKind},
          {"metadata", {{"name", "defaults-worker"}}},
          {"spec", {{"nodeName", "node-z"}}}});
  PatchStatus("worker", "defaults-worker", {{"status", json::object()}}, false);
  json worker = GetJson({"get", "worker", "defaults-worker"});
  EXPECT_EQ(worker["status"]["phase"], "Free") << worker.dump(2);
}

TEST_F(CrdTest, GetShowsThePrinterColumns) {
  Create(MinimalActor("columns"));
  PatchStatus("actor", "columns",
              {{"status",
                {{"status", "STATUS_PAUSED"},
                 {"nodeName", "node-c"},
                 {"workerName", "node-c-gpu0"},
                 {"latestSnapshot",
                  {{"id", "s1"},
                   {"trigger", "Pause"},
                   {"scope", "Full"},
                   {"location", "/snap/s1"},
                   {"sizeBytes", 1048576}}}}}});

  CommandResult r = Kubectl({"get", "actors", "columns", "-n", kNs});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex(R"(NAME +STATUS +DESIRED +NODE +WORKER +SNAPSHOT SIZE +AGE *)")))
      << lines[0];
  EXPECT_TRUE(std::regex_match(
      lines[1],
      std::regex(R"(columns +STATUS_PAUSED +Running +node-c +node-c-gpu0 +1048576 +\S+ *)")))
      << lines[1];

  r = Kubectl({"get", "actors", "columns", "-n", kNs, "-o", "wide"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_TRUE(
      std::regex_search(Lines(r.out)[0], std::regex(R"(AGE +RUNTIME +GPUS +SNAPSHOT TRIGGER *$)")))
      << r.out;

  Create({{"apiVersion", kApiVersion},
          {"kind", kWorkerKind},
          {"metadata", {{"name", "columns-worker"}}},
          {"spec", {{"nodeName", "node-c"}}}});
  PatchStatus(
      "worker", "columns-worker",
      {{"status", {{"phase", "Held"}, {"actorRef", {{"namespace", kNs}, {"name", "columns"}}}}}},
      false);
  r = Kubectl({"get", "workers", "columns-worker"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(std::regex_match(lines[0], std::regex(R"(NAME +NODE +PHASE +ACTOR +AGE *)")))
      << lines[0];
  EXPECT_TRUE(
      std::regex_match(lines[1], std::regex(R"(columns-worker +node-c +Held +columns +\S+ *)")))
      << lines[1];
}

TEST_F(CrdTest, NodeAgentsListOnlyTheirActors) {
  Create(MinimalActor("sel-a", "node-a"));
  Create(MinimalActor("sel-b", "node-b"));
  Create(MinimalActor("sel-free"));

  CommandResult r = Kubectl(
      {"get", "actors", "-n", kNs, "-o", "name", "--field-selector", "spec.nodeName=node-a"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(Names(r), std::vector<std::string>{"sel-a"});

  // Binding sel-free to node-b: status.nodeName and the label, as the binder does.
  PatchStatus("actor", "sel-free", {{"status", {{"nodeName", "node-b"}}}});
  r = Kubectl({"label", "actor", "sel-free", "-n", kNs, std::string(kNodeLabel) + "=node-b"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);

  r = Kubectl(
      {"get", "actors", "-n", kNs, "-o", "name", "--field-selector", "status.nodeName=node-b"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(Names(r), std::vector<std::string>{"sel-free"});
  r = Kubectl({"get", "actors", "-A", "-o", "name", "-l", std::string(kNodeLabel) + "=node-b"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(Names(r), std::vector<std::string>{"sel-free"});
  // Several selectable fields at once, and across namespaces.
  r = Kubectl({"get", "actors", "-A", "-o", "name", "--field-selector",
               "spec.nodeName=node-b,spec.desiredState=Running"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(Names(r), std::vector<std::string>{"sel-b"});
  // The node agent's two caches are disjoint: pinned here, or bound here and not pinned here
  // (an unpinned actor has no spec.nodeName at all, and still matches !=).
  PatchStatus("actor", "sel-b", {{"status", {{"nodeName", "node-b"}}}});
  r = Kubectl({"get", "actors", "-A", "-o", "name", "--field-selector", PinnedActorsSelector("node-b")});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(Names(r), std::vector<std::string>{"sel-b"});
  r = Kubectl({"get", "actors", "-A", "-o", "name", "--field-selector", BoundUnpinnedActorsSelector("node-b")});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(Names(r), std::vector<std::string>{"sel-free"});
  // A field that is not selectable is refused.
  r = Kubectl({"get", "actors", "-n", kNs, "--field-selector", "spec.bundle=/x"});
  EXPECT_NE(r.exit_code, 0);

  // Workers: by node, and the free ones.
  for (const char* node : {"node-x", "node-y"}) {
    Create({{"apiVersion", kApiVersion},
            {"kind", kWorkerKind},
            {"metadata", {{"name", std::string("sel-") + node + "-gpu0"}}},
            {"spec", {{"nodeName", node}}}});
  }
  PatchStatus("worker", "sel-node-x-gpu0", {{"status", {{"phase", "Free"}}}}, false);
  PatchStatus(
      "worker", "sel-node-y-gpu0",
      {{"status", {{"phase", "Held"}, {"actorRef", {{"namespace", kNs}, {"name", "sel-b"}}}}}},
      false);
  r = Kubectl({"get", "workers", "-o", "name", "--field-selector", "spec.nodeName=node-y"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(Names(r), std::vector<std::string>{"sel-node-y-gpu0"});
  r = Kubectl({"get", "workers", "-o", "name", "--field-selector",
               "status.phase=Free,spec.nodeName=node-x"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_EQ(Names(r), std::vector<std::string>{"sel-node-x-gpu0"});
}

// The minor version of the API server under test (the pinned one, or the oldest supported).
int ServerMinor() {
  static const int minor = [] {
    Result<json> v = ParseJson(Kubectl({"version", "-o", "json"}).out);
    if (!v.ok() || !v->contains("serverVersion")) return 0;
    return std::stoi((*v)["serverVersion"].value("minor", "0"));
  }();
  return minor;
}

// Messages as the API servers before 1.37 print them: where a CEL rule fails they show the
// value's type ("object", "string") instead of the value, and an integer field's type error
// names JSON's types ("integer", "number") instead of Go's ("int32", "float64"). The C++
// validator speaks the pinned server's dialect; against an older server the field path and
// the rule's message must still match, with the value and the type names left out.
std::string WithoutValues(const std::string& message) {
  static const std::regex kValue(R"(Invalid value: ("[^"]*"|null): )");
  static const std::regex kType(R"(must be of type \w+: "\w+")");
  return std::regex_replace(std::regex_replace(message, kValue, "Invalid value: "), kType,
                            "must be of type T");
}

bool ServerSaid(const std::string& err, const std::string& expected) {
  if (err.find(expected) != std::string::npos) return true;
  return ServerMinor() < 37 && WithoutValues(err).find(WithoutValues(expected)) != std::string::npos;
}

void ExpectRefused(const CommandResult& r, const BadObject& bad) {
  EXPECT_NE(r.exit_code, 0) << bad.name << ": the API server accepted it";
  EXPECT_TRUE(ServerSaid(r.err, bad.expected))
      << bad.name << ": expected\n  " << bad.expected << "\nin\n  " << r.err;
}

void SendBadObject(const BadObject& bad, const char* resource, bool namespaced) {
  SCOPED_TRACE(bad.name + ": " + bad.what);
  if (bad.write == BadWrite::kCreate) {
    ExpectRefused(Kubectl({"create", "-f", "-"}, bad.object.dump()), bad);
    return;
  }
  json without_status = bad.object;
  without_status.erase("status");
  Create(without_status);
  std::vector<std::string> args = {"patch",
                                   resource,
                                   bad.name,
                                   "--subresource=status",
                                   "--type=merge",
                                   "-p",
                                   json{{"status", bad.object["status"]}}.dump()};
  if (namespaced) args.insert(args.end(), {"-n", kNs});
  ExpectRefused(Kubectl(args), bad);
}

// An actor from an image, with every field an image actor may have, is accepted, defaulted like
// the C++ types, read back field for field, and its status (the image digests) written through
// /status; the agent's pull policy for it follows Pods' rule.
TEST_F(CrdTest, AnImageActorIsAcceptedAndReadBack) {
  const json good = stasis::testing::GoodImageActor("image-actor");
  ASSERT_TRUE(ValidateActor(good).empty());
  Create(good);
  json stored = GetActor("image-actor");
  Result<Actor> typed = ActorFromJson(good);
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ(stored["spec"], ActorTypedJson(*typed)["spec"]) << stored["spec"].dump(2);
  Result<Actor> read = ActorFromJson(stored);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->spec, typed->spec);
  EXPECT_EQ(read->spec.image, "127.0.0.1:5000/stasis/counter:v1");
  EXPECT_EQ(read->spec.image_pull_policy, PullPolicy::kAlways);
  EXPECT_EQ(read->spec.image_pull_secrets.size(), 2u);
  EXPECT_EQ(read->spec.env[1].name, "log.level");
  EXPECT_EQ(read->spec.env[1].value, "");

  // The status fields, through /status, as the agent writes them.
  const json with_status = stasis::testing::GoodImageActor("image-actor", true);
  PatchStatus("actor", "image-actor", {{"status", with_status["status"]}});
  stored = GetActor("image-actor");
  read = ActorFromJson(stored);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->status.image_digest, stasis::testing::kGoodImageDigest);
  ASSERT_TRUE(read->status.latest_snapshot.has_value());
  EXPECT_EQ(read->status.latest_snapshot->image_digest, stasis::testing::kGoodImageDigest);
  EXPECT_TRUE(ValidateActor(stored).empty());

  // The smallest image actor: the server's defaults equal the C++ ones; no pull policy is
  // stored (the agent applies Pods' rule: no tag is Always).
  json minimal = MinimalActor("image-minimal");
  minimal["spec"] = {{"image", "busybox"}};
  Create(minimal);
  stored = GetActor("image-minimal");
  EXPECT_EQ(stored["spec"], ActorTypedJson(*ActorFromJson(minimal))["spec"]) << stored["spec"].dump(2);
  EXPECT_FALSE(stored["spec"].contains("imagePullPolicy"));
  EXPECT_EQ(EffectivePullPolicy(ActorFromJson(stored)->spec), PullPolicy::kAlways);

  // Switching an image actor to a bundle must drop the image (and its fields) in the same write.
  CommandResult r = Kubectl({"patch", "actor", "image-minimal", "-n", kNs, "--type=merge", "-p",
                             R"({"spec": {"bundle": "/var/lib/stasis/bundles/counter"}})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(ServerSaid(r.err, "spec: Invalid value: " + std::string(kMessageImageOrBundle))) << r.err;
  r = Kubectl({"patch", "actor", "image-minimal", "-n", kNs, "--type=merge", "-p",
               R"({"spec": {"bundle": "/var/lib/stasis/bundles/counter", "image": null}})"});
  EXPECT_EQ(r.exit_code, 0) << Show(r);
}

// has() of a list that is present but empty: the server counts it as set, as the C++ rule does.
TEST_F(CrdTest, AnEmptyImageOnlyListStillNeedsAnImage) {
  json actor = MinimalActor("empty-command");
  actor["spec"]["command"] = json::array();
  const FieldErrors errors = ValidateActor(actor);
  ASSERT_EQ(errors.size(), 1u);
  CommandResult r = Kubectl({"create", "-f", "-"}, actor.dump());
  EXPECT_NE(r.exit_code, 0) << "the API server accepted it";
  EXPECT_TRUE(ServerSaid(r.err, errors[0].ToString())) << r.err;
}

TEST_F(CrdTest, EveryBadActorIsRefusedWithTheValidatorsMessage) {
  ASSERT_GE(BadActors().size(), 20u);
  for (const BadObject& bad : BadActors()) {
    // The same message from stasis's own validator…
    FieldErrors errors = bad.write == BadWrite::kCreate ? ValidateActor(bad.object)
                                                        : ValidateActorStatus(bad.object);
    ASSERT_FALSE(errors.empty()) << bad.name;
    EXPECT_EQ(errors[0].ToString(), bad.expected) << bad.name;
    // …and from the API server.
    SendBadObject(bad, "actor", true);
  }
}

TEST_F(CrdTest, EveryBadActorTemplateIsRefusedWithTheValidatorsMessage) {
  ASSERT_GE(BadActorTemplates().size(), 10u);
  for (const BadObject& bad : BadActorTemplates()) {
    FieldErrors errors = bad.write == BadWrite::kCreate ? ValidateActorTemplate(bad.object)
                                                        : ValidateActorTemplateStatus(bad.object);
    ASSERT_FALSE(errors.empty()) << bad.name;
    EXPECT_EQ(errors[0].ToString(), bad.expected) << bad.name;
    SendBadObject(bad, "actortemplate", true);
  }
}

TEST_F(CrdTest, EveryBadWorkerIsRefusedWithTheValidatorsMessage) {
  for (const BadObject& bad : BadWorkers()) {
    FieldErrors errors = bad.write == BadWrite::kCreate ? ValidateWorker(bad.object)
                                                        : ValidateWorkerStatus(bad.object);
    ASSERT_FALSE(errors.empty()) << bad.name;
    EXPECT_EQ(errors[0].ToString(), bad.expected) << bad.name;
    SendBadObject(bad, "worker", false);
  }
}

TEST_F(CrdTest, WorkerNodeNameIsImmutable) {
  const json worker = stasis::testing::GoodWorker("immutable-worker");
  Create(worker);
  json moved = worker;
  moved["spec"]["nodeName"] = "node-b";
  const std::string expected = ValidateWorkerUpdate(worker, moved).at(0).ToString();
  EXPECT_EQ(expected, R"(spec.nodeName: Invalid value: "node-b": nodeName is immutable)");
  CommandResult r = Kubectl({"patch", "worker", "immutable-worker", "--type=merge", "-p",
                             R"({"spec": {"nodeName": "node-b"}})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(ServerSaid(r.err, expected)) << r.err;
}

TEST_F(CrdTest, ActorRuntimeIsImmutable) {
  const json actor = stasis::testing::GoodActor("immutable-runtime");  // runtime: microvm
  Create(actor);
  json changed = actor;
  changed["spec"]["runtime"] = "gvisor";
  const std::string expected = ValidateActorUpdate(actor, changed).at(0).ToString();
  EXPECT_EQ(expected, R"(spec.runtime: Invalid value: "gvisor": runtime is immutable)");
  CommandResult r = Kubectl({"patch", "actor", "immutable-runtime", "-n", kNs, "--type=merge",
                             "-p", R"({"spec": {"runtime": "gvisor"}})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(ServerSaid(r.err, expected)) << r.err;
}

// Adding, changing or removing spec.source after creation: the server refuses each with the
// message and field the C++ validator gives.
TEST_F(CrdTest, ActorSourceIsImmutable) {
  const json clone = stasis::testing::GoodCloneActor("immutable-source");
  Create(clone);
  json changed = clone;
  changed["spec"]["source"]["actorName"] = "another";
  const std::string expected = ValidateActorUpdate(clone, changed).at(0).ToString();
  EXPECT_EQ(expected, "spec.source: Invalid value: " + std::string(kMessageImmutableSource));
  for (const char* patch : {R"({"spec": {"source": {"actorName": "another"}}})",
                            R"({"spec": {"source": null}})"}) {
    CommandResult r = Kubectl(
        {"patch", "actor", "immutable-source", "-n", kNs, "--type=merge", "-p", patch});
    EXPECT_NE(r.exit_code, 0) << patch;
    EXPECT_TRUE(ServerSaid(r.err, expected)) << patch << r.err;
  }
  json plain = MinimalActor("added-source");
  Create(plain);
  CommandResult r = Kubectl({"patch", "actor", "added-source", "-n", kNs, "--type=merge", "-p",
                             R"({"spec": {"source": {"actorName": "counter"}}})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(ServerSaid(r.err, expected)) << r.err;
}

// A template: accepted, defaulted like the C++ types, its status written through /status and
// shown in its printer columns.
TEST_F(CrdTest, AnActorTemplateIsAcceptedDefaultedAndShown) {
  const json good = stasis::testing::GoodActorTemplate("tpl-good");
  Create(good);
  json stored = GetJson({"get", "actortemplate", "tpl-good", "-n", kNs});
  Result<ActorTemplate> typed = ActorTemplateFromJson(good);
  ASSERT_TRUE(typed.ok()) << typed.status().ToString();
  EXPECT_EQ(stored["spec"], ActorTemplateTypedJson(*typed)["spec"]) << stored["spec"].dump(2);
  json minimal = {{"apiVersion", kApiVersion},
                  {"kind", kActorTemplateKind},
                  {"metadata", {{"name", "tpl-minimal"}, {"namespace", kNs}}},
                  {"spec",
                   {{"actor", {{"image", "busybox"}}}, {"readinessGate", {{"command", {"true"}}}}}}};
  Create(minimal);
  stored = GetJson({"get", "atpl", "tpl-minimal", "-n", kNs});
  EXPECT_EQ(stored["spec"], ActorTemplateTypedJson(*ActorTemplateFromJson(minimal))["spec"])
      << stored["spec"].dump(2);

  const json with_status = stasis::testing::GoodActorTemplate("tpl-good", true);
  PatchStatus("actortemplate", "tpl-good", {{"status", with_status["status"]}});
  stored = GetJson({"get", "actortemplate", "tpl-good", "-n", kNs});
  Result<ActorTemplate> read = ActorTemplateFromJson(stored);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(read->status, ActorTemplateFromJson(with_status)->status);
  CommandResult r = Kubectl({"get", "actortemplates", "tpl-good", "-n", kNs});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  std::vector<std::string> lines = Lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_TRUE(std::regex_match(lines[0], std::regex(R"(NAME +GOLDEN +READY +WARM +AGE *)")))
      << lines[0];
  EXPECT_TRUE(std::regex_match(
      lines[1], std::regex(R"(tpl-good +20261202T150102Z-3f9a1c +True +3 +\S+ *)")))
      << lines[1];
}

// An actor from a template: created with templateRef alone; the controller's fill-in (the
// template's spec and source) is accepted once; then source and templateRef are immutable.
TEST_F(CrdTest, ATemplatedActorGetsItsSourceOnce) {
  Create(stasis::testing::GoodTemplatedActor("tpl-actor"));
  CommandResult r = Kubectl(
      {"patch", "actor", "tpl-actor", "-n", kNs, "--type=merge", "-p",
       R"({"spec": {"bundle": "/var/lib/stasis/bundles/counter", "source": {"actorName": "t-golden-1", "snapshotID": "s1"}}})"});
  EXPECT_EQ(r.exit_code, 0) << Show(r);
  json filled = GetActor("tpl-actor");
  json changed = filled;
  changed["spec"]["source"]["snapshotID"] = "s2";
  std::string expected = ValidateActorUpdate(filled, changed).at(0).ToString();
  EXPECT_EQ(expected, "spec.source: Invalid value: " + std::string(kMessageImmutableSource));
  r = Kubectl({"patch", "actor", "tpl-actor", "-n", kNs, "--type=merge", "-p",
               R"({"spec": {"source": {"snapshotID": "s2"}}})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(ServerSaid(r.err, expected)) << r.err;

  changed = filled;
  changed["spec"]["templateRef"]["name"] = "other";
  expected = ValidateActorUpdate(filled, changed).at(0).ToString();
  EXPECT_EQ(expected, "spec.templateRef: Invalid value: " + std::string(kMessageImmutableTemplateRef));
  r = Kubectl({"patch", "actor", "tpl-actor", "-n", kNs, "--type=merge", "-p",
               R"({"spec": {"templateRef": {"name": "other"}}})"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(ServerSaid(r.err, expected)) << r.err;
}

// A newer stasis adds fields; this version's read-modify-write must keep them. The newer
// schema is simulated by adding the fields to the installed CRD for the duration of the test.
TEST_F(CrdTest, UnknownFieldsSurviveReadModifyWriteByApi) {
  const std::string schema = "/spec/versions/0/schema/openAPIV3Schema/properties";
  const json add = json::array({{{"op", "add"},
                                 {"path", schema + "/spec/properties/futureSpecField"},
                                 {"value", {{"type", "string"}, {"maxLength", 64}}}},
                                {{"op", "add"},
                                 {"path", schema + "/status/properties/futureStatusField"},
                                 {"value", {{"type", "string"}, {"maxLength", 64}}}}});
  const json remove =
      json::array({{{"op", "remove"}, {"path", schema + "/spec/properties/futureSpecField"}},
                   {{"op", "remove"}, {"path", schema + "/status/properties/futureStatusField"}}});
  CommandResult r = Kubectl({"patch", "crd", "actors.stasis.dev", "--type=json", "-p", add.dump()});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  struct Restore {
    json remove;
    ~Restore() {
      Kubectl({"patch", "crd", "actors.stasis.dev", "--type=json", "-p", remove.dump()});
    }
  } restore{remove};

  // Written "by the newer version"; retried until the API server serves the new schema
  // (until then, the unknown field is pruned).
  json newer = MinimalActor("future");
  newer["spec"]["futureSpecField"] = "from-the-future";
  Create(newer);
  bool spec_kept = false;
  for (int i = 0; i < 100 && !spec_kept; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    r = Kubectl({"patch", "actor", "future", "-n", kNs, "--type=merge", "-p",
                 R"({"spec": {"futureSpecField": "from-the-future"}})"});
    spec_kept = GetActor("future")["spec"].value("futureSpecField", "") == "from-the-future";
  }
  ASSERT_TRUE(spec_kept) << "the API server never served the extended schema";
  PatchStatus("actor", "future",
              {{"status", {{"status", "STATUS_RUNNING"}, {"futureStatusField", "kept"}}}});

  // 1. Status through a merge patch of /status, built by api/ (resourceVersion-checked).
  Actor before = *ActorFromJson(GetActor("future"));
  Actor after = before;
  after.status.status = ActorState::kPausing;
  after.status.transition_start_time = Time{std::chrono::seconds{1'800'000'000}};
  SetCondition(after.status.conditions,
               {kConditionProgressing,
                ConditionStatus::kTrue,
                before.metadata.generation,
                {},
                "Pausing",
                "checkpoint started"},
               Time{std::chrono::seconds{1'800'000'000}});
  std::optional<json> patch = ActorStatusMergePatch(before, after);
  ASSERT_TRUE(patch.has_value());
  r = Kubectl({"patch", "actor", "future", "-n", kNs, "--subresource=status", "--type=merge", "-p",
               patch->dump()});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  json stored = GetActor("future");
  EXPECT_EQ(stored["status"]["status"], "STATUS_PAUSING");
  EXPECT_EQ(stored["status"]["futureStatusField"], "kept");
  EXPECT_EQ(stored["spec"]["futureSpecField"], "from-the-future");
  EXPECT_EQ(ActorFromJson(stored)->status, after.status);

  // The same patch again carries a stale resourceVersion: the server refuses it (409).
  r = Kubectl({"patch", "actor", "future", "-n", kNs, "--subresource=status", "--type=merge", "-p",
               patch->dump()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("the object has been modified"), std::string::npos) << r.err;

  // 2. A whole-object update (PUT) of the spec, from the raw object kept by api/.
  Actor current = *ActorFromJson(stored);
  const int64_t generation = current.metadata.generation;
  current.spec.desired_state = DesiredState::kPaused;
  r = Kubectl({"replace", "-f", "-"}, ActorToJson(current).dump());
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  stored = GetActor("future");
  EXPECT_EQ(stored["spec"]["desiredState"], "Paused");
  EXPECT_EQ(stored["spec"]["futureSpecField"], "from-the-future");
  EXPECT_EQ(stored["status"]["futureStatusField"], "kept");
  EXPECT_EQ(stored["metadata"]["generation"], generation + 1);

  // 3. A whole-status update (PUT …/status).
  current = *ActorFromJson(stored);
  current.status.status = ActorState::kPaused;
  current.status.transition_start_time.reset();
  r = Kubectl({"replace", "--subresource=status", "-f", "-"}, ActorToJson(current).dump());
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  stored = GetActor("future");
  EXPECT_EQ(stored["status"]["status"], "STATUS_PAUSED");
  EXPECT_FALSE(stored["status"].contains("transitionStartTime"));
  EXPECT_EQ(stored["status"]["futureStatusField"], "kept");
}

}  // namespace
}  // namespace stasis::api
