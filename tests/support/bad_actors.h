// The table of invalid Actors (and Workers) shared by the unit test of the C++ validator
// (tests/unit/api_validation_test.cc) and the integration test against the real API server
// (tests/integration/crd_test.cc): each entry must be refused by both, with the same message.
// Invariant: each entry differs from a valid object by one mistake and has exactly one
// expected error (plus, where the server would add it, the "rules were not checked" notice).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace stasis::testing {

inline constexpr char kBadObjectNamespace[] = "stasis-crd-test";

// How the bad object reaches the API server.
enum class BadWrite {
  kCreate,  // POST of the whole object
  kStatus,  // POST of the object without its status, then a merge patch of /status
};

struct BadObject {
  std::string name;  // metadata.name: unique within the table
  std::string what;  // what is wrong, for test output
  BadWrite write;
  nlohmann::json object;  // the whole object, as the validator sees it
  std::string expected;   // FieldError::ToString() of the error, as kubectl prints it
};

// The validator that checks a write the way `write` reaches the server: ValidateActor() for
// kCreate, ValidateActorStatus() for kStatus (and the Worker equivalents).

// A valid Actor named `name` that sets every spec field (and, with status, every status
// field) to a non-default value.
nlohmann::json GoodActor(const std::string& name, bool with_status = false);
nlohmann::json GoodWorker(const std::string& name, bool with_status = false);
// A valid Actor from an OCI image (spec.image) named `name` that sets every field an image
// actor may have (and, with status, the image digests) to a non-default value.
nlohmann::json GoodImageActor(const std::string& name, bool with_status = false);
// A valid clone (spec.source) of the actor kCloneSourceName, with a postRestore hook, named
// `name` (and, with status, status.clonedFrom).
nlohmann::json GoodCloneActor(const std::string& name, bool with_status = false);
inline constexpr char kCloneSourceName[] = "counter";
// A valid actor from the template kTemplateName (spec.templateRef), with a readiness gate,
// named `name`: only templateRef, nodeName, desiredState and the gate set.
nlohmann::json GoodTemplatedActor(const std::string& name);
// A valid ActorTemplate named `name` that sets every spec field (and, with status, every status
// field) to a non-default value.
nlohmann::json GoodActorTemplate(const std::string& name, bool with_status = false);
inline constexpr char kTemplateName[] = "counter-template";
// A valid sha256 digest, "sha256:" and 64 hex digits.
inline constexpr char kGoodImageDigest[] =
    "sha256:4b825dc642cb6eb9a060e54bf8d69288fbee4904a0a94e0a6c4e3ab2b5a4d2f1";

const std::vector<BadObject>& BadActors();
const std::vector<BadObject>& BadWorkers();
// Checked with ValidateActorTemplate() / ValidateActorTemplateStatus().
const std::vector<BadObject>& BadActorTemplates();

}  // namespace stasis::testing
