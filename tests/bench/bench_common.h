// Small helpers shared by the benchmark programs of tests/bench/ (programs that print figures,
// never tests): `--key value` flags, a client from a kubeconfig, a parallel loop with one
// client per thread, nearest-rank percentiles.
#pragma once

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "controller/kube_client.h"
#include "controller/rest_config.h"

namespace stasis::bench {

using SteadyClock = std::chrono::steady_clock;

inline double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }
inline double Millis(SteadyClock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

struct Flags {
  std::string mode;
  std::map<std::string, std::string> values;
  std::string Get(const std::string& k, const std::string& def = "") const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
  long Int(const std::string& k, long def) const { return std::stol(Get(k, std::to_string(def))); }
};

// argv: MODE --key value | --key=value …; false on anything else.
inline bool ParseFlags(int argc, char** argv, Flags& flags) {
  if (argc < 2) return false;
  flags.mode = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) return false;
    a = a.substr(2);
    if (auto eq = a.find('='); eq != std::string::npos) {
      flags.values[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (i + 1 < argc) {
      flags.values[a] = argv[++i];
    } else {
      return false;
    }
  }
  return true;
}

// Set by SIGTERM and SIGINT once InstallStopSignals ran: a benchmark's long-running part (its
// node agents) stops when it becomes true. SIGPIPE is ignored (a closed connection is an error).
inline std::atomic<bool> g_stop{false};
inline void InstallStopSignals() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop = true; };
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

inline std::unique_ptr<KubeClient> NewClient(const std::string& kubeconfig) {
  auto config = LoadKubeconfig(kubeconfig);
  if (!config.ok()) {
    std::fprintf(stderr, "kubeconfig: %s\n", config.status().ToString().c_str());
    std::exit(1);
  }
  return std::make_unique<KubeClient>(NewCpprestTransport(*config));
}

// Runs fn(client, i) for i in [0, n) over `threads` threads, each with its own client (its own
// connection), as a fleet of independent writers would.
inline void Parallel(const std::string& kubeconfig, long n, int threads,
                     const std::function<void(KubeClient&, long)>& fn) {
  std::vector<std::thread> pool;
  std::atomic<long> next{0};
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      auto client = NewClient(kubeconfig);
      for (long i = next++; i < n; i = next++) fn(*client, i);
    });
  }
  for (auto& t : pool) t.join();
}

// The name of the fleet's node i: <prefix>-0000…, as bench_fleet_sim names its agents and
// bench_fleet pins actors to them.
inline std::string FleetNodeName(const std::string& prefix, long i) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "-%04ld", i);
  return prefix + buf;
}

inline double Mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}

// Nearest rank: with N = 100 the p99 is the 99th smallest sample.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * v.size()));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

}  // namespace stasis::bench
