// Timestamps as the Kubernetes API writes them, the one formatter every layer uses: metav1.Time
// is RFC 3339 in UTC with whole seconds ("2026-12-02T15:04:05Z"), metav1.MicroTime the same
// with six fractional digits ("2026-12-02T15:04:05.123456Z"). Output is always UTC with a
// literal "Z", the only form the API server emits.
// Invariant: FormatTime(ParseTime(FormatTime(t))) == FormatTime(t); parsing accepts any RFC
// 3339 date-time (fractional seconds are truncated, offsets converted to UTC), so values
// written by other clients read back.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/status.h"

namespace stasis {

// A metav1.Time: seconds precision, UTC. Time{} (the Unix epoch) means "not set" where a
// field is required (Condition::last_transition_time); optional fields use std::optional<Time>.
using Time = std::chrono::sys_seconds;

std::string FormatTime(Time t);
// Any instant, its fraction dropped (metav1.Time).
std::string FormatTime(std::chrono::system_clock::time_point t);
// metav1.MicroTime (Lease renewTime, Event eventTime).
std::string FormatMicroTime(std::chrono::system_clock::time_point t);

// kInvalidArgument when `text` is not an RFC 3339 date-time.
Result<Time> ParseTime(std::string_view text);

}  // namespace stasis
