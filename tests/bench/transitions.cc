// Transition throughput against the API server's own write ceiling, in the same run (a program,
// not a test; hack/bench/transitions.sh brings up the control plane and the node agent):
//
//   bench_transitions flip --kubeconfig K --namespace NS --node N --bundle DIR --actors 100
//                          [--rounds 4] [--threads 4] [--timeout-s 300] [--save-statuses FILE]
//       creates --actors Actors pinned to N (label stasis.dev/bench=flip), waits until all are
//       STATUS_RUNNING, then flips them all Paused, Running, … (--rounds times): every round
//       patches spec.desiredState of each actor from --threads threads (t0 just before its
//       PATCH) while one watch records when its status.status reaches the new state (t1).
//       Prints transitions/s per round (actors ÷ first t0 → last t1), p50/p99 of t1 − t0.
//       --save-statuses: writes the status the agent wrote on reaching each state (the last
//       actor of each round to arrive), for the ceiling's --statuses.
//   bench_transitions ceiling --kubeconfig K --namespace NS --actors 100 [--threads 4]
//                             [--seconds 20] [--watchers 0] [--statuses FILE]
//       the baseline: as many /status merge patches as --threads clients can make in a tight
//       loop, round-robin over --actors Actors of their own (label stasis.dev/bench=ceiling,
//       pinned to no node: nobody else writes them). Prints writes/s. With --watchers W, W
//       watches of those actors (each parsing every event, as an informer does) are open
//       during the loop: the fan-out every write of a watched object costs the API server.
//       With --statuses (a file flip --save-statuses wrote), each client alternates its actors
//       between the agent's own RUNNING and PAUSED statuses, each write the merge patch the
//       agent's code computes between them (api::ActorStatusMergePatch): the writes the agent
//       makes, in size and shape, instead of one small field.
//
// Both end with a `RESULT k=v …` line; transitions.sh turns them into the ratio.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/actor.h"
#include "api/json_mapping.h"
#include "api/names.h"
#include "tests/bench/bench_common.h"

namespace stasis::bench {
namespace {

using namespace std::chrono_literals;
const ResourceType kActors{api::kGroup, api::kVersion, api::kActorResource, true};
constexpr char kBenchLabel[] = "stasis.dev/bench";

std::string Numbered(const std::string& prefix, long i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05ld", i);
  return prefix + buf;
}

long IndexOf(const std::string& name) {
  auto dash = name.rfind('-');
  return dash == std::string::npos ? -1 : std::stol(name.substr(dash + 1));
}

json NewActor(const std::string& ns, const std::string& name, const std::string& label,
              const std::string& node, const std::string& bundle, api::DesiredState desired) {
  api::Actor a;
  a.metadata.namespace_ = ns;
  a.metadata.name = name;
  a.metadata.labels[kBenchLabel] = label;
  a.spec.bundle = bundle;
  a.spec.node_name = node;
  a.spec.desired_state = desired;
  return api::ActorTypedJson(a);
}

// Creates actors <prefix>-00000… in parallel; false if one could not be created.
bool CreateAll(const Flags& f, const std::string& prefix, long n, const std::string& label,
               const std::string& node, const std::string& bundle, api::DesiredState desired) {
  std::atomic<long> failed{0};
  Parallel(f.Get("kubeconfig"), n, static_cast<int>(f.Int("threads", 4)), [&](KubeClient& c, long i) {
    for (int attempt = 0;; ++attempt) {
      auto r = c.Create(kActors, f.Get("namespace"),
                        NewActor(f.Get("namespace"), Numbered(prefix, i), label, node, bundle, desired));
      if (r.ok() || r.status().code() == Code::kAlreadyExists) return;
      if (r.status().code() == Code::kUnavailable && attempt < 10) {
        std::this_thread::sleep_for(200ms);
        continue;
      }
      if (failed++ < 3) std::fprintf(stderr, "create: %s\n", r.status().ToString().c_str());
      return;
    }
  });
  return failed.load() == 0;
}

// The status of every flip actor, from one LIST; and that LIST's resourceVersion.
std::string ListStates(KubeClient& c, const std::string& ns, std::vector<std::string>& states) {
  ListOptions lo;
  lo.label_selector = std::string(kBenchLabel) + "=flip";
  auto list = c.List(kActors, ns, lo);
  if (!list.ok()) return "";
  for (const auto& item : (*list)["items"]) {
    long i = IndexOf(item["metadata"].value("name", ""));
    if (i >= 0 && i < static_cast<long>(states.size())) {
      states[i] = item.value("/status/status"_json_pointer, "");
    }
  }
  return (*list)["metadata"].value("resourceVersion", "");
}

int Flip(const Flags& f) {
  const std::string ns = f.Get("namespace");
  const long n = f.Int("actors", 100), rounds = f.Int("rounds", 4);
  const int threads = static_cast<int>(f.Int("threads", 4));
  const auto timeout = std::chrono::seconds(f.Int("timeout-s", 300));
  if (!CreateAll(f, "flip", n, "flip", f.Get("node"), f.Get("bundle"), api::DesiredState::kRunning)) return 1;
  auto client = NewClient(f.Get("kubeconfig"));

  std::vector<std::string> states(n);
  const auto boot = SteadyClock::now();
  std::string rv;
  while (true) {
    rv = ListStates(*client, ns, states);
    const long running = std::count(states.begin(), states.end(), "STATUS_RUNNING");
    if (running == n) break;
    if (SteadyClock::now() - boot > timeout) {
      std::fprintf(stderr, "flip: only %ld of %ld actors reached STATUS_RUNNING\n", running, n);
      return 1;
    }
    std::this_thread::sleep_for(200ms);
  }
  std::printf("flip: %ld actors STATUS_RUNNING after %.1f s\n", n, Seconds(SteadyClock::now() - boot));

  std::vector<double> latencies_ms;
  json saved_statuses = json::object();
  double total_s = 0;
  long total = 0, failures = 0;
  for (long r = 0; r < rounds; ++r) {
    const bool pause = r % 2 == 0;
    const std::string target = pause ? "STATUS_PAUSED" : "STATUS_RUNNING";
    std::vector<SteadyClock::time_point> t0(n), t1(n);
    std::vector<char> sent(n, 0), done(n, 0);
    json last_status;  // of the last actor to arrive: the agent's status at the target state
    std::mutex mu;
    std::condition_variable cv;
    long remaining = n;
    std::atomic<bool> cancel{false};
    rv = ListStates(*client, ns, states);
    std::thread watcher([&] {
      auto wc = NewClient(f.Get("kubeconfig"));
      while (!cancel.load()) {
        WatchOptions wo;
        wo.resource_version = rv;
        wo.label_selector = std::string(kBenchLabel) + "=flip";
        wo.timeout_seconds = 600;
        Status watched = wc->Watch(kActors, ns, wo, [&](const json& event) {
          const auto now = SteadyClock::now();
          const json& obj = event.at("object");
          rv = obj["metadata"].value("resourceVersion", rv);
          long i = IndexOf(obj["metadata"].value("name", ""));
          if (i < 0 || i >= n || obj.value("/status/status"_json_pointer, "") != target) return true;
          std::lock_guard lock(mu);
          if (sent[i] && !done[i]) {
            done[i] = 1;
            t1[i] = now;
            last_status = obj.value("status", json::object());
            if (--remaining == 0) cv.notify_all();
          }
          return !cancel.load();
        }, &cancel);
        if (watched.ok() || cancel.load()) continue;
        // A watch the server refused (410 Gone: rv compacted) would fail again at once: list
        // anew, and count an actor already at the target as arrived now (an upper bound).
        std::fprintf(stderr, "flip: watch: %s; listing again\n", watched.ToString().c_str());
        std::this_thread::sleep_for(200ms);
        std::vector<std::string> now_states(n);
        const std::string listed = ListStates(*wc, ns, now_states);
        if (listed.empty()) continue;
        std::lock_guard lock(mu);
        rv = listed;
        for (long i = 0; i < n; ++i) {
          if (sent[i] && !done[i] && now_states[i] == target) {
            done[i] = 1;
            t1[i] = SteadyClock::now();
            if (--remaining == 0) cv.notify_all();
          }
        }
      }
    });
    std::this_thread::sleep_for(200ms);  // the watch is established before the first PATCH
    const json patch = {{"spec", {{"desiredState", pause ? "Paused" : "Running"}}}};
    Parallel(f.Get("kubeconfig"), n, threads, [&](KubeClient& c, long i) {
      {
        std::lock_guard lock(mu);
        t0[i] = SteadyClock::now();
        sent[i] = 1;
      }
      auto p = c.Patch(kActors, ns, Numbered("flip", i), PatchType::kMerge, patch);
      if (!p.ok()) {
        std::fprintf(stderr, "patch: %s\n", p.status().ToString().c_str());
        std::lock_guard lock(mu);
        sent[i] = 0;
        if (!done[i]) {
          done[i] = 1;
          failures++;
          if (--remaining == 0) cv.notify_all();
        }
      }
    });
    {
      std::unique_lock lock(mu);
      cv.wait_for(lock, timeout, [&] { return remaining == 0; });
    }
    cancel = true;
    watcher.join();
    std::lock_guard lock(mu);
    if (remaining > 0) {
      std::fprintf(stderr, "flip: round %ld: %ld of %ld actors did not reach %s in time\n", r, remaining, n,
                   target.c_str());
      return 1;
    }
    auto first = *std::min_element(t0.begin(), t0.end());
    SteadyClock::time_point last{};
    std::vector<double> round_ms;
    for (long i = 0; i < n; ++i) {
      if (!sent[i]) continue;
      last = std::max(last, t1[i]);
      round_ms.push_back(Millis(t1[i] - t0[i]));
    }
    const double s = Seconds(last - first);
    std::printf("flip: round %ld → %s: %zu transitions in %.2f s = %.1f/s; latency p50 %.0f ms, p99 %.0f ms\n", r,
                target.c_str(), round_ms.size(), s, round_ms.size() / s, Percentile(round_ms, 50),
                Percentile(round_ms, 99));
    total_s += s;
    saved_statuses[target] = last_status;
    total += static_cast<long>(round_ms.size());
    latencies_ms.insert(latencies_ms.end(), round_ms.begin(), round_ms.end());
  }
  if (rounds == 0) return 0;  // boot only (transitions.sh counts the agent's requests after it)
  if (const std::string path = f.Get("save-statuses"); !path.empty()) {
    std::ofstream(path) << saved_statuses.dump(2) << "\n";
  }
  std::printf("flip: %ld transitions, %.1f/s; latency spec change → status p50 %.0f ms, p99 %.0f ms (nearest rank)\n",
              total, total / total_s, Percentile(latencies_ms, 50), Percentile(latencies_ms, 99));
  std::printf("RESULT transitions=%ld transitions_per_s=%.2f p50_ms=%.1f p99_ms=%.1f patch_failures=%ld\n", total,
              total / total_s, Percentile(latencies_ms, 50), Percentile(latencies_ms, 99), failures);
  return failures == 0 ? 0 : 1;
}

// The merge patches RUNNING → PAUSED and PAUSED → RUNNING between the statuses the agent wrote
// (flip --save-statuses), as the agent's status writes compute them.
Result<std::vector<json>> ShapedPatches(const std::string& path) {
  std::ifstream in(path);
  const json saved = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!saved.is_object() || !saved.contains("STATUS_RUNNING") || !saved.contains("STATUS_PAUSED")) {
    return Status(Code::kInvalidArgument, path + ": no RUNNING and PAUSED statuses (flip --save-statuses)");
  }
  auto actor_with = [](const json& status) {
    return api::ActorFromJson({{"apiVersion", api::kApiVersion},
                               {"kind", api::kActorKind},
                               {"metadata", {{"name", "shape"}, {"namespace", "shape"}}},
                               {"spec", {{"bundle", "/var/lib/stasis/bundles/none"}}},
                               {"status", status}});
  };
  auto running = actor_with(saved["STATUS_RUNNING"]);
  auto paused = actor_with(saved["STATUS_PAUSED"]);
  if (!running.ok()) return running.status();
  if (!paused.ok()) return paused.status();
  auto to_paused = api::ActorStatusMergePatch(*running, *paused);
  auto to_running = api::ActorStatusMergePatch(*paused, *running);
  if (!to_paused || !to_running) return Status(Code::kInvalidArgument, path + ": the two statuses are equal");
  return std::vector<json>{*to_paused, *to_running};
}

int Ceiling(const Flags& f) {
  const std::string ns = f.Get("namespace");
  const long n = f.Int("actors", 100);
  const int threads = static_cast<int>(f.Int("threads", 4));
  const double seconds = static_cast<double>(f.Int("seconds", 20));
  if (!CreateAll(f, "ceiling", n, "ceiling", "", "/var/lib/stasis/bundles/none", api::DesiredState::kSuspended)) {
    return 1;
  }
  std::atomic<long> writes{0}, errors{0}, next{0}, events{0};
  std::atomic<bool> stop_watching{false};
  std::vector<std::thread> watchers;
  const int watcher_count = static_cast<int>(f.Int("watchers", 0));
  if (watcher_count > 0) {
    auto lc = NewClient(f.Get("kubeconfig"));
    ListOptions lo;
    lo.limit = 1;
    auto page = lc->ListPage(kActors, ns, lo);
    if (!page.ok()) {
      std::fprintf(stderr, "list: %s\n", page.status().ToString().c_str());
      return 1;
    }
    const std::string rv = (*page)["metadata"].value("resourceVersion", "");
    for (int w = 0; w < watcher_count; ++w) {
      watchers.emplace_back([&, rv] {
        auto wc = NewClient(f.Get("kubeconfig"));
        WatchOptions wo;
        wo.resource_version = rv;
        wo.label_selector = std::string(kBenchLabel) + "=ceiling";
        wo.timeout_seconds = 600;
        Status watched = wc->Watch(kActors, ns, wo, [&](const json&) {
          events++;
          return !stop_watching.load();
        }, &stop_watching);
        if (!watched.ok()) std::fprintf(stderr, "ceiling watch ended: %s\n", watched.ToString().c_str());
      });
    }
    std::this_thread::sleep_for(200ms);  // established before the first write
  }
  // With --statuses: the agent's two statuses, and the patches its own code makes between them.
  std::vector<json> shaped;
  if (const std::string path = f.Get("statuses"); !path.empty()) {
    auto statuses = ShapedPatches(path);
    if (!statuses.ok()) {
      std::fprintf(stderr, "ceiling: %s\n", statuses.status().ToString().c_str());
      return 1;
    }
    shaped = std::move(*statuses);
  }
  std::vector<std::thread> pool;
  const auto start = SteadyClock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      auto c = NewClient(f.Get("kubeconfig"));
      while (Seconds(SteadyClock::now() - start) < seconds) {
        const long k = next++;
        // Without --statuses: a /status merge patch that changes one small field. With it:
        // actor k % n's next write in its RUNNING → PAUSED → RUNNING … cycle (round k / n).
        json patch = shaped.empty() ? json{{"status", {{"sandboxID", "bench-" + std::to_string(k)}}}}
                                    : shaped[static_cast<size_t>(k / n) % shaped.size()];
        auto r = c->Patch(kActors, ns, Numbered("ceiling", k % n), PatchType::kMerge, patch, "status");
        (r.ok() ? writes : errors)++;
      }
    });
  }
  for (auto& t : pool) t.join();
  const double s = Seconds(SteadyClock::now() - start);
  stop_watching = true;
  for (auto& t : watchers) t.join();
  std::printf("ceiling: %ld /status merge patches on %ld actors from %d threads in %.1f s = %.1f writes/s (%ld errors)",
              writes.load(), n, threads, s, writes.load() / s, errors.load());
  if (watcher_count > 0) std::printf(", %d watches open (%ld events seen)", watcher_count, events.load());
  std::printf("\n");
  std::printf("RESULT ceiling_writes_per_s=%.2f errors=%ld\n", writes.load() / s, errors.load());
  return errors.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace stasis::bench

int main(int argc, char** argv) {
  stasis::bench::Flags f;
  if (!stasis::bench::ParseFlags(argc, argv, f) || f.Get("kubeconfig").empty() || f.Get("namespace").empty() ||
      (f.mode != "flip" && f.mode != "ceiling")) {
    std::fprintf(stderr, "usage: bench_transitions flip|ceiling --kubeconfig K --namespace NS … (see the header)\n");
    return 2;
  }
  return f.mode == "flip" ? stasis::bench::Flip(f) : stasis::bench::Ceiling(f);
}
