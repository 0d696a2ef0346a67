#include "reconcilers/node/host_memory.h"

#include <fstream>
#include <limits>
#include <sstream>

namespace stasis {

Result<int64_t> ParseMemAvailable(const std::string& meminfo) {
  std::istringstream lines(meminfo);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kib = -1;
    std::string unit;
    fields >> kib >> unit;
    if (kib < 0 || unit != "kB" || kib > std::numeric_limits<int64_t>::max() / 1024) {
      return Status(Code::kInvalidArgument, "malformed MemAvailable line: \"" + line + "\"");
    }
    return kib * 1024;
  }
  return Status(Code::kInvalidArgument, "no MemAvailable line");
}

Result<int64_t> MemAvailableBytes(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(Code::kUnavailable, "cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return ParseMemAvailable(text.str());
}

}  // namespace stasis
