// docs/metrics.md as data: the families table (name, type, labels, bucket set, which process
// exports it) and the bucket-sets table, so tests can hold the reference and the registered
// families equal and check every metric a dashboard or rule names.
#pragma once

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace stasis::testing {

struct DocumentedFamily {
  std::string name;
  std::string type;                // counter, gauge, histogram
  std::set<std::string> labels;    // the family's own labels (not job, instance, node, le)
  std::string buckets;             // a bucket set's name for histograms, else ""
  std::set<std::string> from;      // "node", "controller"
};

struct MetricsReference {
  std::map<std::string, DocumentedFamily> families;
  std::map<std::string, std::vector<double>> bucket_sets;  // upper bounds, +Inf left out
};

// Parses the table whose header starts with "| metric |" and the one whose header starts with
// "| bucket set |". Cells: `code` spans are unwrapped; labels and "from" are comma-separated;
// bounds are numbers with an optional binary suffix (Ki, Mi, Gi). kInvalidArgument naming the
// line for a row that cannot be read, a histogram without a known bucket set, or a missing
// table.
Result<MetricsReference> LoadMetricsReference(const std::filesystem::path& path);

}  // namespace stasis::testing
