// What hack/ scripts that start a service print for a shell (`hack/object-store.sh up`,
// `hack/registry.sh up`): "export NAME=value" lines, read back by the test fixtures that run them.
#pragma once

#include <map>
#include <sstream>
#include <string>

namespace stasis::testing {

// "export NAME=value" lines → {NAME: value}; other lines are skipped.
inline std::map<std::string, std::string> ParseExports(const std::string& text) {
  std::map<std::string, std::string> vars;
  std::istringstream in(text);
  const std::string prefix = "export ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    vars[line.substr(prefix.size(), eq - prefix.size())] = line.substr(eq + 1);
  }
  return vars;
}

}  // namespace stasis::testing
