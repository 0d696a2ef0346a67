#include "api/schema_validator.h"

#include <cmath>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "api/validation.h"
#include "base/time.h"

namespace stasis::api {
namespace {

using nlohmann::json;
using openapi::ListType;
using openapi::Rule;
using openapi::Schema;
using openapi::TransitionRule;
using openapi::Type;

// ---- Rendering, as Go renders values in field errors ------------------------------------

std::string RenderNumber(const json& v) {
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  const double d = v.get<double>();
  if (std::trunc(d) == d && std::fabs(d) < 1e21) return std::to_string(static_cast<int64_t>(d));
  return json(d).dump();  // shortest round-trip form, like Go's %v
}

std::string RenderValue(const json& v) {
  if (v.is_string()) return GoQuote(v.get_ref<const std::string&>());
  if (v.is_number()) return RenderNumber(v);
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  return v.dump();
}

std::string RenderBound(double d) {
  if (std::trunc(d) == d) return std::to_string(static_cast<int64_t>(d));
  return json(d).dump();
}

const char* TypeName(Type t) {
  switch (t) {
    case Type::kObject:
      return "object";
    case Type::kArray:
      return "array";
    case Type::kString:
      return "string";
    case Type::kInteger:
      return "integer";
    case Type::kNumber:
      return "number";
    case Type::kBoolean:
      return "boolean";
  }
  return "";
}

// The JSON type and format kube-openapi infers from a decoded value.
std::pair<std::string, std::string> InferredType(const json& v) {
  if (v.is_boolean()) return {"boolean", ""};
  if (v.is_string()) return {"string", ""};
  if (v.is_number_integer()) return {"integer", "int64"};
  if (v.is_number_float()) return {"number", "float64"};
  if (v.is_array()) return {"array", ""};
  if (v.is_null()) return {"null", ""};
  return {"object", ""};
}

size_t RuneCount(std::string_view s) {
  size_t n = 0;
  for (char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  }
  return n;
}

bool IsBlocking(FieldErrorType t) {
  return t == FieldErrorType::kNotSupported || t == FieldErrorType::kRequired ||
         t == FieldErrorType::kTooLong || t == FieldErrorType::kTooMany;
}

// ---- The walk ---------------------------------------------------------------------------

class Validator {
 public:
  // Validates `object` against `schema`; `root` is the object's path ("" for a whole object,
  // "status" for a write to /status, where the server names fields relative to the status
  // in its detail texts).
  FieldErrors Run(const Schema& schema, const json& object, const json* old_object,
                  const std::string& root = "") {
    root_prefix_ = root.empty() ? "" : root + ".";
    CheckSchema(schema, object, root);
    CheckListTypes(schema, object, root);
    if (blocked_) {
      errors_.push_back({FieldErrorType::kInvalid, "<nil>", "null", kCelSkippedNotice});
    } else {
      CheckRules(schema, object, old_object, root);
    }
    return std::move(errors_);
  }

 private:
  // The field's name as kube-openapi writes it inside a detail ("x in body should …").
  std::string Name(const std::string& path) const {
    if (!root_prefix_.empty() && path.rfind(root_prefix_, 0) == 0) {
      return path.substr(root_prefix_.size());
    }
    return path;
  }

  static std::string Child(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  static std::string Index(const std::string& path, size_t i) {
    return path + "[" + std::to_string(i) + "]";
  }

  void Add(FieldErrorType type, std::string field, std::string value, std::string detail) {
    if (IsBlocking(type)) blocked_ = true;
    errors_.push_back({type, std::move(field), std::move(value), std::move(detail)});
  }

  // kube-openapi's "must be of type" error (a blocking FieldValueTypeInvalid on the server).
  void TypeError(const std::string& path, const std::string& expected, const std::string& got) {
    blocked_ = true;
    errors_.push_back({FieldErrorType::kInvalid, path, GoQuote(got),
                       Name(path) + " in body must be of type " + expected + ": " + GoQuote(got)});
  }

  // kube-openapi's typeValidator, with its format quirks; false when the type is wrong.
  bool CheckType(const Schema& s, const json& v, const std::string& path) {
    const auto [got, got_format] = InferredType(v);
    const std::string want = TypeName(s.type);
    const bool float_int = v.is_number_float() && s.type == Type::kInteger &&
                           std::trunc(v.get<double>()) == v.get<double>() &&
                           std::fabs(v.get<double>()) < 9007199254740992.0;
    const bool int_float = v.is_number_integer() && s.type == Type::kNumber;
    if (!v.is_string() && !v.is_array() && !s.format.empty() &&
        !(want == got || got_format == s.format || float_int || int_float)) {
      TypeError(path, s.format, got_format);
      return false;
    }
    if (s.type != Type::kInteger && s.type != Type::kNumber && !s.format.empty() &&
        (v.is_string() || v.is_array())) {
      return true;
    }
    if (!(want == got || float_int || int_float)) {
      TypeError(path, want, got);
      return false;
    }
    return true;
  }

  void CheckSchema(const Schema& s, const json& v, const std::string& path) {
    if (!CheckType(s, v, path)) return;
    if (!s.enum_values.empty()) {
      bool found = false;
      for (const std::string& e : s.enum_values) found = found || v == e;
      if (!found) {
        std::string detail = "supported values: ";
        for (size_t i = 0; i < s.enum_values.size(); ++i) {
          detail += (i ? ", " : "") + GoQuote(s.enum_values[i]);
        }
        Add(FieldErrorType::kNotSupported, path, RenderValue(v), detail);
      }
    }
    switch (s.type) {
      case Type::kString:
        CheckString(s, v.get_ref<const std::string&>(), path);
        break;
      case Type::kInteger:
      case Type::kNumber:
        CheckNumber(s, v, path);
        break;
      case Type::kArray:
        CheckArray(s, v, path);
        break;
      case Type::kObject:
        CheckObject(s, v, path);
        break;
      case Type::kBoolean:
        break;
    }
  }

  // Compiling a std::regex costs more than the rest of a reconcile together (callgrind:
  // hack/bench/reconcile-cost.sh); the schemas' patterns are a small fixed set, so each is
  // compiled once. A const std::regex may be searched from several threads at once.
  static const std::regex& Compiled(const std::string& pattern) {
    static std::mutex mu;
    static std::map<std::string, std::regex> compiled;  // node-based: references stay valid
    std::lock_guard lock(mu);
    auto it = compiled.find(pattern);
    if (it == compiled.end()) it = compiled.emplace(pattern, std::regex(pattern)).first;
    return it->second;
  }

  void CheckString(const Schema& s, const std::string& v, const std::string& path) {
    const auto runes = static_cast<int64_t>(RuneCount(v));
    if (s.max_length && runes > *s.max_length) {
      Add(FieldErrorType::kTooLong, path, "",
          "may not be more than " + std::to_string(*s.max_length) +
              (*s.max_length == 1 ? " byte" : " bytes"));
    }
    if (s.min_length && runes < *s.min_length) {
      Add(FieldErrorType::kInvalid, path, GoQuote(v),
          Name(path) + " in body should be at least " + std::to_string(*s.min_length) +
              " chars long");
    }
    if (!s.pattern.empty() && !std::regex_search(v, Compiled(s.pattern))) {
      Add(FieldErrorType::kInvalid, path, GoQuote(v),
          Name(path) + " in body should match '" + s.pattern + "'");
    }
    if (s.format == "date-time" && !ParseTime(v).ok()) {
      TypeError(path, "date-time", v);
    }
  }

  void CheckNumber(const Schema& s, const json& v, const std::string& path) {
    const double d = v.get<double>();
    if (s.maximum && d > *s.maximum) {
      Add(FieldErrorType::kInvalid, path, RenderNumber(v),
          Name(path) + " in body should be less than or equal to " + RenderBound(*s.maximum));
    }
    if (s.minimum && d < *s.minimum) {
      Add(FieldErrorType::kInvalid, path, RenderNumber(v),
          Name(path) + " in body should be greater than or equal to " + RenderBound(*s.minimum));
    }
  }

  void CheckArray(const Schema& s, const json& v, const std::string& path) {
    if (s.max_items && static_cast<int64_t>(v.size()) > *s.max_items) {
      Add(FieldErrorType::kTooMany, path, std::to_string(v.size()),
          "must have at most " + std::to_string(*s.max_items) +
              (*s.max_items == 1 ? " item" : " items"));
    }
    if (s.min_items && static_cast<int64_t>(v.size()) < *s.min_items) {
      // The server quotes the list's length as the value, as kube-openapi's TooFewItems does.
      Add(FieldErrorType::kInvalid, path, std::to_string(v.size()),
          Name(path) + " in body should have at least " + std::to_string(*s.min_items) +
              " items");
    }
    for (size_t i = 0; i < v.size(); ++i) CheckSchema(*s.items, v[i], Index(path, i));
  }

  void CheckObject(const Schema& s, const json& v, const std::string& path) {
    for (const std::string& key : s.required) {
      if (!v.contains(key)) Add(FieldErrorType::kRequired, Child(path, key), "", "");
    }
    for (const auto& [key, sub] : s.properties) {
      auto it = v.find(key);
      if (it != v.end()) CheckSchema(sub, *it, Child(path, key));
    }
  }

  // x-kubernetes-list-type set (scalars) and map (objects keyed by map_key): the second
  // occurrence of each value is a duplicate.
  void CheckListTypes(const Schema& s, const json& v, const std::string& path) {
    if (s.type == Type::kObject && v.is_object()) {
      for (const auto& [key, sub] : s.properties) {
        auto it = v.find(key);
        if (it != v.end()) CheckListTypes(sub, *it, Child(path, key));
      }
      return;
    }
    if (s.type != Type::kArray || !v.is_array()) return;
    if (s.list_type != ListType::kAtomic) CheckDuplicates(s, v, path);
    for (size_t i = 0; i < v.size(); ++i) CheckListTypes(*s.items, v[i], Index(path, i));
  }

  // The second occurrence of each item of a set, or of each key of a map list.
  void CheckDuplicates(const Schema& s, const json& v, const std::string& path) {
    std::vector<json> seen;
    std::set<size_t> reported;
    for (size_t i = 0; i < v.size(); ++i) {
      json key = v[i];
      if (s.list_type == ListType::kMap) {
        key = v[i].is_object() && v[i].contains(s.map_key) ? json{{s.map_key, v[i][s.map_key]}}
                                                           : json::object();
      }
      size_t first = seen.size();
      for (size_t k = 0; k < seen.size(); ++k) {
        if (seen[k] == key) first = k;
      }
      if (first == seen.size()) {
        seen.push_back(key);
      } else if (reported.insert(first).second) {
        Add(FieldErrorType::kDuplicate, Index(path, i), RenderValue(key), "");
      }
    }
  }

  void CheckRules(const Schema& s, const json& v, const json* old, const std::string& path) {
    // The rules of a node see a value of the right type (a type error blocks the CEL pass).
    for (const Rule& rule : s.rules) {
      if (rule.ok(v)) continue;
      const bool compound = s.type == Type::kObject || s.type == Type::kArray;
      errors_.push_back({FieldErrorType::kInvalid,
                         rule.field_path.empty() ? path : Child(path, rule.field_path),
                         compound ? "" : RenderValue(v), rule.message});
    }
    if (old != nullptr) {
      for (const TransitionRule& rule : s.transition_rules) {
        if (rule.ok(v, *old)) continue;
        const bool compound = s.type == Type::kObject || s.type == Type::kArray;
        errors_.push_back({FieldErrorType::kInvalid,
                           rule.field_path.empty() ? path : Child(path, rule.field_path),
                           compound ? "" : RenderValue(v), rule.message});
      }
    }
    if (s.type == Type::kObject) {
      for (const auto& [key, sub] : s.properties) {
        auto it = v.find(key);
        if (it == v.end()) continue;
        const json* old_child = nullptr;
        if (old != nullptr && old->is_object()) {
          auto o = old->find(key);
          if (o != old->end()) old_child = &*o;
        }
        CheckRules(sub, *it, old_child, Child(path, key));
      }
    } else if (s.type == Type::kArray) {
      // Items of sets and atomic lists have no old value to compare with (CEL correlates
      // only map-list items by key; stasis has no transition rule inside a list).
      for (size_t i = 0; i < v.size(); ++i) CheckRules(*s.items, v[i], nullptr, Index(path, i));
    }
  }

  FieldErrors errors_;
  bool blocked_ = false;
  std::string root_prefix_;
};

}  // namespace

FieldErrors ValidateAgainstSchema(const Schema& schema, const json& object, const json* old_object,
                                  const std::string& root) {
  return Validator().Run(schema, object, old_object, root);
}

}  // namespace stasis::api
