// BENCHMARK ONLY: a fleet of node agents in one process, for hack/bench/fleet.sh.
//
//   bench_fleet_sim --kubeconfig K --root DIR --nodes N [--first 0] [--prefix fleet-node] [--bundle-root DIR]
//                   [--workers-per-node 8] [--concurrency 2] [--heartbeat-period 10]
//                   [--heartbeat-lease 40] [--start-per-second 50] [--log-level warn]
//
// Each simulated node is the production node agent (RunNodeAgent: its Actor informers with the
// field selector on its node, its Workers, its heartbeat Lease, its status writes and Events)
// on its own thread, over the no-op runtime driver (noop_runtime_driver.h) instead of runsc:
// nodes <prefix>-<first>…<prefix>-<first+N-1>, each with --workers-per-node CPU workers and its
// own root DIR/<node>. Nothing is simulated but the sandbox. The agents start at
// --start-per-second (a fleet's agents do not all start in the same second, and the API
// server's first LISTs are what a start costs); the program prints one line `started N` once
// every agent has been started and runs until SIGTERM or SIGINT. An agent that fails is started
// again after a backoff, as the kubelet restarts a DaemonSet's container. A `kill -9` of the
// process is N nodes lost at once (hack/bench/fleet.sh's scenario 3).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "reconcilers/node/node_agent.h"
#include "tests/bench/bench_common.h"
#include "tests/bench/noop_runtime_driver.h"

namespace {

stasis::NodeAgentOptions AgentOptions(const stasis::bench::Flags& f, const std::string& node,
                                      stasis::RuntimeDriver* driver) {
  stasis::NodeAgentOptions o;
  o.kubeconfig = f.Get("kubeconfig");
  o.node = node;
  o.root = f.Get("root") + "/" + node;
  if (!f.Get("bundle-root").empty()) o.bundle_roots.roots = {f.Get("bundle-root")};
  o.runsc = "bench-noop";
  o.driver = driver;
  o.metrics_addr = "127.0.0.1:0";  // every agent serves /metrics, as each node's does
  o.concurrency = static_cast<int>(f.Int("concurrency", 2));
  o.workers.assign(static_cast<size_t>(f.Int("workers-per-node", 8)), {});
  o.heartbeat_period_seconds = static_cast<int>(f.Int("heartbeat-period", 10));
  o.heartbeat_lease_seconds = static_cast<int>(f.Int("heartbeat-lease", 40));
  o.shutdown_grace_seconds = 5;
  return o;
}

// Runs one agent until the stop, starting it again after an error as the kubelet restarts a
// DaemonSet's container (CrashLoopBackOff: 10 s doubling to 5 min): an agent that cannot start —
// its first LISTs timing out on an overloaded API server — exits, and its node comes back later.
void RunAsTheKubeletWould(const stasis::NodeAgentOptions& o, std::atomic<long>& failed) {
  auto backoff = std::chrono::seconds(10);
  while (!stasis::bench::g_stop) {
    const stasis::Status s = stasis::RunNodeAgent(o, &stasis::bench::g_stop);
    if (s.ok()) return;
    ++failed;
    std::fprintf(stderr, "bench_fleet_sim: %s: %s (restarting in %lld s)\n", o.node.c_str(), s.ToString().c_str(),
                 static_cast<long long>(backoff.count()));
    for (auto waited = std::chrono::seconds(0); waited < backoff && !stasis::bench::g_stop; waited += std::chrono::seconds(1)) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    backoff = std::min(backoff * 2, std::chrono::seconds(300));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args{argv[0], const_cast<char*>("fleet")};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  stasis::bench::Flags f;
  if (!stasis::bench::ParseFlags(static_cast<int>(args.size()), args.data(), f) || f.Get("root").empty() ||
      f.Int("nodes", 0) <= 0) {
    std::fprintf(stderr, "usage: bench_fleet_sim --kubeconfig K --root DIR --nodes N [--first 0] [--prefix fleet-node] [--bundle-root DIR] "
                         "[--workers-per-node 8] [--concurrency 2] [--heartbeat-period 10] [--heartbeat-lease 40] "
                         "[--start-per-second 50] [--log-level warn]\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(f.Get("log-level", "warn")));
  stasis::bench::InstallStopSignals();
  // One driver for every agent: it keys sandboxes by id, and ids are unique per actor.
  stasis::bench::NoopRuntimeDriver driver;
  const long nodes = f.Int("nodes", 0), first = f.Int("first", 0);
  const auto gap = std::chrono::microseconds(1000000 / std::max(1L, f.Int("start-per-second", 50)));
  std::atomic<long> failed{0};
  std::vector<std::thread> agents;
  agents.reserve(static_cast<size_t>(nodes));
  for (long i = first; i < first + nodes && !stasis::bench::g_stop; ++i) {
    agents.emplace_back([&f, &driver, &failed, node = stasis::bench::FleetNodeName(f.Get("prefix", "fleet-node"), i)] {
      RunAsTheKubeletWould(AgentOptions(f, node, &driver), failed);
    });
    std::this_thread::sleep_for(gap);
  }
  std::printf("started %zu\n", agents.size());
  std::fflush(stdout);
  for (auto& t : agents) t.join();
  std::printf("agent restarts after a failed start: %ld\n", failed.load());
  return 0;
}
