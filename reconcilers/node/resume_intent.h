// The resume's intent record: what its RESUMING status write says, kept on the node's disk
// while that write is still on its way to the API server.
//
// A resume overlaps its two API writes (the Worker claim, then RESUMING) with the restore
// itself (resume.cc). What a recovery after the agent's `kill -9` needs before runsc starts —
// which worker and which sandbox the actor is being started in — is then durable here instead
// of in the API: a plain write and rename beside the sandbox's root, which outlives the agent's
// process (the page cache keeps it). No fsync: a crash of the machine takes the sandbox with it,
// and a record that names a sandbox that is not running recovers like a RESUMING status that does
// (the restore is started again).
//
// A later reconcile reads an actor through the record (Overlay) only while the API still holds
// the very version the resume started from: if the RESUMING write landed, the API says it
// itself; if anything else was written meanwhile, the record is stale and ignored.
#pragma once

#include <optional>
#include <string>

#include "api/actor.h"
#include "base/status.h"

namespace stasis {

struct ResumeIntent {
  std::string actor_uid;
  std::string resource_version;  // the version the RESUMING write is conditioned on
  std::string node_name;
  std::string worker_name;
  std::string sandbox_id;
  std::optional<api::ClonedFrom> cloned_from;
  bool operator==(const ResumeIntent&) const = default;
};

// The record's file name beside the sandbox's root: "<root>.resuming".
inline constexpr char kIntentSuffix[] = ".resuming";

// The intent of a resume about to write `resuming` over `before` (the actor as last read).
ResumeIntent IntentOf(const api::Actor& before, const api::ActorStatus& resuming);

// The record's path: beside the sandbox's runsc root, as its owner file is.
std::string IntentPath(const std::string& sandbox_root);

// Writes the record (a temporary file renamed over it, so a reader never sees half of one),
// making its directory if need be.
[[nodiscard]] Status WriteIntent(const std::string& path, const ResumeIntent& intent);
// The record at `path`; nullopt when there is none or it cannot be parsed (a torn write
// cannot happen, see WriteIntent; an unreadable one is ignored like a stale one).
std::optional<ResumeIntent> ReadIntent(const std::string& path);
void RemoveIntent(const std::string& path);

// Whether the record still speaks for `a`: the same actor at the version the resume started
// from, resting or never started (what a resume starts from).
bool IntentApplies(const ResumeIntent& intent, const api::Actor& a);
// `a` as if the record's RESUMING write had landed. Only the fields that write sets.
void Overlay(const ResumeIntent& intent, api::Actor& a);

}  // namespace stasis
