// How a Node's cordon and stasis.dev/drain annotation read to both roles: every combination,
// and the malformed fields a hand-edited Node may carry.
#include "api/node_drain.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace stasis::api {
namespace {

using json = nlohmann::json;

json NodeWith(std::optional<bool> unschedulable, std::optional<std::string> annotation) {
  json n = {{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", {{"name", "n1"}}}};
  if (unschedulable) n["spec"]["unschedulable"] = *unschedulable;
  if (annotation) n["metadata"]["annotations"][kDrainAnnotation] = *annotation;
  return n;
}

TEST(NodeDrainTest, CordonDrainsUnlessTheAnnotationSaysFalse) {
  EXPECT_EQ(NodeDrainOf(NodeWith(std::nullopt, std::nullopt)), (NodeDrain{true, false}));
  EXPECT_EQ(NodeDrainOf(NodeWith(false, std::nullopt)), (NodeDrain{true, false}));
  EXPECT_EQ(NodeDrainOf(NodeWith(true, std::nullopt)), (NodeDrain{false, true}));
  EXPECT_EQ(NodeDrainOf(NodeWith(true, "false")), (NodeDrain{false, false})) << "cordoned, actors kept";
  EXPECT_EQ(NodeDrainOf(NodeWith(true, "true")), (NodeDrain{false, true}));
  EXPECT_EQ(NodeDrainOf(NodeWith(false, "true")), (NodeDrain{false, true})) << "the annotation alone drains";
  EXPECT_EQ(NodeDrainOf(NodeWith(std::nullopt, "true")), (NodeDrain{false, true}));
  EXPECT_EQ(NodeDrainOf(NodeWith(false, "false")), (NodeDrain{true, false}));
}

TEST(NodeDrainTest, MalformedFieldsCountAsUnset) {
  EXPECT_EQ(NodeDrainOf(json::object()), (NodeDrain{true, false}));
  EXPECT_EQ(NodeDrainOf(NodeWith(std::nullopt, "yes")), (NodeDrain{true, false})) << "only \"true\" drains";
  json n = NodeWith(std::nullopt, std::nullopt);
  n["spec"]["unschedulable"] = "true";  // a string, not a boolean
  EXPECT_EQ(NodeDrainOf(n), (NodeDrain{true, false}));
  n = NodeWith(std::nullopt, std::nullopt);
  n["metadata"]["annotations"] = json::array();
  EXPECT_EQ(NodeDrainOf(n), (NodeDrain{true, false}));
  n["metadata"]["annotations"] = {{kDrainAnnotation, true}};  // a boolean, not the string
  EXPECT_EQ(NodeDrainOf(n), (NodeDrain{true, false}));
}

}  // namespace
}  // namespace stasis::api
