// The sample Actors and ActorTemplates (manifests/samples/) pass the C++ validator and read into
// the C++ types,
// without an API server (integration_crd_test applies them to a real one).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>

#include "api/json_mapping.h"
#include "api/template_json.h"
#include "api/validation.h"

namespace stasis::api {
namespace {

using nlohmann::json;

const std::string kSampleDir = std::string(STASIS_SOURCE_DIR) + "/manifests/samples/";

// A YAML scalar as the API server's decoder reads it: a quoted one is a string; a plain one is
// null, a boolean, an integer or a number where it reads as one, else a string.
json ScalarToJson(const YAML::Node& node) {
  const std::string text = node.Scalar();
  if (node.Tag() == "!") return text;
  if (text == "null" || text == "~" || text.empty()) return nullptr;
  if (text == "true" || text == "false") return text == "true";
  json number = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return number.is_number() ? number : json(text);
}

json YamlToJson(const YAML::Node& node) {
  if (node.IsMap()) {
    json object = json::object();
    for (const auto& entry : node) object[entry.first.as<std::string>()] = YamlToJson(entry.second);
    return object;
  }
  if (node.IsSequence()) {
    json list = json::array();
    for (const auto& item : node) list.push_back(YamlToJson(item));
    return list;
  }
  return node.IsNull() ? json(nullptr) : ScalarToJson(node);
}

TEST(ApiSamplesTest, EverySampleActorIsValid) {
  int actors = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSampleDir)) {
    const json object = YamlToJson(YAML::LoadFile(entry.path().string()));
    if (object.value("kind", "") != kActorKind) continue;
    ++actors;
    SCOPED_TRACE(entry.path().filename().string());
    FieldErrors errors = ValidateActor(object);
    for (const FieldError& e : errors) ADD_FAILURE() << e.ToString();
    Result<Actor> actor = ActorFromJson(object);
    EXPECT_TRUE(actor.ok()) << actor.status().ToString();
  }
  EXPECT_GE(actors, 6);
}

TEST(ApiSamplesTest, EverySampleTemplateIsValid) {
  int templates = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kSampleDir)) {
    const json object = YamlToJson(YAML::LoadFile(entry.path().string()));
    if (object.value("kind", "") != kActorTemplateKind) continue;
    ++templates;
    SCOPED_TRACE(entry.path().filename().string());
    for (const FieldError& e : ValidateActorTemplate(object)) ADD_FAILURE() << e.ToString();
    Result<ActorTemplate> t = ActorTemplateFromJson(object);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
  }
  EXPECT_GE(templates, 1);
}

// The template sample's gate waits for the counter bundle's file; the actor sample names it.
TEST(ApiSamplesTest, TheTemplateSampleGatesTheCounterAndAnActorNamesIt) {
  const json tpl = YamlToJson(YAML::LoadFile(kSampleDir + "actortemplate.yaml"));
  const json from = YamlToJson(YAML::LoadFile(kSampleDir + "actor-from-template.yaml"));
  const json cpu = YamlToJson(YAML::LoadFile(kSampleDir + "actor-cpu.yaml"));
  ActorTemplate t = *ActorTemplateFromJson(tpl);
  EXPECT_EQ(t.spec.actor.bundle, cpu["spec"]["bundle"]);
  ASSERT_TRUE(t.spec.readiness_gate.has_value());
  EXPECT_EQ(t.spec.readiness_gate->command,
            (std::vector<std::string>{"/bin/sh", "-c", "test \"$(cat /tmp/counter)\" -ge 50"}));
  Actor a = *ActorFromJson(from);
  ASSERT_TRUE(a.spec.template_ref.has_value());
  EXPECT_EQ(a.spec.template_ref->name, t.metadata.name);
  EXPECT_TRUE(a.spec.bundle.empty());
  EXPECT_FALSE(a.spec.source.has_value());  // the controller sets it
}

TEST(ApiSamplesTest, TheCloneSampleClonesASampleActorWithAHook) {
  const json clone = YamlToJson(YAML::LoadFile(kSampleDir + "actor-clone.yaml"));
  const json source = YamlToJson(YAML::LoadFile(kSampleDir + "actor-cpu.yaml"));
  Actor a = *ActorFromJson(clone);
  ASSERT_TRUE(a.spec.source.has_value());
  EXPECT_EQ(a.spec.source->actor_name, source["metadata"]["name"]);
  EXPECT_EQ(a.spec.bundle, source["spec"]["bundle"]);  // a restore needs the same root filesystem
  ASSERT_TRUE(a.spec.hooks.post_restore.has_value());
  EXPECT_EQ(a.spec.hooks.post_restore->command,
            (std::vector<std::string>{"/bin/sh", "-c",
                                      "echo \"$STASIS_ACTOR_NAMESPACE/$STASIS_ACTOR_NAME $STASIS_ACTOR_UID\" > /tmp/identity"}));
}

}  // namespace
}  // namespace stasis::api
