#include "api/json_reader.h"

namespace stasis::api::json_internal {

void ReadMeta(Reader& r, const json& obj, ObjectMeta& m) {
  const json* meta = r.Object(obj, "metadata", "metadata");
  if (meta == nullptr) return;
  r.String(*meta, "name", "metadata.name", m.name);
  r.String(*meta, "namespace", "metadata.namespace", m.namespace_);
  r.String(*meta, "uid", "metadata.uid", m.uid);
  r.String(*meta, "resourceVersion", "metadata.resourceVersion", m.resource_version);
  r.Integer(*meta, "generation", "metadata.generation", m.generation);
  r.StringMap(*meta, "labels", "metadata.labels", m.labels);
  r.StringMap(*meta, "annotations", "metadata.annotations", m.annotations);
  r.StringList(*meta, "finalizers", "metadata.finalizers", m.finalizers);
  r.OptionalTime(*meta, "creationTimestamp", "metadata.creationTimestamp", m.creation_timestamp);
  r.OptionalTime(*meta, "deletionTimestamp", "metadata.deletionTimestamp", m.deletion_timestamp);
}

json MetaToJson(const ObjectMeta& m) {
  json j = json::object();
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.namespace_.empty()) j["namespace"] = m.namespace_;
  if (!m.uid.empty()) j["uid"] = m.uid;
  if (!m.resource_version.empty()) j["resourceVersion"] = m.resource_version;
  if (m.generation != 0) j["generation"] = m.generation;
  if (!m.labels.empty()) j["labels"] = m.labels;
  if (!m.annotations.empty()) j["annotations"] = m.annotations;
  if (!m.finalizers.empty()) j["finalizers"] = m.finalizers;
  if (m.creation_timestamp) j["creationTimestamp"] = FormatTime(*m.creation_timestamp);
  if (m.deletion_timestamp) j["deletionTimestamp"] = FormatTime(*m.deletion_timestamp);
  return j;
}

void ReadConditions(Reader& r, const json& status, std::vector<Condition>& out) {
  const json* list = r.Array(status, "conditions", "status.conditions");
  if (list == nullptr) return;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = "status.conditions[" + std::to_string(i) + "]";
    const json& item = (*list)[i];
    if (!item.is_object()) {
      r.Fail(path, "an object");
      return;
    }
    Condition c;
    r.String(item, "type", path + ".type", c.type);
    r.Enum(item, "status", path + ".status", &ParseConditionStatus, c.status);
    r.Integer(item, "observedGeneration", path + ".observedGeneration", c.observed_generation);
    r.RequiredTime(item, "lastTransitionTime", path + ".lastTransitionTime",
                   c.last_transition_time);
    r.String(item, "reason", path + ".reason", c.reason);
    r.String(item, "message", path + ".message", c.message);
    out.push_back(std::move(c));
  }
}

json ConditionsToJson(const std::vector<Condition>& conditions) {
  json list = json::array();
  for (const Condition& c : conditions) {
    json j = {{"type", c.type},
              {"status", ToString(c.status)},
              {"lastTransitionTime", FormatTime(c.last_transition_time)},
              {"reason", c.reason},
              {"message", c.message}};
    if (c.observed_generation != 0) j["observedGeneration"] = c.observed_generation;
    list.push_back(std::move(j));
  }
  return list;
}

std::optional<json> PatchOf(const json& before, const json& after,
                            const std::string& resource_version) {
  json diff = CreateMergePatch(before, after);
  if (diff.empty()) return std::nullopt;
  if (!resource_version.empty()) diff["metadata"]["resourceVersion"] = resource_version;
  return diff;
}

json MetaAndSpec(const json& typed) {
  return {{"metadata", typed["metadata"]}, {"spec", typed["spec"]}};
}

}  // namespace stasis::api::json_internal
