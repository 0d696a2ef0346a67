// The C++ validator against the shared table of bad Actors and Workers (the same table the
// integration test sends to the real API server), plus the rule messages' presence in the CRDs.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "api/json_mapping.h"
#include "api/names.h"
#include "api/validation.h"
#include "snapshots/snapshot_names.h"
#include "tests/support/bad_actors.h"
#include "tests/support/field_errors.h"

namespace stasis::api {
namespace {

using nlohmann::json;
using stasis::testing::BadActors;
using stasis::testing::BadObject;
using stasis::testing::ExpectOnlyError;
using stasis::testing::RenderErrors;
using stasis::testing::BadWorkers;
using stasis::testing::GoodActor;
using stasis::testing::GoodCloneActor;
using stasis::testing::GoodImageActor;
using stasis::testing::GoodWorker;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ApiValidationTest, GoodObjectsPass) {
  EXPECT_TRUE(ValidateActor(GoodActor("a")).empty()) << RenderErrors(ValidateActor(GoodActor("a")));
  EXPECT_TRUE(ValidateActor(GoodActor("a", true)).empty())
      << RenderErrors(ValidateActor(GoodActor("a", true)));
  EXPECT_TRUE(ValidateWorker(GoodWorker("w")).empty());
  EXPECT_TRUE(ValidateWorker(GoodWorker("w", true)).empty())
      << RenderErrors(ValidateWorker(GoodWorker("w", true)));
  // The smallest valid Actor: everything else defaults.
  EXPECT_TRUE(ValidateActor(json::parse(R"({"spec": {"bundle": "/b"}})")).empty());
  Actor typed;
  typed.spec.bundle = "/var/lib/stasis/bundles/x";
  EXPECT_TRUE(ValidateActor(typed).empty());
  // Actors from images: every field, and the smallest.
  EXPECT_TRUE(ValidateActor(GoodImageActor("i")).empty()) << RenderErrors(ValidateActor(GoodImageActor("i")));
  EXPECT_TRUE(ValidateActor(GoodImageActor("i", true)).empty())
      << RenderErrors(ValidateActor(GoodImageActor("i", true)));
  EXPECT_TRUE(ValidateActorStatus(GoodImageActor("i", true)).empty());
  EXPECT_TRUE(ValidateActor(json::parse(R"({"spec": {"image": "busybox"}})")).empty());
  Actor from_image;
  from_image.spec.image = "127.0.0.1:5000/stasis/counter:v1";
  from_image.spec.image_pull_policy = PullPolicy::kNever;
  from_image.spec.image_pull_secrets = {{"regcred"}};
  from_image.spec.command = {"/bin/counter"};
  from_image.spec.args = {"--interval", "1s"};
  from_image.spec.env = {{"A", "1"}, {"B", ""}};
  from_image.spec.working_dir = "/srv";
  from_image.status.image_digest = stasis::testing::kGoodImageDigest;
  EXPECT_TRUE(ValidateActor(from_image).empty()) << RenderErrors(ValidateActor(from_image));
  // A typed actor with neither is refused (nothing is written for an empty bundle or image).
  EXPECT_EQ(RenderErrors(ValidateActor(Actor{})),
            "\n  spec: Invalid value: " + std::string(kMessageImageOrBundle));
  Worker worker;
  worker.spec.node_name = "node-a";
  EXPECT_TRUE(ValidateWorker(worker).empty());
  // Clones: every clone field, and the smallest (the latest snapshot, the default timeout).
  EXPECT_TRUE(ValidateActor(GoodCloneActor("c", true)).empty())
      << RenderErrors(ValidateActor(GoodCloneActor("c", true)));
  EXPECT_TRUE(ValidateActorStatus(GoodCloneActor("c", true)).empty());
  EXPECT_TRUE(ValidateActor(json::parse(R"({"metadata": {"name": "c"}, "spec": {"bundle": "/b",
      "source": {"actorName": "counter"}, "hooks": {"postRestore": {"command": ["/x"]}}}})"))
                  .empty());
  Actor clone;
  clone.metadata.name = "counter-clone";
  clone.spec.bundle = "/var/lib/stasis/bundles/counter";
  clone.spec.source = ActorSourceRef{"counter", ""};
  clone.spec.hooks.post_restore = ExecHook{{"/bin/hostname", "counter-clone"}};
  clone.status.cloned_from = ClonedFrom{"counter", "6f1c3a2e-0000-4000-8000-000000000001", "s1"};
  EXPECT_TRUE(ValidateActor(clone).empty()) << RenderErrors(ValidateActor(clone));
  // A hook needs no source: it runs after every restore of a Full snapshot.
  json hooked = GoodImageActor("i");
  hooked["spec"]["hooks"] = GoodCloneActor("c")["spec"]["hooks"];
  EXPECT_TRUE(ValidateActor(hooked).empty()) << RenderErrors(ValidateActor(hooked));
}

TEST(ApiValidationTest, TheBadActorTableIsLargeEnough) { EXPECT_GE(BadActors().size(), 20u); }

TEST(ApiValidationTest, EveryBadActorIsRejectedWithItsMessage) {
  for (const BadObject& bad : BadActors()) {
    SCOPED_TRACE(bad.name + ": " + bad.what);
    ExpectOnlyError(bad.write == stasis::testing::BadWrite::kCreate ? ValidateActor(bad.object)
                                                               : ValidateActorStatus(bad.object),
               bad);
  }
}

// spec.gpu.fastSnapshot preloads the GPU fast-snapshot library: only a GPU actor may ask. The
// rule holds on the schema's default gpu {} and names the field, not the gpu object.
TEST(ApiValidationTest, FastSnapshotNeedsAGpu) {
  const std::string refused = "spec.gpu.fastSnapshot: Invalid value: " +
                              std::string(kMessageFastSnapshotNeedsGpu);
  json cpu = GoodImageActor("a");
  cpu["spec"]["gpu"] = {{"fastSnapshot", true}};  // count absent: defaulted to 0
  EXPECT_EQ(RenderErrors(ValidateActor(cpu)), "\n  " + refused);
  cpu["spec"]["gpu"]["count"] = 0;
  EXPECT_EQ(RenderErrors(ValidateActor(cpu)), "\n  " + refused);
  cpu["spec"]["gpu"]["fastSnapshot"] = false;
  EXPECT_TRUE(ValidateActor(cpu).empty()) << RenderErrors(ValidateActor(cpu));
  cpu["spec"]["gpu"] = json::object();
  EXPECT_TRUE(ValidateActor(cpu).empty()) << RenderErrors(ValidateActor(cpu));
  json gpu = GoodImageActor("a");
  gpu["spec"]["gpu"] = {{"count", 1}, {"fastSnapshot", true}};
  EXPECT_TRUE(ValidateActor(gpu).empty()) << RenderErrors(ValidateActor(gpu));
  // The typed path: an Actor built in code is refused the same way.
  Actor typed = *ActorFromJson(GoodActor("a"));
  ASSERT_TRUE(typed.spec.gpu.fast_snapshot);
  typed.spec.gpu.count = 0;
  EXPECT_EQ(RenderErrors(ValidateActor(typed)), "\n  " + refused);
}

TEST(ApiValidationTest, EveryBadWorkerIsRejectedWithItsMessage) {
  for (const BadObject& bad : BadWorkers()) {
    SCOPED_TRACE(bad.name + ": " + bad.what);
    ExpectOnlyError(bad.write == stasis::testing::BadWrite::kCreate ? ValidateWorker(bad.object)
                                                               : ValidateWorkerStatus(bad.object),
               bad);
  }
}

TEST(ApiValidationTest, BlockingErrorsSkipTheCelRulesLikeTheServer) {
  json actor = GoodActor("a");
  actor["spec"]["desiredState"] = "Sleeping";  // schema error (blocking)
  actor["spec"]["bundle"] = "relative";        // CEL error: not checked
  FieldErrors errors = ValidateActor(actor);
  ASSERT_EQ(errors.size(), 2u) << RenderErrors(errors);
  EXPECT_EQ(errors[1].ToString(),
            "<nil>: Invalid value: null: some validation rules were not checked because the "
            "object was invalid; correct the existing errors to complete validation");

  // Without a blocking error, every CEL rule reports, in schema order.
  actor = GoodActor("a");
  actor["spec"]["bundle"] = "relative/../x";
  actor["spec"]["snapshots"]["dataDirs"] = {"data"};
  errors = ValidateActor(actor);
  ASSERT_EQ(errors.size(), 3u) << RenderErrors(errors);
  EXPECT_EQ(errors[0].ToString(),
            R"(spec.bundle: Invalid value: "relative/../x": bundle must be an absolute path)");
  EXPECT_EQ(
      errors[1].ToString(),
      R"(spec.bundle: Invalid value: "relative/../x": bundle must not contain a '..' segment)");
  EXPECT_EQ(
      errors[2].ToString(),
      R"(spec.snapshots.dataDirs[0]: Invalid value: "data": dataDirs entries must be absolute paths)");
  // A '..' that is not a whole segment is fine.
  actor = GoodActor("a");
  actor["spec"]["bundle"] = "/var/lib/stasis/bundles/..counter../x..";
  EXPECT_TRUE(ValidateActor(actor).empty()) << RenderErrors(ValidateActor(actor));
}

TEST(ApiValidationTest, ValuesAreRenderedTheWayGoRendersThem) {
  json actor = GoodActor("a");
  actor["spec"]["bundle"] = "tab\there \"quoted\" caf\xC3\xA9";
  EXPECT_EQ(
      ValidateActor(actor)[0].ToString(),
      R"(spec.bundle: Invalid value: "tab\there \"quoted\" café": bundle must be an absolute path)");
  EXPECT_EQ(GoQuote("\x01\xff"), R"("\x01\xff")");
  EXPECT_EQ(ToStatus({}).ok(), true);
  Status s = ToStatus(ValidateActor(json::parse(R"({"spec": {}})")));
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "spec: Invalid value: " + std::string(kMessageImageOrBundle));
}

TEST(ApiValidationTest, ConditionsAreValidatedLikeMetav1Condition) {
  json actor = GoodActor("a", true);
  actor["status"]["conditions"][0]["reason"] = "not camel case";
  FieldErrors errors = ValidateActor(actor);
  ASSERT_EQ(errors.size(), 1u) << RenderErrors(errors);
  EXPECT_EQ(errors[0].ToString(),
            std::string(R"(status.conditions[0].reason: Invalid value: "not camel case": )") +
                "status.conditions[0].reason in body should match '" + kConditionReasonPattern +
                "'");
  actor = GoodActor("a", true);
  actor["status"]["conditions"][0].erase("lastTransitionTime");
  EXPECT_EQ(ValidateActor(actor)[0].ToString(),
            "status.conditions[0].lastTransitionTime: Required value");
  actor = GoodActor("a", true);
  actor["status"]["transitionStartTime"] = "soon";
  EXPECT_EQ(
      ValidateActor(actor)[0].ToString(),
      R"(status.transitionStartTime: Invalid value: "soon": status.transitionStartTime in body must be of type date-time: "soon")");
}

TEST(ApiValidationTest, StatusWritesNameFieldsRelativeToStatusInDetails) {
  json actor = GoodActor("a", true);
  actor["status"]["observedGeneration"] = -1;
  EXPECT_EQ(ValidateActor(actor)[0].ToString(),
            "status.observedGeneration: Invalid value: -1: status.observedGeneration in body "
            "should be greater than or equal to 0");
  EXPECT_EQ(ValidateActorStatus(actor)[0].ToString(),
            "status.observedGeneration: Invalid value: -1: observedGeneration in body should be "
            "greater than or equal to 0");
  // A status write checks only status: spec mistakes are not its business.
  actor = GoodActor("a", true);
  actor["spec"]["bundle"] = "relative";
  EXPECT_TRUE(ValidateActorStatus(actor).empty());
  EXPECT_TRUE(ValidateActorStatus(GoodActor("a")).empty());
  Actor typed = *ActorFromJson(GoodActor("a", true));
  EXPECT_TRUE(ValidateActorStatus(typed).empty());
}

TEST(ApiValidationTest, WorkerNodeNameIsImmutable) {
  const json old_worker = GoodWorker("w", true);
  json new_worker = old_worker;
  EXPECT_TRUE(ValidateWorkerUpdate(old_worker, new_worker).empty());
  new_worker["spec"]["nodeName"] = "node-b";
  FieldErrors errors = ValidateWorkerUpdate(old_worker, new_worker);
  ASSERT_EQ(errors.size(), 1u) << RenderErrors(errors);
  EXPECT_EQ(errors[0].ToString(),
            R"(spec.nodeName: Invalid value: "node-b": nodeName is immutable)");
  // On create there is no old value: the rule does not apply.
  EXPECT_TRUE(ValidateWorker(new_worker).empty());
}

TEST(ApiValidationTest, ActorRuntimeIsImmutable) {
  const json old_actor = GoodActor("a");  // runtime: microvm
  json new_actor = old_actor;
  new_actor["spec"]["desiredState"] = "Running";
  EXPECT_TRUE(ValidateActorUpdate(old_actor, new_actor).empty());
  new_actor["spec"]["runtime"] = "gvisor";
  FieldErrors errors = ValidateActorUpdate(old_actor, new_actor);
  ASSERT_EQ(errors.size(), 1u) << RenderErrors(errors);
  EXPECT_EQ(errors[0].ToString(),
            R"(spec.runtime: Invalid value: "gvisor": runtime is immutable)");
  // The default counts as the old value: an actor created without runtime is gvisor.
  json defaulted = old_actor;
  defaulted["spec"].erase("runtime");
  EXPECT_EQ(ValidateActorUpdate(defaulted, old_actor).size(), 1u);
  EXPECT_TRUE(ValidateActorUpdate(defaulted, new_actor).empty());
  EXPECT_TRUE(ValidateActor(new_actor).empty());  // on create there is no old value
}

// Adding, removing or changing spec.source after creation is refused, each at spec.source; any
// other change of a clone is not.
TEST(ApiValidationTest, ActorSourceIsImmutable) {
  const std::string refused =
      "spec.source: Invalid value: " + std::string(kMessageImmutableSource);
  const json clone = GoodCloneActor("c");
  json other = clone;
  other["spec"]["desiredState"] = "Suspended";
  other["spec"]["hooks"]["postRestore"]["timeoutSeconds"] = 60;
  EXPECT_TRUE(ValidateActorUpdate(clone, other).empty()) << RenderErrors(ValidateActorUpdate(clone, other));
  json changed = clone;
  changed["spec"]["source"]["actorName"] = "another";
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(clone, changed)), "\n  " + refused);
  changed = clone;
  changed["spec"]["source"].erase("snapshotID");  // from one snapshot to the latest: a change
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(clone, changed)), "\n  " + refused);
  json removed = clone;
  removed["spec"].erase("source");
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(clone, removed)), "\n  " + refused);
  json plain = GoodCloneActor("c");
  plain["spec"].erase("source");
  EXPECT_EQ(RenderErrors(ValidateActorUpdate(plain, clone)), "\n  " + refused);  // added
  EXPECT_TRUE(ValidateActorUpdate(plain, plain).empty());
  EXPECT_TRUE(ValidateActor(clone).empty());  // on create there is no old value
}

TEST(ApiValidationTest, CloneRulesAndTheirMessages) {
  // A clone of itself; the name rule reads metadata.name, which the server always has.
  json self = GoodCloneActor("counter");
  FieldErrors errors = ValidateActor(self);
  ASSERT_EQ(errors.size(), 1u) << RenderErrors(errors);
  EXPECT_EQ(errors[0].ToString(),
            "spec.source.actorName: Invalid value: " + std::string(kMessageSourceIsSelf));
  self["metadata"].erase("name");
  EXPECT_TRUE(ValidateActor(self).empty()) << RenderErrors(ValidateActor(self));
  // microvm: refused at spec.source and spec.hooks (the runtime is what a clone, and a
  // command run through runsc exec, cannot have).
  json vm = GoodCloneActor("c");
  vm["spec"]["runtime"] = "microvm";
  errors = ValidateActor(vm);
  ASSERT_EQ(errors.size(), 2u) << RenderErrors(errors);
  EXPECT_EQ(errors[0].ToString(),
            "spec.hooks: Invalid value: " + std::string(kMessageHooksNeedGvisor));
  EXPECT_EQ(errors[1].ToString(),
            "spec.source: Invalid value: " + std::string(kMessageSourceNeedsGvisor));
  vm["spec"].erase("source");
  vm["spec"].erase("hooks");
  EXPECT_TRUE(ValidateActor(vm).empty()) << RenderErrors(ValidateActor(vm));
  // The hook's bounds: 1 and 600 pass, and the default applies before validation.
  for (int ok : {1, kMaxHookTimeoutSeconds}) {
    json hook = GoodCloneActor("c");
    hook["spec"]["hooks"]["postRestore"]["timeoutSeconds"] = ok;
    EXPECT_TRUE(ValidateActor(hook).empty()) << ok << RenderErrors(ValidateActor(hook));
  }
  json one = GoodCloneActor("c");
  one["spec"]["hooks"]["postRestore"]["command"] = {"/x"};
  one["spec"]["hooks"]["postRestore"].erase("timeoutSeconds");
  EXPECT_TRUE(ValidateActor(one).empty()) << RenderErrors(ValidateActor(one));
}

// spec.source.snapshotID accepts exactly the ids the snapshot store accepts
// (snapshots/snapshot_names.h), up to the schema's length.
TEST(ApiValidationTest, SourceSnapshotIdIsASnapshotStoreId) {
  for (const std::string& id :
       {std::string("20261202T150102Z-3f9a1c"), std::string("a"), std::string("A.b_c-9"),
        std::string("9..x"), std::string(kMaxSnapshotIdLength, 'x'), std::string("x.partia"),
        std::string(""), std::string(".hidden"), std::string("-x"), std::string("_x"),
        std::string("a/b"), std::string(".."), std::string("x.partial"), std::string("a b"),
        std::string("caf\xC3\xA9"), std::string(kMaxSnapshotIdLength + 1, 'x')}) {
    json actor = GoodCloneActor("c");
    actor["spec"]["source"]["snapshotID"] = id;
    EXPECT_EQ(ValidateActor(actor).empty(), IsSnapshotId(id)) << id << RenderErrors(ValidateActor(actor));
  }
}

TEST(ApiValidationTest, EveryMessageAndPatternIsInTheCrds) {
  const std::string actors =
      ReadFile(std::string(STASIS_SOURCE_DIR) + "/manifests/crd/actors.stasis.dev.yaml");
  const std::string workers =
      ReadFile(std::string(STASIS_SOURCE_DIR) + "/manifests/crd/workers.stasis.dev.yaml");
  ASSERT_FALSE(actors.empty());
  ASSERT_FALSE(workers.empty());
  for (const char* m :
       {kMessageBundleAbsolute, kMessageBundleDotDot, kMessageCudaPathAbsolute,
        kMessageFastSnapshotNeedsGpu,
        kMessageCudaPathDotDot, kMessageCudaPathPrivateDir, kMessageDataDirAbsolute, kMessageDataDirDotDot, kMessageNodeName,
        kMessageScopeSubset, kMessageDataScopeNeedsDirs, kMessageImmutableRuntime,
        kMessageImageOrBundle, kMessageImageReference, kMessageImageMicrovm,
        kMessageImageDataSnapshots, kMessageCommandNeedsImage, kMessageArgsNeedsImage,
        kMessageEnvNeedsImage, kMessageWorkingDirNeedsImage, kMessagePullPolicyNeedsImage,
        kMessagePullSecretsNeedsImage, kMessageWorkingDirAbsolute, kMessageEnvName,
        kMessagePullSecretName, kMessageSourceActorName, kMessageSourceSnapshotId,
        kMessageImmutableSource, kMessageSourceNeedsGvisor, kMessageSourceIsSelf}) {
    EXPECT_NE(actors.find("message: \"" + std::string(m) + "\""), std::string::npos) << m;
  }
  // The CEL regular expressions, verbatim.
  for (const char* p : {kImageReferencePattern, kEnvNamePattern}) {
    EXPECT_NE(actors.find("rule: \"self.matches('" + std::string(p) + "')\""), std::string::npos)
        << p;
  }
  EXPECT_NE(actors.find("rule: \"self.matches('" + std::string(kSnapshotIdPattern) +
                        "') && !self.endsWith('" + kPartialSnapshotSuffix + "')\""),
            std::string::npos);
  // spec.bundle is no longer required: the rule "exactly one of image and bundle" replaces it.
  EXPECT_EQ(actors.find("required: [bundle]"), std::string::npos);
  for (const char* m : {kMessageNodeName, kMessageWorkerHeldRef, kMessageImmutableNodeName}) {
    EXPECT_NE(workers.find("message: \"" + std::string(m) + "\""), std::string::npos) << m;
  }
  for (const char* p : {kConditionTypePattern, kConditionReasonPattern}) {
    EXPECT_NE(actors.find("pattern: '" + std::string(p) + "'"), std::string::npos) << p;
  }
  for (const char* d : {"default: /usr/local/bin/cuda-checkpoint", "default: 600",
                        "default: gvisor", "default: Running", "default: Direct", "default: Full",
                        "maxItems: 16", "maximum: 86400", "maximum: 8", "maxLength: 4096",
                        "maxLength: 255", "maxItems: 256", "maxLength: 32768",
                        "enum: [Always, IfNotPresent, Never]", "default: 30", "maximum: 600",
                        "minItems: 1", "maxLength: 128", "required: [actorName]",
                        "required: [command]"}) {
    EXPECT_NE(actors.find(d), std::string::npos) << d;
  }
}

// Every field that only an actor from an image may have is reported on a bundle actor, each
// at its own path, in schema order.
TEST(ApiValidationTest, ImageOnlyFieldsNeedAnImage) {
  json actor = GoodActor("a");
  const json image = GoodImageActor("a");
  for (const char* f : {"imagePullPolicy", "imagePullSecrets", "command", "args", "env", "workingDir"}) {
    actor["spec"][f] = image["spec"][f];
  }
  FieldErrors errors = ValidateActor(actor);
  ASSERT_EQ(errors.size(), 6u) << RenderErrors(errors);
  EXPECT_EQ(errors[0].ToString(), "spec.imagePullPolicy: Invalid value: " + std::string(kMessagePullPolicyNeedsImage));
  EXPECT_EQ(errors[1].ToString(), "spec.imagePullSecrets: Invalid value: " + std::string(kMessagePullSecretsNeedsImage));
  EXPECT_EQ(errors[2].ToString(), "spec.command: Invalid value: " + std::string(kMessageCommandNeedsImage));
  EXPECT_EQ(errors[3].ToString(), "spec.args: Invalid value: " + std::string(kMessageArgsNeedsImage));
  EXPECT_EQ(errors[4].ToString(), "spec.env: Invalid value: " + std::string(kMessageEnvNeedsImage));
  EXPECT_EQ(errors[5].ToString(), "spec.workingDir: Invalid value: " + std::string(kMessageWorkingDirNeedsImage));
  // With the image (and without the bundle, and a runtime and scopes an image allows) they pass.
  actor["spec"]["image"] = "counter:v1";
  actor["spec"].erase("bundle");
  actor["spec"]["runtime"] = "gvisor";
  actor["spec"]["snapshots"] = {{"onPause", "Full"}, {"onCommit", "Full"}};
  EXPECT_TRUE(ValidateActor(actor).empty()) << RenderErrors(ValidateActor(actor));
  // Empty lists are still set: the rule is about presence, as CEL's has() is.
  json empty = GoodActor("a");
  empty["spec"]["command"] = json::array();
  ASSERT_EQ(ValidateActor(empty).size(), 1u);
}

TEST(ApiValidationTest, ImageActorsRefuseDataSnapshotsAndMicrovm) {
  json actor = GoodImageActor("a");
  actor["spec"]["snapshots"] = {{"onPause", "Data"}, {"onCommit", "Data"}, {"dataDirs", {"/data"}}};
  actor["spec"]["runtime"] = "microvm";
  FieldErrors errors = ValidateActor(actor);
  ASSERT_EQ(errors.size(), 2u) << RenderErrors(errors);
  EXPECT_EQ(errors[0].ToString(), "spec.runtime: Invalid value: " + std::string(kMessageImageMicrovm));
  EXPECT_EQ(errors[1].ToString(), "spec.snapshots: Invalid value: " + std::string(kMessageImageDataSnapshots));
  EXPECT_NE(errors[1].detail.find("shared read-only between actors"), std::string::npos);
  // The same scopes on a bundle actor are fine, and so is Full on an image actor.
  json bundle = GoodActor("a");
  bundle["spec"]["snapshots"] = actor["spec"]["snapshots"];
  EXPECT_TRUE(ValidateActor(bundle).empty()) << RenderErrors(ValidateActor(bundle));
  actor["spec"]["runtime"] = "gvisor";
  actor["spec"]["snapshots"] = {{"onPause", "Full"}};  // onCommit defaults to Full
  EXPECT_TRUE(ValidateActor(actor).empty()) << RenderErrors(ValidateActor(actor));
  // Both image and bundle, and neither.
  actor["spec"]["bundle"] = "/b";
  EXPECT_EQ(RenderErrors(ValidateActor(actor)), "\n  spec: Invalid value: " + std::string(kMessageImageOrBundle));
  actor["spec"].erase("bundle");
  actor["spec"].erase("image");
  for (const char* f : {"imagePullPolicy", "imagePullSecrets", "command", "args", "env", "workingDir"}) {
    actor["spec"].erase(f);
  }
  EXPECT_EQ(RenderErrors(ValidateActor(actor)), "\n  spec: Invalid value: " + std::string(kMessageImageOrBundle));
}

// The light check of spec.image (the CRD's CEL pattern, run by std::regex here): what users
// write is accepted; whitespace, uppercase in the repository, a bad tag or digest is not.
TEST(ApiValidationTest, ImageReferencesAreCheckedLightly) {
  const std::string hex64(64, 'a');
  for (const std::string& ok :
       {std::string("busybox"), std::string("busybox:1.36"), std::string("library/busybox"),
        std::string("docker.io/library/busybox:latest"),
        std::string("127.0.0.1:5000/stasis/counter:v1"), std::string("localhost:5000/a/b"),
        std::string("localhost/a"), std::string("Registry.Example.COM/team/app:V1.2-rc_3"),
        std::string("ghcr.io/o/r@sha256:") + hex64, std::string("ghcr.io/o/r:v1@sha256:") + hex64,
        std::string("a/b__c/d-e.f/g--h"), std::string("registry:5000/app"),
        std::string("app:") + std::string(128, 't')}) {
    json actor = GoodImageActor("a");
    actor["spec"]["image"] = ok;
    EXPECT_TRUE(ValidateActor(actor).empty()) << ok << RenderErrors(ValidateActor(actor));
  }
  for (const std::string& bad :
       {std::string(""), std::string(" busybox"), std::string("busybox "), std::string("busy box"),
        std::string("busy\tbox"), std::string("Busybox"), std::string("Team/app"),
        std::string("ghcr.io/O/r"), std::string("r:"), std::string("r:-tag"),
        std::string("r@sha256:abc"), std::string("r@md5:") + hex64,
        std::string("r@sha256:") + std::string(64, 'A'), std::string("a//b"), std::string("/a"),
        std::string("a/"), std::string("a..b"), std::string("a_"), std::string("app:") + std::string(129, 't'),
        std::string("r:v1@") }) {
    json actor = GoodImageActor("a");
    actor["spec"]["image"] = bad;
    FieldErrors errors = ValidateActor(actor);
    ASSERT_EQ(errors.size(), 1u) << bad << RenderErrors(errors);
    EXPECT_EQ(errors[0].detail, kMessageImageReference) << bad;
    EXPECT_EQ(errors[0].field, "spec.image");
  }
}

TEST(ApiValidationTest, EnvNamesFollowKubernetesRule) {
  for (const char* ok : {"A", "_a", "a.b-c_D9", ".x", "-x"}) {
    json actor = GoodImageActor("a");
    actor["spec"]["env"] = {{{"name", ok}}};
    EXPECT_TRUE(ValidateActor(actor).empty()) << ok << RenderErrors(ValidateActor(actor));
  }
  for (const char* bad : {"", "9A", "A=B", "A B", "A$"}) {
    json actor = GoodImageActor("a");
    actor["spec"]["env"] = {{{"name", bad}}};
    FieldErrors errors = ValidateActor(actor);
    ASSERT_EQ(errors.size(), 1u) << bad << RenderErrors(errors);
    EXPECT_EQ(errors[0].detail, kMessageEnvName) << bad;
  }
}

}  // namespace
}  // namespace stasis::api
