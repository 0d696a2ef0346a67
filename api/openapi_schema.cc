#include "api/openapi_schema.h"

#include <cstdlib>

namespace stasis::api::openapi {

Schema String(int64_t max_length, std::vector<Rule> rules) {
  Schema s;
  s.type = Type::kString;
  s.max_length = max_length;
  s.rules = std::move(rules);
  return s;
}

Schema Scalar(Type type) {
  Schema s;
  s.type = type;
  return s;
}

Schema Enum(std::vector<std::string> values) {
  Schema s;
  s.type = Type::kString;
  s.enum_values = std::move(values);
  return s;
}

Schema Integer(const char* format, std::optional<double> min, std::optional<double> max) {
  Schema s;
  s.type = Type::kInteger;
  s.format = format;
  s.minimum = min;
  s.maximum = max;
  return s;
}

Schema DateTime() {
  Schema s;
  s.type = Type::kString;
  s.format = "date-time";
  return s;
}

Schema Object(std::vector<std::pair<std::string, Schema>> properties,
              std::vector<std::string> required, std::vector<Rule> rules) {
  Schema s;
  s.type = Type::kObject;
  s.properties = std::move(properties);
  s.required = std::move(required);
  s.rules = std::move(rules);
  return s;
}

Schema Array(Schema items, int64_t max_items, ListType list_type, std::string map_key) {
  Schema s;
  s.type = Type::kArray;
  s.items = std::make_shared<const Schema>(std::move(items));
  s.max_items = max_items;
  s.list_type = list_type;
  s.map_key = std::move(map_key);
  return s;
}

const Schema& PropertyOf(const Schema& schema, const std::string& name) {
  for (const auto& [key, sub] : schema.properties) {
    if (key == name) return sub;
  }
  std::abort();  // a transcription lacks the property: a bug in crd_schemas.cc
}

}  // namespace stasis::api::openapi
