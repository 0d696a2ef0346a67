#include "controller/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace stasis {
namespace {

std::optional<uint64_t> ToUint(std::string_view s) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<std::string> ReadFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

prometheus::MetricFamily Family(const char* name, const char* help, prometheus::MetricType type,
                                double value) {
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  return prometheus::MetricFamily{name, help, type, {m}};
}

// Open descriptors: the entries of /proc/self/fd, less the one this listing holds open.
std::optional<double> OpenFds() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/fd", ec);
  if (ec) return std::nullopt;
  double n = 0;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return std::nullopt;
    ++n;
  }
  return n > 0 ? n - 1 : 0;
}

}  // namespace

std::optional<ProcStat> ParseProcStat(std::string_view line) {
  const size_t paren = line.rfind(')');
  if (paren == std::string_view::npos) return std::nullopt;
  // Fields from (3) on, space-separated.
  std::vector<std::string_view> f;
  size_t pos = paren + 1;
  while (pos < line.size()) {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\n')) ++pos;
    size_t end = pos;
    while (end < line.size() && line[end] != ' ' && line[end] != '\n') ++end;
    if (end > pos) f.push_back(line.substr(pos, end - pos));
    pos = end;
  }
  auto field = [&](size_t n) { return n - 3 < f.size() ? ToUint(f[n - 3]) : std::nullopt; };
  auto utime = field(14), stime = field(15), start = field(22), vsize = field(23), rss = field(24);
  if (!utime || !stime || !start || !vsize || !rss) return std::nullopt;
  return ProcStat{*utime, *stime, *start, *vsize, *rss};
}

std::optional<uint64_t> ParseBootTime(std::string_view proc_stat) {
  std::istringstream in{std::string(proc_stat)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("btime ", 0) == 0) return ToUint(std::string_view(line).substr(6));
  }
  return std::nullopt;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const auto text = ReadFile("/proc/self/stat");
  const auto stat = text ? ParseProcStat(*text) : std::nullopt;
  if (stat && ticks > 0) {
    out.push_back(Family("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                         MetricType::Counter, static_cast<double>(stat->utime_ticks + stat->stime_ticks) / ticks));
    out.push_back(Family("process_resident_memory_bytes", "Resident memory size in bytes.", MetricType::Gauge,
                         static_cast<double>(stat->rss_pages) * static_cast<double>(sysconf(_SC_PAGESIZE))));
    out.push_back(Family("process_virtual_memory_bytes", "Virtual memory size in bytes.", MetricType::Gauge,
                         static_cast<double>(stat->vsize_bytes)));
    const auto proc_stat = ReadFile("/proc/stat");
    if (const auto boot = proc_stat ? ParseBootTime(*proc_stat) : std::nullopt) {
      out.push_back(Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.",
                           MetricType::Gauge, static_cast<double>(*boot) + static_cast<double>(stat->starttime_ticks) / ticks));
    }
  }
  if (const auto fds = OpenFds()) {
    out.push_back(Family("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, *fds));
  }
  if (rlimit lim{}; getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    out.push_back(Family("process_max_fds", "Maximum number of open file descriptors.", MetricType::Gauge,
                         static_cast<double>(lim.rlim_cur)));
  }
  return out;
}

}  // namespace stasis
