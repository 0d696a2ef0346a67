#include "base/names.h"

namespace stasis {
namespace {

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// One label of a subdomain, without the length limit (a subdomain's labels have none of their own).
bool IsLabelShape(std::string_view label) {
  if (label.empty() || !IsLowerAlnum(label.front()) || !IsLowerAlnum(label.back())) return false;
  for (char c : label) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

}  // namespace

bool IsDnsSubdomain(std::string_view s) {
  if (s.empty() || s.size() > kMaxDnsSubdomainLength) return false;
  size_t start = 0;
  while (true) {
    const size_t end = s.find('.', start);
    if (!IsLabelShape(s.substr(start, end == std::string_view::npos ? end : end - start))) return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

bool IsDnsLabel(std::string_view s) { return s.size() <= kMaxDnsLabelLength && IsLabelShape(s); }

}  // namespace stasis
