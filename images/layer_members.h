// The checks on a layer member's name that need no disk (layer_unpack.cc applies the rest):
// its components, whether it is a whiteout, and why it is refused. Internal to images/.
#pragma once

#include <string>
#include <vector>

namespace stasis::images::layer {

// A path's components, "" and "." dropped: "./a//b/" → {a, b}.
std::vector<std::string> SplitPath(const std::string& path);
// The first `n` components joined with "/" ("" for none).
std::string JoinPath(const std::vector<std::string>& parts, size_t n);

enum class MemberKind {
  kEntry,     // a file, directory, link or node to write
  kWhiteout,  // ".wh.<name>": `parts` names what it removes
  kOpaque,    // ".wh..wh..opq": `parts` names the directory it empties (empty: the root)
};

struct MemberName {
  MemberKind kind = MemberKind::kEntry;
  std::vector<std::string> parts;
  std::string refusal;  // why the member is refused by its name alone; "" when not
};

// Classifies a member name: refused when absolute, with a ".." component, or a whiteout of
// "." / ".." / nothing.
MemberName ClassifyMember(const std::string& name);

// Why a hardlink target is refused by its name alone (absolute, "..", empty), or "".
std::string HardlinkTargetRefusal(const std::string& target);

}  // namespace stasis::images::layer
