#include "images/layer_members.h"

namespace stasis::images::layer {
namespace {

constexpr char kWhiteoutPrefix[] = ".wh.";
constexpr char kOpaqueMarker[] = ".wh..wh..opq";

bool StartsWith(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }

// Why `name` cannot name a place under the root: an absolute path or a ".." component. Checked
// on the raw name: a "/" prefix is refused even though SplitPath would make it relative.
std::string NameRefusal(const std::string& name, const std::vector<std::string>& parts) {
  if (!name.empty() && name.front() == '/') return "is an absolute path";
  for (const auto& p : parts) {
    if (p == "..") return "has a \"..\" component";
  }
  return "";
}

}  // namespace

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (!part.empty() && part != ".") out.push_back(std::move(part));
    start = end + 1;
  }
  return out;
}

std::string JoinPath(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
  return out;
}

MemberName ClassifyMember(const std::string& name) {
  MemberName m;
  m.parts = SplitPath(name);
  m.refusal = NameRefusal(name, m.parts);
  if (!m.refusal.empty() || m.parts.empty()) return m;
  const std::string base = m.parts.back();
  if (base == kOpaqueMarker) {
    m.kind = MemberKind::kOpaque;
    m.parts.pop_back();
  } else if (StartsWith(base, kWhiteoutPrefix)) {
    // Other ".wh..wh." names (AUFS metadata such as .wh..wh.plnk) fall here too: whiteouts of
    // ".wh."-prefixed names, which no layer writes, they remove nothing.
    m.kind = MemberKind::kWhiteout;
    const std::string target = base.substr(sizeof(kWhiteoutPrefix) - 1);
    // ".wh." alone, ".wh.." and ".wh..." would remove nothing, the directory itself, or its
    // parent: none is a name a lower layer could have put there.
    if (target.empty() || target == "." || target == "..") {
      m.refusal = "is a whiteout of \"" + target + "\"";
    }
    m.parts.back() = target;
  }
  return m;
}

std::string HardlinkTargetRefusal(const std::string& target) {
  if (target.empty()) return "is a hardlink to nothing";
  const auto parts = SplitPath(target);
  if (parts.empty()) return "is a hardlink to the root";
  const std::string why = NameRefusal(target, parts);
  return why.empty() ? "" : "is a hardlink whose target " + why;
}

}  // namespace stasis::images::layer
