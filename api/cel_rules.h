// The CRDs' CEL rules (x-kubernetes-validations), each written in C++ beside the expression
// it stands for, with the message the server prints for it. crd_schemas.cc attaches them to
// the schema nodes the CRDs attach them to.
// Invariant: each rule is true exactly when its CEL expression is, for a value that passed
// the schema checks (the validator runs no rule on a value of the wrong type).
#pragma once

#include <vector>

#include "api/openapi_schema.h"

namespace stasis::api::cel {

// self.startsWith('/') and !self.matches('(^|/)[.][.](/|$)'), with the field's two messages.
std::vector<openapi::Rule> PathRules(const char* absolute_message, const char* dotdot_message);
// spec.gpu.cudaCheckpointPath: self != '<dir>' && !self.startsWith('<dir>/'), the directory being
// kCudaCheckpointPrivateDir (the helper's mount there would hide or be hidden by the directory).
openapi::Rule CudaPathOutsidePrivateDir();
// spec.gpu: !has(self.fastSnapshot) || !self.fastSnapshot || (has(self.count) && self.count > 0)
// (fieldPath .fastSnapshot). The has() guards keep the rule true on the schema's default {},
// which the server checks against the rules without defaulting inside it.
openapi::Rule FastSnapshotNeedsGpu();

// spec.nodeName: self == '' || self.matches('^[a-z0-9]…$') (an RFC 1123 subdomain).
openapi::Rule NodeNameOrEmpty();
// Worker spec.nodeName: self.matches('^[a-z0-9]…$').
openapi::Rule NodeName();

// spec.snapshots: onCommit is a subset of onPause; a Data scope needs a dataDirs entry.
openapi::Rule ScopeSubset();
openapi::Rule DataScopeNeedsDirs();

// spec, for actors from OCI images:
//   has(self.templateRef) || has(self.image) != has(self.bundle)
openapi::Rule ImageOrBundle();
//   !has(self.templateRef) || !has(self.image) || !has(self.bundle)
openapi::Rule AtMostImageOrBundle();
//   has(self.image) || !has(self.<field>), with fieldPath .<field> (command, args, env, …)
openapi::Rule NeedsImage(const char* field, const char* message);
//   !has(self.image) || !has(self.runtime) || self.runtime != 'microvm'  (fieldPath .runtime)
openapi::Rule ImageNotMicrovm();
//   !has(self.image) || !has(self.snapshots) || (onPause and onCommit are not 'Data')
openapi::Rule ImageNoDataSnapshots();
// spec.image: self.matches(kImageReferencePattern).
openapi::Rule ImageReference();
// spec.env[].name: self.matches(kEnvNamePattern).
openapi::Rule EnvName();
// spec.imagePullSecrets[].name: self.matches('^[a-z0-9]…$') (an RFC 1123 subdomain).
openapi::Rule PullSecretName();
// spec.workingDir: self.startsWith('/').
openapi::Rule WorkingDirAbsolute();

// Clones:
// spec.source.actorName: self.matches('^[a-z0-9]…$') (an RFC 1123 subdomain).
openapi::Rule SourceActorName();
// spec.source.snapshotID: self.matches(kSnapshotIdPattern) && !self.endsWith('.partial').
openapi::Rule SnapshotId();
// spec: !has(self.source) || !has(self.runtime) || self.runtime == 'gvisor'  (fieldPath .source)
openapi::Rule SourceNeedsGvisor();
// spec, on update: (has(self.source) == has(oldSelf.source) &&
//   (!has(self.source) || self.source == oldSelf.source)) ||
//   (has(self.templateRef) && !has(oldSelf.source))  (fieldPath .source)
openapi::TransitionRule SourceImmutable();
// spec: !has(self.<field>) || !has(self.runtime) || self.runtime == 'gvisor'  (fieldPath .<field>)
openapi::Rule GvisorOnly(const char* field, const char* message);

// Templates:
// spec.templateRef.name: self.matches('^[a-z0-9]…$') (an RFC 1123 subdomain).
openapi::Rule TemplateRefName();
// spec, on update: has(self.<field>) == has(oldSelf.<field>) &&
//   (!has(self.<field>) || self.<field> == oldSelf.<field>)  (fieldPath .<field>)
openapi::TransitionRule FieldImmutable(const char* field, const char* message);
// A template's spec.actor: !has(self.<field>)  (fieldPath .<field>).
openapi::Rule Absent(const char* field, const char* message);
// A template's spec.actor: !has(self.runtime) || self.runtime == 'gvisor'  (fieldPath .runtime).
openapi::Rule RuntimeGvisor(const char* message);
// The whole Actor: !has(self.spec.source) || self.spec.source.actorName != self.metadata.name
// (fieldPath .spec.source.actorName).
openapi::Rule SourceIsNotSelf();

// Worker status: has(self.actorRef) == (self.phase == 'Held').
openapi::Rule WorkerHeldRef();

// self == oldSelf.
openapi::TransitionRule Immutable(const char* message);

}  // namespace stasis::api::cel
