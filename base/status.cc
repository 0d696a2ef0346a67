#include "base/status.h"

namespace stasis {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kAborted: return "Aborted";
    case Code::kGone: return "Gone";
    case Code::kFailedPrecondition: return "FailedPrecondition";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kUnauthenticated: return "Unauthenticated";
    case Code::kDeadlineExceeded: return "DeadlineExceeded";
    case Code::kUnavailable: return "Unavailable";
    case Code::kResourceExhausted: return "ResourceExhausted";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace stasis
