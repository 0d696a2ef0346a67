// Timestamps as the Kubernetes API writes them, for the runtime's own objects (Lease,
// Event): metav1.Time is RFC 3339 in UTC with whole seconds ("2026-01-02T15:04:05Z"),
// metav1.MicroTime the same with six fractional digits ("2026-01-02T15:04:05.123456Z").
// Invariant: output is always UTC with a literal "Z", the only form the API server emits.
// (controller/ cannot use api/rfc3339.h: dependencies point from api/ users to controller/.)
#pragma once

#include <chrono>
#include <string>

namespace stasis {

std::string FormatApiTime(std::chrono::system_clock::time_point t);
std::string FormatApiMicroTime(std::chrono::system_clock::time_point t);

}  // namespace stasis
