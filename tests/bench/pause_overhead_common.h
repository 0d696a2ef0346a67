// What the parts of the pause-overhead benchmark (tests/bench/pause_overhead*.cc) share: its
// configuration, its clocks and its statistics.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace stasis::pause_bench {

using SteadyClock = std::chrono::steady_clock;
using WallClock = std::chrono::system_clock;

// What is measured against the runtime: a pause (PATCH Paused → PAUSED, then the resume from
// that node-local image), or a suspend (PATCH Suspended → SUSPENDED, committed to the agent's
// snapshot store, then the resume from the store).
enum class Mode { kPause, kSuspend };

struct Config {
  Mode mode = Mode::kPause;
  std::string kubeconfig, runsc, bundle, node, ns, name, work_dir, agent_log, csv;
  std::vector<std::string> runsc_flags;
  // A GPU run: the GPU both sides use, the node's CDI spec directories, the helper's path in
  // the container. Empty gpu_uuid: no GPU.
  std::string gpu_uuid, gpu_cdi_kind, cuda_checkpoint_path;
  std::vector<std::string> cdi_spec_dirs;
  bool leave_running_side = true;
  int cycles = 50;
  int warmup = 2;
  std::chrono::milliseconds settle{1000};
  // 0: none. Otherwise no cycle starts that the longest so far would carry past it, so that a
  // run in a bounded call (the GPU machine's) ends with a report of the cycles it finished.
  std::chrono::seconds time_budget{0};
  // Suspend into an object store: the direct side's image also goes up to it and comes back
  // down by curl (the baseline of a suspend and of a resume through the store), and the agent's
  // cached copy of its snapshot (`<agent_store_cache>/<ns>/<name>`) is dropped before each
  // resume, so that the resume downloads as it would on another node.
  bool peer_object_store = false;
  std::string agent_store_cache;

  // The desired state and the status the measured checkpoint leads to.
  const char* RestDesired() const { return mode == Mode::kPause ? "Paused" : "Suspended"; }
  const char* RestStatus() const { return mode == Mode::kPause ? "STATUS_PAUSED" : "STATUS_SUSPENDED"; }
  const char* ModeName() const { return mode == Mode::kPause ? "pause" : "suspend"; }
};

inline double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

inline int64_t WallMs(WallClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// Prints "pause_overhead: <what>" and exits 1.
[[noreturn]] void Die(const std::string& what);

// Nearest-rank percentile (with N = 50, p99 is the maximum); NAN for no samples, so that an
// empty series never reads as 0 ms ("met").
double Percentile(std::vector<double> v, double p);
double Mean(const std::vector<double>& v);

}  // namespace stasis::pause_bench
