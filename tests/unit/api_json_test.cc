// JSON mapping of Actor and Worker: every field both ways, defaults on read, errors as
// values, unknown fields kept through a read-modify-write, and the merge patches.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "api/actor.h"
#include "api/defaults.h"
#include "api/json_mapping.h"
#include "api/merge_patch.h"
#include "api/names.h"
#include "base/time.h"
#include "api/worker.h"
#include "tests/support/bad_actors.h"

namespace stasis::api {
namespace {

using nlohmann::json;
using std::chrono::seconds;

Time At(int64_t s) { return Time{seconds{s}}; }

// An Actor with every field set to a non-default value.
Actor FullActor() {
  Actor a;
  a.metadata.name = "counter";
  a.metadata.namespace_ = "team-a";
  a.metadata.uid = "6f1c3a2e-0000-4000-8000-000000000001";
  a.metadata.resource_version = "4711";
  a.metadata.generation = 4;
  a.metadata.labels = {{kNodeLabel, "node-a"}, {"app", "counter"}};
  a.metadata.annotations = {{"example.com/note", "hello"}};
  a.metadata.finalizers = {kActorFinalizer};
  a.metadata.creation_timestamp = At(1'700'000'000);
  a.metadata.deletion_timestamp = At(1'700'000'600);
  a.spec.runtime = Runtime::kMicrovm;
  a.spec.bundle = "/var/lib/stasis/bundles/counter";
  a.spec.node_name = "node-a";
  a.spec.gpu = {2, "/opt/cuda-checkpoint", /*fast_snapshot=*/true};
  a.spec.desired_state = DesiredState::kSuspended;
  a.spec.checkpoint_policy = CheckpointPolicy::kLeaveRunningThenStop;
  a.spec.snapshots = {SnapshotScope::kData, SnapshotScope::kData, {"/data", "/models"}};
  a.spec.timeouts = {900, 120};
  a.status.status = ActorState::kSuspending;
  a.status.observed_generation = 4;
  a.status.node_name = "node-a";
  a.status.worker_name = "node-a-gpu0";
  a.status.sandbox_id = "stasis-counter-1";
  a.status.transition_start_time = At(1'700'000'100);
  Snapshot s;
  s.id = "counter-1";
  s.trigger = SnapshotTrigger::kSuspend;
  s.scope = SnapshotScope::kData;
  s.location = "s3://snapshots/counter-1";
  s.node_name = "node-a";
  s.size_bytes = 5'000'000'000;
  s.duration_seconds = 12.25;
  s.cuda_checkpointed = true;
  s.runsc_version = "release-20260622.0";
  s.gpu = {"NVIDIA H200", "580.95.05", "13.0"};
  s.taken_at = At(1'700'000'050);
  a.status.latest_snapshot = s;
  a.status.conditions = {
      {"Ready", ConditionStatus::kFalse, 4, At(1'700'000'100), "Suspending", "checkpointing"},
      {"Progressing", ConditionStatus::kTrue, 3, At(1'700'000'100), "Checkpointing", ""}};
  return a;
}

TEST(ApiJsonTest, ActorRoundTripsEveryField) {
  const Actor a = FullActor();
  const json j = ActorToJson(a);
  EXPECT_EQ(j["apiVersion"], "stasis.dev/v1alpha1");
  EXPECT_EQ(j["kind"], "Actor");
  // The wire names, one per field.
  EXPECT_EQ(j["metadata"]["namespace"], "team-a");
  EXPECT_EQ(j["metadata"]["resourceVersion"], "4711");
  EXPECT_EQ(j["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(j["metadata"]["deletionTimestamp"], "2023-11-14T22:23:20Z");
  EXPECT_EQ(j["metadata"]["finalizers"], json::array({"stasis.dev/actor-cleanup"}));
  EXPECT_EQ(j["spec"]["runtime"], "microvm");
  EXPECT_EQ(j["spec"]["nodeName"], "node-a");
  EXPECT_EQ(j["spec"]["gpu"], json({{"count", 2},
                                    {"cudaCheckpointPath", "/opt/cuda-checkpoint"},
                                    {"fastSnapshot", true}}));
  EXPECT_EQ(j["spec"]["desiredState"], "Suspended");
  EXPECT_EQ(j["spec"]["checkpointPolicy"], "LeaveRunningThenStop");
  EXPECT_EQ(j["spec"]["snapshots"],
            json({{"onPause", "Data"}, {"onCommit", "Data"}, {"dataDirs", {"/data", "/models"}}}));
  EXPECT_EQ(j["spec"]["timeouts"], json({{"checkpointSeconds", 900}, {"restoreSeconds", 120}}));
  EXPECT_EQ(j["status"]["status"], "STATUS_SUSPENDING");
  EXPECT_EQ(j["status"]["observedGeneration"], 4);
  EXPECT_EQ(j["status"]["workerName"], "node-a-gpu0");
  EXPECT_EQ(j["status"]["sandboxID"], "stasis-counter-1");
  EXPECT_EQ(j["status"]["transitionStartTime"], "2023-11-14T22:15:00Z");
  const json& ls = j["status"]["latestSnapshot"];
  EXPECT_EQ(ls["trigger"], "Suspend");
  EXPECT_EQ(ls["scope"], "Data");
  EXPECT_EQ(ls["sizeBytes"], 5'000'000'000);
  EXPECT_EQ(ls["durationSeconds"], 12.25);
  EXPECT_EQ(ls["cudaCheckpointed"], true);
  EXPECT_EQ(ls["runscVersion"], "release-20260622.0");
  EXPECT_EQ(ls["gpu"], json({{"model", "NVIDIA H200"}, {"driverVersion", "580.95.05"}, {"cudaVersion", "13.0"}}));
  EXPECT_EQ(ls["takenAt"], "2023-11-14T22:14:10Z");
  EXPECT_EQ(ls["nodeName"], "node-a");
  EXPECT_EQ(j["status"]["conditions"][0], json({{"type", "Ready"},
                                                {"status", "False"},
                                                {"observedGeneration", 4},
                                                {"lastTransitionTime", "2023-11-14T22:15:00Z"},
                                                {"reason", "Suspending"},
                                                {"message", "checkpointing"}}));

  Result<Actor> back = ActorFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, a);
  EXPECT_EQ(back->spec, a.spec);
  EXPECT_EQ(back->status, a.status);
  EXPECT_EQ(back->metadata, a.metadata);
  // And through the text form.
  Result<json> parsed = ParseJson(j.dump());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*ActorFromJson(*parsed), a);
}

TEST(ApiJsonTest, JsonWithEveryFieldReadsAndWritesBackIdentically) {
  const json good = stasis::testing::GoodActor("counter", /*with_status=*/true);
  Result<Actor> a = ActorFromJson(good);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(ActorTypedJson(*a), good) << ActorTypedJson(*a).dump(2);
  EXPECT_EQ(ActorToJson(*a), good);

  const json worker = stasis::testing::GoodWorker("node-a-gpu0", /*with_status=*/true);
  Result<Worker> w = WorkerFromJson(worker);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(WorkerTypedJson(*w), worker);
  EXPECT_EQ(w->spec.gpu, (GpuIdentity{"NVIDIA H200", "580.95.05", "13.0"}));
}

// An Actor from an image with every image field set.
Actor FullImageActor() {
  Actor a;
  a.metadata.name = "counter";
  a.metadata.namespace_ = "team-a";
  a.spec.image = "127.0.0.1:5000/stasis/counter:v1";
  a.spec.image_pull_policy = PullPolicy::kIfNotPresent;
  a.spec.image_pull_secrets = {{"regcred"}, {"mirror"}};
  a.spec.command = {"/bin/counter", "--serve"};
  a.spec.args = {"--interval", "1s"};
  a.spec.env = {{"COUNTER_START", "7"}, {"EMPTY", ""}};
  a.spec.working_dir = "/srv";
  a.status.image_digest = stasis::testing::kGoodImageDigest;
  Snapshot s;
  s.id = "counter-1";
  s.image_digest = "sha256:" + std::string(64, 'e');
  a.status.latest_snapshot = s;
  return a;
}

TEST(ApiJsonTest, ImageActorRoundTripsEveryField) {
  const Actor a = FullImageActor();
  const json j = ActorToJson(a);
  EXPECT_FALSE(j["spec"].contains("bundle"));  // an empty bundle is not written
  EXPECT_EQ(j["spec"]["image"], "127.0.0.1:5000/stasis/counter:v1");
  EXPECT_EQ(j["spec"]["imagePullPolicy"], "IfNotPresent");
  EXPECT_EQ(j["spec"]["imagePullSecrets"], json::parse(R"([{"name": "regcred"}, {"name": "mirror"}])"));
  EXPECT_EQ(j["spec"]["command"], json::array({"/bin/counter", "--serve"}));
  EXPECT_EQ(j["spec"]["args"], json::array({"--interval", "1s"}));
  // An empty value is not written (absent reads as empty, as in a Pod).
  EXPECT_EQ(j["spec"]["env"], json::parse(R"([{"name": "COUNTER_START", "value": "7"}, {"name": "EMPTY"}])"));
  EXPECT_EQ(j["spec"]["workingDir"], "/srv");
  EXPECT_EQ(j["status"]["imageDigest"], stasis::testing::kGoodImageDigest);
  EXPECT_EQ(j["status"]["latestSnapshot"]["imageDigest"], "sha256:" + std::string(64, 'e'));
  Result<Actor> back = ActorFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, a);

  // Absent image fields are absent on the wire and empty in C++; a bundle actor writes none.
  const json bundle = ActorToJson(FullActor());
  for (const char* f : {"image", "imagePullPolicy", "imagePullSecrets", "command", "args", "env", "workingDir"}) {
    EXPECT_FALSE(bundle["spec"].contains(f)) << f;
  }
  EXPECT_FALSE(bundle["status"].contains("imageDigest"));
  EXPECT_FALSE(bundle["status"]["latestSnapshot"].contains("imageDigest"));
  Actor empty = *ActorFromJson(json::parse(R"({"spec": {"image": "busybox"}})"));
  EXPECT_FALSE(empty.spec.image_pull_policy.has_value());
  EXPECT_TRUE(empty.spec.image_pull_secrets.empty());
  EXPECT_TRUE(empty.spec.env.empty());
  EXPECT_TRUE(empty.spec.bundle.empty());

  // The shared good image actor reads and writes back identically.
  const json good = stasis::testing::GoodImageActor("counter", /*with_status=*/true);
  Result<Actor> g = ActorFromJson(good);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(ActorTypedJson(*g), good) << ActorTypedJson(*g).dump(2);
}

// A clone with every clone field set.
Actor FullCloneActor() {
  Actor a;
  a.metadata.name = "counter-clone";
  a.metadata.namespace_ = "team-a";
  a.spec.bundle = "/var/lib/stasis/bundles/counter";
  a.spec.source = ActorSourceRef{"counter", "20261202T150102Z-3f9a1c"};
  a.spec.hooks.post_restore = ExecHook{{"/bin/sh", "-c", "hostname \"$STASIS_ACTOR_NAME\""}, 10};
  a.status.cloned_from =
      ClonedFrom{"counter", "6f1c3a2e-0000-4000-8000-000000000001", "20261202T150102Z-3f9a1c"};
  return a;
}

TEST(ApiJsonTest, CloneFieldsRoundTrip) {
  const Actor a = FullCloneActor();
  const json j = ActorToJson(a);
  EXPECT_EQ(j["spec"]["source"],
            json({{"actorName", "counter"}, {"snapshotID", "20261202T150102Z-3f9a1c"}}));
  EXPECT_EQ(j["spec"]["hooks"],
            json::parse(R"({"postRestore": {"command": ["/bin/sh", "-c",
                            "hostname \"$STASIS_ACTOR_NAME\""], "timeoutSeconds": 10}})"));
  EXPECT_EQ(j["status"]["clonedFrom"],
            json({{"actorName", "counter"},
                  {"actorUID", "6f1c3a2e-0000-4000-8000-000000000001"},
                  {"snapshotID", "20261202T150102Z-3f9a1c"}}));
  Result<Actor> back = ActorFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, a);
  EXPECT_EQ(*ActorFromJson(*ParseJson(j.dump())), a);

  // The shared good clone reads and writes back as the server stores it (defaults filled in).
  json good = stasis::testing::GoodCloneActor("counter-clone", /*with_status=*/true);
  Result<Actor> g = ActorFromJson(good);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ApplyActorDefaults(good);
  EXPECT_EQ(ActorTypedJson(*g), good) << ActorTypedJson(*g).dump(2);
}

TEST(ApiJsonTest, AbsentCloneFieldsStayAbsent) {
  // Neither read nor written where not set.
  const Actor bundle = *ActorFromJson(json::parse(R"({"spec": {"bundle": "/b"}})"));
  EXPECT_FALSE(bundle.spec.source.has_value());
  EXPECT_FALSE(bundle.spec.hooks.post_restore.has_value());
  EXPECT_FALSE(bundle.status.cloned_from.has_value());
  const json written = ActorToJson(FullActor());
  EXPECT_FALSE(written["spec"].contains("source"));
  EXPECT_FALSE(written["spec"].contains("hooks"));
  EXPECT_FALSE(written["status"].contains("clonedFrom"));
  // A source without a snapshot id writes no snapshotID (absent = the source's latest).
  Actor latest;
  latest.spec.source = ActorSourceRef{"counter", ""};
  EXPECT_EQ(ActorTypedJson(latest)["spec"]["source"], json({{"actorName", "counter"}}));
  // hooks without postRestore is no hook: it reads as none, and a read-modify-write keeps the
  // object the way it was stored.
  json empty_hooks = json::parse(R"({"spec": {"bundle": "/b", "hooks": {}}})");
  const Actor no_hook = *ActorFromJson(empty_hooks);
  EXPECT_EQ(no_hook.spec.hooks, Hooks{});
  EXPECT_FALSE(ActorTypedJson(no_hook)["spec"].contains("hooks"));
  EXPECT_EQ(ActorToJson(no_hook)["spec"]["hooks"], json::object());
  // null is absent.
  const Actor nulls = *ActorFromJson(json::parse(
      R"({"spec": {"bundle": "/b", "source": null, "hooks": {"postRestore": null}},
          "status": {"clonedFrom": null}})"));
  EXPECT_FALSE(nulls.spec.source.has_value());
  EXPECT_FALSE(nulls.spec.hooks.post_restore.has_value());
  EXPECT_FALSE(nulls.status.cloned_from.has_value());
}

TEST(ApiJsonTest, PostRestoreTimeoutDefaultsTo30Seconds) {
  const char* text = R"({"spec": {"bundle": "/b", "hooks": {"postRestore": {"command": ["/x"]}}}})";
  const Actor a = *ActorFromJson(json::parse(text));
  ASSERT_TRUE(a.spec.hooks.post_restore.has_value());
  EXPECT_EQ(a.spec.hooks.post_restore->timeout_seconds, kDefaultHookTimeoutSeconds);
  EXPECT_EQ(kDefaultHookTimeoutSeconds, 30);
  EXPECT_EQ(ExecHook{}.timeout_seconds, 30);
  json defaulted = json::parse(text);
  ApplyActorDefaults(defaulted);
  EXPECT_EQ(defaulted["spec"]["hooks"]["postRestore"]["timeoutSeconds"], 30);
  // No default creates a hook that was not written.
  json none = json::parse(R"({"spec": {"bundle": "/b", "hooks": {}}})");
  ApplyActorDefaults(none);
  EXPECT_EQ(none["spec"]["hooks"], json::object());
}

TEST(ApiJsonTest, CloneFieldsOfTheWrongTypeAreErrorsWithThePath) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {R"({"spec": {"source": "counter"}})", "spec.source: must be an object"},
      {R"({"spec": {"source": {"actorName": 1}}})", "spec.source.actorName: must be a string"},
      {R"({"spec": {"source": {"snapshotID": true}}})", "spec.source.snapshotID: must be a string"},
      {R"({"spec": {"hooks": []}})", "spec.hooks: must be an object"},
      {R"({"spec": {"hooks": {"postRestore": "/x"}}})", "spec.hooks.postRestore: must be an object"},
      {R"({"spec": {"hooks": {"postRestore": {"command": "/x"}}}})",
       "spec.hooks.postRestore.command: must be a list of strings"},
      {R"({"spec": {"hooks": {"postRestore": {"timeoutSeconds": "30"}}}})",
       "spec.hooks.postRestore.timeoutSeconds: must be an integer"},
      {R"({"status": {"clonedFrom": []}})", "status.clonedFrom: must be an object"},
      {R"({"status": {"clonedFrom": {"actorUID": 7}}})", "status.clonedFrom.actorUID: must be a string"},
  };
  for (const Case& c : cases) {
    Result<Actor> a = ActorFromJson(json::parse(c.json));
    ASSERT_FALSE(a.ok()) << c.json;
    EXPECT_EQ(a.status().message(), c.message);
  }
}

TEST(ApiJsonTest, StatusMergePatchCarriesClonedFrom) {
  json stored = stasis::testing::GoodCloneActor("counter-clone");
  stored["metadata"]["resourceVersion"] = "3";
  const Actor before = *ActorFromJson(stored);
  Actor after = before;
  after.status.cloned_from = ClonedFrom{"counter", "uid-1", "snap-1"};
  std::optional<json> patch = ActorStatusMergePatch(before, after);
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ(*patch, json::parse(R"({"metadata": {"resourceVersion": "3"}, "status": {"clonedFrom":
                                    {"actorName": "counter", "actorUID": "uid-1",
                                     "snapshotID": "snap-1"}}})"));
  // One field changed: only that field; cleared: null removes it.
  Actor changed = after;
  changed.status.cloned_from->snapshot_id = "snap-2";
  EXPECT_EQ((*ActorStatusMergePatch(after, changed))["status"],
            json::parse(R"({"clonedFrom": {"snapshotID": "snap-2"}})"));
  Actor cleared = after;
  cleared.status.cloned_from.reset();
  EXPECT_EQ((*ActorStatusMergePatch(after, cleared))["status"],
            json::parse(R"({"clonedFrom": null})"));
  // spec.source and hooks are spec: in the main merge patch, not the status one.
  Actor spec_changed = before;
  spec_changed.spec.hooks.post_restore->timeout_seconds = 60;
  EXPECT_FALSE(ActorStatusMergePatch(before, spec_changed).has_value());
  EXPECT_EQ((*ActorMergePatch(before, spec_changed))["spec"],
            json::parse(R"({"hooks": {"postRestore": {"timeoutSeconds": 60}}})"));
}

TEST(ApiJsonTest, ImageFieldsOfTheWrongTypeAreErrorsWithThePath) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {R"({"spec": {"image": 5}})", "spec.image: must be a string"},
      {R"({"spec": {"imagePullPolicy": "Sometimes"}})", "spec.imagePullPolicy: unsupported value \"Sometimes\""},
      {R"({"spec": {"imagePullSecrets": {"name": "x"}}})", "spec.imagePullSecrets: must be a list"},
      {R"({"spec": {"imagePullSecrets": ["regcred"]}})", "spec.imagePullSecrets[0]: must be an object"},
      {R"({"spec": {"imagePullSecrets": [{"name": 1}]}})", "spec.imagePullSecrets[0].name: must be a string"},
      {R"({"spec": {"command": "/bin/sh"}})", "spec.command: must be a list of strings"},
      {R"({"spec": {"args": [1]}})", "spec.args: must be a list of strings"},
      {R"({"spec": {"env": [{"name": "A", "value": 1}]}})", "spec.env[0].value: must be a string"},
      {R"({"spec": {"env": ["A=1"]}})", "spec.env[0]: must be an object"},
      {R"({"spec": {"workingDir": false}})", "spec.workingDir: must be a string"},
      {R"({"status": {"imageDigest": 1}})", "status.imageDigest: must be a string"},
      {R"({"status": {"latestSnapshot": {"imageDigest": []}}})", "status.latestSnapshot.imageDigest: must be a string"},
  };
  for (const Case& c : cases) {
    Result<Actor> a = ActorFromJson(json::parse(c.json));
    ASSERT_FALSE(a.ok()) << c.json;
    EXPECT_EQ(a.status().message(), c.message);
  }
  // null is absent.
  Result<Actor> a = ActorFromJson(json::parse(R"({"spec": {"image": "x", "imagePullPolicy": null, "env": null}})"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_FALSE(a->spec.image_pull_policy.has_value());
}

TEST(ApiJsonTest, ImageActorUnknownFieldsSurviveReadModifyWrite) {
  json stored = stasis::testing::GoodImageActor("counter", /*with_status=*/true);
  stored["spec"]["env"][0]["valueFrom"] = {{"secretKeyRef", {{"name", "s"}, {"key", "k"}}}};
  stored["spec"]["imagePullSecrets"][0]["futureField"] = 1;
  stored["spec"]["futureImageField"] = "kept";
  Actor a = *ActorFromJson(stored);
  a.spec.desired_state = DesiredState::kRunning;
  a.status.image_digest = "sha256:" + std::string(64, 'f');
  const json written = ActorToJson(a);
  EXPECT_EQ(written["spec"]["desiredState"], "Running");
  EXPECT_EQ(written["status"]["imageDigest"], "sha256:" + std::string(64, 'f'));
  EXPECT_EQ(written["spec"]["env"], stored["spec"]["env"]);  // untouched lists are kept whole
  EXPECT_EQ(written["spec"]["imagePullSecrets"], stored["spec"]["imagePullSecrets"]);
  EXPECT_EQ(written["spec"]["futureImageField"], "kept");
  EXPECT_EQ(ActorToJson(*ActorFromJson(stored)), stored);
  // A spec merge patch names only the image field that changed.
  Actor after = a;
  after.spec.image = "127.0.0.1:5000/stasis/counter:v2";
  std::optional<json> patch = ActorMergePatch(a, after);
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ((*patch)["spec"], json({{"image", "127.0.0.1:5000/stasis/counter:v2"}}));
}

TEST(ApiJsonTest, EffectivePullPolicyFollowsPods) {
  struct Case {
    const char* image;
    std::optional<PullPolicy> set;
    PullPolicy want;
  } cases[] = {
      {"busybox", std::nullopt, PullPolicy::kAlways},                    // no tag
      {"busybox:latest", std::nullopt, PullPolicy::kAlways},
      {"127.0.0.1:5000/stasis/counter", std::nullopt, PullPolicy::kAlways},  // a port is no tag
      {"localhost:5000/counter:latest", std::nullopt, PullPolicy::kAlways},
      {"127.0.0.1:5000/stasis/counter:v1", std::nullopt, PullPolicy::kIfNotPresent},
      {"busybox:1.36", std::nullopt, PullPolicy::kIfNotPresent},
      {"busybox:Latest", std::nullopt, PullPolicy::kIfNotPresent},  // tags are case-sensitive
      {"ghcr.io/o/r@sha256:0000000000000000000000000000000000000000000000000000000000000000",
       std::nullopt, PullPolicy::kIfNotPresent},  // a digest, no tag
      {"ghcr.io/o/r:latest@sha256:0000000000000000000000000000000000000000000000000000000000000000",
       std::nullopt, PullPolicy::kAlways},  // the tag latest, even with a digest (as Pods)
      {"busybox", PullPolicy::kNever, PullPolicy::kNever},  // set: always wins
      {"busybox:1.36", PullPolicy::kAlways, PullPolicy::kAlways},
      {"busybox:latest", PullPolicy::kIfNotPresent, PullPolicy::kIfNotPresent},
  };
  for (const Case& c : cases) {
    ActorSpec spec;
    spec.image = c.image;
    spec.image_pull_policy = c.set;
    EXPECT_EQ(EffectivePullPolicy(spec), c.want) << c.image;
  }
  EXPECT_EQ(EffectivePullPolicy(ActorSpec{}), PullPolicy::kNever);  // no image: nothing to pull
  EXPECT_EQ(ImageTag("127.0.0.1:5000/a/b:v1@sha256:00"), "v1");
  EXPECT_EQ(ImageTag("127.0.0.1:5000/a/b"), "");
  EXPECT_FALSE(ImageHasDigest("a:v1"));
  for (PullPolicy p : {PullPolicy::kAlways, PullPolicy::kIfNotPresent, PullPolicy::kNever}) {
    EXPECT_EQ(ParsePullPolicy(ToString(p)), p);
  }
  EXPECT_STREQ(ToString(PullPolicy::kIfNotPresent), "IfNotPresent");
  EXPECT_FALSE(ParsePullPolicy("always").has_value());
}

TEST(ApiJsonTest, DefaultsAreAppliedOnRead) {
  Result<Actor> a = ActorFromJson(json::parse(R"({"spec": {"bundle": "/b"}})"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->spec.runtime, Runtime::kGvisor);
  EXPECT_EQ(a->spec.desired_state, DesiredState::kRunning);
  EXPECT_EQ(a->spec.checkpoint_policy, CheckpointPolicy::kDirect);
  EXPECT_EQ(a->spec.gpu.count, 0);
  EXPECT_EQ(a->spec.gpu.cuda_checkpoint_path, "/usr/local/bin/cuda-checkpoint");
  EXPECT_FALSE(a->spec.gpu.fast_snapshot);
  EXPECT_EQ(a->spec.snapshots.on_pause, SnapshotScope::kFull);
  EXPECT_EQ(a->spec.snapshots.on_commit, SnapshotScope::kFull);
  EXPECT_TRUE(a->spec.snapshots.data_dirs.empty());
  EXPECT_EQ(a->spec.timeouts.checkpoint_seconds, 600);
  EXPECT_EQ(a->spec.timeouts.restore_seconds, 600);
  EXPECT_EQ(a->status.status, ActorState::kUnspecified);
  EXPECT_FALSE(a->status.latest_snapshot.has_value());
}

TEST(ApiJsonTest, JsonDefaultsEqualTypedDefaults) {
  // The server's defaulting (mirrored by ApplyActorDefaults) and the C++ member initialisers
  // must agree, or a read-modify-write would change what the server stored.
  for (const char* text :
       {R"({"spec": {"bundle": "/b"}})", R"({"spec": {"bundle": "/b", "gpu": {"count": 1}}})",
        R"({"spec": {"bundle": "/b", "gpu": {"count": 1, "fastSnapshot": true}}})",
        R"({"spec": {"bundle": "/b", "snapshots": {"onCommit": "Data"}}})",
        R"({"spec": {"bundle": "/b", "timeouts": {"restoreSeconds": 5}}})",
        R"({"spec": {"image": "busybox"}})",
        R"({"spec": {"image": "busybox", "env": [{"name": "A", "value": "1"}], "command": ["/x"]}})",
        R"({"spec": {"bundle": "/b", "source": {"actorName": "a"}, "hooks": {"postRestore": {"command": ["/x"]}}}})"}) {
    json defaulted = json::parse(text);
    ApplyActorDefaults(defaulted);
    EXPECT_EQ(ActorTypedJson(*ActorFromJson(json::parse(text)))["spec"], defaulted["spec"]) << text;
  }
  json worker = json::parse(R"({"spec": {"nodeName": "n"}, "status": {}})");
  ApplyWorkerDefaults(worker);
  EXPECT_EQ(worker["status"]["phase"], "Free");
}

TEST(ApiJsonTest, NullIsAbsent) {
  Result<Actor> a = ActorFromJson(json::parse(
      R"({"metadata": {"labels": null}, "spec": {"bundle": "/b", "gpu": null,
          "timeouts": {"checkpointSeconds": null}}, "status": null})"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->spec.gpu, GpuSpec{});
  EXPECT_EQ(a->spec.timeouts.checkpoint_seconds, 600);
}

TEST(ApiJsonTest, WrongTypesAndUnknownEnumsAreErrorsWithThePath) {
  struct Case {
    const char* json;
    const char* message;
  } cases[] = {
      {R"({"spec": {"gpu": {"count": "2"}}})", "spec.gpu.count: must be an integer"},
      {R"({"spec": {"gpu": {"count": 1.5}}})", "spec.gpu.count: must be an integer"},
      {R"({"spec": {"gpu": {"count": 3000000000}}})",
       "spec.gpu.count: must be an integer in range"},
      {R"({"spec": {"gpu": {"fastSnapshot": "true"}}})", "spec.gpu.fastSnapshot: must be a boolean"},
      {R"({"spec": {"runtime": "docker"}})", "spec.runtime: unsupported value \"docker\""},
      {R"({"spec": {"snapshots": {"dataDirs": "/data"}}})",
       "spec.snapshots.dataDirs: must be a list of strings"},
      {R"({"spec": []})", "spec: must be an object"},
      {R"({"status": {"transitionStartTime": "yesterday"}})",
       "status.transitionStartTime: must be an RFC 3339 date-time"},
      {R"({"status": {"conditions": [{"type": "Ready", "status": "Maybe"}]}})",
       "status.conditions[0].status: unsupported value \"Maybe\""},
      {R"({"metadata": {"labels": {"a": 1}}})", "metadata.labels: must be a map of strings"},
  };
  for (const Case& c : cases) {
    Result<Actor> a = ActorFromJson(json::parse(c.json));
    ASSERT_FALSE(a.ok()) << c.json;
    EXPECT_EQ(a.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(a.status().message(), c.message);
  }
  EXPECT_FALSE(ActorFromJson(json::array()).ok());
  EXPECT_FALSE(ParseJson("{not json").ok());
  // A whole number written as a float is still an integer.
  EXPECT_EQ(ActorFromJson(json::parse(R"({"spec": {"gpu": {"count": 2.0}}})"))->spec.gpu.count, 2);
}

TEST(ApiJsonTest, UnknownFieldsSurviveReadModifyWrite) {
  // As a newer stasis would write it: fields this version does not know, at every level.
  json stored = stasis::testing::GoodActor("counter", /*with_status=*/true);
  stored["metadata"]["resourceVersion"] = "10";
  stored["metadata"]["ownerReferences"] = json::array({{{"kind", "Template"}, {"name", "t"}}});
  stored["metadata"]["managedFields"] = json::array({{{"manager", "kubectl"}}});
  stored["spec"]["futureSpecField"] = {{"a", 1}};
  stored["spec"]["gpu"]["futureGpuField"] = "mig-1g.10gb";
  stored["status"]["futureStatusField"] = "kept";
  stored["status"]["latestSnapshot"]["futureChecksum"] = "sha256:abc";
  stored["futureTopLevel"] = true;

  Result<Actor> read = ActorFromJson(stored);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  Actor a = *read;
  a.spec.desired_state = DesiredState::kRunning;
  a.spec.gpu.count = 1;
  a.status.status = ActorState::kResuming;
  a.status.transition_start_time.reset();  // cleared: must disappear from the object
  a.status.latest_snapshot->size_bytes = 42;
  a.metadata.labels[kNodeLabel] = "node-b";
  SetCondition(a.status.conditions, {"Ready", ConditionStatus::kTrue, 4, {}, "Running", ""},
               At(1'800'000'000));

  const json written = ActorToJson(a);
  // Changes are there…
  EXPECT_EQ(written["spec"]["desiredState"], "Running");
  EXPECT_EQ(written["spec"]["gpu"]["count"], 1);
  EXPECT_EQ(written["status"]["status"], "STATUS_RESUMING");
  EXPECT_FALSE(written["status"].contains("transitionStartTime"));
  EXPECT_EQ(written["status"]["latestSnapshot"]["sizeBytes"], 42);
  EXPECT_EQ(written["metadata"]["labels"][kNodeLabel], "node-b");
  EXPECT_EQ(written["status"]["conditions"][0]["status"], "True");
  // …and every unknown field survived.
  EXPECT_EQ(written["metadata"]["ownerReferences"], stored["metadata"]["ownerReferences"]);
  EXPECT_EQ(written["metadata"]["managedFields"], stored["metadata"]["managedFields"]);
  EXPECT_EQ(written["spec"]["futureSpecField"], stored["spec"]["futureSpecField"]);
  EXPECT_EQ(written["spec"]["gpu"]["futureGpuField"], "mig-1g.10gb");
  EXPECT_EQ(written["status"]["futureStatusField"], "kept");
  EXPECT_EQ(written["status"]["latestSnapshot"]["futureChecksum"], "sha256:abc");
  EXPECT_EQ(written["futureTopLevel"], true);
  EXPECT_EQ(written["metadata"]["resourceVersion"], "10");

  // Reading what was written gives the modified object back.
  EXPECT_EQ(*ActorFromJson(written), a);
  // An unmodified object is written back byte for byte.
  EXPECT_EQ(ActorToJson(*read), stored);
}

TEST(ApiJsonTest, StatusMergePatchNamesOnlyTheChanges) {
  json stored = stasis::testing::GoodActor("counter", /*with_status=*/true);
  stored["metadata"]["resourceVersion"] = "10";
  stored["status"]["futureStatusField"] = "kept";
  const Actor before = *ActorFromJson(stored);

  EXPECT_FALSE(ActorStatusMergePatch(before, before).has_value());

  Actor after = before;
  after.status.status = ActorState::kResuming;
  after.status.sandbox_id.clear();
  after.spec.desired_state = DesiredState::kRunning;  // spec: not part of a status patch
  std::optional<json> patch = ActorStatusMergePatch(before, after);
  ASSERT_TRUE(patch.has_value());
  EXPECT_EQ(*patch, json::parse(R"({"metadata": {"resourceVersion": "10"},
                                    "status": {"status": "STATUS_RESUMING", "sandboxID": null}})"));

  // Applied the way the API server applies it, the unknown field stays.
  json server = stored;
  server.merge_patch(*patch);
  EXPECT_EQ(server["status"]["futureStatusField"], "kept");
  EXPECT_EQ(ActorFromJson(server)->status, after.status);

  // Without a resourceVersion the patch is unconditional.
  Actor unversioned = before;
  unversioned.metadata.resource_version.clear();
  EXPECT_FALSE(ActorStatusMergePatch(unversioned, after)->contains("metadata"));
}

TEST(ApiJsonTest, MetadataAndSpecMergePatch) {
  json stored = stasis::testing::GoodActor("counter");
  stored["metadata"]["resourceVersion"] = "7";
  const Actor before = *ActorFromJson(stored);
  EXPECT_FALSE(ActorMergePatch(before, before).has_value());
  Actor after = before;
  after.metadata.AddFinalizer(kActorFinalizer);
  after.metadata.labels[kNodeLabel] = "node-a";
  after.status.status = ActorState::kRunning;  // status: not part of this patch
  EXPECT_EQ(*ActorMergePatch(before, after), json::parse(R"({"metadata": {"resourceVersion": "7",
                                         "finalizers": ["stasis.dev/actor-cleanup"],
                                         "labels": {"stasis.dev/node": "node-a"}}})"));
}

TEST(ApiJsonTest, WorkerRoundTripAndRelease) {
  Worker w;
  w.metadata.name = "node-a-gpu0";
  w.metadata.resource_version = "3";
  w.metadata.labels = {{kNodeLabel, "node-a"}};
  w.spec.node_name = "node-a";
  w.spec.devices = {"GPU-1", "GPU-2"};
  EXPECT_TRUE(w.IsFree());
  Hold(w, {"team-a", "counter"});
  EXPECT_TRUE(w.IsHeldBy({"team-a", "counter"}));
  EXPECT_FALSE(w.IsHeldBy({"team-a", "other"}));

  const json j = WorkerToJson(w);
  EXPECT_EQ(j["kind"], "Worker");
  EXPECT_EQ(j["spec"], json::parse(R"({"nodeName": "node-a", "devices": ["GPU-1", "GPU-2"]})"));
  EXPECT_EQ(
      j["status"],
      json::parse(R"({"phase": "Held", "actorRef": {"namespace": "team-a", "name": "counter"}})"));
  EXPECT_FALSE(j["metadata"].contains("namespace"));
  Worker back = *WorkerFromJson(j);
  EXPECT_EQ(back, w);

  Worker freed = back;
  Release(freed);
  EXPECT_EQ(*WorkerStatusMergePatch(back, freed),
            json::parse(R"({"metadata": {"resourceVersion": "3"},
                            "status": {"phase": "Free", "actorRef": null}})"));
  EXPECT_FALSE(WorkerMergePatch(back, freed).has_value());
}

TEST(ApiJsonTest, WorkerUnknownFieldsSurvive) {
  json stored = stasis::testing::GoodWorker("w", /*with_status=*/true);
  stored["spec"]["futureTopology"] = {{"numa", 1}};
  stored["status"]["futureHealth"] = "ok";
  Worker w = *WorkerFromJson(stored);
  Release(w);
  const json written = WorkerToJson(w);
  EXPECT_EQ(written["spec"]["futureTopology"], stored["spec"]["futureTopology"]);
  EXPECT_EQ(written["status"]["futureHealth"], "ok");
  EXPECT_EQ(written["status"]["phase"], "Free");
  EXPECT_FALSE(written["status"].contains("actorRef"));
}

TEST(ApiJsonTest, EnumNamesRoundTrip) {
  for (ActorState s : {ActorState::kUnspecified, ActorState::kResuming, ActorState::kRunning,
                       ActorState::kSuspending, ActorState::kSuspended, ActorState::kPausing,
                       ActorState::kPaused, ActorState::kFailed}) {
    EXPECT_EQ(ParseActorState(ToString(s)), s);
  }
  EXPECT_STREQ(ToString(ActorState::kSuspending), "STATUS_SUSPENDING");
  EXPECT_FALSE(ParseActorState("RUNNING").has_value());
  EXPECT_TRUE(IsTransitioning(ActorState::kPausing));
  EXPECT_FALSE(IsTransitioning(ActorState::kPaused));
  EXPECT_EQ(ParseCheckpointPolicy("LeaveRunningThenStop"), CheckpointPolicy::kLeaveRunningThenStop);
  EXPECT_EQ(ParseWorkerPhase("Held"), WorkerPhase::kHeld);
}

TEST(ApiJsonTest, ObjectMetaHelpers) {
  ObjectMeta m;
  m.name = "a";
  EXPECT_EQ(m.Key(), "a");
  m.namespace_ = "ns";
  EXPECT_EQ(m.Key(), "ns/a");
  EXPECT_TRUE(m.AddFinalizer(kActorFinalizer));
  EXPECT_FALSE(m.AddFinalizer(kActorFinalizer));
  EXPECT_TRUE(m.HasFinalizer(kActorFinalizer));
  EXPECT_TRUE(m.RemoveFinalizer(kActorFinalizer));
  EXPECT_FALSE(m.RemoveFinalizer(kActorFinalizer));
  EXPECT_FALSE(m.IsBeingDeleted());
}

TEST(ApiJsonTest, Rfc3339) {
  EXPECT_EQ(FormatTime(At(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(*ParseTime("2026-12-02T15:04:05Z"), *ParseTime("2026-12-02T16:04:05+01:00"));
  EXPECT_EQ(*ParseTime("2026-12-02T15:04:05.999999Z"), *ParseTime("2026-12-02T15:04:05Z"));
  EXPECT_EQ(FormatTime(*ParseTime("2026-12-02T15:04:05-08:30")), "2026-12-02T23:34:05Z");
  EXPECT_EQ(FormatTime(*ParseTime("2024-02-29T23:59:59Z")), "2024-02-29T23:59:59Z");
  for (const char* bad :
       {"", "2026-12-02", "2026-12-02T15:04:05", "2026-13-02T15:04:05Z", "2026-02-30T15:04:05Z",
        "2026-12-02T15:04:05Zjunk", "2026-12-02 15:04:05Z", "2026-12-02T15:04:05.Z"}) {
    EXPECT_FALSE(ParseTime(bad).ok()) << bad;
  }
}

TEST(ApiJsonTest, CreateMergePatch) {
  const json from = json::parse(R"({"a": 1, "b": {"c": 2, "d": 3}, "l": [1, 2]})");
  const json to = json::parse(R"({"a": 1, "b": {"c": 5}, "l": [1], "n": "x"})");
  const json patch = CreateMergePatch(from, to);
  EXPECT_EQ(patch, json::parse(R"({"b": {"c": 5, "d": null}, "l": [1], "n": "x"})"));
  json applied = from;
  applied.merge_patch(patch);
  EXPECT_EQ(applied, to);
  EXPECT_TRUE(CreateMergePatch(to, to).empty());
}

}  // namespace
}  // namespace stasis::api
