// Validation of Actors and Workers in C++, with the same rules and the same messages as the
// API server applies from the CRDs (manifests/crd/): OpenAPI schema checks (types, enums,
// bounds, lengths, patterns, required fields), list-type checks (duplicates), then the CEL
// rules (x-kubernetes-validations) with their human messages. Each error renders, through
// FieldError::ToString(), exactly as `kubectl` prints the server's error, e.g.
//   spec.snapshots.onCommit: Invalid value: onCommit must be a subset of onPause: …
// Like the server, defaults are applied (to a copy) first, and the CEL rules are skipped when
// a "blocking" schema error (unsupported, required, too long, too many, wrong type) was found,
// with the server's notice kCelSkippedNotice appended instead.
// Two entry points per kind, as the server has two: ValidateActor() checks a whole object as
// a create or update of the main resource is checked (this validator also checks status
// there, which the server drops on create); ValidateActorStatus() checks only status, as a
// write to /status is checked, where the server names fields relative to `status` in its
// detail texts ("conditions[0].reason in body should match …").
// Invariants: deterministic order (schema order); every kMessage* below appears verbatim in a
// CRD. Differences from the server, by design: metadata (name, labels) is not validated; a
// value of the wrong type yields only the type error (the server may add a second, format
// error); the server reports in an unspecified order.
#pragma once

#include <nlohmann/json.hpp>

#include "api/actor.h"
#include "api/actor_template.h"
#include "api/field_error.h"
#include "api/worker.h"

namespace stasis::api {

// CEL rule messages, verbatim from the CRDs.
inline constexpr char kMessageBundleAbsolute[] = "bundle must be an absolute path";
inline constexpr char kMessageBundleDotDot[] = "bundle must not contain a '..' segment";
inline constexpr char kMessageCudaPathAbsolute[] = "cudaCheckpointPath must be an absolute path";
inline constexpr char kMessageCudaPathDotDot[] =
    "cudaCheckpointPath must not contain a '..' segment";
inline constexpr char kMessageCudaPathPrivateDir[] =
    "cudaCheckpointPath must not be in /opt/stasis/cuda-checkpoint, where the helper's own "
    "directory is mounted";
inline constexpr char kMessageFastSnapshotNeedsGpu[] =
    "fastSnapshot applies only to GPU actors (gpu.count > 0)";
inline constexpr char kMessageDataDirAbsolute[] = "dataDirs entries must be absolute paths";
inline constexpr char kMessageDataDirDotDot[] = "dataDirs entries must not contain a '..' segment";
inline constexpr char kMessageNodeName[] =
    "nodeName must be a lowercase RFC 1123 subdomain, such as node-a";
inline constexpr char kMessageScopeSubset[] =
    "onCommit must be a subset of onPause: with onPause Data, onCommit must be Data";
inline constexpr char kMessageDataScopeNeedsDirs[] =
    "a Data snapshot scope needs at least one dataDirs entry";
inline constexpr char kMessageWorkerHeldRef[] = "actorRef must be set exactly when phase is Held";
inline constexpr char kMessageImmutableNodeName[] = "nodeName is immutable";
inline constexpr char kMessageImmutableRuntime[] = "runtime is immutable";
// Actors from OCI images.
inline constexpr char kMessageImageOrBundle[] =
    "exactly one of image and bundle must be set: an actor runs an OCI image or an OCI bundle "
    "on the node";
inline constexpr char kMessageImageReference[] =
    "image must be an image reference such as registry.example.com/team/app:v1 or "
    "registry.example.com/team/app@sha256:<64 hex digits>: no whitespace, no uppercase letters "
    "in the repository";
inline constexpr char kMessageImageMicrovm[] =
    "runtime microvm cannot run an image: micro-VM bundles are not OCI images; use spec.bundle";
inline constexpr char kMessageImageDataSnapshots[] =
    "an actor from an image cannot take Data snapshots: the image's root filesystem is shared "
    "read-only between actors, so there is no per-actor directory to archive; use Full";
inline constexpr char kMessageCommandNeedsImage[] =
    "command is only for an actor from an image (spec.image)";
inline constexpr char kMessageArgsNeedsImage[] =
    "args is only for an actor from an image (spec.image)";
inline constexpr char kMessageEnvNeedsImage[] = "env is only for an actor from an image (spec.image)";
inline constexpr char kMessageWorkingDirNeedsImage[] =
    "workingDir is only for an actor from an image (spec.image)";
inline constexpr char kMessagePullPolicyNeedsImage[] =
    "imagePullPolicy is only for an actor from an image (spec.image)";
inline constexpr char kMessagePullSecretsNeedsImage[] =
    "imagePullSecrets is only for an actor from an image (spec.image)";
inline constexpr char kMessageWorkingDirAbsolute[] = "workingDir must be an absolute path";
inline constexpr char kMessageEnvName[] =
    "env names must consist of letters, digits, '_', '-' or '.' and must not start with a digit";
inline constexpr char kMessagePullSecretName[] =
    "imagePullSecrets names must be lowercase RFC 1123 subdomains (the names of Secrets)";
// Clones (spec.source).
inline constexpr char kMessageSourceActorName[] =
    "source.actorName must be a lowercase RFC 1123 subdomain (the name of an Actor in the same "
    "namespace)";
inline constexpr char kMessageSourceSnapshotId[] =
    "source.snapshotID must be a snapshot id: letters, digits, '-', '_' or '.', starting with a "
    "letter or digit, not ending in .partial";
inline constexpr char kMessageImmutableSource[] =
    "source is immutable: set it when the actor is created (an actor with templateRef gets it "
    "once, from the controller)";
inline constexpr char kMessageSourceNeedsGvisor[] =
    "source is only for runtime gvisor: a clone restores its source's gVisor snapshot";
inline constexpr char kMessageSourceIsSelf[] = "an actor cannot be its own source";
inline constexpr char kMessageHooksNeedGvisor[] =
    "hooks run in the sandbox through runsc exec: runtime gvisor only";
inline constexpr char kMessageReadinessGateNeedsGvisor[] =
    "readinessGate runs in the sandbox through runsc exec: runtime gvisor only";
// Templates (spec.templateRef, ActorTemplate).
inline constexpr char kMessageImageOrBundleWithTemplate[] =
    "with templateRef, at most one of image and bundle may be set: the controller copies in the "
    "template's";
inline constexpr char kMessageTemplateRefName[] =
    "templateRef.name must be a lowercase RFC 1123 subdomain (the name of an ActorTemplate in "
    "the same namespace)";
inline constexpr char kMessageImmutableTemplateRef[] =
    "templateRef is immutable: set it when the actor is created";
inline constexpr char kMessageTemplateNodeName[] =
    "nodeName is each actor's own: set it on the actors, not in the template";
inline constexpr char kMessageTemplateDesiredState[] =
    "desiredState is each actor's own: set it on the actors, not in the template";
inline constexpr char kMessageTemplateSource[] =
    "source is not for a template: its actors start from its golden snapshot";
inline constexpr char kMessageTemplateTemplateRef[] =
    "templateRef is for actors: a template cannot refer to a template";
inline constexpr char kMessageTemplateRuntime[] =
    "a template's actors start from its golden snapshot, a gVisor one: runtime gvisor only";
// Added by the server (and here) when CEL rules were skipped because of a blocking error.
inline constexpr char kCelSkippedNotice[] =
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation";

// Patterns of metav1.Condition, verbatim from the CRD.
inline constexpr char kConditionTypePattern[] =
    R"(^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$)";
inline constexpr char kConditionReasonPattern[] = R"(^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$)";

// The CEL regular expressions of spec.image and spec.env[].name, verbatim from the CRD (RE2 and
// ECMAScript read them alike: no escapes, no lookaround). An image reference: an optional
// registry host (one with a '.' or a port, or localhost; it may have uppercase letters), then
// lowercase '/'-separated path components, an optional tag, an optional sha256 digest. A light
// check: images/image_reference.h parses it in full on the node.
inline constexpr char kImageReferencePattern[] =
    "^((localhost|[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?([.][a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)+)"
    "(:[0-9]+)?/|[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?:[0-9]+/)?"
    "[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*"
    "(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$";
inline constexpr char kEnvNamePattern[] = "^[-._a-zA-Z][-._a-zA-Z0-9]*$";
// spec.source.snapshotID, with !self.endsWith('.partial') beside it: snapshot ids as
// snapshots/snapshot_names.h IsSnapshotId() accepts them (the length is the schema's maxLength).
inline constexpr char kSnapshotIdPattern[] = "^[a-zA-Z0-9][-._a-zA-Z0-9]*$";
inline constexpr char kPartialSnapshotSuffix[] = ".partial";

// An Actor as sent to the API server (create or update of the main resource): the whole
// object, status included.
FieldErrors ValidateActor(const nlohmann::json& actor);
FieldErrors ValidateActor(const Actor& actor);  // validates ActorTypedJson(actor)
// Also applies the transition rules (spec.runtime, spec.source and spec.templateRef are
// immutable; source may be set once on an actor with templateRef).
FieldErrors ValidateActorUpdate(const nlohmann::json& old_actor, const nlohmann::json& new_actor);

// As a write of status to /status is checked; no errors when there is no status.
FieldErrors ValidateActorStatus(const nlohmann::json& actor);
FieldErrors ValidateActorStatus(const Actor& actor);

// An ActorTemplate, as ValidateActor() checks an Actor; its status as a write to /status.
FieldErrors ValidateActorTemplate(const nlohmann::json& actor_template);
FieldErrors ValidateActorTemplate(const ActorTemplate& actor_template);  // its typed JSON
FieldErrors ValidateActorTemplateStatus(const nlohmann::json& actor_template);

FieldErrors ValidateWorker(const nlohmann::json& worker);
FieldErrors ValidateWorker(const Worker& worker);
FieldErrors ValidateWorkerStatus(const nlohmann::json& worker);
// Also applies the transition rules (spec.nodeName is immutable).
FieldErrors ValidateWorkerUpdate(const nlohmann::json& old_worker,
                                 const nlohmann::json& new_worker);

}  // namespace stasis::api
