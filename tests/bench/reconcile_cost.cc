// Instruction counts of single reconciles (a program, not a test): run under
// `valgrind --tool=callgrind --instr-atstart=no` by hack/bench/reconcile-cost.sh, against a real
// kube-apiserver. Each measured reconcile is bracketed by CALLGRIND_START/STOP_INSTRUMENTATION
// and dumped under its own name, so the count is the reconcile alone (all threads of this
// process: the JSON work, the reconcile logic and the HTTP client), never the setup.
//
//   bench_reconcile_cost --kubeconfig K --namespace NS --root DIR --bundle DIR [--repeat 3]
//
// Cases, each --repeat times on one actor pinned to node cost-node with one worker, with the
// benchmark-only no-op runtime driver (no runsc: its instructions are not ours):
//   node_pause      the agent's reconcile of a RUNNING actor whose desiredState became Paused
//   node_resume     the agent's reconcile of that PAUSED actor wanting Running again
//   cluster_at_rest the cluster controller's reconcile of the same actor at rest (PAUSED)
// The actor caches are filled from a GET before each case (not measured), as a watch would.
// Without valgrind the macros do nothing and the program prints wall times only.
#include <valgrind/callgrind.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "api/actor.h"
#include "api/json_mapping.h"
#include "api/names.h"
#include "controller/metrics.h"
#include "controller/object_store.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/cluster/cluster_metrics.h"
#include "reconcilers/cluster/cluster_reconciler.h"
#include "reconcilers/node/node_workers.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "snapshots/snapshot_store.h"
#include "tests/bench/bench_common.h"
#include "tests/bench/noop_runtime_driver.h"

namespace stasis::bench {
namespace {

constexpr char kNode[] = "cost-node";
constexpr char kActor[] = "cost";

int Main(const Flags& f) {
  const std::string ns = f.Get("namespace"), root = f.Get("root");
  const long repeat = f.Int("repeat", 3);
  auto client = NewClient(f.Get("kubeconfig"));
  Metrics metrics;
  SnapshotMetrics snapshot_metrics(*metrics.registry());
  ClusterMetrics cluster_metrics(*metrics.registry());
  NoopRuntimeDriver driver;
  std::filesystem::create_directories(root + "/snapshots");
  std::filesystem::create_directories(root + "/store");
  SnapshotStore snapshots(root + "/snapshots", root + "/store");
  NodeWorkers workers(*client, kNode, {{}}, &snapshot_metrics);
  if (Status s = workers.Register(); !s.ok()) {
    std::fprintf(stderr, "register: %s\n", s.ToString().c_str());
    return 1;
  }
  api::Actor a;
  a.metadata.namespace_ = ns;
  a.metadata.name = kActor;
  a.spec.bundle = f.Get("bundle");
  a.spec.node_name = kNode;
  if (auto r = client->Create(kActorType, ns, api::ActorTypedJson(a)); !r.ok()) {
    std::fprintf(stderr, "create: %s\n", r.status().ToString().c_str());
    return 1;
  }

  ObjectStore actors, worker_store, leases;
  for (auto& [name, index] : ClusterActorIndexes()) actors.AddIndex(name, std::move(index));  // as the informer has them
  // What the informers would hold: the actor and the node's workers as the API server has them.
  auto refresh = [&]() -> bool {
    auto live = client->Get(kActorType, ns, kActor);
    if (!live.ok()) return false;
    actors.Upsert(std::make_shared<const json>(*live));
    auto list = client->List(kWorkerType, "", ListOptions{});
    if (!list.ok()) return false;
    for (auto& w : (*list)["items"]) worker_store.Upsert(std::make_shared<const json>(w));
    return true;
  };
  ActorReconcilerOptions ro;
  ro.node = kNode;
  ro.root = root;
  // The bench's bundle is confined like any other: its parent is the --bundle-root.
  ro.bundle_roots.roots = {std::filesystem::path(f.Get("bundle")).parent_path().string()};
  ActorReconciler node(ro, *client, [&](const std::string& key) { return actors.Get(key); }, driver,
                       snapshots, workers, snapshot_metrics, nullptr);
  ClusterReconcilerOptions co;
  ClusterReconciler cluster(co, *client, actors, worker_store, leases, cluster_metrics, nullptr);
  const Request req{ns, kActor};

  auto status_of = [&]() -> std::string {
    auto live = client->Get(kActorType, ns, kActor);
    return live.ok() ? live->value("/status/status"_json_pointer, "") : "";
  };
  // Reconciles (unmeasured) until the actor is in `want`: the setup of a case.
  auto settle = [&](const std::string& want) -> bool {
    for (int i = 0; i < 10 && status_of() != want; ++i) {
      if (!refresh()) return false;
      (void)node.Reconcile(req);  // the status read back decides
    }
    return status_of() == want;
  };
  auto desire = [&](const char* state) {
    return client->Patch(kActorType, ns, kActor, PatchType::kMerge, {{"spec", {{"desiredState", state}}}}).ok();
  };
  // One measured call, dumped as `name`; returns false when it did not do what the case says.
  auto measure = [&](const std::string& name, Reconciler& r, const std::string& expect) -> bool {
    if (!refresh()) return false;
    const auto start = SteadyClock::now();
    CALLGRIND_ZERO_STATS;
    CALLGRIND_START_INSTRUMENTATION;
    auto outcome = r.Reconcile(req);
    CALLGRIND_STOP_INSTRUMENTATION;
    CALLGRIND_DUMP_STATS_AT(name.c_str());
    const double ms = Millis(SteadyClock::now() - start);
    const std::string got = status_of();
    std::printf("case %s: %.1f ms wall, reconcile %s, status %s\n", name.c_str(), ms,
                outcome.ok() ? "ok" : outcome.status().ToString().c_str(), got.c_str());
    return outcome.ok() && got == expect;
  };

  if (!settle("STATUS_RUNNING")) {
    std::fprintf(stderr, "the actor did not reach STATUS_RUNNING (status %s)\n", status_of().c_str());
    return 1;
  }
  for (long i = 0; i < repeat; ++i) {
    if (!desire("Paused") || !measure("node_pause", node, "STATUS_PAUSED")) return 1;
    if (!measure("cluster_at_rest", cluster, "STATUS_PAUSED")) return 1;
    if (!desire("Running") || !measure("node_resume", node, "STATUS_RUNNING")) return 1;
  }
  return 0;
}

}  // namespace
}  // namespace stasis::bench

int main(int argc, char** argv) {
  std::vector<char*> args{argv[0], const_cast<char*>("cost")};
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  stasis::bench::Flags f;
  if (!stasis::bench::ParseFlags(static_cast<int>(args.size()), args.data(), f) || f.Get("kubeconfig").empty() ||
      f.Get("namespace").empty() || f.Get("root").empty() || f.Get("bundle").empty()) {
    std::fprintf(stderr, "usage: bench_reconcile_cost --kubeconfig K --namespace NS --root DIR --bundle DIR [--repeat 3]\n");
    return 2;
  }
  return stasis::bench::Main(f);
}
