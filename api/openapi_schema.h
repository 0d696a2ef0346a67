// A small model of the parts of OpenAPI v3 and its Kubernetes extensions (list types,
// x-kubernetes-validations) that the stasis CRDs use, and builders that make transcribing a
// CRD's schema (crd_schemas.cc) read like the YAML it copies.
// Invariant: a Schema is a plain value — immutable once built, shared between threads by
// const reference — and every rule in it is a pure function of the value it checks.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stasis::api::openapi {

using nlohmann::json;

enum class Type { kObject, kArray, kString, kInteger, kNumber, kBoolean };
enum class ListType { kAtomic, kSet, kMap };

// One x-kubernetes-validations rule: `ok` is the CEL expression, in C++.
struct Rule {
  std::function<bool(const json& self)> ok;
  const char* message;
  std::string field_path;  // the rule's fieldPath without the leading '.', or ""
};

// A rule that uses oldSelf (runs on update only, when the old value exists).
struct TransitionRule {
  std::function<bool(const json& self, const json& old_self)> ok;
  const char* message;
  std::string field_path;  // as Rule's
};

struct Schema {
  Type type = Type::kObject;
  std::string format;
  std::vector<std::string> enum_values;
  std::optional<double> minimum;
  std::optional<double> maximum;
  std::optional<int64_t> min_length;
  std::optional<int64_t> max_length;
  std::optional<int64_t> min_items;
  std::optional<int64_t> max_items;
  std::string pattern;
  std::vector<std::string> required;
  std::vector<std::pair<std::string, Schema>> properties;
  std::shared_ptr<const Schema> items;
  ListType list_type = ListType::kAtomic;
  std::string map_key;
  std::vector<Rule> rules;
  std::vector<TransitionRule> transition_rules;
};

Schema String(int64_t max_length, std::vector<Rule> rules = {});
Schema Scalar(Type type);
Schema Enum(std::vector<std::string> values);
Schema Integer(const char* format, std::optional<double> min, std::optional<double> max);
Schema DateTime();
Schema Object(std::vector<std::pair<std::string, Schema>> properties,
              std::vector<std::string> required = {}, std::vector<Rule> rules = {});
Schema Array(Schema items, int64_t max_items, ListType list_type, std::string map_key = "");

// The schema of property `name`; aborts when there is none (a bug in a transcription).
const Schema& PropertyOf(const Schema& schema, const std::string& name);

}  // namespace stasis::api::openapi
