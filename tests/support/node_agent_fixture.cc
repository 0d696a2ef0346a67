#include "tests/support/node_agent_fixture.h"

#include <gmock/gmock.h>
#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include "tests/support/control_plane.h"

namespace stasis::testing {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kStasis = std::string(STASIS_BINARY_DIR) + "/stasis";
const std::string kInjectWrapper = std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-fault-inject.sh";
const std::string kNvproxyWrapper = std::string(STASIS_SOURCE_DIR) + "/tests/support/runsc-nvproxy-fault.sh";

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string StatusOf(const json& a) {
  if (!a.is_object() || !a.contains("status") || !a["status"].is_object()) return "";
  return a["status"].value("status", "");
}

json StatusField(const json& a, const std::string& field) {
  if (!a.is_object() || !a.contains("status") || !a["status"].is_object()) return nullptr;
  return a["status"].value(field, json(nullptr));
}

json Cond(const json& a, const std::string& type) {
  json conds = StatusField(a, "conditions");
  if (!conds.is_array()) return nullptr;
  for (const auto& c : conds) {
    if (c.value("type", "") == type) return c;
  }
  return nullptr;
}

bool CondIs(const json& a, const std::string& type, const std::string& status) {
  json c = Cond(a, type);
  return c.is_object() && c.value("status", "") == status;
}

std::string CondReason(const json& a, const std::string& type) {
  json c = Cond(a, type);
  return c.is_object() ? c.value("reason", "") : "";
}

std::string CondMessage(const json& a, const std::string& type) {
  json c = Cond(a, type);
  return c.is_object() ? c.value("message", "") : "";
}

json ManifestWithChecksums(const fs::path& dir, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    const json m = json::parse(ReadFile(dir / "manifest.json"), nullptr, /*allow_exceptions=*/false);
    if (m.is_object() && !m.value("checksumsPending", false)) return m;
    if (std::chrono::steady_clock::now() >= deadline) return nullptr;
    std::this_thread::sleep_for(kPoll);
  }
}

double MetricValue(const std::string& metrics, const std::string& series) {
  const auto at = metrics.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::stod(metrics.substr(at + series.size() + 2));
}

std::vector<std::string> PartialDirs(const fs::path& root) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::exists(root, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 8 && name.substr(name.size() - 8) == ".partial") out.push_back(it->path().string());
  }
  return out;
}

std::vector<std::string> Entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path().filename().string());
  return out;
}

std::vector<std::string> ProcessesMentioning(const std::string& needle) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string pid = e.path().filename().string();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    if (std::to_string(getpid()) == pid) continue;
    std::string cmd = ReadFile(e.path() / "cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(needle) != std::string::npos) out.push_back(pid + ": " + cmd.substr(0, 200));
  }
  return out;
}

bool ProcessAlive(long pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return false;
  const auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() ||
         (stat[close + 2] != 'Z' && stat[close + 2] != 'X');
}

void NodeAgentTest::SetUpTestSuite() {
  ASSERT_TRUE(fs::exists(kStasis)) << kStasis << " is not built";
  (void)PinnedRunsc();
  ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), "");
}

void NodeAgentTest::SetUp() {
  std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  // "PauseAndResume" → "e2e-pause-and-resume", kept short: the sandbox ids and runtime
  // roots are built from it.
  std::string kebab;
  for (char ch : name) {
    if (std::isupper(static_cast<unsigned char>(ch)) && !kebab.empty()) kebab += '-';
    kebab += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  ns_ = "e2e-" + kebab.substr(0, 20);
  while (ns_.back() == '-') ns_.pop_back();
  auto r = Kubectl({"create", "namespace", ns_});
  ASSERT_TRUE(r.success()) << r.err;
  fs::create_directories(BundleRoot());
  bundle_ = std::make_unique<Bundle>(CounterArgs(), BundleRoot());
  store_ = (work_.path() / "store").string();
}

void NodeAgentTest::TearDown() {
  const auto start = Clock::now();
  // Deletion through the agents first (that is also what a user does).
  bool any_running = false;
  for (auto& a : agents_) any_running = any_running || (a->proc && a->proc->Running());
  Kubectl({"delete", "actors", "--all", "-n", ns_, "--wait=false"});
  if (any_running) {
    while (Clock::now() - start < 20s && !ListActors().empty()) std::this_thread::sleep_for(kPoll);
  }
  for (auto& a : agents_) {
    if (a->proc) a->proc->Stop(10s);
  }
  // Whatever the agents could not finish: drop the finalizers so the objects go.
  for (const auto& item : ListActors()) {
    const std::string name = item["metadata"].value("name", "");
    Kubectl({"patch", "actor", name, "-n", ns_, "--type=merge", "-p",
             R"({"metadata":{"finalizers":null}})"});
  }
  KillOrphans();
  // Sandboxes left by a failed test: force-delete them and release runsc's netns mounts.
  for (const auto& root : roots_) {
    for (const auto& id : Entries(fs::path(root) / "run")) {
      const std::string dir = root + "/run/" + id;
      auto r = RunCommand({PinnedRunsc(), "-root", dir, "list", "-format", "json"}, 30s);
      if (r.ok() && r->success()) {
        try {
          json list = json::parse(r->out);
          if (list.is_array()) {
            for (const auto& c : list) {
              (void)RunCommand({PinnedRunsc(), "-root", dir, "delete", "-force", c.value("id", "")}, 30s);
            }
          }
        } catch (...) {
        }
      }
      umount2((dir + "/null-netns").c_str(), MNT_DETACH);
    }
  }
  // STASIS_E2E_LOG_DIR=DIR keeps the agents' logs (and the wrapper's call log) after the test.
  if (const char* keep = std::getenv("STASIS_E2E_LOG_DIR"); keep && *keep) {
    std::error_code ec;
    const fs::path dir = fs::path(keep) / ns_;
    fs::create_directories(dir, ec);
    for (const auto& a : agents_) {
      fs::copy_file(a->proc->log_path(), dir / fs::path(a->proc->log_path()).filename(),
                    fs::copy_options::overwrite_existing, ec);
    }
    fs::copy_file(InjectLog(), dir / "inject-calls.log", fs::copy_options::overwrite_existing, ec);
  }
  for (const auto& node : nodes_) {
    Kubectl({"delete", "workers", "-l", "stasis.dev/node=" + node, "--wait=false"});
  }
  Kubectl({"delete", "namespace", ns_, "--wait=false"});
}

CommandResult NodeAgentTest::Kubectl(const std::vector<std::string>& args, const std::string& in) {
  return ControlPlane::Get().Kubectl(args, in);
}

std::vector<json> NodeAgentTest::ListActors() {
  auto r = Kubectl({"get", "actors", "-n", ns_, "-o", "json"});
  if (!r.success()) return {};
  try {
    return json::parse(r.out).value("items", json::array()).get<std::vector<json>>();
  } catch (...) {
    return {};
  }
}

std::string ScrapeMetrics(const std::string& log) {
  const std::string key = "serving metrics addr=127.0.0.1:0 port=";
  const auto at = log.rfind(key);
  if (at == std::string::npos) return "";
  const auto from = at + key.size();
  const std::string port = log.substr(from, log.find_first_of(" \n", from) - from);
  auto r = RunCommand({"curl", "-fsS", "http://127.0.0.1:" + port + "/metrics"}, 10s);
  return r.ok() && r->success() ? r->out : "";
}

Agent* NodeAgentTest::StartAgent(const std::string& node, const std::string& runsc,
                                 const std::vector<std::string>& env, int workers,
                                 const std::string& store, const std::vector<std::string>& extra_args) {
  auto a = std::make_unique<Agent>();
  a->node = node;
  a->root = (work_.path() / ("root-" + node.substr(ns_.size() + 1))).string();
  a->store = store.empty() ? store_ : store;
  a->runsc = runsc;
  const std::string log =
      (work_.path() / ("agent-" + node + "-" + std::to_string(agents_.size()) + ".log")).string();
  std::vector<std::string> argv = {kStasis, "node", "--kubeconfig", ControlPlane::Get().kubeconfig(),
                                   "--node-name", node, "--runsc", runsc, "--root", a->root,
                                   "--workers", std::to_string(workers), "--metrics-addr",
                                   "127.0.0.1:0", "--snapshot-store", a->store, "--shutdown-grace", "5",
                                   "--bundle-root", BundleRoot().string()};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  a->proc = std::make_unique<BackgroundProcess>(argv, log, env);
  roots_.insert(a->root);
  nodes_.insert(node);
  Agent* out = a.get();
  agents_.push_back(std::move(a));
  const auto start = Clock::now();
  const std::string ready = "node agent ready node=" + node;
  // Generous: under a full parallel test run an agent's start (runsc and qemu probes, the
  // first lists, throttled by the apiserver's priority and fairness) has taken over 30 s.
  while (Clock::now() - start < 90s) {
    if (out->proc->Log().find(ready) != std::string::npos) return out;
    if (!out->proc->Running()) break;
    std::this_thread::sleep_for(50ms);
  }
  ADD_FAILURE() << "agent " << node << " did not become ready:\n" << out->proc->LogTail();
  return nullptr;
}

std::vector<std::string> NodeAgentTest::InjectEnv(const std::string& mode, const std::string& next) {
  return {"STASIS_INJECT_RUNSC=" + (next.empty() ? PinnedRunsc() : next),
          "STASIS_INJECT_MODE=" + mode, "STASIS_INJECT_LOG=" + InjectLog(),
          "STASIS_INJECT_ARM_FILE=" + ArmFile(), "STASIS_INJECT_RELEASE_FILE=" + ReleaseFile(),
          "STASIS_INJECT_HOLD_S=60"};
}

void NodeAgentTest::Arm(const std::string& actor) { std::ofstream(ArmFile(), std::ios::app) << Id(actor) << "\n"; }

std::vector<std::string> NodeAgentTest::InjectCalls(const std::string& sub, const std::string& actor) {
  std::vector<std::string> out;
  std::istringstream in(ReadFile(InjectLog()));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(sub + " " + Id(actor) + " ", 0) == 0) out.push_back(line);
  }
  return out;
}

long NodeAgentTest::PidOf(const std::string& call_line) {
  auto p = call_line.find("pid=");
  return p == std::string::npos ? -1 : std::stol(call_line.substr(p + 4));
}

void NodeAgentTest::KillOrphans() {
  std::istringstream in(ReadFile(InjectLog()));
  for (std::string line; std::getline(in, line);) {
    const long pid = PidOf(line);
    if (pid <= 0 || !ProcessAlive(pid)) continue;
    std::string cmd = ReadFile("/proc/" + std::to_string(pid) + "/cmdline");
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    if (cmd.find(work_.path().string()) != std::string::npos) kill(-static_cast<pid_t>(pid), SIGKILL);
  }
}

std::string NodeAgentTest::AgentLogs() {
  std::string out;
  for (const auto& a : agents_) {
    out += "---- agent " + a->node + " (" + a->proc->log_path() + ") ----\n" + a->proc->LogTail(3000) + "\n";
  }
  return out;
}

NodeAgentTest::StepsAfterCheckpoint NodeAgentTest::StepsAfterCheckpointInLog(const Agent& a, const std::string& name) {
  auto find_freed = [&](const std::string& log, size_t from) {
    const std::string step = "worker freed worker=", tail = " actor=" + ns_ + "/" + name;
    for (size_t at = log.find(step, from); at != std::string::npos; at = log.find(step, at + 1)) {
      const size_t end = log.find('\n', at);
      if (std::string_view(log).substr(at, end == std::string::npos ? end : end - at).ends_with(tail)) return at;
    }
    return std::string::npos;
  };
  StepsAfterCheckpoint steps;
  std::string log = ReadFile(a.proc->log_path());
  const size_t checkpointed = log.find("component=runsc op=checkpoint sandbox=" + Id(name) + " result=ok");
  if (checkpointed == std::string::npos) {
    ADD_FAILURE() << "no successful checkpoint of " << name << " in the agent's log\n" << AgentLogs();
    return steps;
  }
  for (int i = 0; i < 100 && find_freed(log, checkpointed) == std::string::npos; ++i) {
    std::this_thread::sleep_for(50ms);
    log = ReadFile(a.proc->log_path());
  }
  steps.deleted = log.find("component=runsc op=delete sandbox=" + Id(name) + " result=ok", checkpointed);
  steps.written = log.find("actor checkpointed actor=" + ns_ + "/" + name + " ", checkpointed);
  steps.freed = find_freed(log, checkpointed);
  if (steps.freed != std::string::npos) {
    const size_t name_at = steps.freed + std::string("worker freed worker=").size();
    steps.freed_worker = log.substr(name_at, log.find(' ', name_at) - name_at);
  }
  return steps;
}

void NodeAgentTest::CreateActor(const std::string& name, json spec) {
  if (!spec.contains("timeouts")) spec["timeouts"] = {{"checkpointSeconds", 60}, {"restoreSeconds", 60}};
  json actor = {{"apiVersion", "stasis.dev/v1alpha1"},
                {"kind", "Actor"},
                {"metadata", {{"name", name}, {"namespace", ns_}}},
                {"spec", spec}};
  auto r = Kubectl({"create", "-f", "-"}, actor.dump());
  ASSERT_TRUE(r.success()) << r.Summary() << "\n" << r.err;
}

json NodeAgentTest::CounterSpec(const std::string& node, const std::string& desired) {
  return {{"bundle", bundle_->dir().string()}, {"nodeName", node}, {"desiredState", desired}};
}

void NodeAgentTest::Patch(const std::string& name, const json& spec) {
  auto r = Kubectl({"patch", "actor", name, "-n", ns_, "--type=merge", "-p", json{{"spec", spec}}.dump()});
  ASSERT_TRUE(r.success()) << r.Summary() << "\n" << r.err;
}

json NodeAgentTest::GetActor(const std::string& name) {
  auto r = Kubectl({"get", "actor", name, "-n", ns_, "-o", "json"});
  if (!r.success()) {
    if (r.err.find("NotFound") != std::string::npos || r.err.find("not found") != std::string::npos) {
      return nullptr;
    }
    ADD_FAILURE() << "kubectl get actor " << name << ": " << r.Summary();
    return nullptr;
  }
  return json::parse(r.out);
}

bool NodeAgentTest::WaitActor(const std::string& name, const std::function<bool(const json&)>& pred,
                              std::chrono::milliseconds timeout, const std::string& what, json* out) {
  const auto start = Clock::now();
  json last;
  while (true) {
    last = GetActor(name);
    if (pred(last)) {
      if (out) *out = last;
      return true;
    }
    if (Clock::now() - start > timeout) break;
    std::this_thread::sleep_for(kPoll);
  }
  if (out) *out = last;
  ADD_FAILURE() << "actor " << ns_ << "/" << name << ": not " << what << " within "
                << std::chrono::duration_cast<std::chrono::seconds>(timeout).count() << " s; last seen:\n"
                << (last.is_object() && last.contains("status") ? last["status"].dump(2) : last.dump())
                << "\n" << AgentLogs();
  return false;
}

bool NodeAgentTest::WaitStatus(const std::string& name, const std::string& status,
                               std::chrono::milliseconds timeout, json* out) {
  return WaitActor(name, [&](const json& a) { return StatusOf(a) == status; }, timeout, status, out);
}

long NodeAgentTest::Counter(const Agent& a, const std::string& actor) {
  return ReadCounterIn(RunDir(a, actor), Id(actor));
}

long NodeAgentTest::FirstCounter(const Agent& a, const std::string& actor) {
  long v = Counter(a, actor);
  for (int i = 0; i < 20 && v < 0; ++i) {
    std::this_thread::sleep_for(100ms);
    v = Counter(a, actor);
  }
  return v;
}

std::string NodeAgentTest::InSandbox(const Agent& a, const std::string& actor, const std::vector<std::string>& argv) {
  std::vector<std::string> cmd = {PinnedRunsc(), "-root", RunDir(a, actor), "exec", Id(actor)};
  cmd.insert(cmd.end(), argv.begin(), argv.end());
  auto r = RunCommand(cmd, 30s);
  if (!r.ok() || !r->success()) return "";
  std::string out = r->out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

long NodeAgentTest::WaitCounter(const Agent& a, const std::string& actor, long at_least,
                                std::chrono::milliseconds timeout) {
  const auto start = Clock::now();
  long v = -1;
  while (Clock::now() - start < timeout) {
    v = Counter(a, actor);
    if (v >= at_least) return v;
    std::this_thread::sleep_for(100ms);
  }
  ADD_FAILURE() << "counter of " << actor << " did not reach " << at_least << " (last " << v << ")\n" << AgentLogs();
  return v;
}

std::vector<json> NodeAgentTest::Workers(const std::string& node) {
  auto r = Kubectl({"get", "workers", "-l", "stasis.dev/node=" + node, "-o", "json"});
  EXPECT_TRUE(r.success()) << r.err;
  if (!r.success()) return {};
  return json::parse(r.out).value("items", json::array()).get<std::vector<json>>();
}

std::string NodeAgentTest::WorkersText(const std::string& node) {
  std::string out;
  for (const auto& w : Workers(node)) {
    json st = w.value("status", json::object());
    out += w["metadata"].value("name", "") + "=" + st.value("phase", "?");
    if (st.contains("actorRef")) {
      out += "(" + st["actorRef"].value("namespace", "") + "/" + st["actorRef"].value("name", "") + ")";
    }
    out += " ";
  }
  return out;
}

void NodeAgentTest::ExpectAllWorkersFree(const std::string& node) {
  auto all_free = [&] {
    auto ws = Workers(node);
    return !ws.empty() && std::all_of(ws.begin(), ws.end(), [](const json& w) {
      return w.value("status", json::object()).value("phase", "") == "Free";
    });
  };
  // Up to 90 s: a resume from the store holds its worker while it downloads, so while the store
  // is down each retried attempt holds it a few seconds (its S3 retries) before giving it back;
  // the gaps between attempts grow with the resume's backoff (1 s doubling), and under a full
  // parallel run the first ones were too short for 30 s of polling to see the worker free.
  const auto deadline = Clock::now() + 90s;
  while (Clock::now() < deadline && !all_free()) std::this_thread::sleep_for(100ms);
  auto workers = Workers(node);
  EXPECT_FALSE(workers.empty()) << "node " << node << " registered no workers";
  for (const auto& w : workers) {
    json st = w.value("status", json::object());
    EXPECT_EQ(st.value("phase", ""), "Free") << "node " << node << ": " << WorkersText(node);
    EXPECT_FALSE(st.contains("actorRef")) << WorkersText(node);
  }
}

void NodeAgentTest::ExpectHeldBy(const std::string& node, const std::string& actor, const json& a) {
  int held_by_it = 0, held = 0;
  std::string which;
  for (const auto& w : Workers(node)) {
    json st = w.value("status", json::object());
    if (st.value("phase", "") != "Held") continue;
    ++held;
    if (st.contains("actorRef") && st["actorRef"].value("namespace", "") == ns_ &&
        st["actorRef"].value("name", "") == actor) {
      ++held_by_it;
      which = w["metadata"].value("name", "");
    }
  }
  EXPECT_EQ(held_by_it, 1) << WorkersText(node);
  EXPECT_EQ(held, 1) << WorkersText(node);
  EXPECT_EQ(StatusField(a, "workerName"), json(which)) << StatusField(a, "workerName");
}

std::vector<std::string> NodeAgentTest::LocalSnapshotsAfterCommit(const Agent& a, const std::string& actor) {
  const auto start = Clock::now();
  while (Clock::now() - start < 10s && !Entries(LocalSnapshots(a, actor)).empty()) {
    std::this_thread::sleep_for(kPoll);
  }
  return Entries(LocalSnapshots(a, actor));
}

std::vector<std::string> NodeAgentTest::ProcessesAfterCheckpoint(const Agent& a, const std::string& actor) {
  const auto start = Clock::now();
  while (Clock::now() - start < 10s && !ProcessesMentioning(RunDir(a, actor)).empty()) {
    std::this_thread::sleep_for(kPoll);
  }
  return ProcessesMentioning(RunDir(a, actor));
}

void NodeAgentTest::ExpectNothingLeftOnNode(const Agent& a, const std::string& actor) {
  EXPECT_FALSE(fs::exists(RunDir(a, actor))) << RunDir(a, actor) << " left behind: " << ::testing::PrintToString(Entries(RunDir(a, actor)));
  EXPECT_THAT(ProcessesMentioning(RunDir(a, actor)), ::testing::IsEmpty()) << "sandbox processes left";
  EXPECT_THAT(Entries(LocalSnapshots(a, actor)), ::testing::IsEmpty()) << LocalSnapshots(a, actor);
}

std::string NodeAgentTest::WriteCdiSpecs(bool with_private_dir) {
  const fs::path dir = work_.path() / "cdi";
  fs::create_directories(dir);
  std::string gpu = "cdiVersion: 0.6.0\nkind: nvidia.com/gpu\n";
  gpu += "devices:\n";
  // Each GPU's edits: the variable a one-GPU actor reads to see which it got, and one of its
  // own, so that a multi-GPU actor shows it got every GPU of its worker.
  for (const std::string index : {"0", "1"}) {
    const std::string uuid = "GPU-e2e-" + index;
    gpu += "  - name: " + uuid + "\n    containerEdits:\n      env: [STASIS_E2E_GPU=" + uuid +
           ", STASIS_E2E_HAS_GPU_" + index + "=yes]\n";
  }
  std::ofstream(dir / "gpu.yaml") << gpu;
  const std::string helper = HelperSpecForThisBuild(with_private_dir);
  EXPECT_FALSE(helper.empty()) << "the shipped helper spec changed";
  std::ofstream(dir / "stasis-cuda-checkpoint.yaml") << helper;
  return dir.string();
}

}  // namespace stasis::testing
