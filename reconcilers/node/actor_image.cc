// Actors from OCI images (docs/images.md): before a worker is claimed, the image is made
// present in the node's cache (images/image_store.h) — by the digest a Full snapshot was taken
// on when resuming one, else by spec.image under its pull policy — and the actor's bundle is
// written: <root>/image-bundles/<sandbox id>/config.json, the image config with the spec's
// overrides, over the image's shared rootfs (never written: runsc keeps each sandbox's writes
// in its own root, SandboxRef::shared_rootfs).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "base/base64.h"
#include "images/image_reference.h"
#include "images/registry_client.h"
#include "images/runtime_spec.h"
#include "reconcilers/api_resources.h"
#include "reconcilers/node/actor_context.h"
#include "reconcilers/node/actor_reconciler.h"
#include "reconcilers/node/image_failures.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;
using api::ActorState;

inline const ResourceType kSecretType{"", "v1", "secrets", true};

images::PullPolicy PolicyOf(api::PullPolicy p) {
  switch (p) {
    case api::PullPolicy::kAlways: return images::PullPolicy::kAlways;
    case api::PullPolicy::kNever: return images::PullPolicy::kNever;
    case api::PullPolicy::kIfNotPresent: break;
  }
  return images::PullPolicy::kIfNotPresent;
}

}  // namespace

std::vector<images::RegistryAuth> ActorReconciler::PullSecretAuths(Ctx& c) {
  // Only the Secrets the actor names, in its namespace, with `get` alone: the agent cannot list
  // Secrets, and a namespace grants it even that only by a RoleBinding (docs/images.md). An
  // unreadable Secret is a warning, as the kubelet treats it: the pull may not need it, and
  // one that does fails as Unauthorized, its message naming the Secret.
  std::vector<images::RegistryAuth> auths;
  for (const auto& ref : c.a.spec.image_pull_secrets) {
    auto secret = client_.Get(kSecretType, c.a.metadata.namespace_, ref.name);
    std::string problem;
    if (!secret.ok()) {
      problem = secret.status().ToString();
    } else if (secret->value("type", "") != "kubernetes.io/dockerconfigjson") {
      problem = "type is " + secret->value("type", "") + ", not kubernetes.io/dockerconfigjson";
    } else {
      auto decoded = DecodeBase64((*secret)["data"].value(".dockerconfigjson", ""));
      auto parsed = decoded ? images::ParseDockerConfigJson(*decoded)
                            : Result<std::vector<images::RegistryAuth>>(
                                  Status(Code::kInvalidArgument, ".dockerconfigjson is not base64"));
      if (parsed.ok()) {
        auths.insert(auths.end(), parsed->begin(), parsed->end());
      } else {
        problem = parsed.status().message();
      }
    }
    if (!problem.empty()) {
      c.pull_secret_problems.push_back(ref.name + ": " + problem);
      spdlog::warn("pull secret unusable actor={} secret={} error=\"{}\"", c.key, ref.name, problem);
    }
  }
  return auths;
}

std::optional<Result<ReconcileOutcome>> ActorReconciler::PrepareImage(Ctx& c) {
  if (c.a.spec.image.empty()) return std::nullopt;
  if (!options_.image_store) {
    return RefuseImage(c, api::kReasonBadImage, "this node agent runs no actors from images (no image cache)", false);
  }
  auto reference = images::ParseImageReference(c.a.spec.image);
  if (!reference.ok()) return RefuseImage(c, api::kReasonBadImage, reference.status().message(), false);
  images::PullRequest request;
  request.image = *reference;
  request.policy = PolicyOf(api::EffectivePullPolicy(c.a.spec));
  request.deadline = std::chrono::seconds(c.a.spec.timeouts.restore_seconds);
  const auto& snap = c.a.status.latest_snapshot;
  if (snap && snap->scope == api::SnapshotScope::kFull) {
    // runsc restores onto the root filesystem the snapshot was taken on, byte for byte.
    if (snap->image_digest.empty()) {
      return RefuseImage(c, api::kReasonSnapshotImageUnavailable,
                         "snapshot " + snap->id + " was not taken on an image (it records no image digest); "
                         "it can only be restored from the bundle it was taken on", false);
    }
    request.pinned_digest = snap->image_digest;
  } else if (c.clone) {
    request.pinned_digest = c.clone->image_digest;  // the source's image, by the same rule
  }
  request.auths = PullSecretAuths(c);
  if (options_.image_store->WouldPull(request)) {
    // A pull may take minutes: say so before it, while the actor still rests where it was.
    SetCondition(c, api::kConditionProgressing, true, api::kReasonPullingImage,
                 "pulling image " + c.a.spec.image +
                     (request.pinned_digest.empty() ? "" : " at " + request.pinned_digest + ", the snapshot's"));
    if (Status s = WriteStatus(c); !s.ok()) return s;
  }
  auto image = options_.image_store->Ensure(request);
  if (!image.ok()) {
    std::string message = "image " + c.a.spec.image +
                          (request.pinned_digest.empty() ? "" : "@" + request.pinned_digest) + ": " +
                          image.status().message();
    for (const auto& p : c.pull_secret_problems) message += "; pull secret " + p;
    const ImageFailure failure = JudgeImageFailure(image.status(), !request.pinned_digest.empty());
    return RefuseImage(c, failure.reason, message, failure.retry);
  }
  if (!image->cache_hit) {
    Event(c, false, "Pulled", "image " + c.a.spec.image + " pulled: " + image->digest);
    options_.image_store->Collect(options_.images_in_use ? options_.images_in_use() : std::set<std::string>{});
  }
  if (Status s = WriteImageBundle(c, *image); !s.ok()) {
    const ImageFailure failure = JudgeImageFailure(s, /*pinned=*/false);
    return RefuseImage(c, failure.reason, s.message(), failure.retry);
  }
  spdlog::info("image ready actor={} image={} digest={} cache_hit={} pinned={}", c.key, c.a.spec.image,
               image->digest, image->cache_hit, !request.pinned_digest.empty());
  c.image = std::move(*image);
  return std::nullopt;
}

Status ActorReconciler::WriteImageBundle(Ctx& c, const images::LocalImage& image) {
  images::RuntimeSpecRequest r;
  r.image = image.config;
  r.command = c.a.spec.command;
  r.args = c.a.spec.args;
  for (const auto& e : c.a.spec.env) r.env.emplace_back(e.name, e.value);
  r.working_dir = c.a.spec.working_dir;
  r.rootfs = image.rootfs;
  r.hostname = c.a.metadata.name;
  auto spec = images::BuildRuntimeSpec(r);
  if (!spec.ok()) return spec.status();
  const fs::path dir = ImageBundleDir(c.ref);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return Status(Code::kInternal, "cannot create " + dir.string() + ": " + ec.message(),
                  images::pull_reason::kUnpackFailed);
  }
  {
    std::ofstream out(dir / "config.json.tmp", std::ios::trunc);
    out << spec->dump(2);
    out.flush();
    if (!out) {
      return Status(Code::kInternal, "cannot write " + (dir / "config.json.tmp").string(),
                    images::pull_reason::kUnpackFailed);
    }
  }
  fs::rename(dir / "config.json.tmp", dir / "config.json", ec);
  if (ec) {
    return Status(Code::kInternal, "cannot write " + (dir / "config.json").string() + ": " + ec.message(),
                  images::pull_reason::kUnpackFailed);
  }
  c.ref.bundle = dir.string();
  c.ref.shared_rootfs = true;
  return OkStatus();
}

std::string ActorReconciler::ImageBundleDir(const SandboxRef& ref) const {
  return options_.root + "/" + kImageBundlesDir + "/" + ref.id;
}

Result<ReconcileOutcome> ActorReconciler::RefuseImage(Ctx& c, const char* reason, const std::string& message,
                                                      bool retry) {
  // A pull that may succeed later is retried with the resume's backoff, as a Pod's
  // ImagePullBackOff; an image this node can never run waits for a new generation.
  if (const auto* p = api::FindCondition(c.a.status.conditions, api::kConditionProgressing);
      p && p->reason == api::kReasonPullingImage) {
    SetCondition(c, api::kConditionProgressing, false, reason, "the pull failed");
  }
  spdlog::warn("image not ready actor={} image={} reason={} retry={} error=\"{}\"", c.key, c.a.spec.image, reason,
               retry, message);
  return RefuseStart(c, reason, message, retry);
}

}  // namespace stasis
