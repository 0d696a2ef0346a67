#include "api/cel_rules.h"

#include <string>
#include <string_view>

#include "api/validation.h"
#include "base/names.h"

namespace stasis::api::cel {
namespace {

using nlohmann::json;

bool StartsWithSlash(const json& self) {
  const auto& s = self.get_ref<const std::string&>();
  return !s.empty() && s[0] == '/';
}

// !self.matches('(^|/)[.][.](/|$)')
bool NoDotDotSegment(const json& self) {
  const auto& s = self.get_ref<const std::string&>();
  size_t start = 0;
  while (true) {
    const size_t end = s.find('/', start);
    const std::string_view segment(s.data() + start,
                                   (end == std::string::npos ? s.size() : end) - start);
    if (segment == "..") return false;
    if (end == std::string::npos) return true;
    start = end + 1;
  }
}

// self == '' || self.matches('^[a-z0-9]…$')
bool IsEmptyOrDnsSubdomain(const json& self) {
  const auto& s = self.get_ref<const std::string&>();
  return s.empty() || IsDnsSubdomain(s);
}

}  // namespace

std::vector<openapi::Rule> PathRules(const char* absolute_message, const char* dotdot_message) {
  return {{&StartsWithSlash, absolute_message, ""}, {&NoDotDotSegment, dotdot_message, ""}};
}

openapi::Rule NodeNameOrEmpty() { return {&IsEmptyOrDnsSubdomain, kMessageNodeName, ""}; }

openapi::Rule NodeName() {
  return {[](const json& self) { return IsDnsSubdomain(self.get_ref<const std::string&>()); },
          kMessageNodeName, ""};
}

openapi::Rule ScopeSubset() {
  return {[](const json& self) {
            return self.value("onPause", "") == "Full" || self.value("onCommit", "") == "Data";
          },
          kMessageScopeSubset, "onCommit"};
}

openapi::Rule DataScopeNeedsDirs() {
  return {[](const json& self) {
            const bool data =
                self.value("onPause", "") == "Data" || self.value("onCommit", "") == "Data";
            auto dirs = self.find("dataDirs");
            return !data || (dirs != self.end() && dirs->is_array() && !dirs->empty());
          },
          kMessageDataScopeNeedsDirs, "dataDirs"};
}

openapi::Rule WorkerHeldRef() {
  return {[](const json& self) {
            return (self.value("phase", "") == "Held") == self.contains("actorRef");
          },
          kMessageWorkerHeldRef, ""};
}

openapi::TransitionRule Immutable(const char* message) {
  return {[](const json& self, const json& old_self) { return self == old_self; }, message};
}

}  // namespace stasis::api::cel
