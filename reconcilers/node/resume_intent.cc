#include "reconcilers/node/resume_intent.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace stasis {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json ToJson(const ResumeIntent& i) {
  json j = {{"actorUid", i.actor_uid},   {"resourceVersion", i.resource_version}, {"nodeName", i.node_name},
            {"workerName", i.worker_name}, {"sandboxId", i.sandbox_id}};
  if (i.cloned_from) {
    j["clonedFrom"] = {{"actorName", i.cloned_from->actor_name},
                       {"actorUid", i.cloned_from->actor_uid},
                       {"snapshotId", i.cloned_from->snapshot_id}};
  }
  return j;
}

std::optional<ResumeIntent> FromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  ResumeIntent i;
  i.actor_uid = j.value("actorUid", "");
  i.resource_version = j.value("resourceVersion", "");
  i.node_name = j.value("nodeName", "");
  i.worker_name = j.value("workerName", "");
  i.sandbox_id = j.value("sandboxId", "");
  if (auto c = j.find("clonedFrom"); c != j.end() && c->is_object()) {
    i.cloned_from = api::ClonedFrom{c->value("actorName", ""), c->value("actorUid", ""), c->value("snapshotId", "")};
  }
  // Every field a recovery acts on must be there: a record without them speaks for nothing.
  if (i.actor_uid.empty() || i.resource_version.empty() || i.worker_name.empty() || i.sandbox_id.empty()) {
    return std::nullopt;
  }
  return i;
}

}  // namespace

ResumeIntent IntentOf(const api::Actor& before, const api::ActorStatus& resuming) {
  return ResumeIntent{before.metadata.uid,    before.metadata.resource_version, resuming.node_name,
                      resuming.worker_name,   resuming.sandbox_id,              resuming.cloned_from};
}

std::string IntentPath(const std::string& sandbox_root) { return sandbox_root + kIntentSuffix; }

Status WriteIntent(const std::string& path, const ResumeIntent& intent) {
  const std::string tmp = path + ".tmp";
  std::error_code ec;
  // The node's run/ directory, made by the first sandbox's start otherwise.
  fs::create_directories(fs::path(path).parent_path(), ec);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << ToJson(intent).dump() << "\n";
    out.flush();
    if (!out) return Status(Code::kUnavailable, "writing " + tmp + ": " + std::strerror(errno));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status(Code::kUnavailable, "renaming " + tmp + " to " + path + ": " + why);
  }
  return OkStatus();
}

std::optional<ResumeIntent> ReadIntent(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;
  return FromJson(j);
}

void RemoveIntent(const std::string& path) { std::remove(path.c_str()); }

bool IntentApplies(const ResumeIntent& intent, const api::Actor& a) {
  return intent.actor_uid == a.metadata.uid && intent.resource_version == a.metadata.resource_version &&
         api::IsResting(a.status.status);
}

void Overlay(const ResumeIntent& intent, api::Actor& a) {
  a.status.status = api::ActorState::kResuming;
  a.status.node_name = intent.node_name;
  a.status.worker_name = intent.worker_name;
  a.status.sandbox_id = intent.sandbox_id;
  if (intent.cloned_from) a.status.cloned_from = intent.cloned_from;
}

}  // namespace stasis
