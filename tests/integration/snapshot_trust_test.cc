// What the node agent trusts of a snapshot, and what a checkpoint may cost, against a real
// kube-apiserver with the fake runtime driver (tests/support/fake_runtime_driver.h): a restore
// reads the image directory derived from the actor's names — whatever status.latestSnapshot.
// location says —, refuses a snapshot of another life of the actor (manifest ownerUid) and a
// committed one whose checksums fail, keeping both; a checkpoint without room on the snapshot's
// file system is refused while the actor runs on; and a -leave-running checkpoint whose
// completion fails (a full disk) leaves the sandbox running and the last good snapshot in place.
#include <gtest/gtest.h>
#include <prometheus/registry.h>
#include <sys/mount.h>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/json_mapping.h"
#include "controller/event_recorder.h"
#include "controller/object_store.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/node_workers.h"
#include "reconcilers/node/sandbox_id.h"
#include "reconcilers/node/snapshot_metrics.h"
#include "snapshots/snapshot_store.h"
#include "tests/support/control_plane.h"
#include "tests/support/fake_runtime_driver.h"
#include "tests/support/recorded_events.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using testing::ControlPlane;
using testing::FakeRuntimeDriver;
using testing::RecordedEvents;

constexpr char kActor[] = "a1";
constexpr int64_t kMiB = 1 << 20;

// A tmpfs of `bytes` over `dir`, unmounted (lazily) when it goes.
struct Tmpfs {
  std::string dir;
  bool mounted = false;
  Tmpfs(const std::string& d, int64_t bytes) : dir(d) {
    const std::string opts = "size=" + std::to_string(bytes);
    mounted = mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~Tmpfs() {
    if (mounted) umount2(dir.c_str(), MNT_DETACH);
  }
};

// Writes `path` until the file system is full (ENOSPC); true if it got there.
bool FillUp(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  const std::string chunk(64 * 1024, 'x');
  bool full = false;
  for (size_t n = chunk.size(); !full && n > 0;) {
    if (write(fd, chunk.data(), n) < 0) {
      if (errno != ENOSPC) break;
      if (n == 1) full = true;
      n = n / 2;
    }
  }
  close(fd);
  return full;
}

class SnapshotTrustTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(ControlPlane::Get().InstallStasisApi(), ""); }

  void SetUp() override {
    ns_ = ControlPlane::Get().CreateTestNamespace("st");
    ASSERT_FALSE(ns_.empty());
    root_ = fs::temp_directory_path() / ("stasis-st-" + ns_);
    fs::remove_all(root_);
    for (const char* d : {"snapshots", "store", "bundles/app"}) fs::create_directories(root_ / d);
    client_ = ControlPlane::Get().NewClient();
    metrics_ = std::make_unique<SnapshotMetrics>(registry_);
    store_ = std::make_unique<SnapshotStore>((root_ / "snapshots").string(), (root_ / "store").string());
    workers_ = std::make_unique<NodeWorkers>(*client_, ns_, std::vector<std::vector<std::string>>{{}}, metrics_.get());
    ASSERT_TRUE(workers_->Register().ok());
    NewReconciler(64 * kMiB);
  }

  void TearDown() override {
    tmpfs_.reset();
    fs::remove_all(root_);
  }

  void NewReconciler(int64_t margin, decltype(ActorReconcilerOptions::gpu_memory_used) gpu_memory = nullptr,
                     decltype(ActorReconcilerOptions::host_memory_available) host_memory = nullptr) {
    ActorReconcilerOptions o;
    if (gpu_memory) o.gpu_memory_used = std::move(gpu_memory);
    if (host_memory) o.host_memory_available = std::move(host_memory);
    o.checkpoint_memory_margin = kMiB;
    o.node = ns_;
    o.root = root_.string();
    o.bundle_roots.roots = {(root_ / "bundles").string()};
    o.pause_durability = Durability::kSynced;
    o.retry_base = std::chrono::milliseconds(1);
    o.retry_max = std::chrono::milliseconds(1);
    o.checkpoint_space_margin = margin;
    reconciler_ = std::make_unique<ActorReconciler>(
        o, *client_, [this](const std::string& key) { return cache_.Get(key); }, RuntimeDrivers{&driver_, nullptr},
        *store_, *workers_, *metrics_, &events_);
  }

  void Create(const std::string& policy = "Direct") {
    json body = {{"apiVersion", "stasis.dev/v1alpha1"}, {"kind", "Actor"},
                 {"metadata", {{"name", kActor}, {"namespace", ns_}}},
                 {"spec", {{"bundle", (root_ / "bundles" / "app").string()}, {"nodeName", ns_},
                           {"desiredState", "Running"}, {"checkpointPolicy", policy}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, body).ok());
  }

  void RegisterGpuWorker() {
    workers_ = std::make_unique<NodeWorkers>(*client_, ns_, std::vector<std::vector<std::string>>{{"GPU-trust-0"}},
                                             metrics_.get());
    ASSERT_TRUE(workers_->Register().ok());
  }
  // A GPU actor RUNNING on the GPU worker, as a resume leaves it (a GPU resume needs CDI specs).
  void RunGpuActorOnItsWorker() {
    json body = {{"apiVersion", "stasis.dev/v1alpha1"}, {"kind", "Actor"},
                 {"metadata", {{"name", kActor}, {"namespace", ns_}}},
                 {"spec", {{"bundle", (root_ / "bundles" / "app").string()}, {"nodeName", ns_},
                           {"desiredState", "Running"}, {"gpu", {{"count", 1}}}}}};
    ASSERT_TRUE(client_->Create(kActorType, ns_, body).ok());
    auto worker = workers_->Claim(api::ActorRef{ns_, kActor}, 1);
    ASSERT_TRUE(worker.ok()) << worker.status().ToString();
    PatchStatus({{"status", "STATUS_RUNNING"}, {"nodeName", ns_}, {"workerName", worker->metadata.name},
                 {"sandboxId", Sandbox()}});
    driver_.SetState(Sandbox(), SandboxState::kRunning);
    driver_.SetMemoryUsage(kMiB);
  }

  Result<ReconcileOutcome> Reconcile() {
    auto live = client_->Get(kActorType, ns_, kActor);
    if (live.ok()) cache_.Upsert(std::make_shared<const json>(*live));
    return reconciler_->Reconcile(Request{ns_, kActor});
  }
  api::Actor Get() {
    auto live = client_->Get(kActorType, ns_, kActor);
    EXPECT_TRUE(live.ok());
    auto a = api::ActorFromJson(live.ok() ? *live : json::object());
    return a.ok() ? *a : api::Actor{};
  }
  std::string StatusName() { return api::ToString(Get().status.status); }
  bool Settle(const std::string& want) {
    for (int i = 0; i < 6 && StatusName() != want; ++i) (void)Reconcile();
    return StatusName() == want;
  }
  void Desire(const std::string& state) {
    ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge, {{"spec", {{"desiredState", state}}}}).ok());
  }
  void PatchStatus(const json& status) {
    ASSERT_TRUE(client_->Patch(kActorType, ns_, kActor, PatchType::kMerge, {{"status", status}}, "status").ok());
  }
  const api::Condition* Cond(const api::Actor& a, const char* type) { return api::FindCondition(a.status.conditions, type); }
  std::string Reason(const char* type) {
    const api::Actor a = Get();
    const api::Condition* c = Cond(a, type);
    return c ? c->reason : "";
  }
  std::string Sandbox() const { return SandboxIdFor(ns_, kActor); }
  bool HasWarning(const std::string& prefix) {
    for (const auto& w : events_.Warnings()) {
      if (w.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }
  // Suspends the running actor; returns the committed snapshot's id.
  std::string SuspendCommitted() {
    Desire("Suspended");
    EXPECT_TRUE(Settle("STATUS_SUSPENDED"));
    const api::Actor a = Get();
    EXPECT_TRUE(a.status.latest_snapshot && a.status.latest_snapshot->node_name.empty());
    return a.status.latest_snapshot ? a.status.latest_snapshot->id : "";
  }

  std::string ns_;
  fs::path root_;
  prometheus::Registry registry_;
  std::unique_ptr<KubeClient> client_;
  std::unique_ptr<SnapshotMetrics> metrics_;
  std::unique_ptr<SnapshotStore> store_;
  std::unique_ptr<NodeWorkers> workers_;
  ObjectStore cache_;
  FakeRuntimeDriver driver_;
  RecordedEvents events_;
  std::unique_ptr<ActorReconciler> reconciler_;
  std::unique_ptr<Tmpfs> tmpfs_;
};

// status.latestSnapshot.location pointed at another directory holding an image (here another
// actor's committed snapshot): the restore reads the directory derived from the names.
TEST_F(SnapshotTrustTest, TamperedLocationIsNotRestored) {
  Create();
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  const std::string id = SuspendCommitted();
  const fs::path other = root_ / "store" / ns_ / "other-actor" / "s-other";
  fs::create_directories(other);
  std::ofstream(other / "checkpoint.img") << "another tenant's image";
  PatchStatus({{"latestSnapshot", {{"location", other.string()}}}});
  ASSERT_EQ(Get().status.latest_snapshot->location, other.string());
  Desire("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  const auto restored = driver_.RestoredFrom();
  ASSERT_EQ(restored.size(), 1u);
  EXPECT_EQ(restored[0], store_->StorePath(ns_, kActor, id));
}

// An id that is no snapshot id (a path) never becomes a path: FAILED, nothing restored.
TEST_F(SnapshotTrustTest, AnIdThatIsAPathIsRefused) {
  Create();
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  SuspendCommitted();
  PatchStatus({{"latestSnapshot", {{"id", "../other-actor/s-other"}}}});
  Desire("Running");
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), "InvalidName");
  EXPECT_TRUE(driver_.RestoredFrom().empty());
}

// The snapshot of an earlier actor of the same name (its manifest names another uid): refused
// with SnapshotOwnerMismatch and a Warning Event, nothing restored, nothing deleted.
TEST_F(SnapshotTrustTest, AnotherLifesSnapshotIsRefused) {
  Create();
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  const std::string id = SuspendCommitted();
  const fs::path dir = store_->StorePath(ns_, kActor, id);
  json m = json::parse(std::ifstream(dir / kManifestFile));
  ASSERT_EQ(m.value("ownerUid", ""), Get().metadata.uid) << "the manifest records its actor's uid";
  m["ownerUid"] = "00000000-0000-0000-0000-earlier-life";
  fs::remove(dir / kManifestFile);
  std::ofstream(dir / kManifestFile) << m.dump(2);
  Desire("Running");
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonSnapshotOwnerMismatch);
  EXPECT_TRUE(HasWarning(std::string("ResumeFailed: ")));
  EXPECT_TRUE(driver_.RestoredFrom().empty());
  EXPECT_TRUE(fs::exists(dir / "checkpoint.img")) << "kept for inspection";
  EXPECT_EQ(Get().status.latest_snapshot->id, id);
}

// One byte flipped in a committed Full snapshot: refused with SnapshotCorrupt before runsc
// sees it, the snapshot kept.
TEST_F(SnapshotTrustTest, ACorruptCommittedSnapshotIsRefused) {
  Create();
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  const std::string id = SuspendCommitted();
  const fs::path image = store_->StorePath(ns_, kActor, id) + "/checkpoint.img";
  {
    std::fstream f(image, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2);
    f.put('#');
  }
  // The committed copy is checked before a worker is claimed: the Worker is never written.
  auto worker = [&] { return client_->Get(kWorkerType, "", ns_ + "-slot0"); };
  ASSERT_TRUE(worker().ok());
  const std::string version = (*worker())["metadata"].value("resourceVersion", "");
  Desire("Running");
  (void)Reconcile();
  EXPECT_EQ(StatusName(), "STATUS_FAILED");
  EXPECT_EQ(Reason(api::kConditionReady), api::kReasonSnapshotCorrupt);
  EXPECT_TRUE(driver_.RestoredFrom().empty());
  EXPECT_TRUE(fs::exists(image)) << "kept for inspection";
  EXPECT_EQ((*worker())["metadata"].value("resourceVersion", ""), version) << "the worker was claimed and freed";
}

// The snapshot's file system has less room than the sandbox's memory plus the margin: no
// checkpoint, RUNNING, CheckpointFailed=True InsufficientSpace with the figures, a Warning
// Event; with room again the retry pauses it.
TEST_F(SnapshotTrustTest, NoRoomRefusesTheCheckpoint) {
  NewReconciler(kMiB);
  tmpfs_ = std::make_unique<Tmpfs>((root_ / "snapshots").string(), 4 * kMiB);
  ASSERT_TRUE(tmpfs_->mounted);
  Create();
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  driver_.SetMemoryUsage(8 * kMiB);
  Desire("Paused");
  (void)Reconcile();
  const api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_RUNNING");
  const api::Condition* failed = Cond(a, api::kConditionCheckpointFailed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->reason, api::kReasonInsufficientSpace);
  EXPECT_NE(failed->message.find("checkpoint needs " + std::to_string(9 * kMiB) + " (memory " +
                                 std::to_string(8 * kMiB) + " + GPU memory 0 + margin " + std::to_string(kMiB) + ")"),
            std::string::npos)
      << failed->message;
  EXPECT_TRUE(HasWarning("CheckpointFailed: "));
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 0);
  EXPECT_EQ(driver_.StateOf(Sandbox()), SandboxState::kRunning);

  driver_.SetMemoryUsage(kMiB);
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 1);
}

// A GPU actor's image also holds the memory its GPUs hold (cuda-checkpoint copies it to the
// host before runsc saves): with room for the host memory of any sandbox but not for that, the
// checkpoint is refused before anything is frozen, the GPUs asked about being the actor's own.
TEST_F(SnapshotTrustTest, NoRoomForTheGpuMemoryRefusesTheCheckpoint) {
  const int64_t kPiB = int64_t{1} << 50;
  std::vector<std::string> asked;
  RegisterGpuWorker();
  // The host has the memory (the disk is what lacks room here).
  NewReconciler(
      kMiB,
      [&](const std::vector<std::string>& uuids) -> Result<int64_t> {
        asked = uuids;
        return kPiB;
      },
      [] { return Result<int64_t>(int64_t{1} << 62); });
  RunGpuActorOnItsWorker();
  Desire("Paused");
  (void)Reconcile();
  (void)Reconcile();
  const api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_RUNNING");
  const api::Condition* failed = Cond(a, api::kConditionCheckpointFailed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->reason, api::kReasonInsufficientSpace);
  EXPECT_NE(failed->message.find(" + GPU memory " + std::to_string(kPiB) + " + "), std::string::npos)
      << failed->message;
  EXPECT_EQ(asked, std::vector<std::string>{"GPU-trust-0"});
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 0);
  EXPECT_EQ(driver_.StateOf(Sandbox()), SandboxState::kRunning);
}

// The CUDA checkpoint first copies the device memory in use into host memory: with less memory
// available than that plus the margin, nothing is frozen (the kernel would kill the workload
// half-way), the actor runs on with CheckpointFailed=True InsufficientHostMemory and the figures;
// once the memory is there the retry pauses it.
TEST_F(SnapshotTrustTest, NoHostMemoryForTheGpuMemoryRefusesTheCheckpoint) {
  const int64_t kGiB = int64_t{1} << 30;
  int64_t available = kGiB / 2;
  RegisterGpuWorker();
  NewReconciler(
      kMiB, [&](const std::vector<std::string>&) -> Result<int64_t> { return kGiB; },
      [&] { return Result<int64_t>(available); });
  RunGpuActorOnItsWorker();
  Desire("Paused");
  (void)Reconcile();
  (void)Reconcile();
  api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_RUNNING");
  const api::Condition* failed = Cond(a, api::kConditionCheckpointFailed);
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->reason, api::kReasonInsufficientHostMemory);
  EXPECT_NE(failed->message.find("the host has " + std::to_string(kGiB / 2) +
                                 " bytes of memory available; the CUDA checkpoint copies the GPU memory in use (" +
                                 std::to_string(kGiB) + ")"),
            std::string::npos)
      << failed->message;
  EXPECT_TRUE(HasWarning("CheckpointFailed: "));
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 0);
  EXPECT_EQ(driver_.StateOf(Sandbox()), SandboxState::kRunning);

  available = 64 * kGiB;
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  EXPECT_EQ(driver_.CountCalls("Checkpoint"), 1);
}

// A -leave-running checkpoint whose snapshot cannot be completed (the disk fills between the
// check and the manifest): the sandbox is thawed and runs on, RUNNING, the last good snapshot
// still latestSnapshot and on disk; with room again the retry pauses it.
TEST_F(SnapshotTrustTest, DiskFullAtCompletionKeepsTheSandbox) {
  NewReconciler(0);
  tmpfs_ = std::make_unique<Tmpfs>((root_ / "snapshots").string(), 4 * kMiB);
  ASSERT_TRUE(tmpfs_->mounted);
  Create("LeaveRunningThenStop");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  Desire("Paused");
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  Desire("Running");
  ASSERT_TRUE(Settle("STATUS_RUNNING"));
  const std::string good = Get().status.latest_snapshot->id;
  const std::string filler = (root_ / "snapshots" / "filler").string();
  driver_.SetAfterCheckpoint([&](const std::string&) { ASSERT_TRUE(FillUp(filler)); });
  const int deletes = driver_.CountCalls("Delete");
  Desire("Paused");
  (void)Reconcile();
  const api::Actor a = Get();
  EXPECT_EQ(std::string(api::ToString(a.status.status)), "STATUS_RUNNING");
  EXPECT_EQ(driver_.StateOf(Sandbox()), SandboxState::kRunning) << "thawed, never deleted";
  EXPECT_EQ(driver_.CountCalls("Delete"), deletes) << ::testing::PrintToString(driver_.Calls());
  EXPECT_EQ(driver_.CountCalls("Thaw"), 1) << "frozen after the -leave-running save, thawed when it failed";
  EXPECT_EQ(Reason(api::kConditionCheckpointFailed), api::kReasonHostDiskFull);
  ASSERT_TRUE(a.status.latest_snapshot.has_value());
  EXPECT_EQ(a.status.latest_snapshot->id, good);
  EXPECT_TRUE(fs::exists(store_->LocalPath(ns_, kActor, good) + "/" + kManifestFile));
  EXPECT_EQ(store_->ListLocal(ns_, kActor).size(), 1u) << "nothing of the failed snapshot is left";

  driver_.SetAfterCheckpoint(nullptr);
  fs::remove(filler);
  ASSERT_TRUE(Settle("STATUS_PAUSED"));
  EXPECT_NE(Get().status.latest_snapshot->id, good);
}

}  // namespace
}  // namespace stasis
