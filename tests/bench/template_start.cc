// Time from `kubectl create` to RUNNING, from the client, for the three ways an actor starts
// (a program, not a test; hack/bench/template-start.sh brings up the control plane, one node
// agent and the cluster controller, sharing one directory snapshot store):
//
//   bench_template_start --kubeconfig K --namespace NS --node N --bundle DIR --store DIR
//                        --runsc RUNSC --direct-root DIR --agent-metrics URL
//                        [--actors 100] [--warm 3] [--timeout-s 60]
//
// Two ActorTemplates of the same bundle: warm-tpl (spec.warm = --warm) and cold-tpl (no pool).
// Once both goldens are recorded and warm-tpl's pool is full, --actors rounds, one start at a
// time (latency, not throughput), each measuring once per kind, the order rotated per round:
//   boot     an actor of the bundle pinned to N: POST → STATUS_RUNNING
//   golden   an actor with templateRef cold-tpl (filled in from its golden): POST → RUNNING
//   warm     an actor with templateRef warm-tpl (a claim of a paused pool member): POST → RUNNING
//   resume   the agent's resume of a local pause snapshot: the desiredState PATCH of a paused
//            actor of the bundle (resume-base) → RUNNING, then paused again (unmeasured)
//   direct   RunscDriver::Restore of cold-tpl's golden image straight from the store into a
//            sandbox of its own, until `runsc restore` returns; no API, no agent
// RUNNING is when the benchmark's one watch of the namespace's actors first delivers the
// status. Each actor is deleted (and its deletion seen) before the next start, and after a warm
// start the pool is let refill: no measured start runs beside a refill's restore and pause.
// Prints p50/p99 (nearest rank) per kind, the warm hits and misses, the agent's own part of each
// kind (stasis_actor_start_seconds from --agent-metrics, over the rounds) and the two target
// figures; ends with `RESULT k=v …`. Exits 1, printing no figure, when a start did not reach
// RUNNING within --timeout-s or any request failed.
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "api/actor_template.h"
#include "api/names.h"
#include "base/subprocess.h"
#include "runtimes/runsc_driver.h"
#include "snapshots/snapshot_names.h"
#include "tests/bench/bench_common.h"

namespace stasis::bench {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
const ResourceType kActors{api::kGroup, api::kVersion, api::kActorResource, true};
const ResourceType kTemplates{api::kGroup, api::kVersion, api::kActorTemplateResource, true};
constexpr char kWarmTemplate[] = "warm-tpl";
constexpr char kColdTemplate[] = "cold-tpl";
constexpr char kResumeBase[] = "resume-base";
constexpr char kDeleted[] = "DELETED";  // a target of ActorWatch: the actor is gone
const std::vector<std::string> kKinds = {"boot", "golden", "warm", "resume", "direct"};

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "bench_template_start: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Must(Result<T> r, const std::string& what) {
  if (!r.ok()) Fail(what + ": " + r.status().ToString());
  return std::move(*r);
}

struct Arrival {
  SteadyClock::time_point at;
  json object;  // the actor as the event carried it
};

// One watch of the namespace's actors for the whole run: every wait goes through it, so an
// event that arrives is newer than every event an earlier wait saw (a watch is ordered).
class ActorWatch {
 public:
  ActorWatch(std::string kubeconfig, std::string ns) : kubeconfig_(std::move(kubeconfig)), ns_(std::move(ns)) {}
  ~ActorWatch() {
    cancel_ = true;
    if (thread_.joinable()) thread_.join();
  }

  void Start() {
    auto client = NewClient(kubeconfig_);
    rv_ = Must(client->List(kActors, ns_), "list actors")["metadata"].value("resourceVersion", "");
    thread_ = std::thread([this] { Run(); });
    std::this_thread::sleep_for(300ms);  // established before the first request it must see
  }

  // Arms a wait for `name` reaching status.status `status` (or kDeleted); called before the
  // request that causes it.
  void Expect(const std::string& name, const std::string& status) {
    std::lock_guard lock(mu_);
    targets_[name] = Target{status, false, {}, json()};
  }

  std::optional<Arrival> Wait(const std::string& name, std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, timeout, [&] { return targets_[name].arrived; });
    const Target& t = targets_[name];
    if (!t.arrived) return std::nullopt;
    return Arrival{t.at, t.object};
  }

 private:
  struct Target {
    std::string status;
    bool arrived = false;
    SteadyClock::time_point at;
    json object;
  };

  void Run() {
    auto client = NewClient(kubeconfig_);
    while (!cancel_.load()) {
      WatchOptions wo;
      wo.resource_version = rv_;
      wo.timeout_seconds = 600;
      Status watched = client->Watch(kActors, ns_, wo, [&](const json& event) {
        Observe(event.value("type", ""), event.at("object"), SteadyClock::now());
        return !cancel_.load();
      }, &cancel_);
      if (watched.ok() || cancel_.load()) continue;
      // A watch the server refused (410 Gone: rv compacted) would fail again at once: list
      // anew; a target already reached counts as arrived now (an upper bound, and said so).
      std::fprintf(stderr, "bench_template_start: watch: %s; listing again\n", watched.ToString().c_str());
      std::this_thread::sleep_for(200ms);
      auto list = client->List(kActors, ns_);
      if (list.ok()) Relisted(*list);
    }
  }

  void Observe(const std::string& type, const json& obj, SteadyClock::time_point now) {
    std::lock_guard lock(mu_);
    rv_ = obj["metadata"].value("resourceVersion", rv_);
    if (type == "BOOKMARK") return;
    auto it = targets_.find(obj["metadata"].value("name", ""));
    if (it == targets_.end() || it->second.arrived) return;
    const bool reached = type == "DELETED" ? it->second.status == kDeleted
                                           : obj.value("/status/status"_json_pointer, "") == it->second.status;
    if (!reached) return;
    it->second = Target{it->second.status, true, now, obj};
    cv_.notify_all();
  }

  void Relisted(const json& list) {
    std::lock_guard lock(mu_);
    rv_ = list["metadata"].value("resourceVersion", rv_);
    std::map<std::string, json> present;
    for (const auto& item : list["items"]) present[item["metadata"].value("name", "")] = item;
    for (auto& [name, t] : targets_) {
      if (t.arrived) continue;
      auto p = present.find(name);
      const bool reached = t.status == kDeleted ? p == present.end()
                                                : p != present.end() &&
                                                      p->second.value("/status/status"_json_pointer, "") == t.status;
      if (reached) t = Target{t.status, true, SteadyClock::now(), p == present.end() ? json() : p->second};
    }
    cv_.notify_all();
  }

  std::string kubeconfig_, ns_, rv_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Target> targets_;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

struct Config {
  std::string kubeconfig, ns, node, bundle, store, runsc, direct_root, agent_metrics;
  long actors = 100, warm = 3;
  std::chrono::seconds timeout{60};
};

json ActorObject(const Config& c, const std::string& name, const json& spec) {
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kActorKind},
          {"metadata", {{"name", name}, {"namespace", c.ns}}},
          {"spec", spec}};
}

// A spec pinned to the benchmark's node and to be running: `from` is the bundle or a templateRef.
json Running(const Config& c, json from) {
  from["nodeName"] = c.node;
  from["desiredState"] = "Running";
  return from;
}

json FromTemplate(const std::string& name) { return {{"templateRef", {{"name", name}}}}; }

json TemplateObject(const Config& c, const std::string& name, long warm) {
  json spec = {{"actor", {{"bundle", c.bundle}}}};
  if (warm > 0) spec["warm"] = warm;
  return {{"apiVersion", api::kApiVersion},
          {"kind", api::kActorTemplateKind},
          {"metadata", {{"name", name}, {"namespace", c.ns}}},
          {"spec", spec}};
}

// What an actor that did not get where it should says about itself, for the failure message.
std::string Describe(KubeClient& client, const Config& c, const std::string& name) {
  auto a = client.Get(kActors, c.ns, name);
  if (!a.ok()) return a.status().ToString();
  std::string out = "status " + a->value("/status/status"_json_pointer, std::string("(none)"));
  for (const auto& cond : a->value("/status/conditions"_json_pointer, json::array())) {
    if (cond.value("status", "") == "False" || cond.value("type", "") == "Ready") {
      out += "; " + cond.value("type", "") + "=" + cond.value("status", "") + " " + cond.value("reason", "") + ": " +
             cond.value("message", "");
    }
  }
  return out;
}

class Bench {
 public:
  explicit Bench(Config c)
      : c_(std::move(c)), client_(NewClient(c_.kubeconfig)), watch_(c_.kubeconfig, c_.ns), driver_(c_.runsc) {}

  void Setup();
  void Round(long r);
  void Report();
  long rounds() const { return c_.actors; }

 private:
  json WaitTemplate(const std::string& name, const std::function<bool(const json&)>& ready, const std::string& what);
  long WarmReady(const json& t) const { return t.value("/status/warmReady"_json_pointer, 0L); }
  Arrival AwaitStatus(const std::string& name, const std::string& status, const std::string& what);
  void SetDesired(const std::string& name, const char* desired);
  double CreateToRunning(const std::string& name, const json& spec, json* running = nullptr);
  void Remove(const std::string& name);
  void Measure(const std::string& kind, long r);
  double Warm(long r);
  double Resume();
  double Direct(long r);
  std::map<std::string, std::pair<double, double>> AgentStarts();

  Config c_;
  std::unique_ptr<KubeClient> client_;
  ActorWatch watch_;
  RunscDriver driver_;
  std::string golden_image_;  // cold-tpl's golden snapshot, in the store
  std::map<std::string, std::vector<double>> ms_;
  std::vector<double> miss_ms_;
  long hits_ = 0, misses_ = 0;
  std::map<std::string, std::pair<double, double>> starts_before_;  // kind → (sum s, count)
};

json Bench::WaitTemplate(const std::string& name, const std::function<bool(const json&)>& ready,
                         const std::string& what) {
  const auto start = SteadyClock::now();
  json t;
  while (SteadyClock::now() - start < 300s) {
    t = Must(client_->Get(kTemplates, c_.ns, name), "get template " + name);
    if (ready(t)) return t;
    std::this_thread::sleep_for(100ms);
  }
  Fail("template " + name + ": no " + what + " within 300 s; its status: " + t.value("status", json()).dump());
}

bool GoldenReady(const json& t) {
  for (const auto& cond : t.value("/status/conditions"_json_pointer, json::array())) {
    if (cond.value("type", "") == api::kConditionGoldenReady) return cond.value("status", "") == "True";
  }
  return false;
}

Arrival Bench::AwaitStatus(const std::string& name, const std::string& status, const std::string& what) {
  auto arrival = watch_.Wait(name, c_.timeout);
  if (!arrival) {
    Fail(what + ": actor " + name + " did not reach " + status + " within " + std::to_string(c_.timeout.count()) +
         " s (" + Describe(*client_, c_, name) + ")");
  }
  return *arrival;
}

void Bench::SetDesired(const std::string& name, const char* desired) {
  Must(client_->Patch(kActors, c_.ns, name, PatchType::kMerge, {{"spec", {{"desiredState", desired}}}}),
       "patch " + name + " desiredState " + desired);
}

// Milliseconds from just before the POST to the watch's RUNNING event.
double Bench::CreateToRunning(const std::string& name, const json& spec, json* running) {
  watch_.Expect(name, "STATUS_RUNNING");
  const auto t0 = SteadyClock::now();
  Must(client_->Create(kActors, c_.ns, ActorObject(c_, name, spec)), "create actor " + name);
  const Arrival a = AwaitStatus(name, "STATUS_RUNNING", "create");
  if (running) *running = a.object;
  return Millis(a.at - t0);
}

// Deletes a measured actor and waits until it is gone: the next start finds its worker free.
void Bench::Remove(const std::string& name) {
  watch_.Expect(name, kDeleted);
  if (Status s = client_->Delete(kActors, c_.ns, name); !s.ok()) Fail("delete actor " + name + ": " + s.ToString());
  AwaitStatus(name, kDeleted, "delete");
}

void Bench::Setup() {
  watch_.Start();
  for (const auto& [name, warm] : {std::pair{kWarmTemplate, c_.warm}, std::pair{kColdTemplate, 0L}}) {
    Must(client_->Create(kTemplates, c_.ns, TemplateObject(c_, name, warm)), std::string("create template ") + name);
  }
  // The resume baseline boots while the goldens are being taken.
  watch_.Expect(kResumeBase, "STATUS_RUNNING");
  Must(client_->Create(kActors, c_.ns, ActorObject(c_, kResumeBase, Running(c_, {{"bundle", c_.bundle}}))),
       "create actor resume-base");
  AwaitStatus(kResumeBase, "STATUS_RUNNING", "setup");
  watch_.Expect(kResumeBase, "STATUS_PAUSED");
  SetDesired(kResumeBase, "Paused");
  AwaitStatus(kResumeBase, "STATUS_PAUSED", "setup");
  const json cold = WaitTemplate(kColdTemplate, GoldenReady, "GoldenReady=True");
  const std::string golden_actor = cold.value("/status/golden/actorName"_json_pointer, "");
  const std::string golden_id = cold.value("/status/golden/snapshotID"_json_pointer, "");
  golden_image_ = SnapshotDir(c_.store, c_.ns, golden_actor, golden_id).string();
  if (golden_actor.empty() || golden_id.empty() || !fs::is_directory(golden_image_)) {
    Fail("cold-tpl's golden snapshot is not in the store: " + golden_image_);
  }
  WaitTemplate(kWarmTemplate, GoldenReady, "GoldenReady=True");
  WaitTemplate(kWarmTemplate, [&](const json& t) { return WarmReady(t) == c_.warm; },
               "status.warmReady " + std::to_string(c_.warm));
  std::printf("setup: goldens recorded (cold-tpl's %s of %s), warm-tpl's pool %ld ready, resume-base paused\n",
              golden_id.c_str(), golden_actor.c_str(), c_.warm);
  std::fflush(stdout);
  starts_before_ = AgentStarts();
}

std::string Name(const std::string& kind, long r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05ld", r);
  return kind + buf;
}

double Bench::Warm(long r) {
  WaitTemplate(kWarmTemplate, [&](const json& t) { return WarmReady(t) >= 1; }, "status.warmReady >= 1");
  const std::string name = Name("warm", r);
  json running;
  const double ms = CreateToRunning(name, Running(c_, FromTemplate(kWarmTemplate)), &running);
  const std::string source = running.value("/spec/source/actorName"_json_pointer, "");
  const bool hit = source.rfind(std::string(kWarmTemplate) + "-warm-", 0) == 0;
  Remove(name);
  // The claim's refill (a restore from the golden, then a pause) would run beside the next
  // measured start on two cores: it is let finish first.
  WaitTemplate(kWarmTemplate, [&](const json& t) { return WarmReady(t) == c_.warm; },
               "status.warmReady " + std::to_string(c_.warm) + " again");
  (hit ? hits_ : misses_)++;
  if (!hit) miss_ms_.push_back(ms);
  return hit ? ms : -1;
}

double Bench::Resume() {
  watch_.Expect(kResumeBase, "STATUS_RUNNING");
  const auto t0 = SteadyClock::now();
  SetDesired(kResumeBase, "Running");
  const double ms = Millis(AwaitStatus(kResumeBase, "STATUS_RUNNING", "resume").at - t0);
  watch_.Expect(kResumeBase, "STATUS_PAUSED");
  SetDesired(kResumeBase, "Paused");
  AwaitStatus(kResumeBase, "STATUS_PAUSED", "pause");
  return ms;
}

double Bench::Direct(long r) {
  const std::string id = Name("direct", r);
  SandboxRef ref{id, c_.direct_root + "/run/" + id, c_.bundle, c_.direct_root + "/logs/" + id + ".log"};
  fs::create_directories(ref.root);
  fs::create_directories(fs::path(ref.log_path).parent_path());
  RestoreOptions ro;
  ro.image_dir = golden_image_;
  ro.deadline = c_.timeout;
  const auto t0 = SteadyClock::now();
  Status restored = driver_.Restore(ref, ro);
  const double ms = Millis(SteadyClock::now() - t0);
  Status deleted = driver_.Delete(ref);
  if (!restored.ok()) Fail("direct restore of " + golden_image_ + ": " + restored.ToString());
  if (!deleted.ok()) Fail("delete the direct sandbox " + id + ": " + deleted.ToString());
  fs::remove_all(ref.root);
  return ms;
}

void Bench::Measure(const std::string& kind, long r) {
  double ms = -1;
  if (kind == "boot") {
    ms = CreateToRunning(Name(kind, r), Running(c_, {{"bundle", c_.bundle}}));
    Remove(Name(kind, r));
  } else if (kind == "golden") {
    ms = CreateToRunning(Name(kind, r), Running(c_, FromTemplate(kColdTemplate)));
    Remove(Name(kind, r));
  } else if (kind == "warm") {
    ms = Warm(r);
  } else if (kind == "resume") {
    ms = Resume();
  } else {
    ms = Direct(r);
  }
  if (ms >= 0) ms_[kind].push_back(ms);
}

// Each round starts at another kind: no kind always follows the same one.
void Bench::Round(long r) {
  for (size_t k = 0; k < kKinds.size(); ++k) Measure(kKinds[(r + k) % kKinds.size()], r);
  if ((r + 1) % 10 == 0 || r + 1 == c_.actors) {
    std::printf("round %ld/%ld done\n", r + 1, c_.actors);
    std::fflush(stdout);
  }
}

// stasis_actor_start_seconds from the agent's /metrics: kind → (sum s, count).
std::map<std::string, std::pair<double, double>> Bench::AgentStarts() {
  auto r = RunCommand({"curl", "-fsS", "--max-time", "10", c_.agent_metrics}, 15s);
  if (!r.ok() || !r->success()) Fail("scrape " + c_.agent_metrics + ": " + (r.ok() ? r->err : r.status().ToString()));
  static const std::regex line(R"re(^stasis_actor_start_seconds_(sum|count)\{[^}]*kind="(\w+)"[^}]*\} (\S+)$)re");
  // The agent's runsc restores of committed images (every golden start and pool refill), under
  // the key "restore": what the direct restore is the same operation as.
  static const std::regex restore(
      R"re(^stasis_snapshot_duration_seconds_(sum|count)\{(?=[^}]*operation="restore")(?=[^}]*trigger="Suspend")(?=[^}]*result="success")[^}]*\} (\S+)$)re");
  std::map<std::string, std::pair<double, double>> out;
  std::istringstream in(r->out);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    if (std::regex_match(l, m, line)) {
      auto& [sum, count] = out[m[2]];
      (m[1] == "sum" ? sum : count) += std::stod(m[3]);
    } else if (std::regex_match(l, m, restore)) {
      auto& [sum, count] = out["restore"];
      (m[1] == "sum" ? sum : count) += std::stod(m[2]);
    }
  }
  return out;
}

void Bench::Report() {
  const auto after = AgentStarts();
  for (const auto& kind : kKinds) {
    if (ms_[kind].empty()) Fail("no " + kind + " start measured" + (kind == "warm" ? " (every claim missed)" : ""));
  }
  static const std::map<std::string, std::string> what = {
      {"boot", "boot: bundle, POST -> RUNNING"},
      {"golden", "golden: templateRef cold-tpl, POST -> RUNNING"},
      {"warm", "warm: templateRef warm-tpl (hits), POST -> RUNNING"},
      {"resume", "resume: local pause snapshot, PATCH -> RUNNING"},
      {"direct", "direct: runsc restore of the golden image"}};
  std::printf("\n%-52s %5s %9s %9s\n", "start (sequential, ms, nearest rank)", "n", "p50", "p99");
  for (const auto& kind : kKinds) {
    std::printf("%-52s %5zu %9.1f %9.1f\n", what.at(kind).c_str(), ms_[kind].size(), Percentile(ms_[kind], 50),
                Percentile(ms_[kind], 99));
  }
  if (!miss_ms_.empty()) {
    std::printf("%-52s %5zu %9.1f %9.1f\n", "warm-tpl misses (filled in from the golden)", miss_ms_.size(),
                Percentile(miss_ms_, 50), Percentile(miss_ms_, 99));
  }
  std::printf("warm claims: %ld hits, %ld misses\n", hits_, misses_);
  std::map<std::string, double> agent_ms;
  std::printf("the agent's part (stasis_actor_start_seconds over the rounds, decision -> RUNNING write), mean:");
  for (const char* kind : {"boot", "golden", "warm", "refill", "restore"}) {
    const auto [sum, count] = after.count(kind) ? after.at(kind) : std::pair{0.0, 0.0};
    const double n = count - starts_before_[kind].second;
    agent_ms[kind] = n > 0 ? (sum - starts_before_[kind].first) / n * 1000 : 0;
    std::printf(" %s %.1f ms (%.0f)", kind, agent_ms[kind], n);
  }
  std::printf("\n  (restore: the agent's runsc restores of committed images, golden starts and refills;"
              " direct restore mean %.1f ms)\n", Mean(ms_["direct"]));
  const double golden_ratio = Percentile(ms_["golden"], 50) / Percentile(ms_["direct"], 50);
  const double warm_over_resume = Percentile(ms_["warm"], 50) - Percentile(ms_["resume"], 50);
  std::printf("golden_ratio = golden p50 / direct restore p50 = %.3f\n", golden_ratio);
  std::printf("warm_over_resume_ms = warm p50 - resume p50 = %.1f\n", warm_over_resume);
  std::printf("RESULT rounds=%ld", c_.actors);
  for (const auto& kind : kKinds) {
    std::printf(" %s_p50_ms=%.1f %s_p99_ms=%.1f", kind.c_str(), Percentile(ms_[kind], 50), kind.c_str(),
                Percentile(ms_[kind], 99));
  }
  std::printf(" warm_hits=%ld warm_misses=%ld agent_boot_ms=%.1f agent_golden_ms=%.1f agent_warm_ms=%.1f"
              " golden_ratio=%.3f warm_over_resume_ms=%.1f\n",
              hits_, misses_, agent_ms["boot"], agent_ms["golden"], agent_ms["warm"], golden_ratio, warm_over_resume);
}

Config ParseConfig(int argc, char** argv) {
  // bench_common's flags begin with a mode; this program has one.
  std::vector<char*> args = {argv[0], const_cast<char*>("run")};
  args.insert(args.end(), argv + 1, argv + argc);
  Flags f;
  Config c;
  if (!ParseFlags(static_cast<int>(args.size()), args.data(), f)) Fail("usage: see the header of template_start.cc");
  c.kubeconfig = f.Get("kubeconfig");
  c.ns = f.Get("namespace");
  c.node = f.Get("node");
  c.bundle = f.Get("bundle");
  c.store = f.Get("store");
  c.runsc = f.Get("runsc");
  c.direct_root = f.Get("direct-root");
  c.agent_metrics = f.Get("agent-metrics");
  for (const std::string* v :
       {&c.kubeconfig, &c.ns, &c.node, &c.bundle, &c.store, &c.runsc, &c.direct_root, &c.agent_metrics}) {
    if (v->empty()) {
      Fail("every flag of the header but --actors, --warm and --timeout-s is needed");
    }
  }
  c.actors = f.Int("actors", 100);
  c.warm = f.Int("warm", 3);
  c.timeout = std::chrono::seconds(f.Int("timeout-s", 60));
  if (c.actors < 1 || c.warm < 1 || c.warm > 64 || c.timeout.count() < 1) {
    Fail("--actors and --timeout-s must be at least 1, --warm 1 to 64");
  }
  return c;
}

}  // namespace
}  // namespace stasis::bench

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::warn);
  stasis::bench::Bench bench(stasis::bench::ParseConfig(argc, argv));
  bench.Setup();
  std::printf("%ld rounds, one start at a time: boot, golden, warm, resume, direct (the order rotated per round)\n",
              bench.rounds());
  std::fflush(stdout);
  for (long r = 0; r < bench.rounds(); ++r) bench.Round(r);
  bench.Report();
  return 0;
}
