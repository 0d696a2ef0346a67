// ActorTemplates and actors from templates in api/: the JSON mapping (round trips, defaults,
// absent fields, the status merge patch, the one Actor spec writer), the validator against the
// shared table of bad templates and the new Actor rules (templateRef immutable, source set once
// by the controller, image or bundle with templateRef), and the messages' presence in the CRDs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "api/defaults.h"
#include "api/json_mapping.h"
#include "api/names.h"
#include "api/template_json.h"
#include "api/validation.h"
#include "tests/support/bad_actors.h"
#include "tests/support/field_errors.h"

namespace stasis::api {
namespace {

using nlohmann::json;
using stasis::testing::BadActorTemplates;
using stasis::testing::BadObject;
using stasis::testing::ExpectOnlyError;
using stasis::testing::RenderErrors;
using stasis::testing::BadWrite;
using stasis::testing::GoodActorTemplate;
using stasis::testing::GoodCloneActor;
using stasis::testing::GoodTemplatedActor;
using stasis::testing::kTemplateName;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

json Defaulted(json t) {
  ApplyActorTemplateDefaults(t);
  return t;
}

TEST(ApiTemplateTest, GoodTemplatesAndTemplatedActorsPass) {
  EXPECT_TRUE(ValidateActorTemplate(GoodActorTemplate("t")).empty())
      << RenderErrors(ValidateActorTemplate(GoodActorTemplate("t")));
  EXPECT_TRUE(ValidateActorTemplate(GoodActorTemplate("t", true)).empty())
      << RenderErrors(ValidateActorTemplate(GoodActorTemplate("t", true)));
  EXPECT_TRUE(ValidateActorTemplateStatus(GoodActorTemplate("t", true)).empty());
  EXPECT_TRUE(ValidateActor(GoodTemplatedActor("a")).empty())
      << RenderErrors(ValidateActor(GoodTemplatedActor("a")));
}

TEST(ApiTemplateTest, EveryBadTemplateIsRejectedWithItsMessage) {
  ASSERT_GE(BadActorTemplates().size(), 10u);
  for (const BadObject& bad : BadActorTemplates()) {
    FieldErrors errors = bad.write == BadWrite::kCreate ? ValidateActorTemplate(bad.object)
                                                        : ValidateActorTemplateStatus(bad.object);
    ExpectOnlyError(errors, bad);
  }
}

TEST(ApiTemplateTest, RoundTripKeepsEveryField) {
  const json good = GoodActorTemplate("t", true);
  Result<ActorTemplate> t = ActorTemplateFromJson(good);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->spec.actor.bundle, "/var/lib/stasis/bundles/counter");
  EXPECT_EQ(t->spec.actor.gpu.count, 1);
  EXPECT_TRUE(t->spec.actor.gpu.fast_snapshot);
  ASSERT_TRUE(t->spec.actor.hooks.post_restore.has_value());
  ASSERT_TRUE(t->spec.readiness_gate.has_value());
  EXPECT_EQ(t->spec.readiness_gate->timeout_seconds, 600);
  EXPECT_EQ(t->spec.readiness_gate->period_seconds, 2);
  EXPECT_EQ(t->spec.warm, 3);
  EXPECT_EQ(t->status.observed_generation, 2);
  ASSERT_TRUE(t->status.golden.has_value());
  EXPECT_EQ(t->status.golden->actor_name, "t-golden-2");
  EXPECT_EQ(t->status.golden->generation, 2);
  EXPECT_TRUE(t->status.golden->cuda_checkpointed);
  EXPECT_TRUE(t->status.golden->taken_at.has_value());
  EXPECT_EQ(t->status.warm_ready, 2);
  ASSERT_EQ(t->status.conditions.size(), 1u);
  EXPECT_EQ(t->status.conditions[0].type, kConditionGoldenReady);

  EXPECT_EQ(*ActorTemplateFromJson(ActorTemplateToJson(*t)), *t);
  // The typed JSON is what the server stores: the input with its defaults applied.
  EXPECT_EQ(ActorTemplateTypedJson(*t)["spec"], Defaulted(good)["spec"]);
  EXPECT_EQ(ActorTemplateTypedJson(*t)["status"], good["status"]);
  EXPECT_TRUE(ValidateActorTemplate(*t).empty()) << RenderErrors(ValidateActorTemplate(*t));
}

TEST(ApiTemplateTest, AMinimalTemplateTakesTheDefaults) {
  const json minimal = {{"apiVersion", kApiVersion},
                        {"kind", kActorTemplateKind},
                        {"metadata", {{"name", "m"}}},
                        {"spec", {{"actor", {{"bundle", "/b"}}}}}};
  ActorTemplate t = *ActorTemplateFromJson(minimal);
  EXPECT_FALSE(t.spec.readiness_gate.has_value());
  EXPECT_EQ(t.spec.warm, 0);
  EXPECT_FALSE(t.status.golden.has_value());
  const json spec = ActorTemplateTypedJson(t)["spec"];
  EXPECT_EQ(spec, Defaulted(minimal)["spec"]) << spec.dump(2);
  // Each actor's own fields are not written into a template.
  for (const char* key : {"nodeName", "desiredState", "source", "templateRef"}) {
    EXPECT_FALSE(spec["actor"].contains(key)) << key;
  }
  EXPECT_TRUE(ValidateActorTemplate(t).empty()) << RenderErrors(ValidateActorTemplate(t));
  // A gate written without its bounds gets 300 s and 1 s.
  json gated = minimal;
  gated["spec"]["readinessGate"] = {{"command", {"true"}}};
  EXPECT_EQ(Defaulted(gated)["spec"]["readinessGate"],
            (json{{"command", {"true"}},
                  {"timeoutSeconds", kDefaultReadinessTimeoutSeconds},
                  {"periodSeconds", 1}}));
  EXPECT_EQ(ActorTemplateTypedJson(*ActorTemplateFromJson(gated))["spec"],
            Defaulted(gated)["spec"]);
}

TEST(ApiTemplateTest, UnknownFieldsSurviveAndTheStatusPatchNamesOnlyChanges) {
  json stored = GoodActorTemplate("t", true);
  stored["metadata"]["resourceVersion"] = "42";
  stored["spec"]["futureField"] = "kept";
  stored["status"]["futureStatus"] = 1;
  ActorTemplate before = *ActorTemplateFromJson(stored);
  ActorTemplate after = before;
  EXPECT_FALSE(ActorTemplateStatusMergePatch(before, after).has_value());
  after.status.warm_ready = 3;
  after.status.golden->snapshot_id = "20261203T000000Z-000001";
  std::optional<json> patch = ActorTemplateStatusMergePatch(before, after);
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ(*patch, (json{{"metadata", {{"resourceVersion", "42"}}},
                          {"status",
                           {{"warmReady", 3},
                            {"golden", {{"snapshotID", "20261203T000000Z-000001"}}}}}}))
      << patch->dump();
  const json written = ActorTemplateToJson(after);
  EXPECT_EQ(written["spec"]["futureField"], "kept");
  EXPECT_EQ(written["status"]["futureStatus"], 1);
  EXPECT_EQ(written["status"]["warmReady"], 3);
}

// ActorSpecJson is the Actor's own spec writer: what the controller copies into an actor.
TEST(ApiTemplateTest, ActorSpecJsonIsTheActorsSpec) {
  for (const json& object : {GoodCloneActor("c"), GoodTemplatedActor("a")}) {
    Actor a = *ActorFromJson(object);
    EXPECT_EQ(ActorSpecJson(a.spec), ActorTypedJson(a)["spec"]);
  }
  ActorTemplate t = *ActorTemplateFromJson(GoodActorTemplate("t"));
  Actor copy;
  copy.metadata.name = "from-t";
  copy.spec = t.spec.actor;
  copy.spec.node_name = "node-b";
  copy.spec.template_ref = LocalObjectReference{"t"};
  copy.spec.source = ActorSourceRef{"t-golden-2", "20261202T150102Z-3f9a1c"};
  EXPECT_TRUE(ValidateActor(copy).empty()) << RenderErrors(ValidateActor(copy));
  EXPECT_EQ(*ActorFromJson(ActorTypedJson(copy)), copy);
  EXPECT_TRUE(copy.spec.gpu.fast_snapshot);  // the template's opt-in reaches its actors
  EXPECT_EQ(ActorTypedJson(copy)["spec"]["gpu"]["fastSnapshot"], true);
}

TEST(ApiTemplateTest, TemplatedActorFieldsRoundTrip) {
  Actor a = *ActorFromJson(GoodTemplatedActor("a"));
  ASSERT_TRUE(a.spec.template_ref.has_value());
  EXPECT_EQ(a.spec.template_ref->name, kTemplateName);
  ASSERT_TRUE(a.spec.readiness_gate.has_value());
  EXPECT_EQ(a.spec.readiness_gate->command, (std::vector<std::string>{"test", "-e", "/tmp/ready"}));
  EXPECT_EQ(a.spec.readiness_gate->timeout_seconds, 120);
  EXPECT_EQ(a.spec.readiness_gate->period_seconds, 2);
  EXPECT_EQ(*ActorFromJson(ActorToJson(a)), a);
  // Absent stays absent.
  Actor plain = *ActorFromJson(GoodCloneActor("c"));
  EXPECT_FALSE(plain.spec.template_ref.has_value());
  EXPECT_FALSE(plain.spec.readiness_gate.has_value());
  const json spec = ActorTypedJson(plain)["spec"];
  EXPECT_FALSE(spec.contains("templateRef"));
  EXPECT_FALSE(spec.contains("readinessGate"));
}

// With templateRef, image and bundle may both be left out (the controller fills them in), one
// may be set, not both; without, exactly one.
TEST(ApiTemplateTest, ImageOrBundleWithATemplate) {
  json a = GoodTemplatedActor("a");
  EXPECT_TRUE(ValidateActor(a).empty());
  a["spec"]["bundle"] = "/b";
  EXPECT_TRUE(ValidateActor(a).empty()) << RenderErrors(ValidateActor(a));
  a["spec"]["image"] = "busybox";
  EXPECT_EQ(RenderErrors(ValidateActor(a)),
            "\n  spec: Invalid value: " + std::string(kMessageImageOrBundleWithTemplate));
  a["spec"].erase("bundle");
  EXPECT_TRUE(ValidateActor(a).empty()) << RenderErrors(ValidateActor(a));
  a["spec"].erase("templateRef");
  a["spec"].erase("image");
  EXPECT_EQ(RenderErrors(ValidateActor(a)), "\n  spec: Invalid value: " + std::string(kMessageImageOrBundle));
}

TEST(ApiTemplateTest, TemplateRefIsImmutable) {
  const std::string refused =
      "spec.templateRef: Invalid value: " + std::string(kMessageImmutableTemplateRef);
  const json a = GoodTemplatedActor("a");
  json changed = a;
  changed["spec"]["templateRef"]["name"] = "other";
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(a, changed)), "\n  " + refused);
  json removed = a;
  removed["spec"].erase("templateRef");
  removed["spec"]["bundle"] = "/b";
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(a, removed)), "\n  " + refused);
  json plain = GoodCloneActor("c");
  plain["spec"].erase("source");
  json added = plain;
  added["spec"]["templateRef"] = {{"name", "t"}};
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(plain, added)), "\n  " + refused);
}

// The controller sets source once on an actor from a template; after that it is immutable.
TEST(ApiTemplateTest, SourceIsSetOnceOnATemplatedActor) {
  const std::string refused =
      "spec.source: Invalid value: " + std::string(kMessageImmutableSource);
  const json created = GoodTemplatedActor("a");
  json filled = created;
  filled["spec"]["bundle"] = "/var/lib/stasis/bundles/counter";
  filled["spec"]["source"] = {{"actorName", "t-golden-1"}, {"snapshotID", "s1"}};
  EXPECT_TRUE(ValidateActorUpdate(created, filled).empty())
      << RenderErrors(ValidateActorUpdate(created, filled));
  json changed = filled;
  changed["spec"]["source"]["snapshotID"] = "s2";
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(filled, changed)), "\n  " + refused);
  json removed = filled;
  removed["spec"].erase("source");
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(filled, removed)), "\n  " + refused);
}

TEST(ApiTemplateTest, EveryMessageIsInTheCrds) {
  const std::string dir = std::string(STASIS_SOURCE_DIR) + "/manifests/crd/";
  const std::string actors = ReadFile(dir + "actors.stasis.dev.yaml");
  const std::string templates = ReadFile(dir + "actortemplates.stasis.dev.yaml");
  ASSERT_FALSE(templates.empty());
  for (const char* m : {kMessageImageOrBundleWithTemplate, kMessageTemplateRefName,
                        kMessageImmutableTemplateRef, kMessageHooksNeedGvisor,
                        kMessageReadinessGateNeedsGvisor, kMessageImmutableSource}) {
    EXPECT_NE(actors.find("message: \"" + std::string(m) + "\""), std::string::npos) << m;
  }
  for (const char* m : {kMessageTemplateNodeName, kMessageTemplateDesiredState,
                        kMessageTemplateSource, kMessageTemplateTemplateRef,
                        kMessageTemplateRuntime, kMessageImageOrBundle,
                        kMessageHooksNeedGvisor, kMessageReadinessGateNeedsGvisor,
                        kMessageFastSnapshotNeedsGpu}) {
    EXPECT_NE(templates.find("message: \"" + std::string(m) + "\""), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace stasis::api
