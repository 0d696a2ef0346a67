// The schemas of the stasis CRDs (manifests/crd/actors.stasis.dev.yaml,
// actortemplates.stasis.dev.yaml, workers.stasis.dev.yaml), transcribed into openapi::Schema values with their CEL rules.
// Invariant: each transcription matches its YAML field for field — bounds, enums, patterns,
// required fields, list types and rules; change both together.
#pragma once

#include "api/openapi_schema.h"

namespace stasis::api {

// Built once, on first use; safe to share between threads.
const openapi::Schema& ActorSchema();
const openapi::Schema& ActorTemplateSchema();
const openapi::Schema& WorkerSchema();

}  // namespace stasis::api
