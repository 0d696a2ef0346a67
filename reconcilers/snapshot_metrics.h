// The snapshot-health metrics of DESIGN.md §7, exported by the node agent. Label values are
// small fixed sets (trigger, scope, gpu, operation, result, reason); never an actor name.
#pragma once

#include <memory>
#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace stasis {

class SnapshotMetrics {
 public:
  explicit SnapshotMetrics(prometheus::Registry& registry);

  // trigger: "Pause"|"Suspend"; scope: "Full"|"Data"; gpu: true → "true".
  void ObserveSize(const std::string& trigger, const std::string& scope, bool gpu, double bytes);
  // operation: "checkpoint"|"restore"|"commit"; result: "success"|"error".
  void ObserveDuration(const std::string& operation, const std::string& trigger, bool gpu,
                       const std::string& result, double seconds);
  // reason: "" on success, else the failure class (a runtime driver's Status::reason()).
  void CountOperation(const std::string& operation, const std::string& result,
                      const std::string& reason);
  // reason: "deadline"|"sandbox_died"|"node_lost"|"deleted".
  void CountForcedCleanup(const std::string& reason);
  void SetWorkers(int free, int held);

 private:
  prometheus::Family<prometheus::Histogram>& size_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Counter>& operations_;
  prometheus::Family<prometheus::Counter>& forced_cleanups_;
  prometheus::Family<prometheus::Gauge>& workers_;
};

}  // namespace stasis
