// A real Prometheus for tests (Debian's /usr/bin/prometheus, or $STASIS_PROMETHEUS): started
// by argv in its own process group on a free loopback port with a generated configuration and
// its own TSDB directory, queried through its HTTP API (curl, argv only, with a deadline), and
// killed with its group when destroyed. Aborts the test binary when no Prometheus can be had:
// a test that needs one must not pass without it.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "tests/support/background_process.h"

namespace stasis::testing {

// A port on 127.0.0.1 that was free a moment ago (bound to 0 and released), for programs that
// cannot report the port they bound.
int FreeLoopbackPort();

struct ScrapeTarget {
  std::string job;                            // job_name
  std::string address;                        // host:port serving /metrics
  std::map<std::string, std::string> labels;  // target labels, e.g. {"node": "n1"}
};

struct PrometheusOptions {
  std::filesystem::path dir;  // config, TSDB and log live here
  std::vector<ScrapeTarget> targets;
  // More `scrape_configs` entries, as a YAML block sequence (ScrapeConfigsFor's output).
  std::string extra_scrape_configs;
  // The binary; empty: Binary().
  std::string binary;
  std::vector<std::string> rule_files;  // absolute paths
  std::string scrape_interval = "1s";
  std::string evaluation_interval = "1s";
};

class PrometheusServer {
 public:
  // The Prometheus binary: $STASIS_PROMETHEUS, else "prometheus" from PATH.
  static std::string Binary();

  // Starts Prometheus and waits (up to 60 s) until /-/ready answers; nullptr (with the log on
  // stderr) when it does not come up.
  static std::unique_ptr<PrometheusServer> Start(const PrometheusOptions& options);
  ~PrometheusServer();

  const std::string& url() const { return url_; }  // http://127.0.0.1:PORT
  const std::string& log_path() const { return process_->log_path(); }

  // GET /api/v1/<endpoint> with URL-encoded parameters; the response's "data" when its status
  // is "success", else a Status whose message is Prometheus' error (kInvalidArgument for a bad
  // query, kUnavailable when it cannot be reached).
  Result<nlohmann::json> Api(const std::string& endpoint,
                             const std::vector<std::pair<std::string, std::string>>& params) const;
  Result<nlohmann::json> Query(const std::string& expr, double time) const;
  Result<nlohmann::json> QueryRange(const std::string& expr, double start, double end,
                                    double step_seconds) const;

 private:
  PrometheusServer() = default;
  std::string url_;
  std::unique_ptr<BackgroundProcess> process_;
};

// Whether a query's data ({"resultType", "result"}) holds at least one finite sample: a vector
// or matrix with a non-NaN, non-infinite value, or such a scalar. Series made only of NaN (a
// quantile over a window without observations) are no data to a reader.
bool HasFiniteSample(const nlohmann::json& data);

// Seconds since the epoch, as Prometheus' API takes time.
double UnixNow();

}  // namespace stasis::testing
