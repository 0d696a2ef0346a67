// What the JSON mappings of the kinds (json_mapping.cc, actor_spec_json.cc, template_json.cc)
// share: the typed reader, metadata and conditions, the Actor spec, and the merge of typed
// fields into the raw object. Internal to api/: the public entry points are json_mapping.h and
// template_json.h.
#pragma once

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/actor.h"
#include "api/conditions.h"
#include "api/merge_patch.h"
#include "api/object_meta.h"
#include "base/status.h"
#include "base/time.h"

namespace stasis::api::json_internal {

using nlohmann::json;

// Reads typed values out of JSON objects. A missing or null key leaves the output at its
// default; a value of the wrong type records the first error, with the field's path.
class Reader {
 public:
  const Status& status() const { return status_; }

  // The child object at obj[key], or nullptr when absent/null (or not an object: an error).
  const json* Object(const json& obj, const char* key, const std::string& path) {
    const json* v = Find(obj, key);
    if (v == nullptr) return nullptr;
    if (!v->is_object()) return Fail(path, "an object");
    return v;
  }

  void String(const json& obj, const char* key, const std::string& path, std::string& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_string()) return (void)Fail(path, "a string");
    out = v->get<std::string>();
  }

  template <typename Int>
  void Integer(const json& obj, const char* key, const std::string& path, Int& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    long double d;
    if (v->is_number_integer() && v->is_number_unsigned()) {
      d = static_cast<long double>(v->get<uint64_t>());
    } else if (v->is_number_integer()) {
      d = static_cast<long double>(v->get<int64_t>());
    } else if (v->is_number_float() && std::trunc(v->get<double>()) == v->get<double>()) {
      d = v->get<double>();  // 600.0 is an integer in JSON's eyes
    } else {
      return (void)Fail(path, "an integer");
    }
    if (d < static_cast<long double>(std::numeric_limits<Int>::min()) ||
        d > static_cast<long double>(std::numeric_limits<Int>::max())) {
      return (void)Fail(path, "an integer in range");
    }
    out = static_cast<Int>(d);
  }

  void Number(const json& obj, const char* key, const std::string& path, double& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_number()) return (void)Fail(path, "a number");
    out = v->get<double>();
  }

  void Bool(const json& obj, const char* key, const std::string& path, bool& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return (void)Fail(path, "a boolean");
    out = v->get<bool>();
  }

  void OptionalTime(const json& obj, const char* key, const std::string& path,
                    std::optional<Time>& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_string()) return (void)Fail(path, "an RFC 3339 date-time");
    Result<Time> t = ParseTime(v->get_ref<const std::string&>());
    if (!t.ok()) return (void)Fail(path, "an RFC 3339 date-time");
    out = *t;
  }

  void RequiredTime(const json& obj, const char* key, const std::string& path, Time& out) {
    std::optional<Time> t;
    OptionalTime(obj, key, path, t);
    if (t) out = *t;
  }

  template <typename E>
  void Enum(const json& obj, const char* key, const std::string& path,
            std::optional<E> (*parse)(std::string_view), E& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_string()) return (void)Fail(path, "a string");
    std::optional<E> e = parse(v->get_ref<const std::string&>());
    if (!e) {
      if (status_.ok()) {
        status_ = Status(Code::kInvalidArgument,
                         path + ": unsupported value \"" + v->get<std::string>() + "\"");
      }
      return;
    }
    out = *e;
  }

  void StringList(const json& obj, const char* key, const std::string& path,
                  std::vector<std::string>& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_array()) return (void)Fail(path, "a list of strings");
    out.clear();
    for (const json& item : *v) {
      if (!item.is_string()) return (void)Fail(path, "a list of strings");
      out.push_back(item.get<std::string>());
    }
  }

  void StringMap(const json& obj, const char* key, const std::string& path,
                 std::map<std::string, std::string>& out) {
    const json* v = Find(obj, key);
    if (v == nullptr) return;
    if (!v->is_object()) return (void)Fail(path, "a map of strings");
    out.clear();
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (!it.value().is_string()) return (void)Fail(path, "a map of strings");
      out[it.key()] = it.value().get<std::string>();
    }
  }

  const json* Array(const json& obj, const char* key, const std::string& path) {
    const json* v = Find(obj, key);
    if (v == nullptr) return nullptr;
    if (!v->is_array()) return Fail(path, "a list");
    return v;
  }

  const json* Fail(const std::string& path, const char* what) {
    if (status_.ok()) status_ = Status(Code::kInvalidArgument, path + ": must be " + what);
    return nullptr;
  }

 private:
  static const json* Find(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Status status_;
};

// A list of objects at obj[key]: `read` is called with each item and its path.
template <typename T, typename F>
void ReadObjectList(Reader& r, const json& obj, const char* key, const std::string& path,
                    std::vector<T>& out, F read) {
  const json* list = r.Array(obj, key, path);
  if (list == nullptr) return;
  out.clear();
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string item_path = path + "[" + std::to_string(i) + "]";
    const json& item = (*list)[i];
    if (!item.is_object()) return (void)r.Fail(item_path, "an object");
    T t;
    read(item, item_path, t);
    out.push_back(std::move(t));
  }
}


void ReadMeta(Reader& r, const json& obj, ObjectMeta& m);
json MetaToJson(const ObjectMeta& m);
void ReadConditions(Reader& r, const json& status, std::vector<Condition>& out);
json ConditionsToJson(const std::vector<Condition>& conditions);

// The fields of an Actor spec from the object `spec`; `prefix` ("spec." for an Actor,
// "spec.actor." for a template) begins the path of every error.
void ReadActorSpec(Reader& r, const json& spec, const std::string& prefix, ActorSpec& s);
// spec.readinessGate of an Actor or a template; absent stays nullopt.
void ReadReadinessGate(Reader& r, const json& spec, const std::string& prefix,
                       std::optional<ReadinessGate>& out);
json ReadinessGateJson(const ReadinessGate& gate);

// A merge patch from `before` to `after` with before's resourceVersion; nullopt when equal.
std::optional<json> PatchOf(const json& before, const json& after,
                            const std::string& resource_version);
json MetaAndSpec(const json& typed);

// `raw` with the changes between what it says and `typed` applied; apiVersion/kind set.
template <typename T>
json MergeIntoRaw(const T& object, const json& typed, Result<T> (*from_json)(const json&),
                  json (*to_typed)(const T&)) {
  if (!object.raw.is_object() || object.raw.empty()) return typed;
  json out = object.raw;
  Result<T> base = from_json(object.raw);
  if (base.ok()) {
    out.merge_patch(CreateMergePatch(to_typed(*base), typed));
  } else {
    out.merge_patch(typed);  // raw unreadable: typed fields win, other keys stay
  }
  out["apiVersion"] = typed["apiVersion"];
  out["kind"] = typed["kind"];
  return out;
}

}  // namespace stasis::api::json_internal
