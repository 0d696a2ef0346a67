// Kubernetes timestamps (metav1.Time) as C++ values: RFC 3339 in UTC with whole seconds,
// "2026-12-02T15:04:05Z". Invariant: FormatTime(ParseTime(FormatTime(t))) == FormatTime(t);
// parsing accepts any RFC 3339 date-time (fractional seconds are truncated, offsets converted
// to UTC), so values written by other clients read back.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "controller/result.h"

namespace stasis::api {

// A metav1.Time: seconds precision, UTC. Time{} (the Unix epoch) means "not set" where a
// field is required (Condition::last_transition_time); optional fields use std::optional<Time>.
using Time = std::chrono::sys_seconds;

std::string FormatTime(Time t);

// kInvalidArgument when `text` is not an RFC 3339 date-time.
Result<Time> ParseTime(std::string_view text);

}  // namespace stasis::api
