// The fleet for hack/bench/scale.sh, on a real API server (a benchmark helper, not a test):
//
//   bench_fleet populate --kubeconfig K --namespace NS --actors 10000 --node N --workers 1000
//                        [--threads 16] [--prefix fleet] [--first 0]
//                        [--nodes K --node-prefix P] [--desired Suspended|Running] [--unpinned 1]
//                        [--bundle DIR]
//   bench_fleet list --kubeconfig K [--repeat 3]
//   bench_fleet bind-ceiling --kubeconfig K --namespace NS [--actors 2000] [--threads 16]
//   bench_fleet probe --kubeconfig K --namespace NS --configmap NAME [--interval-ms 50] [--seconds 0]
//   bench_fleet churn --kubeconfig K --namespace NS --per-minute N --minutes M [--settle-s 120]
//
// list: the baseline for an initial sync, in the same run: a paged LIST (pages of 500, as the
// informer asks) of every Actor and every Worker, parsed into JSON and nothing else — what any
// client of this API server pays before it can cache an object. Prints the best of --repeat.
//
// bind-ceiling: the baseline for the binder, in the same run: --actors actors of its own
// (wanting Suspended, so that no controller or agent acts on them) given exactly the binder's
// two writes each — the node label, then status.nodeName with the resourceVersion it read — by
// --threads clients as fast as the API server takes them. Prints the binds per second.
//
// probe: a client unrelated to stasis (its own identity in K) measuring what the fleet costs
// everyone else: one GET of a ConfigMap every --interval-ms, for --seconds (0: until SIGINT or
// SIGTERM). Prints the latency's p50, p99 and max and the failed requests.
//
// churn: steady churn on the RUNNING actors of NS, N desired-state flips a minute, evenly spaced,
// for M minutes: every other flip suspends the next of them, and the flips between resume the
// oldest this run suspended (once five are suspended). Then waits (--settle-s at most) until
// every flipped actor shows the status its last flip asked for, and prints the flips made and
// settled (`RESULT flips=… settled=…`).
//
// populate:
// Actors <prefix>-00000…, pinned to node N, SUSPENDED the way a node agent leaves them after a
// suspend (finalizer, status with a committed latestSnapshot and the Ready/Progressing
// conditions), so that the controller and the agent cache realistic objects and find nothing to
// do. Workers "<N>-slot<i>" (the names `stasis node --workers` uses) labelled with the node,
// Free. Both in parallel, one connection per thread; objects that exist are left as they are.
// With --nodes K the actors are spread over the nodes <P>-0000…<P>-<K-1> (bench_fleet_sim's
// names) instead of --node, round robin, and no Worker is made (each simulated agent makes its
// own). --desired Running makes actors a user has just asked to run instead: no status, pinned
// to their node, or with --unpinned 1 bound by the controller. --first numbers the actors from
// there (a second batch beside a first).
// Prints the rates and a `RESULT k=v …` line.
#include <cstdio>
#include <deque>
#include <map>
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

// An actor pinned to `node` (none when empty), wanting `desired`. A suspended one carries the
// finalizer and node label its agent would have added.
json FleetActor(const std::string& ns, const std::string& name, const std::string& node, api::DesiredState desired,
               const std::string& bundle) {
  api::Actor a;
  a.metadata.namespace_ = ns;
  a.metadata.name = name;
  if (desired == api::DesiredState::kSuspended) {
    a.metadata.labels[api::kNodeLabel] = node;
    a.metadata.finalizers = {api::kActorFinalizer};
  }
  a.spec.bundle = bundle;
  a.spec.node_name = node;
  a.spec.desired_state = desired;
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
  const long nodes = f.Int("nodes", 0), first = f.Int("first", 0);
  const long actors = f.Int("actors", 10000), workers = nodes > 0 ? 0 : f.Int("workers", 1000);
  const int threads = static_cast<int>(f.Int("threads", 16));
  const std::string prefix = f.Get("prefix", "fleet"), node_prefix = f.Get("node-prefix", "fleet-node");
  const bool running = f.Get("desired", "Suspended") == "Running", unpinned = f.Get("unpinned") == "1";
  const std::string bundle = f.Get("bundle", "/var/lib/stasis/bundles/counter");
  if (kubeconfig.empty() || ns.empty() || (node.empty() && nodes <= 0)) {
    std::fprintf(stderr, "usage: bench_fleet populate --kubeconfig K --namespace NS --node N | --nodes K "
                         "[--actors 10000] [--workers 1000] … (see the file's header)\n");
    return 2;
  }
  // The node actor i is pinned to.
  auto node_of = [&](long i) { return unpinned ? std::string() : nodes > 0 ? FleetNodeName(node_prefix, i % nodes) : node; };
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
  if (workers > 0) {
    std::printf("populate: %ld workers of node %s in %.1f s (%.0f objects/s, create + status, %d threads)\n",
                workers, node.c_str(), worker_s, workers / worker_s, threads);
  }

  start = SteadyClock::now();
  Parallel(kubeconfig, actors, threads, [&](KubeClient& c, long i) {
    const std::string name = Numbered(prefix, first + i), pinned = node_of(first + i);
    const auto desired = running ? api::DesiredState::kRunning : api::DesiredState::kSuspended;
    bool created = false;
    if (!Retry([&] {
          auto r = c.Create(kActors, ns, FleetActor(ns, name, pinned, desired, bundle));
          created = r.ok();
          return r.ok() ? OkStatus() : r.status();
        }, "create actor " + name, failed)) return;
    if (!created || running) return;
    Retry([&] {
      auto r = c.Patch(kActors, ns, name, PatchType::kMerge, SuspendedStatus(ns, name, pinned), "status");
      return r.ok() ? OkStatus() : r.status();
    }, "actor status " + name, failed);
  });
  const double actor_s = Seconds(SteadyClock::now() - start);
  std::printf("populate: %ld %s actors in %.1f s (%.0f actors/s, %s, %d threads)\n", actors,
              running ? "running (asked)" : "suspended", actor_s, actors / actor_s,
              running ? "create" : "create + status", threads);
  std::printf("RESULT populate_workers_s=%.1f populate_actors_s=%.1f failed=%ld\n", worker_s, actor_s,
              failed.load());
  return failed.load() == 0 ? 0 : 1;
}

int BindCeiling(const Flags& f) {
  const std::string kubeconfig = f.Get("kubeconfig"), ns = f.Get("namespace");
  const long n = f.Int("actors", 2000);
  const int threads = static_cast<int>(f.Int("threads", 16));
  std::atomic<long> failed{0};
  Parallel(kubeconfig, n, threads, [&](KubeClient& c, long i) {
    const std::string name = Numbered("ceiling", i);
    Retry([&] {
      auto r = c.Create(kActors, ns, FleetActor(ns, name, "", api::DesiredState::kSuspended, "/ceiling"));
      return r.ok() ? OkStatus() : r.status();
    }, "create actor " + name, failed);
  });
  const auto start = SteadyClock::now();
  Parallel(kubeconfig, n, threads, [&](KubeClient& c, long i) {
    const std::string name = Numbered("ceiling", i), node = "ceiling-node";
    auto labeled = c.Patch(kActors, ns, name, PatchType::kMerge, {{"metadata", {{"labels", {{api::kNodeLabel, node}}}}}});
    if (!labeled.ok()) {
      if (failed++ < 5) std::fprintf(stderr, "label %s: %s\n", name.c_str(), labeled.status().ToString().c_str());
      return;
    }
    json patch = {{"metadata", {{"resourceVersion", (*labeled)["metadata"]["resourceVersion"]}}},
                  {"status", {{"nodeName", node}}}};
    auto bound = c.Patch(kActors, ns, name, PatchType::kMerge, patch, "status");
    if (!bound.ok() && failed++ < 5) std::fprintf(stderr, "bind %s: %s\n", name.c_str(), bound.status().ToString().c_str());
  });
  const double s = Seconds(SteadyClock::now() - start);
  std::printf("bind ceiling: %ld binds (label + status.nodeName) by %d clients in %.1f s: %.1f binds/s\n", n, threads,
              s, n / s);
  std::printf("RESULT bind_ceiling_per_s=%.2f failed=%ld\n", n / s, failed.load());
  return failed.load() == 0 ? 0 : 1;
}

int Probe(const Flags& f) {
  InstallStopSignals();
  const std::string ns = f.Get("namespace"), name = f.Get("configmap");
  const auto interval = std::chrono::milliseconds(f.Int("interval-ms", 50));
  const long seconds = f.Int("seconds", 0);
  const ResourceType configmaps{"", "v1", "configmaps", true};
  auto client = NewClient(f.Get("kubeconfig"));
  std::vector<double> ms;
  long failed = 0;
  const auto end = SteadyClock::now() + std::chrono::seconds(seconds);
  while (!g_stop && (seconds == 0 || SteadyClock::now() < end)) {
    const auto t0 = SteadyClock::now();
    auto r = client->Get(configmaps, ns, name);
    ms.push_back(Millis(SteadyClock::now() - t0));
    if (!r.ok() && failed++ < 5) std::fprintf(stderr, "probe: %s\n", r.status().ToString().c_str());
    std::this_thread::sleep_until(t0 + interval);
  }
  if (ms.empty()) return 1;
  std::printf("probe: %zu GETs, p50 %.1f ms, p99 %.1f ms, max %.1f ms, %ld failed\n", ms.size(), Percentile(ms, 50),
              Percentile(ms, 99), Percentile(ms, 100), failed);
  std::printf("RESULT probe_n=%zu probe_p50_ms=%.1f probe_p99_ms=%.1f probe_max_ms=%.1f failed=%ld\n", ms.size(),
              Percentile(ms, 50), Percentile(ms, 99), Percentile(ms, 100), failed);
  return failed == 0 ? 0 : 1;
}

// The status an actor shows once its desired state is reached (the states churn asks for).
std::string SettledStatus(const std::string& desired) {
  return desired == "Running" ? "STATUS_RUNNING" : "STATUS_SUSPENDED";
}

int Churn(const Flags& f) {
  InstallStopSignals();
  const std::string ns = f.Get("namespace");
  const long per_minute = f.Int("per-minute", 1), minutes = f.Int("minutes", 1), lag = 5;
  if (per_minute < 1 || minutes < 1) {
    std::fprintf(stderr, "churn: --per-minute and --minutes must be at least 1\n");
    return 2;
  }
  auto client = NewClient(f.Get("kubeconfig"));
  auto listed = client->List(kActors, ns);
  if (!listed.ok()) {
    std::fprintf(stderr, "churn: list: %s\n", listed.status().ToString().c_str());
    return 1;
  }
  std::vector<std::string> running;
  for (const auto& a : (*listed)["items"]) {
    if (a.value("status", json::object()).value("status", "") == "STATUS_RUNNING") running.push_back(a["metadata"]["name"]);
  }
  const long flips = per_minute * minutes;
  if (static_cast<long>(running.size()) < flips / 2 + lag) {
    std::fprintf(stderr, "churn: %zu RUNNING actors in %s; %ld flips need %ld\n", running.size(), ns.c_str(), flips,
                 flips / 2 + lag);
    return 1;
  }
  std::map<std::string, std::string> desired;  // actor → what its last flip asked
  std::deque<std::string> suspended;            // by this run, oldest first
  size_t next = 0;                              // the next RUNNING actor to suspend
  const auto gap = std::chrono::microseconds(60'000'000 / per_minute);
  const auto start = SteadyClock::now();
  long made = 0, failed = 0;
  for (long k = 0; k < flips && !g_stop; ++k) {
    std::this_thread::sleep_until(start + gap * k);
    const bool suspend = k % 2 == 0 || static_cast<long>(suspended.size()) < lag;
    if (suspend && next == running.size()) break;
    const std::string name = suspend ? running[next++] : suspended.front();
    if (!suspend) suspended.pop_front();
    const std::string want = suspend ? "Suspended" : "Running";
    auto r = client->Patch(kActors, ns, name, PatchType::kMerge, {{"spec", {{"desiredState", want}}}});
    if (!r.ok()) {
      if (failed++ < 5) std::fprintf(stderr, "churn: %s: %s\n", name.c_str(), r.status().ToString().c_str());
      continue;
    }
    desired[name] = want;
    if (suspend) suspended.push_back(name);
    ++made;
  }
  const double churn_s = Seconds(SteadyClock::now() - start);
  long settled = 0;
  const auto settle_end = SteadyClock::now() + std::chrono::seconds(f.Int("settle-s", 120));
  while (!g_stop) {
    settled = 0;
    if (auto now = client->List(kActors, ns); now.ok()) {
      for (const auto& a : (*now)["items"]) {
        auto it = desired.find(a["metadata"].value("name", ""));
        if (it != desired.end() && a.value("status", json::object()).value("status", "") == SettledStatus(it->second)) ++settled;
      }
    }
    if (settled == static_cast<long>(desired.size()) || SteadyClock::now() > settle_end) break;
    std::this_thread::sleep_for(1s);
  }
  std::printf("churn: %ld flips over %.1f s (%ld failed), %ld of %zu actors settled %.1f s after the last\n", made,
              churn_s, failed, settled, desired.size(), Seconds(SteadyClock::now() - start) - churn_s);
  std::printf("RESULT flips=%ld churn_s=%.1f settled=%ld actors=%zu failed=%ld\n", made, churn_s, settled,
              desired.size(), failed);
  return failed == 0 && settled == static_cast<long>(desired.size()) ? 0 : 1;
}

}  // namespace
}  // namespace stasis::bench

int main(int argc, char** argv) {
  stasis::bench::Flags f;
  if (!stasis::bench::ParseFlags(argc, argv, f) ||
      (f.mode != "populate" && f.mode != "list" && f.mode != "bind-ceiling" && f.mode != "probe" &&
       f.mode != "churn")) {
    std::fprintf(stderr, "usage: bench_fleet populate|list|bind-ceiling|probe|churn --kubeconfig K … (see the file's header)\n");
    return 2;
  }
  if (f.mode == "list") return stasis::bench::List(f);
  if (f.mode == "probe") return stasis::bench::Probe(f);
  if (f.mode == "churn") return stasis::bench::Churn(f);
  return f.mode == "bind-ceiling" ? stasis::bench::BindCeiling(f) : stasis::bench::Populate(f);
}
