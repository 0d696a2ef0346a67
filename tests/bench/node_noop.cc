// BENCHMARK ONLY: `stasis node` with the no-op runtime driver (noop_runtime_driver.h) instead of
// runsc, for hack/bench/transitions.sh: the agent's own cost per transition, with no sandbox.
//
//   bench_node_noop --kubeconfig K --node-name N --root DIR [--bundle-root DIR] [--workers 1] [--concurrency 4]
//                   [--metrics-addr 127.0.0.1:0] [--log-level info] [--kube-api-qps 50] [--kube-api-burst 100]
//
// Everything but the driver is the production agent (RunNodeAgent); SIGTERM stops it.
#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "reconcilers/node/node_agent.h"
#include "tests/bench/bench_common.h"
#include "tests/bench/noop_runtime_driver.h"

int main(int argc, char** argv) {
  // ParseFlags wants a mode first; this program has one role.
  std::vector<char*> args{argv[0], const_cast<char*>("node")};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  stasis::bench::Flags f;
  if (!stasis::bench::ParseFlags(static_cast<int>(args.size()), args.data(), f) ||
      f.Get("node-name").empty() || f.Get("root").empty()) {
    std::fprintf(stderr, "usage: bench_node_noop --kubeconfig K --node-name N --root DIR [--workers 1] "
                         "[--concurrency 4] [--metrics-addr ADDR] [--bundle-root DIR] [--log-level info] "
                         "[--kube-api-qps 50] [--kube-api-burst 100]\n");
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(f.Get("log-level", "info")));
  stasis::bench::NoopRuntimeDriver driver;
  stasis::NodeAgentOptions o;
  o.kubeconfig = f.Get("kubeconfig");
  o.node = f.Get("node-name");
  o.root = f.Get("root");
  // Where the benchmark's bundles are (the agent's default: <root>/bundles).
  if (!f.Get("bundle-root").empty()) o.bundle_roots.roots = {f.Get("bundle-root")};
  o.runsc = "bench-noop";
  o.metrics_addr = f.Get("metrics-addr", "127.0.0.1:0");
  o.concurrency = static_cast<int>(f.Int("concurrency", 4));
  o.workers.assign(static_cast<size_t>(f.Int("workers", 1)), {});
  // The agent's client-side limit, as `stasis node` takes it (same defaults): transitions.sh
  // lifts it to measure the agent's path rather than its budget of requests.
  o.kube_api_qps = std::stod(f.Get("kube-api-qps", "50"));
  o.kube_api_burst = static_cast<int>(f.Int("kube-api-burst", 100));
  o.driver = &driver;
  stasis::bench::InstallStopSignals();
  if (auto s = stasis::RunNodeAgent(o, &stasis::bench::g_stop); !s.ok()) {
    std::fprintf(stderr, "bench_node_noop: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
