// The fixture of the `stasis node` end-to-end tests (tests/e2e/node_*_test.cc): the real binary
// against a real kube-apiserver, reconciling Actors with the pinned runsc and real gVisor
// sandboxes running a counter. The tests speak only the API (kubectl, -o json) and look at what
// is on disk and in runsc, as an operator would. Faults are produced by labelled test doubles
// placed in front of the real runsc: tests/support/runsc-fault-inject.sh (kills the sandbox just
// before a checkpoint, or holds a checkpoint/restore so the agent can be killed mid-transition)
// and tests/support/runsc-nvproxy-fault.sh (the nvproxy save failure of a GPU sandbox). The real
// runsc does every piece of real work.
//
// Every wait polls with a deadline and fails with the last observed status and the agents' log
// tails; the only fixed waits are the ones that check that something does NOT happen (a
// checkpoint is never retried).
//
// Hermetic, so that the test binaries that share it can run at once: each binary has its own
// control plane, each test its own namespace (named for the test, unique across the binaries),
// working directory (agents' roots, the store, logs, CDI specs) and loopback ports.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "tests/support/background_process.h"
#include "tests/support/sandbox.h"
#include "reconcilers/node/sandbox_id.h"

namespace stasis::testing {

// The `stasis` binary of this build, and the two runsc fault wrappers.
extern const std::string kStasis;
extern const std::string kInjectWrapper;
extern const std::string kNvproxyWrapper;

// How often the waits poll the API.
inline constexpr std::chrono::milliseconds kPoll{150};

std::string ReadFile(const std::filesystem::path& p);

// .status.status, or "" when there is none yet.
std::string StatusOf(const nlohmann::json& a);
nlohmann::json StatusField(const nlohmann::json& a, const std::string& field);
// The condition of that type, or null.
nlohmann::json Cond(const nlohmann::json& a, const std::string& type);
bool CondIs(const nlohmann::json& a, const std::string& type, const std::string& status);
// The condition's reason, or "" while the actor has no such condition.
std::string CondReason(const nlohmann::json& a, const std::string& type);
std::string CondMessage(const nlohmann::json& a, const std::string& type);

// The manifest of the local snapshot `dir` once the agent's background job has computed its
// checksums (a Pause completes without them), or null after `timeout`. A test that edits a
// snapshot's files waits for this first: an edit while the job hashes them fails the job.
nlohmann::json ManifestWithChecksums(const std::filesystem::path& dir, std::chrono::milliseconds timeout);

// Every "*.partial" directory under `root`.
std::vector<std::string> PartialDirs(const std::filesystem::path& root);
// The entries of a directory (empty when it does not exist).
std::vector<std::string> Entries(const std::filesystem::path& dir);
// Live processes whose command line mentions `needle` (a sandbox's runsc root: the sandbox,
// its gofer and any runsc call on it carry it).
std::vector<std::string> ProcessesMentioning(const std::string& needle);
// Whether process `pid` exists and is not a zombie.
bool ProcessAlive(long pid);
// The /metrics text of the stasis process whose log is `log` (it serves on the port its line
// "serving metrics addr=127.0.0.1:0 port=N" names), or "" when it cannot be read.
std::string ScrapeMetrics(const std::string& log);
// The value of the series written exactly as `series` in a /metrics text, or -1.
double MetricValue(const std::string& metrics, const std::string& series);

// One `stasis node` process.
struct Agent {
  std::string node, root, store, runsc;
  std::unique_ptr<BackgroundProcess> proc;
};

class NodeAgentTest : public ::testing::Test {
 protected:
  using json = nlohmann::json;

  static void SetUpTestSuite();

  NodeAgentTest() : work_("stasis-e2e-node-") {}

  void SetUp() override;
  void TearDown() override;

  CommandResult Kubectl(const std::vector<std::string>& args, const std::string& in = "");
  std::vector<json> ListActors();

  std::string Node(const std::string& suffix) { return ns_ + "-" + suffix; }
  std::string Id(const std::string& actor) const { return SandboxIdFor(ns_, actor); }
  std::string RunDir(const Agent& a, const std::string& actor) const { return a.root + "/run/" + Id(actor); }
  std::string LocalSnapshots(const Agent& a, const std::string& actor) const {
    return a.root + "/snapshots/" + ns_ + "/" + actor;
  }
  std::string Committed(const std::string& store, const std::string& actor) const {
    return store + "/" + ns_ + "/" + actor;
  }

  // Starts `stasis node` and waits until it is ready. Its root is <work>/root-<suffix> for a
  // node named Node(suffix): one root per node, shared by its successive agents.
  Agent* StartAgent(const std::string& node, const std::string& runsc,
                    const std::vector<std::string>& env = {}, int workers = 2,
                    const std::string& store = "", const std::vector<std::string>& extra_args = {});

  // The wrapper's environment: everything goes to the real runsc (or `next`).
  std::vector<std::string> InjectEnv(const std::string& mode, const std::string& next = "");
  // Every agent's --bundle-root: <work>/bundles, beside (never holding) their roots and store.
  std::filesystem::path BundleRoot() const { return work_.path() / "bundles"; }
  std::string InjectLog() const { return (work_.path() / "inject-calls.log").string(); }
  std::string ArmFile() const { return (work_.path() / "inject-armed").string(); }
  std::string ReleaseFile() const { return (work_.path() / "inject-release").string(); }
  void Arm(const std::string& actor);

  // The wrapper's record of `sub` calls ("checkpoint", "restore") for one actor.
  std::vector<std::string> InjectCalls(const std::string& sub, const std::string& actor);

  static long PidOf(const std::string& call_line);

  // Held wrapper processes that outlived a killed agent (the AgentKilled* cases), by the pid
  // they logged; only those whose command line is about this test's directories.
  void KillOrphans();

  std::string AgentLogs();

  // Where the agent logged the steps that follow an actor's successful checkpoint (one
  // reconcile's lines are in order): its sandbox's delete, "actor checkpointed" (after the
  // PAUSED/SUSPENDED write) and "worker freed" (and which worker); npos for a step not logged.
  // "worker freed" follows the release's response, which a test's Workers poll may see first:
  // waited for (5 s).
  struct StepsAfterCheckpoint {
    size_t deleted = std::string::npos, written = std::string::npos, freed = std::string::npos;
    std::string freed_worker;
  };
  StepsAfterCheckpoint StepsAfterCheckpointInLog(const Agent& a, const std::string& name);

  void CreateActor(const std::string& name, json spec);
  json CounterSpec(const std::string& node, const std::string& desired = "Running");
  void Patch(const std::string& name, const json& spec);

  // The actor, or null when it does not exist (any other error fails the test).
  json GetActor(const std::string& name);

  // Polls the actor until `pred` holds; on timeout fails with the last observed object and
  // the agents' log tails.
  bool WaitActor(const std::string& name, const std::function<bool(const json&)>& pred,
                 std::chrono::milliseconds timeout, const std::string& what, json* out = nullptr);
  bool WaitStatus(const std::string& name, const std::string& status, std::chrono::milliseconds timeout,
                  json* out = nullptr);

  // `cat /tmp/counter` in the actor's sandbox on that agent's node, or -1.
  long Counter(const Agent& a, const std::string& actor);

  // The counter right after RUNNING: the first exec may race the restored sandbox's start, so
  // it is read again for up to 2 s (a fresh boot counts to 20 at most meanwhile). -1 if unread.
  long FirstCounter(const Agent& a, const std::string& actor);

  // What `argv` prints inside the actor's sandbox on that agent's node, trailing newlines cut
  // ("" when it fails).
  std::string InSandbox(const Agent& a, const std::string& actor, const std::vector<std::string>& argv);

  // Waits until the counter is at least `at_least`; returns the last value read.
  long WaitCounter(const Agent& a, const std::string& actor, long at_least,
                   std::chrono::milliseconds timeout = std::chrono::seconds(20));

  std::vector<json> Workers(const std::string& node);

  // "name=Free" / "name=Held(ns/actor)" for each worker of the node, for messages.
  std::string WorkersText(const std::string& node);

  // The agent gives the worker back right after the write that ends a pause or suspend (off
  // its path), so a client that saw PAUSED may look a moment before it is free: up to 30 s.
  void ExpectAllWorkersFree(const std::string& node);

  // Exactly one worker of the node is held, by `actor`, and it is the actor's status.workerName.
  void ExpectHeldBy(const std::string& node, const std::string& actor, const json& a);

  // The node-local copies of an actor's snapshots, once they are gone (the agent drops the local
  // copy of a committed snapshot after the status write, off the transition's path; polled).
  std::vector<std::string> LocalSnapshotsAfterCommit(const Agent& a, const std::string& actor);

  // The processes mentioning an actor's runtime dir once they are gone: after a Direct
  // checkpoint the agent deletes the stopped sandbox (runsc delete, runsc list) after the status
  // write, off the pause's path; polled. A sandbox that still runs is still there after 10 s.
  std::vector<std::string> ProcessesAfterCheckpoint(const Agent& a, const std::string& actor);

  // Nothing of the actor is left on that agent's node: no runtime dir, no sandbox or runsc
  // process on it, no node-local snapshot.
  void ExpectNothingLeftOnNode(const Agent& a, const std::string& actor);

  // CDI specs for GPU workers GPU-e2e-0 and GPU-e2e-1 of a CPU machine, and the project's
  // helper spec with its host paths pointed at this build's self-contained helper
  // (build/cuda-checkpoint/). Each GPU device sets STASIS_E2E_GPU to its own UUID. The busybox
  // root has no C library: the helper runs there on its private directory's alone.
  // with_private_dir false drops the spec's mount of that directory (an outdated spec).
  std::string WriteCdiSpecs(bool with_private_dir);

  TempDir work_;
  std::string ns_, store_;
  std::unique_ptr<Bundle> bundle_;
  std::vector<std::unique_ptr<Agent>> agents_;
  std::set<std::string> roots_, nodes_;
};

}  // namespace stasis::testing
