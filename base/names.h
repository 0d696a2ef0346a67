// The name rules of Kubernetes that more than one layer checks (the API's validation, the
// snapshot store's paths), in one place so they cannot disagree: RFC 1123 subdomains (object
// names) and labels (namespaces), exactly as apimachinery's IsDNS1123Subdomain/Label.
#pragma once

#include <cstddef>
#include <string_view>

namespace stasis {

inline constexpr size_t kMaxDnsSubdomainLength = 253;
inline constexpr size_t kMaxDnsLabelLength = 63;

// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$, at most 253 characters.
// Its alphabet has no '/', and no label may be empty, so "." and ".." are not names: a name
// is a safe single path component.
bool IsDnsSubdomain(std::string_view s);

// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$, at most 63 characters (a namespace).
bool IsDnsLabel(std::string_view s);

}  // namespace stasis
