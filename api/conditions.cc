#include "api/conditions.h"

#include <algorithm>
#include <cctype>

#include "api/names.h"

namespace stasis::api {

const char* ToString(ConditionStatus status) {
  switch (status) {
    case ConditionStatus::kTrue:
      return "True";
    case ConditionStatus::kFalse:
      return "False";
    case ConditionStatus::kUnknown:
      return "Unknown";
  }
  return "Unknown";
}

std::string MetricReason(std::string_view condition_reason) {
  std::string out;
  for (char ch : condition_reason) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isupper(u) && !out.empty()) out.push_back('_');
    out.push_back(static_cast<char>(std::tolower(u)));
  }
  return out;
}

std::optional<ConditionStatus> ParseConditionStatus(std::string_view text) {
  if (text == "True") return ConditionStatus::kTrue;
  if (text == "False") return ConditionStatus::kFalse;
  if (text == "Unknown") return ConditionStatus::kUnknown;
  return std::nullopt;
}

const Condition* FindCondition(const std::vector<Condition>& conditions, std::string_view type) {
  for (const Condition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

Condition* FindCondition(std::vector<Condition>& conditions, std::string_view type) {
  for (Condition& c : conditions) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

std::string TruncateMessage(std::string message, size_t max_bytes) {
  if (message.size() <= max_bytes) return message;
  static constexpr std::string_view kEllipsis = "\xE2\x80\xA6";  // U+2026
  if (max_bytes < kEllipsis.size()) return std::string();
  size_t cut = max_bytes - kEllipsis.size();
  // Step back over continuation bytes so the cut falls on a sequence boundary.
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  message.resize(cut);
  message += kEllipsis;
  return message;
}

bool SetCondition(std::vector<Condition>& conditions, Condition condition, Time now) {
  condition.message = TruncateMessage(std::move(condition.message), kMaxConditionMessageBytes);
  Condition* existing = FindCondition(conditions, condition.type);
  if (existing == nullptr) {
    if (condition.last_transition_time == Time{}) condition.last_transition_time = now;
    conditions.push_back(std::move(condition));
    return true;
  }
  bool changed = false;
  if (existing->status != condition.status) {
    existing->status = condition.status;
    existing->last_transition_time =
        condition.last_transition_time == Time{} ? now : condition.last_transition_time;
    changed = true;
  }
  if (existing->reason != condition.reason) {
    existing->reason = std::move(condition.reason);
    changed = true;
  }
  if (existing->message != condition.message) {
    existing->message = std::move(condition.message);
    changed = true;
  }
  if (existing->observed_generation != condition.observed_generation) {
    existing->observed_generation = condition.observed_generation;
    changed = true;
  }
  return changed;
}

bool RemoveCondition(std::vector<Condition>& conditions, std::string_view type) {
  return std::erase_if(conditions, [&](const Condition& c) { return c.type == type; }) > 0;
}

ConditionStatus GetConditionStatus(const std::vector<Condition>& conditions,
                                   std::string_view type) {
  const Condition* c = FindCondition(conditions, type);
  return c == nullptr ? ConditionStatus::kUnknown : c->status;
}

}  // namespace stasis::api
