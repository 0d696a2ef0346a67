// The fleet for hack/bench/scale.sh, on a real API server (a benchmark helper, not a test):
//
//   bench_fleet populate --kubeconfig K --namespace NS --actors 10000 --node N --workers 1000
//                        [--threads 16] [--prefix fleet]
//   bench_fleet list --kubeconfig K [--repeat 3]
//
// list: the baseline for an initial sync, in the same run: a paged LIST (pages of 500, as the
// informer asks) of every Actor and every Worker, parsed into JSON and nothing else — what any
// client of this API server pays before it can cache an object. Prints the best of --repeat.
//
// populate:
// Actors <prefix>-00000…, pinned to node N, SUSPENDED the way a node agent leaves them after a
// suspend (finalizer, status with a committed latestSnapshot and the Ready/Progressing
// conditions), so that the controller and the agent cache realistic objects and find nothing to
// do. Workers "<N>-slot<i>" (the names `stasis node --workers` uses) labelled with the node,
// Free. Both in parallel, one connection per thread; objects that exist are left as they are.
// Prints the rates and a `RESULT k=v …` line.
#include <cstdio>
#include <string>
#include <thread>

#include "api/actor.h"
#include "api/json_mapping.h"
#include "api/names.h"
#include "tests/bench/bench_common.h"

namespace stasis::bench {
namespace {

using namespace std::chrono_literals;
const ResourceType kActors{api::kGroup, api::kVersion, api::kActorResource, true};
const ResourceType kWorkers{api::kGroup, api::kVersion, api::kWorkerResource, false};

std::string Numbered(const std::string& prefix, long i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05ld", i);
  return prefix + buf;
}

json SuspendedActor(const std::string& ns, const std::string& name, const std::string& node) {
  api::Actor a;
  a.metadata.namespace_ = ns;
  a.metadata.name = name;
  a.metadata.labels[api::kNodeLabel] = node;
  a.metadata.finalizers = {api::kActorFinalizer};
  a.spec.bundle = "/var/lib/stasis/bundles/counter";
  a.spec.node_name = node;
  a.spec.desired_state = api::DesiredState::kSuspended;
  return api::ActorTypedJson(a);
}

json SuspendedStatus(const std::string& ns, const std::string& name, const std::string& node) {
  const Time now = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());
  api::Actor a;
  a.metadata.generation = 1;
  a.status.status = api::ActorState::kSuspended;
  a.status.observed_generation = 1;
  a.status.node_name = node;
  api::Snapshot s;
  s.id = "20260101T000000Z-0001";
  s.trigger = api::SnapshotTrigger::kSuspend;
  s.scope = api::SnapshotScope::kFull;
  s.location = "store://" + ns + "/" + name + "/" + s.id;
  s.size_bytes = 413208;
  s.duration_seconds = 0.058;
  s.runsc_version = "go-160fafc42237";
  s.taken_at = now;
  a.status.latest_snapshot = s;
  api::SetCondition(a.status.conditions,
                    api::Condition{"Ready", api::ConditionStatus::kFalse, 1, {}, "Suspended",
                                   "suspended; snapshot committed to the store"},
                    now);
  api::SetCondition(a.status.conditions,
                    api::Condition{"Progressing", api::ConditionStatus::kFalse, 1, {}, "Settled",
                                   "no transition in progress"},
                    now);
  return {{"status", api::ActorToJson(a)["status"]}};
}

// Retries what a busy API server answers with 429/5xx; false on anything else.
bool Retry(const std::function<Status()>& fn, const std::string& what, std::atomic<long>& failed) {
  for (int attempt = 0;; ++attempt) {
    Status s = fn();
    if (s.ok() || s.code() == Code::kAlreadyExists) return true;
    if (s.code() == Code::kUnavailable && attempt < 10) {
      std::this_thread::sleep_for(200ms);
      continue;
    }
    if (failed++ < 5) std::fprintf(stderr, "%s: %s\n", what.c_str(), s.ToString().c_str());
    return false;
  }
}

int List(const Flags& f) {
  auto client = NewClient(f.Get("kubeconfig"));
  double best = 1e9;
  size_t actors = 0, workers = 0;
  for (long r = 0; r < f.Int("repeat", 3); ++r) {
    const auto start = SteadyClock::now();
    auto a = client->List(kActors, "", ListOptions{});
    auto w = client->List(kWorkers, "", ListOptions{});
    const double s = Seconds(SteadyClock::now() - start);
    if (!a.ok() || !w.ok()) {
      std::fprintf(stderr, "list: %s\n", (!a.ok() ? a.status() : w.status()).ToString().c_str());
      return 1;
    }
    actors = (*a)["items"].size();
    workers = (*w)["items"].size();
    best = std::min(best, s);
  }
  std::printf("baseline: paged LIST of %zu actors + %zu workers, parsed: %.2f s (best of %ld)\n",
              actors, workers, best, f.Int("repeat", 3));
  std::printf("RESULT list_s=%.3f\n", best);
  return 0;
}

int Populate(const Flags& f) {
  const std::string kubeconfig = f.Get("kubeconfig"), ns = f.Get("namespace"), node = f.Get("node");
  const long actors = f.Int("actors", 10000), workers = f.Int("workers", 1000);
  const int threads = static_cast<int>(f.Int("threads", 16));
  const std::string prefix = f.Get("prefix", "fleet");
  if (kubeconfig.empty() || ns.empty() || node.empty()) {
    std::fprintf(stderr, "usage: bench_fleet --kubeconfig K --namespace NS --node N "
                         "[--actors 10000] [--workers 1000] [--threads 16] [--prefix fleet]\n");
    return 2;
  }
  std::atomic<long> failed{0};

  auto start = SteadyClock::now();
  Parallel(kubeconfig, workers, threads, [&](KubeClient& c, long i) {
    const std::string name = node + "-slot" + std::to_string(i);
    json w = {{"apiVersion", api::kApiVersion},
              {"kind", api::kWorkerKind},
              {"metadata", {{"name", name}, {"labels", {{api::kNodeLabel, node}}}}},
              {"spec", {{"nodeName", node}, {"devices", json::array()}}}};
    bool created = false;
    if (!Retry([&] {
          auto r = c.Create(kWorkers, "", w);
          created = r.ok();
          return r.ok() ? OkStatus() : r.status();
        }, "create worker " + name, failed)) return;
    if (!created) return;
    Retry([&] {
      auto r = c.Patch(kWorkers, "", name, PatchType::kMerge, {{"status", {{"phase", "Free"}}}}, "status");
      return r.ok() ? OkStatus() : r.status();
    }, "worker status " + name, failed);
  });
  const double worker_s = Seconds(SteadyClock::now() - start);
  std::printf("populate: %ld workers of node %s in %.1f s (%.0f objects/s, create + status, %d threads)\n",
              workers, node.c_str(), worker_s, workers / worker_s, threads);

  start = SteadyClock::now();
  Parallel(kubeconfig, actors, threads, [&](KubeClient& c, long i) {
    const std::string name = Numbered(prefix, i);
    bool created = false;
    if (!Retry([&] {
          auto r = c.Create(kActors, ns, SuspendedActor(ns, name, node));
          created = r.ok();
          return r.ok() ? OkStatus() : r.status();
        }, "create actor " + name, failed)) return;
    if (!created) return;
    Retry([&] {
      auto r = c.Patch(kActors, ns, name, PatchType::kMerge, SuspendedStatus(ns, name, node), "status");
      return r.ok() ? OkStatus() : r.status();
    }, "actor status " + name, failed);
  });
  const double actor_s = Seconds(SteadyClock::now() - start);
  std::printf("populate: %ld suspended actors in %.1f s (%.0f actors/s, create + status, %d threads)\n",
              actors, actor_s, actors / actor_s, threads);
  std::printf("RESULT populate_workers_s=%.1f populate_actors_s=%.1f failed=%ld\n", worker_s, actor_s,
              failed.load());
  return failed.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace stasis::bench

int main(int argc, char** argv) {
  stasis::bench::Flags f;
  if (!stasis::bench::ParseFlags(argc, argv, f) || (f.mode != "populate" && f.mode != "list")) {
    std::fprintf(stderr, "usage: bench_fleet populate|list --kubeconfig K … (see the file's header)\n");
    return 2;
  }
  return f.mode == "list" ? stasis::bench::List(f) : stasis::bench::Populate(f);
}
