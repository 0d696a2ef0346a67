// Checks a JSON value against an openapi::Schema the way the API server's kube-openapi and
// CEL validators do, with their messages: first the schema (types, enums, bounds, lengths,
// patterns, required fields), then list types (duplicates), then the CEL rules — skipped,
// with kCelSkippedNotice instead, when a blocking error was found.
// Invariants: errors come in schema order (deterministic); values render as Go renders them
// in the server's field errors, so FieldError::ToString() prints what kubectl prints.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "api/field_error.h"
#include "api/openapi_schema.h"

namespace stasis::api {

// Validates `object` against `schema`; `old_object` (may be null) enables the transition
// rules. `root` is the object's path: "" for a whole object, "status" for a write to /status,
// where the server names fields relative to the status in its detail texts.
FieldErrors ValidateAgainstSchema(const openapi::Schema& schema, const nlohmann::json& object,
                                  const nlohmann::json* old_object, const std::string& root = "");

}  // namespace stasis::api
