// Every field of every CRD has a description, so `kubectl explain` documents all of them.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace {

const std::string kCrdDir = std::string(STASIS_SOURCE_DIR) + "/manifests/crd/";

// The paths of properties under `node` (a schema) that have no description.
void Undescribed(const YAML::Node& node, const std::string& path, std::vector<std::string>& out) {
  if (!node.IsMap()) return;
  if (const YAML::Node props = node["properties"]) {
    for (const auto& p : props) {
      const std::string child = path + "." + p.first.as<std::string>();
      // The API server forbids anything but name and generateName under the root's metadata
      // (it is ObjectMeta, explained by Kubernetes itself).
      if (child == ".metadata") continue;
      const YAML::Node d = p.second["description"];
      if (!d || d.as<std::string>().empty()) out.push_back(child);
      Undescribed(p.second, child, out);
    }
  }
  if (const YAML::Node items = node["items"]) Undescribed(items, path + "[]", out);
}

TEST(CrdDescriptionsTest, EveryFieldOfEveryVersionIsDescribed) {
  for (const char* crd :
       {"actors.stasis.dev.yaml", "actortemplates.stasis.dev.yaml", "workers.stasis.dev.yaml"}) {
    const YAML::Node root = YAML::LoadFile(kCrdDir + crd);
    int versions = 0;
    for (const auto& v : root["spec"]["versions"]) {
      ++versions;
      const YAML::Node schema = v["schema"]["openAPIV3Schema"];
      ASSERT_TRUE(schema) << crd;
      EXPECT_FALSE(schema["description"].as<std::string>("").empty()) << crd;
      std::vector<std::string> missing;
      Undescribed(schema, "", missing);
      for (const auto& m : missing) ADD_FAILURE() << crd << " " << v["name"].as<std::string>() << ": " << m;
    }
    EXPECT_GE(versions, 1) << crd;
  }
}

}  // namespace
