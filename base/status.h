// Errors as values at module boundaries: Status (a code that says what the caller can do,
// and a message for people) and Result<T> (a value or a Status).
//
// The codes follow Abseil's canonical set, narrowed to the ones stasis acts on. They are
// mapped once, at the edge (HTTP status and Kubernetes reasons in the client, runsc stderr in
// the runsc driver), so callers decide on the code and never parse messages.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace stasis {

enum class Code {
  kOk,
  kInvalidArgument,     // the input is wrong; retrying will not help
  kNotFound,            // 404 / no such sandbox
  kAlreadyExists,       // 409 AlreadyExists
  kAborted,             // 409 Conflict: re-read and retry at a higher level
  kGone,                // 410: the resourceVersion is too old; relist
  kFailedPrecondition,  // do not retry until state changes (e.g. a stopped sandbox)
  kPermissionDenied,    // 403
  kUnauthenticated,     // 401
  kDeadlineExceeded,    // a deadline passed
  kUnavailable,         // transient: retry with backoff
  kResourceExhausted,   // a bound was reached (a response larger than the client accepts)
  kInternal,            // should never happen; a bug or a broken peer
};

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(Code code, std::string message, std::string reason = "")
      : code_(code), message_(std::move(message)), reason_(std::move(reason)) {}

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // A machine-readable reason finer than the code, for metrics labels and conditions: the
  // Kubernetes Status reason ("Conflict") from the API, or a runtime failure class
  // ("nvproxy_live_clients", "container_stopped") from a runtime driver. May be empty.
  const std::string& reason() const { return reason_; }
  // "NotFound: actors.stasis.dev \"a\" not found"
  std::string ToString() const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
  std::string reason_;
};

inline Status OkStatus() { return Status(); }

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like StatusOr
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an OK status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace stasis
