#include "reconcilers/node/host_errors.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "api/conditions.h"

namespace stasis {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return out;
}

bool ContainsAny(const std::string& text, std::initializer_list<std::string_view> needles) {
  return std::any_of(needles.begin(), needles.end(),
                     [&](std::string_view n) { return text.find(n) != std::string::npos; });
}

// Whether the text names a path under one of the directories (followed by '/' or its end, so
// that "/var/lib/stasis" does not claim "/var/lib/stasis-other").
bool NamesOwnPath(const std::string& text, const std::vector<std::string>& own_dirs) {
  for (std::string dir : own_dirs) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (dir.empty()) continue;
    for (size_t at = text.find(dir); at != std::string::npos; at = text.find(dir, at + 1)) {
      const size_t end = at + dir.size();
      if (end == text.size() || text[end] == '/' || text[end] == ':' || text[end] == '"' ||
          text[end] == ']' || text[end] == ' ') {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::optional<HostError> ClassifyHostError(const Status& failure, const std::vector<std::string>& own_dirs) {
  if (failure.ok()) return std::nullopt;
  // strerror and libstdc++ say "File name too long", Go (runsc) "file name too long".
  const std::string text = Lower(failure.message());
  if (ContainsAny(text, {"file name too long", "enametoolong",
                         "unable to find location to write socket file"})) {
    return HostError{api::kReasonHostPathTooLong, true};
  }
  if (ContainsAny(text, {"no space left on device", "enospc", "disk quota exceeded"})) {
    return HostError{api::kReasonHostDiskFull, false};
  }
  if (ContainsAny(text, {"read-only file system", "permission denied", "operation not permitted"}) &&
      NamesOwnPath(failure.message(), own_dirs)) {
    return HostError{api::kReasonHostPathNotWritable, false};
  }
  return std::nullopt;
}

}  // namespace stasis
