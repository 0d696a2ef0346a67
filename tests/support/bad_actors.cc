#include "tests/support/bad_actors.h"

#include <string>
#include <utility>

namespace stasis::testing {
namespace {

using nlohmann::json;

// `base` with `patch` applied as a JSON merge patch (null deletes a key).
json Patched(json base, const json& patch) {
  base.merge_patch(patch);
  return base;
}

BadObject Actor(std::string name, std::string what, BadWrite write, const json& patch,
                std::string expected) {
  json object = Patched(GoodActor(name, write == BadWrite::kStatus), patch);
  return {std::move(name), std::move(what), write, std::move(object), std::move(expected)};
}

BadObject ImageActor(std::string name, std::string what, BadWrite write, const json& patch,
                     std::string expected) {
  json object = Patched(GoodImageActor(name, write == BadWrite::kStatus), patch);
  return {std::move(name), std::move(what), write, std::move(object), std::move(expected)};
}

BadObject CloneActor(std::string name, std::string what, BadWrite write, const json& patch,
                     std::string expected) {
  json object = Patched(GoodCloneActor(name, write == BadWrite::kStatus), patch);
  return {std::move(name), std::move(what), write, std::move(object), std::move(expected)};
}

BadObject TemplatedActor(std::string name, std::string what, const json& patch,
                         std::string expected) {
  json object = Patched(GoodTemplatedActor(name), patch);
  return {std::move(name), std::move(what), BadWrite::kCreate, std::move(object),
          std::move(expected)};
}

BadObject Template(std::string name, std::string what, BadWrite write, const json& patch,
                   std::string expected) {
  json object = Patched(GoodActorTemplate(name, write == BadWrite::kStatus), patch);
  return {std::move(name), std::move(what), write, std::move(object), std::move(expected)};
}

BadObject Worker(std::string name, std::string what, BadWrite write, const json& patch,
                 std::string expected) {
  json object = Patched(GoodWorker(name, write == BadWrite::kStatus), patch);
  return {std::move(name), std::move(what), write, std::move(object), std::move(expected)};
}

std::vector<json> ManyDirs(int n) {
  std::vector<json> dirs;
  for (int i = 0; i < n; ++i) dirs.push_back("/data/" + std::to_string(i));
  return dirs;
}

// n objects {"name": "<prefix><i>"} (plus a value for env).
json ManyNamed(int n, const std::string& prefix, bool with_value) {
  json list = json::array();
  for (int i = 0; i < n; ++i) {
    json item = {{"name", prefix + std::to_string(i)}};
    if (with_value) item["value"] = "v";
    list.push_back(std::move(item));
  }
  return list;
}

}  // namespace

json GoodActor(const std::string& name, bool with_status) {
  json actor = {{"apiVersion", "stasis.dev/v1alpha1"},
                {"kind", "Actor"},
                {"metadata", {{"name", name}, {"namespace", kBadObjectNamespace}}},
                {"spec",
                 {{"runtime", "microvm"},
                  {"bundle", "/var/lib/stasis/bundles/counter"},
                  {"nodeName", "node-a"},
                  {"gpu",
                   {{"count", 2},
                    {"cudaCheckpointPath", "/opt/nvidia/cuda-checkpoint"},
                    {"fastSnapshot", true}}},
                  {"desiredState", "Paused"},
                  {"checkpointPolicy", "LeaveRunningThenStop"},
                  {"snapshots",
                   {{"onPause", "Full"}, {"onCommit", "Data"}, {"dataDirs", {"/data", "/cache"}}}},
                  {"timeouts", {{"checkpointSeconds", 900}, {"restoreSeconds", 120}}}}}};
  if (with_status) {
    actor["status"] = {{"status", "STATUS_PAUSED"},
                       {"observedGeneration", 3},
                       {"nodeName", "node-a"},
                       {"workerName", "node-a-gpu0"},
                       {"sandboxID", "stasis-counter-7f3a"},
                       {"transitionStartTime", "2026-12-02T10:00:00Z"},
                       {"latestSnapshot",
                        {{"id", "counter-20261202-100000"},
                         {"trigger", "Pause"},
                         {"scope", "Full"},
                         {"location", "/var/lib/stasis/snapshots/counter-20261202-100000"},
                         {"nodeName", "node-a"},
                         {"sizeBytes", 123456789},
                         {"durationSeconds", 4.5},
                         {"cudaCheckpointed", true},
                         {"runscVersion", "release-20260622.0"},
                         {"takenAt", "2026-12-02T10:00:04Z"}}},
                       {"conditions",
                        {{{"type", "Ready"},
                          {"status", "False"},
                          {"observedGeneration", 3},
                          {"lastTransitionTime", "2026-12-02T10:00:00Z"},
                          {"reason", "Paused"},
                          {"message", "the actor is paused"}},
                         {{"type", "CudaCheckpointReady"},
                          {"status", "True"},
                          {"observedGeneration", 3},
                          {"lastTransitionTime", "2026-12-02T09:00:00Z"},
                          {"reason", "PreflightPassed"},
                          {"message", ""}}}}};
  }
  return actor;
}

json GoodImageActor(const std::string& name, bool with_status) {
  json actor = {{"apiVersion", "stasis.dev/v1alpha1"},
                {"kind", "Actor"},
                {"metadata", {{"name", name}, {"namespace", kBadObjectNamespace}}},
                {"spec",
                 {{"runtime", "gvisor"},
                  {"image", "127.0.0.1:5000/stasis/counter:v1"},
                  {"imagePullPolicy", "Always"},
                  {"imagePullSecrets", {{{"name", "regcred"}}, {{"name", "mirror.example.com"}}}},
                  {"command", {"/bin/counter"}},
                  {"args", {"--interval", "1s"}},
                  {"env", {{{"name", "COUNTER_START"}, {"value", "7"}}, {{"name", "log.level"}}}},
                  {"workingDir", "/srv/counter"},
                  {"nodeName", "node-a"},
                  {"gpu",
                   {{"count", 1},
                    {"cudaCheckpointPath", "/opt/nvidia/cuda-checkpoint"},
                    {"fastSnapshot", true}}},
                  {"desiredState", "Paused"},
                  {"checkpointPolicy", "LeaveRunningThenStop"},
                  {"snapshots", {{"onPause", "Full"}, {"onCommit", "Full"}}},
                  {"timeouts", {{"checkpointSeconds", 900}, {"restoreSeconds", 120}}}}}};
  if (with_status) {
    actor["status"] = {{"status", "STATUS_PAUSED"},
                       {"observedGeneration", 2},
                       {"nodeName", "node-a"},
                       {"workerName", "node-a-gpu0"},
                       {"sandboxID", "stasis-counter-7f3a"},
                       {"imageDigest", kGoodImageDigest},
                       {"latestSnapshot",
                        {{"id", "counter-20261202-100000"},
                         {"trigger", "Pause"},
                         {"scope", "Full"},
                         {"location", "/var/lib/stasis/snapshots/counter-20261202-100000"},
                         {"nodeName", "node-a"},
                         {"sizeBytes", 123456789},
                         {"durationSeconds", 4.5},
                         {"cudaCheckpointed", false},
                         {"runscVersion", "release-20260622.0"},
                         {"imageDigest", kGoodImageDigest},
                         {"takenAt", "2026-12-02T10:00:04Z"}}}};
  }
  return actor;
}

json GoodCloneActor(const std::string& name, bool with_status) {
  json actor = {
      {"apiVersion", "stasis.dev/v1alpha1"},
      {"kind", "Actor"},
      {"metadata", {{"name", name}, {"namespace", kBadObjectNamespace}}},
      {"spec",
       {{"runtime", "gvisor"},
        {"bundle", "/var/lib/stasis/bundles/counter"},
        {"desiredState", "Running"},
        {"source", {{"actorName", kCloneSourceName}, {"snapshotID", "20261202T150102Z-3f9a1c"}}},
        {"hooks",
         {{"postRestore",
           {{"command", {"/bin/sh", "-c", "hostname \"$STASIS_ACTOR_NAME\""}},
            {"timeoutSeconds", 10}}}}}}}};
  if (with_status) {
    actor["status"] = {{"status", "STATUS_RUNNING"},
                       {"observedGeneration", 1},
                       {"nodeName", "node-a"},
                       {"workerName", "node-a-cpu0"},
                       {"clonedFrom",
                        {{"actorName", kCloneSourceName},
                         {"actorUID", "6f1c3a2e-0000-4000-8000-000000000001"},
                         {"snapshotID", "20261202T150102Z-3f9a1c"}}}};
  }
  return actor;
}

json GoodTemplatedActor(const std::string& name) {
  return {{"apiVersion", "stasis.dev/v1alpha1"},
          {"kind", "Actor"},
          {"metadata", {{"name", name}, {"namespace", kBadObjectNamespace}}},
          {"spec",
           {{"templateRef", {{"name", kTemplateName}}},
            {"nodeName", "node-a"},
            {"desiredState", "Running"},
            {"readinessGate",
             {{"command", {"test", "-e", "/tmp/ready"}},
              {"timeoutSeconds", 120},
              {"periodSeconds", 2}}}}}};
}

json GoodActorTemplate(const std::string& name, bool with_status) {
  json t = {
      {"apiVersion", "stasis.dev/v1alpha1"},
      {"kind", "ActorTemplate"},
      {"metadata", {{"name", name}, {"namespace", kBadObjectNamespace}}},
      {"spec",
       {{"actor",
         {{"runtime", "gvisor"},
          {"bundle", "/var/lib/stasis/bundles/counter"},
          {"gpu",
           {{"count", 1},
            {"cudaCheckpointPath", "/opt/nvidia/cuda-checkpoint"},
            {"fastSnapshot", true}}},
          {"checkpointPolicy", "LeaveRunningThenStop"},
          {"snapshots", {{"onPause", "Full"}, {"onCommit", "Full"}}},
          {"timeouts", {{"checkpointSeconds", 900}, {"restoreSeconds", 120}}},
          {"hooks",
           {{"postRestore",
             {{"command", {"/bin/sh", "-c", "hostname \"$STASIS_ACTOR_NAME\""}},
              {"timeoutSeconds", 10}}}}}}},
        {"readinessGate",
         {{"command", {"/bin/sh", "-c", "test \"$(cat /tmp/counter)\" -ge 50"}},
          {"timeoutSeconds", 600},
          {"periodSeconds", 2}}},
        {"warm", 3}}}};
  if (with_status) {
    t["status"] = {{"observedGeneration", 2},
                   {"golden",
                    {{"actorName", name + "-golden-2"},
                     {"snapshotID", "20261202T150102Z-3f9a1c"},
                     {"generation", 2},
                     {"imageDigest", kGoodImageDigest},
                     {"sizeBytes", 123456789},
                     {"cudaCheckpointed", true},
                     {"takenAt", "2026-12-02T15:01:02Z"}}},
                   {"warmReady", 2},
                   {"conditions",
                    {{{"type", "GoldenReady"},
                      {"status", "True"},
                      {"observedGeneration", 2},
                      {"lastTransitionTime", "2026-12-02T15:01:03Z"},
                      {"reason", "GoldenSnapshotTaken"},
                      {"message", ""}}}}};
  }
  return t;
}

json GoodWorker(const std::string& name, bool with_status) {
  json worker = {
      {"apiVersion", "stasis.dev/v1alpha1"},
      {"kind", "Worker"},
      {"metadata", {{"name", name}}},
      {"spec",
       {{"nodeName", "node-a"},
        {"devices", {"GPU-8f5c1a52-2b1e-4c3d-9a7e-0123456789ab"}},
        {"gpu", {{"model", "NVIDIA H200"}, {"driverVersion", "580.95.05"}, {"cudaVersion", "13.0"}}}}}};
  if (with_status) {
    worker["status"] = {{"phase", "Held"},
                        {"actorRef", {{"namespace", kBadObjectNamespace}, {"name", "counter"}}}};
  }
  return worker;
}

const std::vector<BadObject>& BadActors() {
  static const auto* const kTable = [] {
    const BadWrite kCreate = BadWrite::kCreate;
    const BadWrite kStatus = BadWrite::kStatus;
    const std::string long_bundle = "/" + std::string(4096, 'b');
    return new std::vector<BadObject>{
        Actor(
            "bad-desired-state", "desiredState outside the enum", kCreate,
            {{"spec", {{"desiredState", "Sleeping"}}}},
            R"(spec.desiredState: Unsupported value: "Sleeping": supported values: "Running", "Paused", "Suspended")"),
        Actor(
            "bad-runtime", "runtime outside the enum", kCreate, {{"spec", {{"runtime", "docker"}}}},
            R"(spec.runtime: Unsupported value: "docker": supported values: "gvisor", "microvm")"),
        Actor(
            "bad-policy", "checkpointPolicy outside the enum", kCreate,
            {{"spec", {{"checkpointPolicy", "Sometimes"}}}},
            R"(spec.checkpointPolicy: Unsupported value: "Sometimes": supported values: "Direct", "LeaveRunningThenStop")"),
        Actor(
            "bad-on-pause", "onPause outside the enum", kCreate,
            {{"spec", {{"snapshots", {{"onPause", "Partial"}}}}}},
            R"(spec.snapshots.onPause: Unsupported value: "Partial": supported values: "Full", "Data")"),
        Actor(
            "bad-on-commit", "onCommit outside the enum", kCreate,
            {{"spec", {{"snapshots", {{"onCommit", "Everything"}}}}}},
            R"(spec.snapshots.onCommit: Unsupported value: "Everything": supported values: "Full", "Data")"),
        Actor("bad-scope-subset", "onCommit Full is not a subset of onPause Data", kCreate,
              {{"spec", {{"snapshots", {{"onPause", "Data"}, {"onCommit", "Full"}}}}}},
              "spec.snapshots.onCommit: Invalid value: onCommit must be a subset of onPause: "
              "with onPause Data, onCommit must be Data"),
        Actor(
            "bad-data-no-dirs", "a Data scope without dataDirs", kCreate,
            {{"spec",
              {{"snapshots", {{"onPause", "Data"}, {"onCommit", "Data"}, {"dataDirs", nullptr}}}}}},
            "spec.snapshots.dataDirs: Invalid value: a Data snapshot scope needs at least one "
            "dataDirs entry"),
        Actor("bad-checkpoint-zero", "checkpointSeconds below 1", kCreate,
              {{"spec", {{"timeouts", {{"checkpointSeconds", 0}}}}}},
              "spec.timeouts.checkpointSeconds: Invalid value: 0: spec.timeouts.checkpointSeconds "
              "in body should be greater than or equal to 1"),
        Actor("bad-checkpoint-day", "checkpointSeconds above 86400", kCreate,
              {{"spec", {{"timeouts", {{"checkpointSeconds", 86401}}}}}},
              "spec.timeouts.checkpointSeconds: Invalid value: 86401: "
              "spec.timeouts.checkpointSeconds in body should be less than or equal to 86400"),
        Actor("bad-restore-negative", "restoreSeconds negative", kCreate,
              {{"spec", {{"timeouts", {{"restoreSeconds", -5}}}}}},
              "spec.timeouts.restoreSeconds: Invalid value: -5: spec.timeouts.restoreSeconds in "
              "body should be greater than or equal to 1"),
        Actor("bad-restore-huge", "restoreSeconds above 86400", kCreate,
              {{"spec", {{"timeouts", {{"restoreSeconds", 100000}}}}}},
              "spec.timeouts.restoreSeconds: Invalid value: 100000: spec.timeouts.restoreSeconds "
              "in body should be less than or equal to 86400"),
        Actor(
            "bad-timeout-type", "a timeout written as a string", kCreate,
            {{"spec", {{"timeouts", {{"checkpointSeconds", "600"}}}}}},
            R"(spec.timeouts.checkpointSeconds: Invalid value: "string": spec.timeouts.checkpointSeconds in body must be of type integer: "string")"),
        Actor(
            "bad-gpu-count-float", "gpu.count not a whole number", kCreate,
            {{"spec", {{"gpu", {{"count", 1.5}}}}}},
            R"(spec.gpu.count: Invalid value: "float64": spec.gpu.count in body must be of type int32: "float64")"),
        Actor("bad-bundle-relative", "bundle not absolute", kCreate,
              {{"spec", {{"bundle", "bundles/counter"}}}},
              R"(spec.bundle: Invalid value: "bundles/counter": bundle must be an absolute path)"),
        Actor("bad-bundle-empty", "bundle empty", kCreate, {{"spec", {{"bundle", ""}}}},
              R"(spec.bundle: Invalid value: "": bundle must be an absolute path)"),
        Actor(
            "bad-bundle-dotdot", "bundle with a '..' segment", kCreate,
            {{"spec", {{"bundle", "/var/lib/stasis/../../etc"}}}},
            R"(spec.bundle: Invalid value: "/var/lib/stasis/../../etc": bundle must not contain a '..' segment)"),
        Actor("bad-bundle-long", "bundle longer than 4096", kCreate,
              {{"spec", {{"bundle", long_bundle}}}},
              "spec.bundle: Too long: may not be more than 4096 bytes"),
        Actor("bad-bundle-missing", "neither bundle nor image", kCreate,
              {{"spec", {{"bundle", nullptr}}}},
              "spec: Invalid value: exactly one of image and bundle must be set: an actor runs "
              "an OCI image or an OCI bundle on the node"),
        Actor("bad-spec-missing", "spec missing", kCreate, {{"spec", nullptr}},
              "spec: Required value"),
        Actor("bad-gpu-count-high", "gpu.count above 8", kCreate,
              {{"spec", {{"gpu", {{"count", 9}}}}}},
              "spec.gpu.count: Invalid value: 9: spec.gpu.count in body should be less than or "
              "equal to 8"),
        // Without fastSnapshot, whose rule (count > 0) would report a second error.
        Actor("bad-gpu-count-negative", "gpu.count negative", kCreate,
              {{"spec", {{"gpu", {{"count", -1}, {"fastSnapshot", false}}}}}},
              "spec.gpu.count: Invalid value: -1: spec.gpu.count in body should be greater than "
              "or equal to 0"),
        Actor(
            "bad-cuda-path-relative", "cudaCheckpointPath not absolute", kCreate,
            {{"spec", {{"gpu", {{"cudaCheckpointPath", "cuda-checkpoint"}}}}}},
            R"(spec.gpu.cudaCheckpointPath: Invalid value: "cuda-checkpoint": cudaCheckpointPath must be an absolute path)"),
        Actor(
            "bad-cuda-path-dotdot", "cudaCheckpointPath with a '..' segment", kCreate,
            {{"spec", {{"gpu", {{"cudaCheckpointPath", "/usr/local/../bin/cuda-checkpoint"}}}}}},
            R"(spec.gpu.cudaCheckpointPath: Invalid value: "/usr/local/../bin/cuda-checkpoint": cudaCheckpointPath must not contain a '..' segment)"),
        Actor(
            "bad-cuda-path-private", "cudaCheckpointPath inside the helper's private directory",
            kCreate, {{"spec", {{"gpu", {{"cudaCheckpointPath", "/opt/stasis/cuda-checkpoint"}}}}}},
            R"(spec.gpu.cudaCheckpointPath: Invalid value: "/opt/stasis/cuda-checkpoint": cudaCheckpointPath must not be in /opt/stasis/cuda-checkpoint, where the helper's own directory is mounted)"),
        Actor(
            "bad-cuda-path-under-private", "cudaCheckpointPath under the helper's private directory",
            kCreate, {{"spec", {{"gpu", {{"cudaCheckpointPath", "/opt/stasis/cuda-checkpoint/x"}}}}}},
            R"(spec.gpu.cudaCheckpointPath: Invalid value: "/opt/stasis/cuda-checkpoint/x": cudaCheckpointPath must not be in /opt/stasis/cuda-checkpoint, where the helper's own directory is mounted)"),
        Actor("bad-fast-snapshot-cpu", "gpu.fastSnapshot on a CPU actor (count 0)", kCreate,
              {{"spec", {{"gpu", {{"count", 0}}}}}},
              "spec.gpu.fastSnapshot: Invalid value: fastSnapshot applies only to GPU actors "
              "(gpu.count > 0)"),
        Actor("bad-fast-snapshot-count-absent", "gpu.fastSnapshot with count absent (default 0)",
              kCreate, {{"spec", {{"gpu", {{"count", nullptr}}}}}},
              "spec.gpu.fastSnapshot: Invalid value: fastSnapshot applies only to GPU actors "
              "(gpu.count > 0)"),
        Actor(
            "bad-fast-snapshot-type", "gpu.fastSnapshot written as a string", kCreate,
            {{"spec", {{"gpu", {{"fastSnapshot", "true"}}}}}},
            R"(spec.gpu.fastSnapshot: Invalid value: "string": spec.gpu.fastSnapshot in body must be of type boolean: "string")"),
        Actor(
            "bad-data-dir-relative", "a dataDirs entry not absolute", kCreate,
            {{"spec", {{"snapshots", {{"dataDirs", {"/data", "cache"}}}}}}},
            R"(spec.snapshots.dataDirs[1]: Invalid value: "cache": dataDirs entries must be absolute paths)"),
        Actor(
            "bad-data-dir-dotdot", "a dataDirs entry ending in '..'", kCreate,
            {{"spec", {{"snapshots", {{"dataDirs", {"/data/.."}}}}}}},
            R"(spec.snapshots.dataDirs[0]: Invalid value: "/data/..": dataDirs entries must not contain a '..' segment)"),
        Actor("bad-data-dirs-many", "17 dataDirs", kCreate,
              {{"spec", {{"snapshots", {{"dataDirs", ManyDirs(17)}}}}}},
              "spec.snapshots.dataDirs: Too many: 17: must have at most 16 items"),
        Actor("bad-data-dirs-duplicate", "a dataDirs entry twice", kCreate,
              {{"spec", {{"snapshots", {{"dataDirs", {"/data", "/cache", "/data"}}}}}}},
              R"(spec.snapshots.dataDirs[2]: Duplicate value: "/data")"),
        Actor(
            "bad-node-name", "nodeName not a DNS subdomain", kCreate,
            {{"spec", {{"nodeName", "Node_A"}}}},
            R"(spec.nodeName: Invalid value: "Node_A": nodeName must be a lowercase RFC 1123 subdomain, such as node-a)"),
        // Actors from OCI images.
        ImageActor("bad-image-and-bundle", "both image and bundle", kCreate,
                   {{"spec", {{"bundle", "/var/lib/stasis/bundles/counter"}}}},
                   "spec: Invalid value: exactly one of image and bundle must be set: an actor "
                   "runs an OCI image or an OCI bundle on the node"),
        ImageActor("bad-image-data-on-pause", "image with onPause Data", kCreate,
                   {{"spec",
                     {{"snapshots",
                       {{"onPause", "Data"}, {"onCommit", "Data"}, {"dataDirs", {"/data"}}}}}}},
                   "spec.snapshots: Invalid value: an actor from an image cannot take Data "
                   "snapshots: the image's root filesystem is shared read-only between actors, so "
                   "there is no per-actor directory to archive; use Full"),
        ImageActor("bad-image-data-on-commit", "image with onCommit Data", kCreate,
                   {{"spec", {{"snapshots", {{"onCommit", "Data"}, {"dataDirs", {"/data"}}}}}}},
                   "spec.snapshots: Invalid value: an actor from an image cannot take Data "
                   "snapshots: the image's root filesystem is shared read-only between actors, so "
                   "there is no per-actor directory to archive; use Full"),
        ImageActor("bad-image-microvm", "image with runtime microvm", kCreate,
                   {{"spec", {{"runtime", "microvm"}}}},
                   "spec.runtime: Invalid value: runtime microvm cannot run an image: micro-VM "
                   "bundles are not OCI images; use spec.bundle"),
        Actor("bad-command-without-image", "command on a bundle actor", kCreate,
              {{"spec", {{"command", {"/bin/sh"}}}}},
              "spec.command: Invalid value: command is only for an actor from an image "
              "(spec.image)"),
        Actor("bad-args-without-image", "args on a bundle actor", kCreate,
              {{"spec", {{"args", {"-c", "true"}}}}},
              "spec.args: Invalid value: args is only for an actor from an image (spec.image)"),
        Actor("bad-env-without-image", "env on a bundle actor", kCreate,
              {{"spec", {{"env", {{{"name", "A"}, {"value", "1"}}}}}}},
              "spec.env: Invalid value: env is only for an actor from an image (spec.image)"),
        Actor("bad-working-dir-without-image", "workingDir on a bundle actor", kCreate,
              {{"spec", {{"workingDir", "/srv"}}}},
              "spec.workingDir: Invalid value: workingDir is only for an actor from an image "
              "(spec.image)"),
        Actor("bad-pull-policy-without-image", "imagePullPolicy on a bundle actor", kCreate,
              {{"spec", {{"imagePullPolicy", "Never"}}}},
              "spec.imagePullPolicy: Invalid value: imagePullPolicy is only for an actor from "
              "an image (spec.image)"),
        Actor("bad-pull-secrets-without-image", "imagePullSecrets on a bundle actor", kCreate,
              {{"spec", {{"imagePullSecrets", {{{"name", "regcred"}}}}}}},
              "spec.imagePullSecrets: Invalid value: imagePullSecrets is only for an actor from "
              "an image (spec.image)"),
        ImageActor(
            "bad-image-uppercase", "uppercase in the image's repository", kCreate,
            {{"spec", {{"image", "registry.example.com/Team/app:v1"}}}},
            std::string(R"(spec.image: Invalid value: "registry.example.com/Team/app:v1": )") +
                "image must be an image reference such as registry.example.com/team/app:v1 or "
                "registry.example.com/team/app@sha256:<64 hex digits>: no whitespace, no "
                "uppercase letters in the repository"),
        ImageActor("bad-image-whitespace", "whitespace in the image", kCreate,
                   {{"spec", {{"image", "counter :v1"}}}},
                   std::string(R"(spec.image: Invalid value: "counter :v1": )") +
                       "image must be an image reference such as registry.example.com/team/app:v1 "
                       "or registry.example.com/team/app@sha256:<64 hex digits>: no whitespace, "
                       "no uppercase letters in the repository"),
        ImageActor("bad-image-short-digest", "a digest that is not 64 hex digits", kCreate,
                   {{"spec", {{"image", "counter@sha256:abc"}}}},
                   std::string(R"(spec.image: Invalid value: "counter@sha256:abc": )") +
                       "image must be an image reference such as registry.example.com/team/app:v1 "
                       "or registry.example.com/team/app@sha256:<64 hex digits>: no whitespace, "
                       "no uppercase letters in the repository"),
        ImageActor("bad-image-long", "image longer than 255", kCreate,
                   {{"spec", {{"image", "r.example.com/" + std::string(250, 'a')}}}},
                   "spec.image: Too long: may not be more than 255 bytes"),
        ImageActor(
            "bad-pull-policy", "imagePullPolicy outside the enum", kCreate,
            {{"spec", {{"imagePullPolicy", "Sometimes"}}}},
            R"(spec.imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never")"),
        ImageActor(
            "bad-pull-secret-name", "an imagePullSecrets name that is no Secret name", kCreate,
            {{"spec", {{"imagePullSecrets", {{{"name", "Reg_Cred"}}}}}}},
            R"(spec.imagePullSecrets[0].name: Invalid value: "Reg_Cred": imagePullSecrets names must be lowercase RFC 1123 subdomains (the names of Secrets))"),
        ImageActor("bad-pull-secret-no-name", "an imagePullSecrets entry without a name",
                   kCreate, {{"spec", {{"imagePullSecrets", {json::object()}}}}},
                   "spec.imagePullSecrets[0].name: Required value"),
        ImageActor("bad-pull-secrets-many", "17 imagePullSecrets", kCreate,
                   {{"spec", {{"imagePullSecrets", ManyNamed(17, "regcred-", false)}}}},
                   "spec.imagePullSecrets: Too many: 17: must have at most 16 items"),
        ImageActor("bad-pull-secret-duplicate", "an imagePullSecrets name twice", kCreate,
                   {{"spec", {{"imagePullSecrets", {{{"name", "regcred"}}, {{"name", "regcred"}}}}}}},
                   R"(spec.imagePullSecrets[1]: Duplicate value: {"name":"regcred"})"),
        ImageActor(
            "bad-env-name", "an env name starting with a digit", kCreate,
            {{"spec", {{"env", {{{"name", "1ST"}, {"value", "x"}}}}}}},
            R"(spec.env[0].name: Invalid value: "1ST": env names must consist of letters, digits, '_', '-' or '.' and must not start with a digit)"),
        ImageActor("bad-env-duplicate", "an env name twice", kCreate,
                   {{"spec", {{"env", {{{"name", "A"}, {"value", "1"}}, {{"name", "A"}}}}}}},
                   R"(spec.env[1]: Duplicate value: {"name":"A"})"),
        ImageActor("bad-env-many", "257 env entries", kCreate,
                   {{"spec", {{"env", ManyNamed(257, "VAR_", true)}}}},
                   "spec.env: Too many: 257: must have at most 256 items"),
        ImageActor("bad-command-many", "257 command items", kCreate,
                   {{"spec", {{"command", json(std::vector<std::string>(257, "x"))}}}},
                   "spec.command: Too many: 257: must have at most 256 items"),
        ImageActor("bad-arg-long", "an argument longer than 4096", kCreate,
                   {{"spec", {{"args", {std::string(4097, 'a')}}}}},
                   "spec.args[0]: Too long: may not be more than 4096 bytes"),
        ImageActor(
            "bad-working-dir-relative", "workingDir not absolute", kCreate,
            {{"spec", {{"workingDir", "srv"}}}},
            R"(spec.workingDir: Invalid value: "srv": workingDir must be an absolute path)"),
        // Clones (spec.source, spec.hooks).
        CloneActor("bad-source-no-name", "source without actorName", kCreate,
                   {{"spec", {{"source", {{"actorName", nullptr}}}}}},
                   "spec.source.actorName: Required value"),
        CloneActor(
            "bad-source-name", "source.actorName not a DNS subdomain", kCreate,
            {{"spec", {{"source", {{"actorName", "Counter_A"}}}}}},
            R"(spec.source.actorName: Invalid value: "Counter_A": source.actorName must be a lowercase RFC 1123 subdomain (the name of an Actor in the same namespace))"),
        CloneActor("bad-source-name-long", "source.actorName longer than 253", kCreate,
                   {{"spec", {{"source", {{"actorName", std::string(254, 'a')}}}}}},
                   "spec.source.actorName: Too long: may not be more than 253 bytes"),
        CloneActor(
            "bad-source-snapshot-id", "source.snapshotID with a '/'", kCreate,
            {{"spec", {{"source", {{"snapshotID", "../other/1"}}}}}},
            R"(spec.source.snapshotID: Invalid value: "../other/1": source.snapshotID must be a snapshot id: letters, digits, '-', '_' or '.', starting with a letter or digit, not ending in .partial)"),
        CloneActor(
            "bad-source-snapshot-partial", "source.snapshotID naming a partial snapshot", kCreate,
            {{"spec", {{"source", {{"snapshotID", "20261202T150102Z-3f9a1c.partial"}}}}}},
            R"(spec.source.snapshotID: Invalid value: "20261202T150102Z-3f9a1c.partial": source.snapshotID must be a snapshot id: letters, digits, '-', '_' or '.', starting with a letter or digit, not ending in .partial)"),
        CloneActor("bad-source-snapshot-long", "source.snapshotID longer than 128", kCreate,
                   {{"spec", {{"source", {{"snapshotID", std::string(129, 's')}}}}}},
                   "spec.source.snapshotID: Too long: may not be more than 128 bytes"),
        CloneActor("bad-source-microvm", "a clone with runtime microvm", kCreate,
                   {{"spec", {{"runtime", "microvm"}, {"hooks", nullptr}}}},
                   "spec.source: Invalid value: source is only for runtime gvisor: a clone "
                   "restores its source's gVisor snapshot"),
        CloneActor("bad-source-self", "an actor that names itself as its source", kCreate,
                   {{"spec", {{"source", {{"actorName", "bad-source-self"}}}}}},
                   "spec.source.actorName: Invalid value: an actor cannot be its own source"),
        CloneActor("bad-hook-no-command", "postRestore without command", kCreate,
                   {{"spec", {{"hooks", {{"postRestore", {{"command", nullptr}}}}}}}},
                   "spec.hooks.postRestore.command: Required value"),
        CloneActor("bad-hook-empty-command", "postRestore with an empty command", kCreate,
                   {{"spec", {{"hooks", {{"postRestore", {{"command", json::array()}}}}}}}},
                   "spec.hooks.postRestore.command: Invalid value: 0: "
                   "spec.hooks.postRestore.command in body should have at least 1 items"),
        CloneActor("bad-hook-command-many", "257 postRestore command items", kCreate,
                   {{"spec",
                     {{"hooks",
                       {{"postRestore",
                         {{"command", json(std::vector<std::string>(257, "x"))}}}}}}}},
                   "spec.hooks.postRestore.command: Too many: 257: must have at most 256 items"),
        CloneActor("bad-hook-arg-long", "a postRestore argument longer than 4096", kCreate,
                   {{"spec",
                     {{"hooks", {{"postRestore", {{"command", {std::string(4097, 'a')}}}}}}}}},
                   "spec.hooks.postRestore.command[0]: Too long: may not be more than 4096 bytes"),
        CloneActor("bad-hook-timeout-zero", "postRestore timeoutSeconds below 1", kCreate,
                   {{"spec", {{"hooks", {{"postRestore", {{"timeoutSeconds", 0}}}}}}}},
                   "spec.hooks.postRestore.timeoutSeconds: Invalid value: 0: "
                   "spec.hooks.postRestore.timeoutSeconds in body should be greater than or "
                   "equal to 1"),
        CloneActor("bad-hook-timeout-high", "postRestore timeoutSeconds above 600", kCreate,
                   {{"spec", {{"hooks", {{"postRestore", {{"timeoutSeconds", 601}}}}}}}},
                   "spec.hooks.postRestore.timeoutSeconds: Invalid value: 601: "
                   "spec.hooks.postRestore.timeoutSeconds in body should be less than or equal "
                   "to 600"),
        CloneActor("bad-hooks-microvm", "postRestore hook with runtime microvm", kCreate,
                   {{"spec", {{"runtime", "microvm"}, {"source", nullptr}}}},
                   "spec.hooks: Invalid value: hooks run in the sandbox through runsc exec: "
                   "runtime gvisor only"),
        Actor("bad-readiness-microvm", "a readiness gate with runtime microvm", kCreate,
              {{"spec", {{"readinessGate", {{"command", {"true"}}}}}}},
              "spec.readinessGate: Invalid value: readinessGate runs in the sandbox through "
              "runsc exec: runtime gvisor only"),
        TemplatedActor("bad-template-ref-name", "templateRef.name not a DNS subdomain",
                       {{"spec", {{"templateRef", {{"name", "Counter_Template"}}}}}},
                       R"(spec.templateRef.name: Invalid value: "Counter_Template": templateRef.name must be a lowercase RFC 1123 subdomain (the name of an ActorTemplate in the same namespace))"),
        TemplatedActor("bad-template-ref-no-name", "templateRef without name",
                       {{"spec", {{"templateRef", {{"name", nullptr}}}}}},
                       "spec.templateRef.name: Required value"),
        TemplatedActor("bad-template-image-and-bundle", "templateRef with both image and bundle",
                       {{"spec",
                         {{"image", "busybox"}, {"bundle", "/var/lib/stasis/bundles/counter"}}}},
                       "spec: Invalid value: with templateRef, at most one of image and bundle "
                       "may be set: the controller copies in the template's"),
        TemplatedActor("bad-readiness-no-command", "readinessGate without command",
                       {{"spec", {{"readinessGate", {{"command", nullptr}}}}}},
                       "spec.readinessGate.command: Required value"),
        TemplatedActor("bad-readiness-empty-command", "readinessGate with an empty command",
                       {{"spec", {{"readinessGate", {{"command", json::array()}}}}}},
                       "spec.readinessGate.command: Invalid value: 0: "
                       "spec.readinessGate.command in body should have at least 1 items"),
        TemplatedActor("bad-readiness-command-many", "257 readinessGate command items",
                       {{"spec",
                         {{"readinessGate",
                           {{"command", json(std::vector<std::string>(257, "x"))}}}}}},
                       "spec.readinessGate.command: Too many: 257: must have at most 256 items"),
        TemplatedActor("bad-readiness-arg-long", "a readinessGate argument longer than 4096",
                       {{"spec", {{"readinessGate", {{"command", {std::string(4097, 'a')}}}}}}},
                       "spec.readinessGate.command[0]: Too long: may not be more than 4096 bytes"),
        TemplatedActor("bad-readiness-timeout-zero", "readinessGate timeoutSeconds below 1",
                       {{"spec", {{"readinessGate", {{"timeoutSeconds", 0}}}}}},
                       "spec.readinessGate.timeoutSeconds: Invalid value: 0: "
                       "spec.readinessGate.timeoutSeconds in body should be greater than or "
                       "equal to 1"),
        TemplatedActor("bad-readiness-timeout-high", "readinessGate timeoutSeconds above 3600",
                       {{"spec", {{"readinessGate", {{"timeoutSeconds", 3601}}}}}},
                       "spec.readinessGate.timeoutSeconds: Invalid value: 3601: "
                       "spec.readinessGate.timeoutSeconds in body should be less than or equal "
                       "to 3600"),
        TemplatedActor("bad-readiness-period-zero", "readinessGate periodSeconds below 1",
                       {{"spec", {{"readinessGate", {{"periodSeconds", 0}}}}}},
                       "spec.readinessGate.periodSeconds: Invalid value: 0: "
                       "spec.readinessGate.periodSeconds in body should be greater than or "
                       "equal to 1"),
        TemplatedActor("bad-readiness-period-high", "readinessGate periodSeconds above 60",
                       {{"spec", {{"readinessGate", {{"periodSeconds", 61}}}}}},
                       "spec.readinessGate.periodSeconds: Invalid value: 61: "
                       "spec.readinessGate.periodSeconds in body should be less than or equal "
                       "to 60"),
        TemplatedActor("bad-template-command-no-image", "templateRef with command and no image",
                       {{"spec", {{"command", {"/bin/counter"}}}}},
                       "spec.command: Invalid value: command is only for an actor from an image "
                       "(spec.image)"),
        CloneActor("bad-cloned-from-uid-long", "status.clonedFrom.actorUID longer than 128",
                   kStatus, {{"status", {{"clonedFrom", {{"actorUID", std::string(129, 'u')}}}}}},
                   "status.clonedFrom.actorUID: Too long: may not be more than 128 bytes"),
        ImageActor("bad-image-digest-long", "status.imageDigest longer than 256", kStatus,
                   {{"status", {{"imageDigest", std::string(257, 'd')}}}},
                   "status.imageDigest: Too long: may not be more than 256 bytes"),
        Actor(
            "bad-status", "status.status outside the STATUS_* enum", kStatus,
            {{"status", {{"status", "RUNNING"}}}},
            R"(status.status: Unsupported value: "RUNNING": supported values: "STATUS_UNSPECIFIED", "STATUS_RESUMING", "STATUS_RUNNING", "STATUS_SUSPENDING", "STATUS_SUSPENDED", "STATUS_PAUSING", "STATUS_PAUSED", "STATUS_FAILED")"),
        Actor(
            "bad-snapshot-trigger", "latestSnapshot.trigger outside the enum", kStatus,
            {{"status", {{"latestSnapshot", {{"trigger", "Manual"}}}}}},
            R"(status.latestSnapshot.trigger: Unsupported value: "Manual": supported values: "Pause", "Suspend")"),
        Actor("bad-observed-generation", "observedGeneration negative", kStatus,
              {{"status", {{"observedGeneration", -1}}}},
              "status.observedGeneration: Invalid value: -1: observedGeneration in body should "
              "be greater than or equal to 0"),
        Actor(
            "bad-transition-time", "transitionStartTime not a date-time", kStatus,
            {{"status", {{"transitionStartTime", "soon"}}}},
            R"(status.transitionStartTime: Invalid value: "soon": transitionStartTime in body must be of type date-time: "soon")"),
        Actor(
            "bad-condition-reason", "a condition reason that is not CamelCase", kStatus,
            {{"status",
              {{"conditions",
                {{{"type", "Ready"},
                  {"status", "True"},
                  {"lastTransitionTime", "2026-12-02T10:00:00Z"},
                  {"reason", "not camel case"},
                  {"message", ""}}}}}}},
            R"(status.conditions[0].reason: Invalid value: "not camel case": conditions[0].reason in body should match '^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$')"),
        Actor(
            "bad-condition-status", "a condition status other than True/False/Unknown", kStatus,
            {{"status",
              {{"conditions",
                {{{"type", "Ready"},
                  {"status", "Maybe"},
                  {"lastTransitionTime", "2026-12-02T10:00:00Z"},
                  {"reason", "Paused"},
                  {"message", ""}}}}}}},
            R"(status.conditions[0].status: Unsupported value: "Maybe": supported values: "True", "False", "Unknown")"),
        Actor("bad-condition-duplicate", "two conditions of one type", kStatus,
              {{"status",
                {{"conditions",
                  {{{"type", "Ready"},
                    {"status", "True"},
                    {"lastTransitionTime", "2026-12-02T10:00:00Z"},
                    {"reason", "Running"},
                    {"message", ""}},
                   {{"type", "Ready"},
                    {"status", "False"},
                    {"lastTransitionTime", "2026-12-02T10:00:00Z"},
                    {"reason", "Paused"},
                    {"message", ""}}}}}}},
              R"(status.conditions[1]: Duplicate value: {"type":"Ready"})"),
    };
  }();
  return *kTable;
}

const std::vector<BadObject>& BadWorkers() {
  static const auto* const kTable = [] {
    const BadWrite kCreate = BadWrite::kCreate;
    const BadWrite kStatus = BadWrite::kStatus;
    return new std::vector<BadObject>{
        Worker("bad-worker-no-node", "spec.nodeName missing", kCreate,
               {{"spec", {{"nodeName", nullptr}}}}, "spec.nodeName: Required value"),
        Worker(
            "bad-worker-node-name", "spec.nodeName not a DNS subdomain", kCreate,
            {{"spec", {{"nodeName", "node a"}}}},
            R"(spec.nodeName: Invalid value: "node a": nodeName must be a lowercase RFC 1123 subdomain, such as node-a)"),
        Worker("bad-worker-devices", "a device listed twice", kCreate,
               {{"spec", {{"devices", {"GPU-0", "GPU-0"}}}}},
               R"(spec.devices[1]: Duplicate value: "GPU-0")"),
        Worker("bad-worker-driver-version", "a driver version past its bound", kCreate,
               {{"spec", {{"gpu", {{"driverVersion", std::string(65, '5')}}}}}},
               "spec.gpu.driverVersion: Too long: may not be more than 64 bytes"),
        Worker("bad-worker-phase", "phase outside the enum", kStatus,
               {{"status", {{"phase", "Busy"}}}},
               R"(status.phase: Unsupported value: "Busy": supported values: "Free", "Held")"),
        Worker("bad-worker-held-no-ref", "Held without actorRef", kStatus,
               {{"status", {{"actorRef", nullptr}}}},
               "status: Invalid value: actorRef must be set exactly when phase is Held"),
        Worker("bad-worker-free-with-ref", "Free with an actorRef", kStatus,
               {{"status", {{"phase", "Free"}}}},
               "status: Invalid value: actorRef must be set exactly when phase is Held"),
    };
  }();
  return *kTable;
}

const std::vector<BadObject>& BadActorTemplates() {
  static const auto* const kTable = [] {
    const BadWrite kCreate = BadWrite::kCreate;
    const BadWrite kStatus = BadWrite::kStatus;
    return new std::vector<BadObject>{
        Template("bad-tpl-node-name", "spec.actor.nodeName set", kCreate,
                 {{"spec", {{"actor", {{"nodeName", "node-a"}}}}}},
                 "spec.actor.nodeName: Invalid value: nodeName is each actor's own: set it on the "
                 "actors, not in the template"),
        Template("bad-tpl-desired-state", "spec.actor.desiredState set", kCreate,
                 {{"spec", {{"actor", {{"desiredState", "Running"}}}}}},
                 "spec.actor.desiredState: Invalid value: desiredState is each actor's own: set "
                 "it on the actors, not in the template"),
        Template("bad-tpl-source", "spec.actor.source set", kCreate,
                 {{"spec", {{"actor", {{"source", {{"actorName", "counter"}}}}}}}},
                 "spec.actor.source: Invalid value: source is not for a template: its actors "
                 "start from its golden snapshot"),
        Template("bad-tpl-template-ref", "spec.actor.templateRef set", kCreate,
                 {{"spec", {{"actor", {{"templateRef", {{"name", "other"}}}}}}}},
                 "spec.actor.templateRef: Invalid value: templateRef is for actors: a template "
                 "cannot refer to a template"),
        Template("bad-tpl-microvm", "spec.actor.runtime microvm", kCreate,
                 {{"spec", {{"actor", {{"runtime", "microvm"}, {"hooks", nullptr}}}}}},
                 "spec.actor.runtime: Invalid value: a template's actors start from its golden "
                 "snapshot, a gVisor one: runtime gvisor only"),
        Template("bad-tpl-image-and-bundle", "spec.actor with both image and bundle", kCreate,
                 {{"spec", {{"actor", {{"image", "busybox"}}}}}},
                 "spec.actor: Invalid value: exactly one of image and bundle must be set: an "
                 "actor runs an OCI image or an OCI bundle on the node"),
        Template("bad-tpl-neither", "spec.actor with neither image nor bundle", kCreate,
                 {{"spec", {{"actor", {{"bundle", nullptr}}}}}},
                 "spec.actor: Invalid value: exactly one of image and bundle must be set: an "
                 "actor runs an OCI image or an OCI bundle on the node"),
        Template("bad-tpl-no-actor", "spec.actor missing", kCreate,
                 {{"spec", {{"actor", nullptr}}}}, "spec.actor: Required value"),
        Template("bad-tpl-checkpoint-timeout", "spec.actor.timeouts.checkpointSeconds 0",
                 kCreate, {{"spec", {{"actor", {{"timeouts", {{"checkpointSeconds", 0}}}}}}}},
                 "spec.actor.timeouts.checkpointSeconds: Invalid value: 0: "
                 "spec.actor.timeouts.checkpointSeconds in body should be greater than or equal "
                 "to 1"),
        Template("bad-tpl-fast-snapshot-cpu", "spec.actor.gpu.fastSnapshot with count 0",
                 kCreate, {{"spec", {{"actor", {{"gpu", {{"count", 0}}}}}}}},
                 "spec.actor.gpu.fastSnapshot: Invalid value: fastSnapshot applies only to GPU "
                 "actors (gpu.count > 0)"),
        Template("bad-tpl-warm-high", "spec.warm above 64", kCreate, {{"spec", {{"warm", 65}}}},
                 "spec.warm: Invalid value: 65: spec.warm in body should be less than or equal "
                 "to 64"),
        Template("bad-tpl-warm-negative", "spec.warm below 0", kCreate,
                 {{"spec", {{"warm", -1}}}},
                 "spec.warm: Invalid value: -1: spec.warm in body should be greater than or "
                 "equal to 0"),
        Template("bad-tpl-readiness-empty", "spec.readinessGate with an empty command", kCreate,
                 {{"spec", {{"readinessGate", {{"command", json::array()}}}}}},
                 "spec.readinessGate.command: Invalid value: 0: spec.readinessGate.command in "
                 "body should have at least 1 items"),
        Template("bad-tpl-readiness-timeout", "spec.readinessGate.timeoutSeconds above 3600",
                 kCreate, {{"spec", {{"readinessGate", {{"timeoutSeconds", 3601}}}}}},
                 "spec.readinessGate.timeoutSeconds: Invalid value: 3601: "
                 "spec.readinessGate.timeoutSeconds in body should be less than or equal to "
                 "3600"),
        Template("bad-tpl-golden-id-long", "status.golden.snapshotID longer than 128", kStatus,
                 {{"status", {{"golden", {{"snapshotID", std::string(129, 's')}}}}}},
                 "status.golden.snapshotID: Too long: may not be more than 128 bytes"),
        Template("bad-tpl-golden-taken-at", "status.golden.takenAt not a date-time", kStatus,
                 {{"status", {{"golden", {{"takenAt", "soon"}}}}}},
                 R"(status.golden.takenAt: Invalid value: "soon": golden.takenAt in body must be of type date-time: "soon")"),
        Template("bad-tpl-warm-ready", "status.warmReady negative", kStatus,
                 {{"status", {{"warmReady", -1}}}},
                 "status.warmReady: Invalid value: -1: warmReady in body should be greater than "
                 "or equal to 0"),
    };
  }();
  return *kTable;
}

}  // namespace stasis::testing
