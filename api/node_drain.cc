#include "api/node_drain.h"

#include <string>

namespace stasis::api {

NodeDrain NodeDrainOf(const nlohmann::json& node) {
  using json_pointer = nlohmann::json::json_pointer;
  const json_pointer unschedulable("/spec/unschedulable");
  const bool cordoned = node.contains(unschedulable) && node.at(unschedulable).is_boolean() &&
                        node.at(unschedulable).get<bool>();
  std::string annotation;
  const json_pointer annotations("/metadata/annotations");
  if (node.contains(annotations) && node.at(annotations).is_object()) {
    auto it = node.at(annotations).find(kDrainAnnotation);
    if (it != node.at(annotations).end() && it->is_string()) annotation = it->get<std::string>();
  }
  NodeDrain d;
  d.drain = annotation == "true" || (cordoned && annotation != "false");
  d.takes_new_actors = !cordoned && !d.drain;
  return d;
}

}  // namespace stasis::api
