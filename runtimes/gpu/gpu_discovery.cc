#include "runtimes/gpu/gpu_discovery.h"

#include <map>
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

Result<int64_t> SumGpuMemoryUsed(const std::string& text, const std::vector<std::string>& uuids) {
  std::map<std::string, int64_t> used_mib;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto comma = line.find(',');
    if (comma == std::string::npos) continue;
    const std::string uuid = line.substr(0, comma);
    const auto digits = line.find_first_not_of(' ', comma + 1);
    if (digits == std::string::npos) continue;
    const std::string mib = line.substr(digits);
    if (mib.empty() || mib.find_first_not_of("0123456789\r") != std::string::npos) continue;
    used_mib[uuid] = std::stoll(mib);
  }
  int64_t total = 0;
  for (const auto& uuid : uuids) {
    auto it = used_mib.find(uuid);
    if (it == used_mib.end()) return Status(Code::kUnavailable, "nvidia-smi lists no memory use for " + uuid);
    total += it->second << 20;
  }
  return total;
}

Result<int64_t> GpuMemoryUsed(const std::vector<std::string>& uuids, const std::string& nvidia_smi,
                              std::chrono::milliseconds deadline) {
  if (uuids.empty()) return int64_t{0};
  auto r = RunCommand({nvidia_smi, "--query-gpu=uuid,memory.used", "--format=csv,noheader,nounits"}, deadline);
  if (!r.ok()) return Status(r.status().code(), "GPU memory: " + r.status().message());
  if (!r->success()) return Status(Code::kUnavailable, "GPU memory: " + nvidia_smi + ": " + r->Summary());
  return SumGpuMemoryUsed(r->out, uuids);
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
