// One validation failure of one field, rendered exactly as the Kubernetes API server renders
// it (k8s.io/apimachinery field.Error.Error()), so that a message from stasis's own validator
// and one from `kubectl apply` can be compared byte for byte:
//   spec.bundle: Invalid value: "data": bundle must be an absolute path
//   spec.desiredState: Unsupported value: "Sleeping": supported values: "Running", ...
// Invariant: ToString() depends only on the four fields; bad_value is already rendered the
// way Go renders it (a quoted string, a bare number, JSON for objects) or empty when omitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stasis::api {

enum class FieldErrorType {
  kRequired,      // "Required value"
  kInvalid,       // "Invalid value" (also the server's type errors)
  kNotSupported,  // "Unsupported value" (an enum)
  kDuplicate,     // "Duplicate value" (x-kubernetes-list-type set/map)
  kTooLong,       // "Too long"
  kTooMany,       // "Too many"
  kForbidden,     // "Forbidden"
};

struct FieldError {
  FieldErrorType type = FieldErrorType::kInvalid;
  std::string field;      // "spec.snapshots.dataDirs[0]"; "<nil>" for object-wide notices
  std::string bad_value;  // rendered; empty = omitted
  std::string detail;

  std::string ToString() const;
  bool operator==(const FieldError&) const = default;
};

using FieldErrors = std::vector<FieldError>;

// The rendered forms of bad values, as Go's fmt renders them in field.Error.
std::string GoQuote(std::string_view s);  // %q: "a\"b"
std::string RenderInt(long long v);       // %v of an int64

// "field: Invalid value: …" for each error, joined with "; "; OK when `errors` is empty.
// The code is kInvalidArgument.
Status ToStatus(const FieldErrors& errors);

}  // namespace stasis::api
