#include "api/merge_patch.h"

namespace stasis::api {

nlohmann::json CreateMergePatch(const nlohmann::json& from, const nlohmann::json& to) {
  // A null inside `to` cannot be expressed by a merge patch (null means delete); stasis's
  // typed objects never contain one.
  if (!from.is_object() || !to.is_object()) return to;
  nlohmann::json patch = nlohmann::json::object();
  for (auto it = from.begin(); it != from.end(); ++it) {
    if (!to.contains(it.key())) patch[it.key()] = nullptr;
  }
  for (auto it = to.begin(); it != to.end(); ++it) {
    auto old = from.find(it.key());
    if (old == from.end()) {
      patch[it.key()] = it.value();
    } else if (*old != it.value()) {
      if (old->is_object() && it.value().is_object()) {
        patch[it.key()] = CreateMergePatch(*old, it.value());
      } else {
        patch[it.key()] = it.value();
      }
    }
  }
  return patch;
}

}  // namespace stasis::api
