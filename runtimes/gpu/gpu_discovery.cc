#include "runtimes/gpu/gpu_discovery.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "base/subprocess.h"

namespace stasis {

namespace {

namespace fs = std::filesystem;

std::string ReadWhole(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \r\t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \r\t") - first + 1);
}

}  // namespace

Result<GpuInventory> ParseNvidiaSmiQuery(const std::string& text) {
  GpuInventory inv;
  inv.source = "nvidia-smi";
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    // The model sits between the first and the last comma (a name could hold one).
    const auto first = line.find(',');
    const auto last = line.rfind(',');
    if (first == std::string::npos || first == last) continue;
    DiscoveredGpu gpu{Trimmed(line.substr(0, first)), Trimmed(line.substr(first + 1, last - first - 1))};
    const std::string driver = Trimmed(line.substr(last + 1));
    if (gpu.uuid.rfind("GPU-", 0) != 0) continue;
    if (!inv.driver_version.empty() && driver != inv.driver_version) {
      return Status(Code::kUnavailable, "GPU discovery: nvidia-smi lists two driver versions (" +
                                            inv.driver_version + ", " + driver + ")");
    }
    inv.driver_version = driver;
    inv.gpus.push_back(std::move(gpu));
  }
  if (inv.gpus.empty()) {
    return Status(Code::kUnavailable, "GPU discovery: nvidia-smi listed no GPU: \"" + Trimmed(text) + "\"");
  }
  return inv;
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

std::optional<DiscoveredGpu> ParseProcGpuInformation(const std::string& text) {
  DiscoveredGpu gpu;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trimmed(line.substr(0, colon));
    if (key == "Model") gpu.model = Trimmed(line.substr(colon + 1));
    if (key == "GPU UUID") gpu.uuid = Trimmed(line.substr(colon + 1));
  }
  if (gpu.model.empty() || gpu.uuid.rfind("GPU-", 0) != 0) return std::nullopt;
  return gpu;
}

std::string ParseProcDriverVersion(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("NVRM version:", 0) != 0) continue;
    // "… Kernel Module  580.95.05  Release Build …": the first word of digits and dots.
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      if (w.find('.') != std::string::npos && w.find_first_not_of("0123456789.") == std::string::npos &&
          std::isdigit(static_cast<unsigned char>(w.front()))) {
        return w;
      }
    }
  }
  return "";
}

Result<GpuInventory> DiscoverGpusFromProc(const std::string& proc_dir) {
  GpuInventory inv;
  inv.source = "procfs";
  std::error_code ec;
  std::vector<fs::path> buses;
  for (const auto& entry : fs::directory_iterator(fs::path(proc_dir) / "gpus", ec)) buses.push_back(entry.path());
  std::sort(buses.begin(), buses.end());
  for (const auto& bus : buses) {
    if (auto gpu = ParseProcGpuInformation(ReadWhole(bus / "information"))) inv.gpus.push_back(std::move(*gpu));
  }
  if (inv.gpus.empty()) return Status(Code::kNotFound, "GPU discovery: no GPU under " + proc_dir + "/gpus");
  inv.driver_version = ParseProcDriverVersion(ReadWhole(fs::path(proc_dir) / "version"));
  if (inv.driver_version.empty()) {
    return Status(Code::kUnavailable, "GPU discovery: no driver version in " + proc_dir + "/version");
  }
  return inv;
}

Result<std::vector<std::vector<std::string>>> GroupGpus(const std::vector<std::string>& uuids, int per_worker) {
  if (per_worker < 1) return Status(Code::kInvalidArgument, "--gpus-per-worker must be at least 1");
  const size_t n = static_cast<size_t>(per_worker);
  if (uuids.empty() || uuids.size() % n != 0) {
    return Status(Code::kInvalidArgument, std::to_string(uuids.size()) + " GPU(s) do not make workers of " +
                                              std::to_string(per_worker) + " (--gpus-per-worker)");
  }
  std::vector<std::vector<std::string>> workers;
  for (size_t i = 0; i < uuids.size(); i += n) workers.emplace_back(uuids.begin() + i, uuids.begin() + i + n);
  return workers;
}

Result<GpuInventory> DiscoverGpus(const GpuDiscoverySources& sources) {
  auto nvml = DiscoverGpusWithNvml(sources.nvml_library, sources.deadline);
  if (nvml.ok() || nvml.status().code() != Code::kNotFound) return nvml;
  auto proc = DiscoverGpusFromProc(sources.proc_dir);
  if (proc.ok() || proc.status().code() != Code::kNotFound) return proc;
  const std::string tried = nvml.status().message() + "; " + proc.status().message();
  auto r = RunCommand({sources.nvidia_smi, "--query-gpu=uuid,name,driver_version", "--format=csv,noheader"},
                      sources.deadline);
  if (!r.ok()) return Status(r.status().code(), tried + "; and " + r.status().message());
  if (!r->success()) return Status(Code::kUnavailable, "GPU discovery: " + sources.nvidia_smi + ": " + r->Summary());
  return ParseNvidiaSmiQuery(r->out);
}

}  // namespace stasis
