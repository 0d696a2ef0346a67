#include "api/actor.h"

#include <array>
#include <utility>

namespace stasis::api {
namespace {

// One table per enum: the C++ value and its spelling in the CRD.
template <typename E, size_t N>
using Names = std::array<std::pair<E, const char*>, N>;

constexpr Names<Runtime, 2> kRuntimes{
    {{Runtime::kGvisor, "gvisor"}, {Runtime::kMicrovm, "microvm"}}};
constexpr Names<DesiredState, 3> kDesiredStates{{{DesiredState::kRunning, "Running"},
                                                 {DesiredState::kPaused, "Paused"},
                                                 {DesiredState::kSuspended, "Suspended"}}};
constexpr Names<CheckpointPolicy, 2> kPolicies{
    {{CheckpointPolicy::kDirect, "Direct"},
     {CheckpointPolicy::kLeaveRunningThenStop, "LeaveRunningThenStop"}}};
constexpr Names<SnapshotScope, 2> kScopes{
    {{SnapshotScope::kFull, "Full"}, {SnapshotScope::kData, "Data"}}};
constexpr Names<SnapshotTrigger, 2> kTriggers{
    {{SnapshotTrigger::kPause, "Pause"}, {SnapshotTrigger::kSuspend, "Suspend"}}};
constexpr Names<PullPolicy, 3> kPullPolicies{{{PullPolicy::kAlways, "Always"},
                                              {PullPolicy::kIfNotPresent, "IfNotPresent"},
                                              {PullPolicy::kNever, "Never"}}};
constexpr Names<ActorState, 8> kStates{{{ActorState::kUnspecified, "STATUS_UNSPECIFIED"},
                                        {ActorState::kResuming, "STATUS_RESUMING"},
                                        {ActorState::kRunning, "STATUS_RUNNING"},
                                        {ActorState::kSuspending, "STATUS_SUSPENDING"},
                                        {ActorState::kSuspended, "STATUS_SUSPENDED"},
                                        {ActorState::kPausing, "STATUS_PAUSING"},
                                        {ActorState::kPaused, "STATUS_PAUSED"},
                                        {ActorState::kFailed, "STATUS_FAILED"}}};

template <typename E, size_t N>
const char* NameOf(const Names<E, N>& names, E v) {
  for (const auto& [value, name] : names) {
    if (value == v) return name;
  }
  return "";
}

template <typename E, size_t N>
std::optional<E> ValueOf(const Names<E, N>& names, std::string_view s) {
  for (const auto& [value, name] : names) {
    if (s == name) return value;
  }
  return std::nullopt;
}

}  // namespace

const char* ToString(Runtime v) { return NameOf(kRuntimes, v); }
const char* ToString(DesiredState v) { return NameOf(kDesiredStates, v); }
const char* ToString(CheckpointPolicy v) { return NameOf(kPolicies, v); }
const char* ToString(SnapshotScope v) { return NameOf(kScopes, v); }
const char* ToString(SnapshotTrigger v) { return NameOf(kTriggers, v); }
const char* ToString(ActorState v) { return NameOf(kStates, v); }
std::optional<Runtime> ParseRuntime(std::string_view s) { return ValueOf(kRuntimes, s); }
std::optional<DesiredState> ParseDesiredState(std::string_view s) {
  return ValueOf(kDesiredStates, s);
}
std::optional<CheckpointPolicy> ParseCheckpointPolicy(std::string_view s) {
  return ValueOf(kPolicies, s);
}
std::optional<SnapshotScope> ParseSnapshotScope(std::string_view s) { return ValueOf(kScopes, s); }
std::optional<SnapshotTrigger> ParseSnapshotTrigger(std::string_view s) {
  return ValueOf(kTriggers, s);
}
std::optional<ActorState> ParseActorState(std::string_view s) { return ValueOf(kStates, s); }
const char* ToString(PullPolicy v) { return NameOf(kPullPolicies, v); }
std::optional<PullPolicy> ParsePullPolicy(std::string_view s) { return ValueOf(kPullPolicies, s); }

std::string_view ImageTag(std::string_view image) {
  const std::string_view name = image.substr(0, image.find('@'));
  const size_t slash = name.rfind('/');
  const std::string_view last = slash == std::string_view::npos ? name : name.substr(slash + 1);
  const size_t colon = last.rfind(':');
  return colon == std::string_view::npos ? std::string_view() : last.substr(colon + 1);
}

bool ImageHasDigest(std::string_view image) { return image.find('@') != std::string_view::npos; }

PullPolicy EffectivePullPolicy(const ActorSpec& spec) {
  if (spec.image.empty()) return PullPolicy::kNever;
  if (spec.image_pull_policy) return *spec.image_pull_policy;
  const std::string_view tag = ImageTag(spec.image);
  if (tag == "latest" || (tag.empty() && !ImageHasDigest(spec.image))) return PullPolicy::kAlways;
  return PullPolicy::kIfNotPresent;
}

bool IsTransitioning(ActorState s) {
  return s == ActorState::kResuming || s == ActorState::kSuspending || s == ActorState::kPausing;
}

bool IsResting(ActorState s) { return s != ActorState::kRunning && !IsTransitioning(s); }

namespace {

struct StateConditions {
  bool paused;
  bool suspended;
  const char* reason;
  const char* message;
};

StateConditions ConditionsFor(ActorState s) {
  switch (s) {
    case ActorState::kRunning: return {false, false, kReasonRunning, "the actor is running"};
    case ActorState::kResuming: return {false, false, kReasonResuming, "the actor is resuming"};
    case ActorState::kPausing: return {false, false, kReasonPausing, "the actor is being checkpointed"};
    case ActorState::kSuspending: return {false, false, kReasonSuspending, "the actor is being checkpointed"};
    case ActorState::kPaused:
      return {true, false, kReasonPaused, "its snapshot is kept on its node; it holds no worker"};
    case ActorState::kSuspended:
      return {true, true, kReasonSuspended,
              "its snapshot is in the store and no node holds it; this satisfies Paused too"};
    case ActorState::kFailed: return {false, false, kReasonFailed, "the actor failed; see Ready"};
    default: return {false, false, "", ""};
  }
}

void Set(std::vector<Condition>& conditions, const char* type, bool status, const StateConditions& sc,
         int64_t generation, Time now) {
  SetCondition(conditions,
               Condition{type, status ? ConditionStatus::kTrue : ConditionStatus::kFalse, generation, {},
                         sc.reason, sc.message},
               now);
}

}  // namespace

void SetStateConditions(ActorStatus& status, int64_t generation, Time now) {
  const StateConditions sc = ConditionsFor(status.status);
  if (*sc.reason) {
    Set(status.conditions, kConditionPaused, sc.paused, sc, generation, now);
    Set(status.conditions, kConditionSuspended, sc.suspended, sc, generation, now);
  }
  for (Condition& c : status.conditions) c.observed_generation = generation;
}

bool AwaitsTemplate(const ActorSpec& spec) {
  return spec.template_ref && spec.bundle.empty() && spec.image.empty();
}

}  // namespace stasis::api
