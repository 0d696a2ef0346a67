// Transition throughput against the API server's own write ceiling, in the same run (a program,
// not a test; hack/bench/transitions.sh brings up the control plane and the node agent):
//
//   bench_transitions flip --kubeconfig K --namespace NS --node N --bundle DIR --actors 100
//                          [--rounds 4] [--threads 4] [--timeout-s 300]
//       creates --actors Actors pinned to N (label stasis.dev/bench=flip), waits until all are
//       STATUS_RUNNING, then flips them all Paused, Running, … (--rounds times): every round
//       patches spec.desiredState of each actor from --threads threads (t0 just before its
//       PATCH) while one watch records when its status.status reaches the new state (t1).
//       Prints transitions/s per round (actors ÷ first t0 → last t1), p50/p99 of t1 − t0.
//   bench_transitions ceiling --kubeconfig K --namespace NS --actors 100 [--threads 4]
//                             [--seconds 20] [--watchers 0] [--mix FILE]
//       a baseline on --actors Actors of its own (label stasis.dev/bench=ceiling, pinned to
//       no node: nobody else writes them), from --threads clients in a tight loop. Without
//       --mix: /status merge patches of one small field, round-robin; prints writes/s. With
//       --watchers W, W watches of those actors (each parsing every event, as an informer
//       does) are open during the loop: the fan-out every write of a watched object costs the
//       API server. With --mix (hack/bench/request_mix.py's file: the requests a real
//       transition made, recorded from the API server's audit log): each client replays whole
//       transitions on actors of its own — the same requests, in the same order, with the same
//       bodies (the resourceVersion precondition the agent sends set to the actor's current
//       one, Events given names of their own), Paused and Running alternating per actor; an
//       actor with no status yet goes through one unmeasured Paused and Running first, so
//       that every write replaces a status like the agent's. Prints transitions/s and
//       requests/s. Every request that fails is counted and fails the run (exit 1).
//
// Both end with a `RESULT k=v …` line; transitions.sh turns them into the ratio.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
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
const ResourceType kEvents{"", "v1", "events", true};
const ResourceType kWorkers{api::kGroup, api::kVersion, api::kWorkerResource, false};
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
  double total_s = 0;
  long total = 0, failures = 0;
  for (long r = 0; r < rounds; ++r) {
    const bool pause = r % 2 == 0;
    const std::string target = pause ? "STATUS_PAUSED" : "STATUS_RUNNING";
    std::vector<SteadyClock::time_point> t0(n), t1(n);
    std::vector<char> sent(n, 0), done(n, 0);
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
    total += static_cast<long>(round_ms.size());
    latencies_ms.insert(latencies_ms.end(), round_ms.begin(), round_ms.end());
  }
  if (rounds == 0) return 0;  // boot only (transitions.sh counts the agent's requests after it)
  std::printf("flip: %ld transitions, %.1f/s; latency spec change → status p50 %.0f ms, p99 %.0f ms (nearest rank)\n",
              total, total / total_s, Percentile(latencies_ms, 50), Percentile(latencies_ms, 99));
  std::printf("RESULT transitions=%ld transitions_per_s=%.2f p50_ms=%.1f p99_ms=%.1f patch_failures=%ld\n", total,
              total / total_s, Percentile(latencies_ms, 50), Percentile(latencies_ms, 99), failures);
  return failures == 0 ? 0 : 1;
}

// One recorded request of a transition (hack/bench/request_mix.py).
struct MixRequest {
  std::string verb, resource, subresource;
  json body;
};
using Mix = std::map<std::string, std::vector<MixRequest>>;  // by desiredState: Paused, Running

Result<Mix> LoadMix(const std::string& path) {
  std::ifstream in(path);
  const json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  Mix mix;
  for (const char* desired : {"Paused", "Running"}) {
    if (!j.is_object() || !j.contains(desired) || j[desired].value("requests", json::array()).empty()) {
      return Status(Code::kInvalidArgument, path + ": no " + desired + " transition (hack/bench/request_mix.py)");
    }
    for (const auto& r : j[desired]["requests"]) {
      MixRequest m{r.value("verb", ""), r.value("resource", ""), r.value("subresource", ""),
                   r.value("body", json())};
      // What the replay knows how to aim at its own actors; anything else must be taught to
      // it, not dropped (a lighter mix would flatter the ceiling).
      const bool known = (m.resource == "actors" && (m.verb == "patch" || m.verb == "get")) ||
                         (m.resource == "events" && (m.verb == "create" || m.verb == "patch")) ||
                         (m.resource == "workers" && m.verb == "patch" && m.subresource == "status");
      if (!known) {
        return Status(Code::kInvalidArgument, path + ": the replay does not know " + m.verb + " " + m.resource +
                                                (m.subresource.empty() ? "" : "/" + m.subresource));
      }
      mix[desired].push_back(std::move(m));
    }
  }
  return mix;
}

// What a replaying client knows of one of its actors, as the agent would.
struct ReplayActor {
  std::string name, uid, resource_version, last_event;
  std::string worker, worker_resource_version;  // the Worker it holds while not paused
  bool paused = false;      // the desired state its last transition set
  bool has_status = false;  // no status.status yet (fresh, or only the one-field loop's): warmed up first
};

// Replays one transition's requests on `a`; the number that succeeded, or an error (the run fails).
Result<long> ReplayTransition(KubeClient& c, const std::string& ns, const std::vector<MixRequest>& requests,
                              ReplayActor& a, std::atomic<long>& event_seq) {
  long done = 0;
  for (const auto& m : requests) {
    json body = m.body;
    Result<json> r = Status(Code::kInternal, "unreached");
    if (m.resource == "actors") {
      if (body.is_object() && body.contains("metadata") && body["metadata"].contains("resourceVersion")) {
        body["metadata"]["resourceVersion"] = a.resource_version;
      }
      r = m.verb == "get" ? c.Get(kActors, ns, a.name)
                          : c.Patch(kActors, ns, a.name, PatchType::kMerge, body, m.subresource);
      if (r.ok()) a.resource_version = (*r)["metadata"].value("resourceVersion", a.resource_version);
    } else if (m.resource == "workers") {
      // A claim is a merge patch with the resourceVersion seen; a free, a JSON patch whose
      // tests expect this actor as the holder: both aimed at this actor and its worker.
      if (body.is_array()) {
        for (auto& op : body) {
          if (op.value("path", "") == "/status/actorRef/name") op["value"] = a.name;
          if (op.value("path", "") == "/status/actorRef/namespace") op["value"] = ns;
        }
      } else {
        if (body.contains("metadata") && body["metadata"].contains("resourceVersion")) {
          body["metadata"]["resourceVersion"] = a.worker_resource_version;
        }
        if (body.contains("status") && body["status"].contains("actorRef") && body["status"]["actorRef"].is_object()) {
          body["status"]["actorRef"] = {{"namespace", ns}, {"name", a.name}};
        }
      }
      r = c.Patch(kWorkers, "", a.worker, body.is_array() ? PatchType::kJson : PatchType::kMerge, body, "status");
      if (r.ok()) a.worker_resource_version = (*r)["metadata"].value("resourceVersion", "");
    } else if (m.verb == "create") {
      // Unique across runs on the same actors (the clock) and within one (the sequence).
      static const unsigned long run = static_cast<unsigned long>(
          std::chrono::system_clock::now().time_since_epoch().count() & 0xffffffffffff);
      char suffix[48];
      std::snprintf(suffix, sizeof suffix, ".%012lx%06lx", run, static_cast<unsigned long>(event_seq++));
      body["metadata"] = {{"name", a.name + suffix}, {"namespace", ns}};
      body["involvedObject"]["name"] = a.name;
      body["involvedObject"]["namespace"] = ns;
      body["involvedObject"]["uid"] = a.uid;
      body["involvedObject"]["resourceVersion"] = a.resource_version;
      r = c.Create(kEvents, ns, body);
      if (r.ok()) a.last_event = a.name + suffix;
    } else {
      if (a.last_event.empty()) return Status(Code::kFailedPrecondition, "an Event patch before any Event");
      r = c.Patch(kEvents, ns, a.last_event, PatchType::kMerge, body);
    }
    if (!r.ok()) {
      return Status(r.status().code(), m.verb + " " + m.resource + (m.subresource.empty() ? "" : "/" + m.subresource) +
                                           " " + a.name + ": " + r.status().ToString());
    }
    ++done;
  }
  return done;
}

// The --mix ceiling: each of `threads` clients replays whole transitions on its own actors.
int MixCeiling(const Flags& f, const Mix& mix) {
  const std::string ns = f.Get("namespace");
  const long n = f.Int("actors", 100);
  const int threads = static_cast<int>(f.Int("threads", 4));
  const double seconds = static_cast<double>(f.Int("seconds", 20));
  auto lc = NewClient(f.Get("kubeconfig"));
  ListOptions lo;
  lo.label_selector = std::string(kBenchLabel) + "=ceiling";
  auto list = lc->List(kActors, ns, lo);
  if (!list.ok()) {
    std::fprintf(stderr, "ceiling: list: %s\n", list.status().ToString().c_str());
    return 1;
  }
  std::vector<ReplayActor> actors(n);
  long listed = 0;
  for (const auto& item : (*list)["items"]) {
    const long i = IndexOf(item["metadata"].value("name", ""));
    if (i < 0 || i >= n) continue;
    ++listed;
    ReplayActor& a = actors[i];
    a.name = item["metadata"].value("name", "");
    a.uid = item["metadata"].value("uid", "");
    a.resource_version = item["metadata"].value("resourceVersion", "");
    a.paused = item.value("/spec/desiredState"_json_pointer, "") == "Paused";
    a.has_status = item.contains("/status/status"_json_pointer);
  }
  if (listed != n) {
    std::fprintf(stderr, "ceiling: %ld of %ld actors listed\n", listed, n);
    return 1;
  }
  // One Worker per actor, held while the actor is not paused (as the agent's are), so that the
  // replayed claims and frees find it as the recorded ones did. Unmeasured.
  std::atomic<long> setup_failed{0};
  Parallel(f.Get("kubeconfig"), n, threads, [&](KubeClient& c, long i) {
    ReplayActor& a = actors[i];
    a.worker = Numbered(ns + "-ceiling-slot", i);
    auto created = c.Create(kWorkers, "", {{"apiVersion", api::kApiVersion},
                                           {"kind", api::kWorkerKind},
                                           {"metadata", {{"name", a.worker}, {"labels", {{api::kNodeLabel, "ceiling-node"}}}}},
                                           {"spec", {{"nodeName", "ceiling-node"}, {"devices", json::array()}}}});
    const json holder = a.paused ? json(nullptr) : json{{"namespace", ns}, {"name", a.name}};
    auto set = created.ok() || created.status().code() == Code::kAlreadyExists
                   ? c.Patch(kWorkers, "", a.worker, PatchType::kMerge,
                             {{"status", {{"phase", a.paused ? "Free" : "Held"}, {"actorRef", holder}}}}, "status")
                   : Result<json>(created.status());
    if (!set.ok()) {
      if (setup_failed++ < 3) std::fprintf(stderr, "ceiling: worker %s: %s\n", a.worker.c_str(), set.status().ToString().c_str());
      return;
    }
    a.worker_resource_version = (*set)["metadata"].value("resourceVersion", "");
  });
  if (setup_failed.load() > 0) return 1;
  std::atomic<long> transitions{0}, requests{0}, errors{0}, event_seq{0};
  std::atomic<bool> measuring{false};
  auto next = [&](KubeClient& c, ReplayActor& a) {
    auto r = ReplayTransition(c, ns, mix.at(a.paused ? "Running" : "Paused"), a, event_seq);
    if (!r.ok()) {
      if (errors++ < 5) std::fprintf(stderr, "ceiling: %s\n", r.status().ToString().c_str());
      return false;
    }
    a.paused = !a.paused;
    if (measuring.load()) {
      transitions++;
      requests += *r;
    }
    return true;
  };
  SteadyClock::time_point start;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto c = NewClient(f.Get("kubeconfig"));
      // Warm-up, unmeasured: an actor with no status yet is paused and resumed once.
      for (long i = t; i < n; i += threads) {
        if (actors[i].has_status) continue;
        if (!next(*c, actors[i]) || !next(*c, actors[i])) return;
        actors[i].has_status = true;
      }
    });
  }
  for (auto& th : pool) th.join();
  pool.clear();
  if (errors.load() > 0) return 1;
  measuring = true;
  start = SteadyClock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      if (t >= n) return;  // more clients than actors: this one has none
      auto c = NewClient(f.Get("kubeconfig"));
      for (long i = t; Seconds(SteadyClock::now() - start) < seconds; i = i + threads < n ? i + threads : t) {
        if (!next(*c, actors[i])) return;
      }
    });
  }
  for (auto& th : pool) th.join();
  const double s = Seconds(SteadyClock::now() - start);
  std::printf("ceiling, the agent's request mix: %ld transitions (%ld requests: %zu per Paused, %zu per Running) "
              "on %ld actors from %d threads in %.1f s = %.1f transitions/s, %.1f requests/s (%ld errors)\n",
              transitions.load(), requests.load(), mix.at("Paused").size(), mix.at("Running").size(), n, threads, s,
              transitions.load() / s, requests.load() / s, errors.load());
  std::printf("RESULT ceiling_transitions_per_s=%.2f ceiling_requests_per_s=%.2f errors=%ld\n", transitions.load() / s,
              requests.load() / s, errors.load());
  return errors.load() == 0 && transitions.load() > 0 ? 0 : 1;
}

int Ceiling(const Flags& f) {
  const std::string ns = f.Get("namespace");
  const long n = f.Int("actors", 100);
  const int threads = static_cast<int>(f.Int("threads", 4));
  const double seconds = static_cast<double>(f.Int("seconds", 20));
  if (!CreateAll(f, "ceiling", n, "ceiling", "", "/var/lib/stasis/bundles/none", api::DesiredState::kSuspended)) {
    return 1;
  }
  if (const std::string path = f.Get("mix"); !path.empty()) {
    auto mix = LoadMix(path);
    if (!mix.ok()) {
      std::fprintf(stderr, "ceiling: %s\n", mix.status().ToString().c_str());
      return 1;
    }
    return MixCeiling(f, *mix);
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
  std::vector<std::thread> pool;
  const auto start = SteadyClock::now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      auto c = NewClient(f.Get("kubeconfig"));
      while (Seconds(SteadyClock::now() - start) < seconds) {
        const long k = next++;
        const json patch = {{"status", {{"sandboxID", "bench-" + std::to_string(k)}}}};
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
  return errors.load() == 0 && writes.load() > 0 ? 0 : 1;
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
