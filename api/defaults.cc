#include "api/defaults.h"

#include "api/names.h"

namespace stasis::api {
namespace {

using nlohmann::json;

// Drops null members of objects, recursively (list items are kept: a null item is an error
// the validator reports).
void DropNulls(json& j) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end();) {
      if (it->is_null()) {
        it = j.erase(it);
      } else {
        DropNulls(*it);
        ++it;
      }
    }
  } else if (j.is_array()) {
    for (json& item : j) DropNulls(item);
  }
}

void Default(json& obj, const char* key, json value) {
  if (obj.is_object() && !obj.contains(key)) obj[key] = std::move(value);
}

// spec.readinessGate has no default; its bounds are filled in wherever a gate is written.
void ApplyReadinessGateDefaults(json& spec) {
  auto gate = spec.find("readinessGate");
  if (gate == spec.end() || !gate->is_object()) return;
  Default(*gate, "timeoutSeconds", kDefaultReadinessTimeoutSeconds);
  Default(*gate, "periodSeconds", kDefaultReadinessPeriodSeconds);
}

// The defaults of an Actor spec's fields, in an Actor's spec or a template's spec.actor (which
// has no desiredState: each actor sets its own).
void ApplyActorSpecDefaults(json& spec, bool with_desired_state) {
  Default(spec, "runtime", "gvisor");
  if (with_desired_state) Default(spec, "desiredState", "Running");
  Default(spec, "checkpointPolicy", "Direct");
  Default(spec, "gpu", json::object());
  Default(spec, "snapshots", json::object());
  Default(spec, "timeouts", json::object());
  Default(spec["gpu"], "count", 0);
  Default(spec["gpu"], "cudaCheckpointPath", kDefaultCudaCheckpointPath);
  Default(spec["gpu"], "fastSnapshot", false);
  Default(spec["snapshots"], "onPause", "Full");
  Default(spec["snapshots"], "onCommit", "Full");
  Default(spec["timeouts"], "checkpointSeconds", kDefaultTimeoutSeconds);
  Default(spec["timeouts"], "restoreSeconds", kDefaultTimeoutSeconds);
  // spec.hooks has no default: its fields are filled only where the user wrote the hook.
  if (auto hooks = spec.find("hooks"); hooks != spec.end() && hooks->is_object()) {
    if (auto hook = hooks->find("postRestore"); hook != hooks->end()) {
      Default(*hook, "timeoutSeconds", kDefaultHookTimeoutSeconds);
    }
  }
  ApplyReadinessGateDefaults(spec);
}

}  // namespace

void ApplyActorDefaults(json& actor) {
  DropNulls(actor);
  if (!actor.is_object()) return;
  auto spec = actor.find("spec");
  if (spec == actor.end() || !spec->is_object()) return;
  ApplyActorSpecDefaults(*spec, /*with_desired_state=*/true);
}

void ApplyActorTemplateDefaults(json& actor_template) {
  DropNulls(actor_template);
  if (!actor_template.is_object()) return;
  auto spec = actor_template.find("spec");
  if (spec == actor_template.end() || !spec->is_object()) return;
  Default(*spec, "warm", 0);
  ApplyReadinessGateDefaults(*spec);
  if (auto actor = spec->find("actor"); actor != spec->end() && actor->is_object()) {
    ApplyActorSpecDefaults(*actor, /*with_desired_state=*/false);
  }
}

void ApplyWorkerDefaults(json& worker) {
  DropNulls(worker);
  if (!worker.is_object()) return;
  auto status = worker.find("status");
  if (status != worker.end()) Default(*status, "phase", "Free");
}

}  // namespace stasis::api
