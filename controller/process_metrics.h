// The process_* families every client_golang program exports (its process collector), read
// from /proc at each scrape: CPU time, resident and virtual memory, open and maximum file
// descriptors, and the start time. prometheus-cpp has none; Metrics registers this one on the
// process's registry, so both `stasis node` and `stasis controller` export them.
//
// Invariants: names, types and help texts are client_golang's, so dashboards made for Go
// programs work unchanged; a value that cannot be read is left out of that scrape (never
// exported as 0, which a dashboard would take for a measurement); nothing here keeps state
// between scrapes.
#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace stasis {

// The fields of /proc/<pid>/stat the collector reads (proc(5) numbering).
struct ProcStat {
  uint64_t utime_ticks = 0;       // (14)
  uint64_t stime_ticks = 0;       // (15)
  uint64_t starttime_ticks = 0;   // (22) after boot
  uint64_t vsize_bytes = 0;       // (23)
  uint64_t rss_pages = 0;         // (24)
};

// Parses a /proc/<pid>/stat line; nullopt when it is malformed. The command name (2) may hold
// spaces and parentheses, so fields are counted from its last ')'.
std::optional<ProcStat> ParseProcStat(std::string_view line);
// The boot time (`btime`, seconds since the epoch) from /proc/stat's text.
std::optional<uint64_t> ParseBootTime(std::string_view proc_stat);

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace stasis
