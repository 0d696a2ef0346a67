// The controller runtime at scale, against a real kube-apiserver (a program, not a test; run
// by hack/bench/informer-scale.sh, which brings up the control plane and the CRDs):
//
//   bench_informer_scale create --kubeconfig K --namespace NS --count 10000 [--threads 8]
//       creates Actor objects bench-00000… in parallel and prints the create rate;
//   bench_informer_scale run --kubeconfig K --namespace NS --expect 10000 [--patches 5000]
//       [--patch-threads 4] [--queue-keys 100000] [--workers 4]
//       (a) an Informer over the actors: initial sync time and the process's peak RSS;
//       (b) watch events/s: writers merge-patch a label on N actors while the informer runs;
//           how fast its handler sees them, against the writers' own rate (the ceiling);
//           (b') then the same patches written while the informer is stopped, and the rate at
//           which it takes in that backlog when it resumes (its own ceiling);
//       (c) queue adds/s and reconciles/s: a Controller with a no-op Reconciler.
//
// Prints one line per figure, the targets (sync < 10 s, peak RSS < 150 MB, >= 5,000 queue
// adds/s) as met/missed, and a last `RESULT k=v …` line for scripts. Exits 0 when the
// measurements ran (met or not); 1 when something failed, and then no target verdict is
// printed at all — an informer that synced fewer objects than expected, a watch phase that saw
// fewer events than were written, or a queue that never went idle would flatter the figures —
// only why.
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "controller/controller.h"
#include "controller/informer.h"
#include "controller/kube_client.h"
#include "controller/metrics.h"
#include "controller/rest_config.h"

namespace stasis {
namespace {

using SteadyClock = std::chrono::steady_clock;
using namespace std::chrono_literals;

const ResourceType kActors{"stasis.dev", "v1alpha1", "actors", true};
constexpr char kBenchLabel[] = "stasis.dev/bench";

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Flags {
  std::string mode;
  std::map<std::string, std::string> values;
  std::string Get(const std::string& k, const std::string& def) const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
  long Int(const std::string& k, long def) const { return std::stol(Get(k, std::to_string(def))); }
};

bool ParseFlags(int argc, char** argv, Flags& flags) {
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
  return flags.values.count("kubeconfig") && flags.values.count("namespace");
}

std::unique_ptr<KubeClient> NewClient(const std::string& kubeconfig) {
  auto config = LoadKubeconfig(kubeconfig);
  if (!config.ok()) {
    std::cerr << "kubeconfig: " << config.status().ToString() << "\n";
    std::exit(1);
  }
  return std::make_unique<KubeClient>(NewCpprestTransport(*config));
}

// kB from a "Key:   123 kB" line of /proc/self/status.
long ProcStatusKb(const std::string& key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream in(line.substr(key.size() + 1));
      long kb = 0;
      in >> kb;
      return kb;
    }
  }
  return -1;
}
double Mb(long kb) { return kb / 1024.0; }

// CPU seconds (user + system) this process has used: compared with a phase's wall time, it
// says whether the client or the API server (the other processes on the machine) limits it.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Resets VmHWM to the current RSS (Linux: "5" to clear_refs), so a peak can be taken per phase.
bool ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
  f.flush();
  return f.good();
}

std::string ActorName(long i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "bench-%05ld", i);
  return buf;
}

// A realistic Actor: the CPU sample's spec, pinned to one of 10 nodes, with the API server's
// defaults filled in on create.
json Actor(long i) {
  return {{"apiVersion", "stasis.dev/v1alpha1"},
          {"kind", "Actor"},
          {"metadata",
           {{"name", ActorName(i)},
            {"labels", {{kBenchLabel, "informer-scale"}, {"app", "counter-" + std::to_string(i % 100)}}}}},
          {"spec",
           {{"runtime", "gvisor"},
            {"bundle", "/var/lib/stasis/bundles/counter"},
            {"nodeName", "node-" + std::to_string(i % 10)},
            {"desiredState", "Running"},
            {"snapshots", {{"onPause", "Full"}, {"onCommit", "Full"}}},
            {"timeouts", {{"checkpointSeconds", 600}, {"restoreSeconds", 600}}}}}};
}

// Runs fn(thread, i) for i in [0, n) spread over `threads` threads, each with its own client.
void Parallel(const std::string& kubeconfig, long n, int threads,
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

int Create(const Flags& flags) {
  const std::string ns = flags.Get("namespace", "");
  const long count = flags.Int("count", 10000);
  const int threads = static_cast<int>(flags.Int("threads", 8));
  std::atomic<long> created{0}, existed{0}, failed{0};
  const auto start = SteadyClock::now();
  Parallel(flags.Get("kubeconfig", ""), count, threads, [&](KubeClient& c, long i) {
    for (int attempt = 0;; ++attempt) {
      auto r = c.Create(kActors, ns, Actor(i));
      if (r.ok()) {
        created++;
      } else if (r.status().code() == Code::kAlreadyExists) {
        existed++;
      } else if (r.status().code() == Code::kUnavailable && attempt < 5) {
        std::this_thread::sleep_for(100ms);
        continue;
      } else {
        if (failed++ < 5) std::cerr << "create " << ActorName(i) << ": " << r.status().ToString() << "\n";
      }
      return;
    }
  });
  const double s = Seconds(SteadyClock::now() - start);
  std::printf("create: %ld actors created (%ld already there, %ld failed) in %.2f s from %d threads: %.0f creates/s\n",
              created.load(), existed.load(), failed.load(), s, threads, created.load() / s);
  std::printf("RESULT create_count=%ld create_seconds=%.2f creates_per_second=%.0f\n", created.load(), s,
              created.load() / s);
  return failed.load() == 0 ? 0 : 1;
}

struct Target {
  std::string what;
  bool met;
};

class NoopReconciler : public Reconciler {
 public:
  Result<ReconcileOutcome> Reconcile(const Request&) override {
    count_.fetch_add(1, std::memory_order_relaxed);
    return ReconcileOutcome{};
  }
  long count() const { return count_.load(); }

 private:
  std::atomic<long> count_{0};
};

// Waits until the controller's queue is empty, nothing is in flight and nothing waits.
bool WaitIdle(Controller& c, std::chrono::seconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  while (SteadyClock::now() < deadline) {
    if (c.queue().Len() == 0 && c.queue().NumProcessing() == 0 && c.queue().NumWaiting() == 0) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// Counts informer updates whose label bench-round carries the armed token, and when the
// last one arrived. Arm() is called from the main thread, Saw() on the informer's.
class Round {
 public:
  void Arm(const std::string& token, SteadyClock::time_point start) {
    std::lock_guard<std::mutex> lock(mu_);
    token_ = token;
    seen_ = 0;
    last_ = start;
  }
  void Saw(const json& obj) {
    const auto& meta = obj.at("metadata");
    auto labels = meta.find("labels");
    if (labels == meta.end()) return;
    auto it = labels->find("bench-round");
    std::lock_guard<std::mutex> lock(mu_);
    if (it == labels->end() || token_.empty() || *it != token_) return;
    seen_++;
    last_ = SteadyClock::now();
    cv_.notify_all();
  }
  // Waits until `want` were seen or `timeout` passed; returns how many were seen.
  long WaitFor(long want, std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return seen_ >= want; });
    return seen_;
  }
  SteadyClock::time_point last() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string token_;
  long seen_ = 0;
  SteadyClock::time_point last_;
};

int Run(const Flags& flags) {
  const std::string kubeconfig = flags.Get("kubeconfig", "");
  const std::string ns = flags.Get("namespace", "");
  const long expect = flags.Int("expect", 10000);
  const long patches = flags.Int("patches", 5000);
  const int patch_threads = static_cast<int>(flags.Int("patch-threads", 4));
  const long queue_keys = flags.Int("queue-keys", 100000);
  const int workers = static_cast<int>(flags.Int("workers", 4));
  std::vector<Target> targets;
  std::ostringstream result;
  std::vector<std::string> refusals;  // why no verdict can be given; empty when it can

  // ---- (a) initial sync and peak RSS ----
  auto client = NewClient(kubeconfig);
  // Warm the client (TLS handshake, cpprest's thread pool) so the baseline RSS includes it.
  if (auto r = client->Get({"", "v1", "namespaces", false}, "", ns); !r.ok()) {
    std::cerr << "namespace " << ns << ": " << r.status().ToString() << "\n";
    return 1;
  }
  const long rss_before = ProcStatusKb("VmRSS");
  const long hwm_before = ProcStatusKb("VmHWM");
  const bool hwm_reset = ResetPeakRss();

  InformerOptions io;
  io.type = kActors;
  io.ns = ns;
  io.label_selector = std::string(kBenchLabel) + "=informer-scale";
  Informer informer(*client, io);
  informer.AddIndex("namespace", IndexByNamespace());
  informer.AddIndex("node", IndexByField("/spec/nodeName"));

  // The watch phases' handler: counts the updates that carry the current round's label value.
  Round round;
  informer.AddEventHandler({nullptr, [&](const ObjectPtr&, const ObjectPtr& n) { round.Saw(*n); }, nullptr});

  std::atomic<bool> stop{false};
  const auto sync_start = SteadyClock::now();
  const double sync_cpu_start = ProcessCpuSeconds();
  std::thread informer_thread([&] { informer.Run(&stop); });
  const bool synced = informer.WaitForSync(&stop, 120s);
  const double sync_s = Seconds(SteadyClock::now() - sync_start);
  const double sync_cpu = ProcessCpuSeconds() - sync_cpu_start;
  const long rss_after = ProcStatusKb("VmRSS");
  const long hwm_after = ProcStatusKb("VmHWM");
  const size_t cached = informer.store().size();
  std::printf("(a) informer: synced=%s %zu actors (expected %ld) in %.2f s = %.0f objects/s; %zu on node-0\n",
              synced ? "yes" : "no", cached, expect, sync_s, cached / sync_s,
              informer.store().ByIndex("node", "node-0").size());
  std::printf("    this process used %.2f s of CPU during the sync (%.0f%% of the wall time; the rest is the API server)\n",
              sync_cpu, 100.0 * sync_cpu / sync_s);
  std::printf("    RSS before: %.1f MB (peak so far %.1f MB); after sync: %.1f MB; peak during sync: %.1f MB%s\n",
              Mb(rss_before), Mb(hwm_before), Mb(rss_after), Mb(hwm_after),
              hwm_reset ? "" : " (VmHWM could not be reset: peak since process start)");
  if (cached > 0) {
    // What the memory holds: the objects' JSON text size, and how much of it is managedFields.
    size_t text = 0, managed = 0, sampled = 0;
    for (const auto& o : informer.store().List()) {
      if (sampled++ == 500) break;
      text += o->dump().size();
      if (auto m = o->at("metadata").find("managedFields"); m != o->at("metadata").end()) managed += m->dump().size();
    }
    std::printf("    per object: %.1f kB of RSS; %.2f kB as JSON text, %.0f%% of it managedFields\n",
                (rss_after - rss_before) / static_cast<double>(cached), text / 1024.0 / sampled,
                100.0 * managed / text);
  }
  if (!synced) refusals.push_back("the informer did not sync within 120 s");
  if (static_cast<long>(cached) != expect) {
    refusals.push_back("the informer synced " + std::to_string(cached) + " objects, not the " +
                       std::to_string(expect) + " expected");
  }
  targets.push_back({"initial sync < 10 s", synced && sync_s < 10.0});
  targets.push_back({"peak RSS < 150 MB", hwm_after < 150 * 1024});
  result << " objects=" << cached << " sync_seconds=" << sync_s << " sync_cpu_seconds=" << sync_cpu << " rss_before_mb=" << Mb(rss_before)
         << " rss_after_mb=" << Mb(rss_after) << " peak_rss_mb=" << Mb(hwm_after);

  const long n = std::min<long>(patches, static_cast<long>(cached));
  // Label values unique to this run: patching the value an object already has is a no-op on
  // the API server (no new resourceVersion, no event), which would stall a rerun.
  const std::string run_id = std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  const std::string live_token = "live-" + run_id, backlog_token = "backlog-" + run_id;
  // Merge-patches a new label value onto actors 0..n-1 from patch_threads threads; returns
  // the number written and sets *seconds.
  auto write_round = [&](const std::string& token, double* seconds) {
    std::atomic<long> failed{0};
    const auto start = SteadyClock::now();
    Parallel(kubeconfig, n, patch_threads, [&](KubeClient& c, long i) {
      json patch = {{"metadata", {{"labels", {{"bench-round", token}}}}}};
      auto r = c.Patch(kActors, ns, ActorName(i), PatchType::kMerge, patch);
      if (!r.ok() && failed++ < 5) std::cerr << "patch: " << r.status().ToString() << "\n";
    });
    *seconds = Seconds(SteadyClock::now() - start);
    return n - failed.load();
  };

  // ---- (b) watch events/s against the writers' rate, informer running ----
  if (n > 0 && synced) {
    const auto write_start = SteadyClock::now();
    round.Arm(live_token, write_start);
    double write_s = 0;
    const long written = write_round(live_token, &write_s);
    const long seen = round.WaitFor(written, 120s);
    const double seen_s = Seconds(round.last() - write_start);
    const double write_rate = written / write_s;
    const double event_rate = seen / seen_s;
    std::printf("(b) watch, live: %ld merge patches from %d threads in %.2f s = %.0f writes/s (the ceiling);\n"
                "    the informer saw %ld of them, the last %.2f s after the first write = %.0f events/s "
                "(%.0f%% of the write rate; lag after the last write %.0f ms)\n",
                written, patch_threads, write_s, write_rate, seen, seen_s, event_rate,
                100.0 * event_rate / write_rate, 1000.0 * std::max(0.0, seen_s - write_s));
    if (written != n) refusals.push_back("(b) " + std::to_string(n - written) + " patches failed");
    if (seen != written) {
      refusals.push_back("(b) the informer saw " + std::to_string(seen) + " of " + std::to_string(written) + " events");
    }
    result << " patches=" << written << " write_per_second=" << write_rate << " events_seen=" << seen
           << " events_per_second=" << event_rate;
  }
  stop = true;
  informer_thread.join();

  // ---- (b') the informer's own ceiling: a backlog delivered at once ----
  // With the informer stopped, the same writers patch the same actors again; the informer then
  // resumes its watch from its last resourceVersion and the API server's watch cache sends the
  // whole backlog as fast as the informer takes it: the informer's rate, not the writers'.
  if (n > 0 && synced) {
    double write_s = 0;
    const long written = write_round(backlog_token, &write_s);
    const int lists_before = informer.list_count();
    stop = false;
    const auto resume = SteadyClock::now();
    const double cpu_start = ProcessCpuSeconds();
    round.Arm(backlog_token, resume);
    informer_thread = std::thread([&] { informer.Run(&stop); });
    const long seen = round.WaitFor(written, 120s);
    const double seen_s = Seconds(round.last() - resume);
    const double cpu = ProcessCpuSeconds() - cpu_start;
    stop = true;
    informer_thread.join();
    const bool relisted = informer.list_count() != lists_before;
    std::printf("(b') watch, backlog: %ld patches written while stopped (%.0f writes/s); after resuming, the informer "
                "saw %ld in %.2f s = %.0f events/s%s\n",
                written, written / write_s, seen, seen_s, seen / seen_s,
                relisted ? " (NOTE: it relisted: the watch cache no longer held the backlog)" : "");
    std::printf("    this process used %.2f s of CPU meanwhile (%.0f%% of the wall time): %.0f us per event\n", cpu,
                100.0 * cpu / seen_s, 1e6 * cpu / seen);
    if (seen != written) {
      refusals.push_back("(b') the informer saw " + std::to_string(seen) + " of " + std::to_string(written) +
                         " backlog events");
    }
    result << " backlog_events_per_second=" << seen / seen_s << " backlog_cpu_us_per_event=" << 1e6 * cpu / seen << " backlog_relisted=" << relisted;
  }
  {
    // The writers ran in this process too (8 clients, their threads and malloc arenas); how
    // much of the growth is memory the allocator kept rather than live data shows after a trim.
    const long rss = ProcStatusKb("VmRSS"), hwm = ProcStatusKb("VmHWM");
    malloc_trim(0);
    std::printf("    RSS after the watch phases: %.1f MB (peak since the sync began %.1f MB); %.1f MB after malloc_trim\n",
                Mb(rss), Mb(hwm), Mb(ProcStatusKb("VmRSS")));
    result << " rss_after_watch_mb=" << Mb(rss) << " rss_after_trim_mb=" << Mb(ProcStatusKb("VmRSS"));
  }

  // ---- (c) queue adds/s and reconciles/s with a no-op reconcile ----
  if (queue_keys > 0) {
    for (const bool with_metrics : {true, false}) {
      Metrics metrics;  // its own registry, as the process's would be
      NoopReconciler noop;
      Controller c("bench", noop, workers, with_metrics ? &metrics : nullptr);
      std::vector<std::string> keys;
      keys.reserve(queue_keys);
      for (long i = 0; i < queue_keys; ++i) keys.push_back(ns + "/" + ActorName(i));
      c.Start();

      const auto t0 = SteadyClock::now();
      for (const auto& k : keys) c.queue().Add(k);
      const double add_s = Seconds(SteadyClock::now() - t0);
      while (noop.count() < queue_keys) std::this_thread::sleep_for(100us);
      const double reconcile_s = Seconds(SteadyClock::now() - t0);
      const bool idle = WaitIdle(c, 60s);

      // Re-adds: every key twice in a row (the second Add of a queued key is a dedup no-op),
      // while workers drain.
      const long before = noop.count();
      const auto t1 = SteadyClock::now();
      for (const auto& k : keys) {
        c.queue().Add(k);
        c.queue().Add(k);
      }
      const double readd_s = Seconds(SteadyClock::now() - t1);
      const bool idle2 = WaitIdle(c, 60s);
      const double readd_total_s = Seconds(SteadyClock::now() - t1);
      const long re_reconciled = noop.count() - before;
      c.Stop(5s);

      const double add_rate = queue_keys / add_s;
      std::printf("(c) queue%s, %d workers: %ld distinct Add()s in %.3f s = %.0f adds/s; all reconciled after %.3f s = %.0f reconciles/s\n",
                  with_metrics ? " (with Prometheus metrics)" : " (no metrics)", workers, queue_keys,
                  add_s, add_rate, reconcile_s, queue_keys / reconcile_s);
      std::printf("    re-adds: %ld Add()s (each key twice) in %.3f s = %.0f adds/s; %ld reconciles (dedup), idle after %.3f s\n",
                  2 * queue_keys, readd_s, 2 * queue_keys / readd_s, re_reconciled, readd_total_s);
      if (!idle || !idle2) refusals.push_back("(c) the queue did not go idle within 60 s");
      if (with_metrics) {
        targets.push_back({">= 5,000 queue adds/s", add_rate >= 5000});
        result << " queue_adds_per_second=" << add_rate << " reconciles_per_second=" << queue_keys / reconcile_s
               << " readds_per_second=" << 2 * queue_keys / readd_s;
      } else {
        result << " queue_adds_per_second_no_metrics=" << add_rate;
      }
    }
  }

  if (!refusals.empty()) {
    std::printf("targets: no verdict:\n");
    for (const auto& why : refusals) std::printf("  %s\n", why.c_str());
    std::printf("RESULT%s no_verdict=%zu\n", result.str().c_str(), refusals.size());
    return 1;
  }
  std::printf("targets:\n");
  int missed = 0;
  for (const auto& t : targets) {
    std::printf("  %-24s %s\n", t.what.c_str(), t.met ? "met" : "MISSED");
    missed += t.met ? 0 : 1;
  }
  std::printf("RESULT%s targets_missed=%d\n", result.str().c_str(), missed);
  return 0;
}

}  // namespace
}  // namespace stasis

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  stasis::Flags flags;
  if (!stasis::ParseFlags(argc, argv, flags) || (flags.mode != "create" && flags.mode != "run")) {
    std::cerr << "usage: bench_informer_scale create|run --kubeconfig FILE --namespace NS [options]\n"
                 "  create: --count 10000 --threads 8\n"
                 "  run:    --expect 10000 --patches 5000 --patch-threads 4 --queue-keys 100000 --workers 4\n";
    return 2;
  }
  return flags.mode == "create" ? stasis::Create(flags) : stasis::Run(flags);
}
