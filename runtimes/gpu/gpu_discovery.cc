#include "runtimes/gpu/gpu_discovery.h"

#include <sstream>

#include "base/subprocess.h"

namespace stasis {

std::vector<std::string> ParseNvidiaSmiList(const std::string& text) {
  std::vector<std::string> uuids;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("GPU ", 0) != 0) continue;  // MIG devices are indented under their GPU
    const std::string tag = "(UUID: ";
    const auto at = line.find(tag);
    if (at == std::string::npos) continue;
    const auto end = line.find(')', at);
    if (end == std::string::npos) continue;
    std::string uuid = line.substr(at + tag.size(), end - at - tag.size());
    if (uuid.rfind("GPU-", 0) == 0) uuids.push_back(uuid);
  }
  return uuids;
}

Result<std::vector<std::string>> DiscoverGpus(const std::string& nvidia_smi,
                                              std::chrono::milliseconds deadline) {
  auto r = RunCommand({nvidia_smi, "-L"}, deadline);
  if (!r.ok()) {
    return Status(r.status().code(), "GPU discovery: " + r.status().message());
  }
  if (!r->success()) {
    return Status(Code::kUnavailable, "GPU discovery: " + nvidia_smi + " -L: " + r->Summary());
  }
  auto uuids = ParseNvidiaSmiList(r->out);
  if (uuids.empty()) {
    return Status(Code::kUnavailable, "GPU discovery: " + nvidia_smi + " -L listed no GPU: \"" + r->out + "\"");
  }
  return uuids;
}

}  // namespace stasis
