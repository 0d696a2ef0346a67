#include "api/cel_rules.h"

#include <initializer_list>
#include <regex>
#include <string>
#include <string_view>

#include "api/names.h"
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

// self.matches(pattern), the pattern compiled once (a const std::regex may be searched from
// several threads at once).
bool Matches(const json& self, const std::regex& re) {
  return std::regex_search(self.get_ref<const std::string&>(), re);
}

// The value at a path of object keys, or nullptr where one is missing (CEL's has() false).
const json* FindPath(const json& root, std::initializer_list<const char*> keys) {
  const json* v = &root;
  for (const char* key : keys) {
    if (!v->is_object()) return nullptr;
    auto it = v->find(key);
    if (it == v->end()) return nullptr;
    v = &*it;
  }
  return v;
}

// has(self.<key>) == has(oldSelf.<key>) && (!has(self.<key>) || self.<key> == oldSelf.<key>)
bool SameOptionalField(const json& self, const json& old_self, const std::string& key) {
  const auto value = self.find(key);
  const auto old_value = old_self.find(key);
  const bool has = value != self.end();
  return has == (old_value != old_self.end()) && (!has || *value == *old_value);
}

bool IsData(const json& snapshots, const char* key) {
  auto it = snapshots.find(key);
  return it != snapshots.end() && *it == "Data";
}

}  // namespace

openapi::Rule ImageOrBundle() {
  return {[](const json& self) {
            return self.contains("templateRef") || self.contains("image") != self.contains("bundle");
          },
          kMessageImageOrBundle, ""};
}

openapi::Rule AtMostImageOrBundle() {
  return {[](const json& self) {
            return !self.contains("templateRef") || !self.contains("image") ||
                   !self.contains("bundle");
          },
          kMessageImageOrBundleWithTemplate, ""};
}

openapi::Rule NeedsImage(const char* field, const char* message) {
  const std::string key = field;
  return {[key](const json& self) { return self.contains("image") || !self.contains(key); },
          message, key};
}

openapi::Rule ImageNotMicrovm() {
  return {[](const json& self) {
            return !self.contains("image") || self.value("runtime", "") != "microvm";
          },
          kMessageImageMicrovm, "runtime"};
}

openapi::Rule ImageNoDataSnapshots() {
  return {[](const json& self) {
            auto snapshots = self.find("snapshots");
            return !self.contains("image") || snapshots == self.end() ||
                   (!IsData(*snapshots, "onPause") && !IsData(*snapshots, "onCommit"));
          },
          kMessageImageDataSnapshots, "snapshots"};
}

openapi::Rule ImageReference() {
  static const std::regex* const kRe = new std::regex(kImageReferencePattern);
  return {[](const json& self) { return Matches(self, *kRe); }, kMessageImageReference, ""};
}

openapi::Rule EnvName() {
  static const std::regex* const kRe = new std::regex(kEnvNamePattern);
  return {[](const json& self) { return Matches(self, *kRe); }, kMessageEnvName, ""};
}

openapi::Rule PullSecretName() {
  return {[](const json& self) { return IsDnsSubdomain(self.get_ref<const std::string&>()); },
          kMessagePullSecretName, ""};
}

openapi::Rule WorkingDirAbsolute() { return {&StartsWithSlash, kMessageWorkingDirAbsolute, ""}; }

std::vector<openapi::Rule> PathRules(const char* absolute_message, const char* dotdot_message) {
  return {{&StartsWithSlash, absolute_message, ""}, {&NoDotDotSegment, dotdot_message, ""}};
}

openapi::Rule CudaPathOutsidePrivateDir() {
  return {[](const json& self) {
            const auto& s = self.get_ref<const std::string&>();
            const std::string dir = kCudaCheckpointPrivateDir;
            return s != dir && s.rfind(dir + "/", 0) != 0;
          },
          kMessageCudaPathPrivateDir, ""};
}

openapi::Rule FastSnapshotNeedsGpu() {
  return {[](const json& self) {
            auto fast = self.find("fastSnapshot");
            if (fast == self.end() || !fast->is_boolean() || !fast->get<bool>()) return true;
            auto count = self.find("count");
            return count != self.end() && count->is_number() && count->get<double>() > 0;
          },
          kMessageFastSnapshotNeedsGpu, "fastSnapshot"};
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

openapi::Rule SourceActorName() {
  return {[](const json& self) { return IsDnsSubdomain(self.get_ref<const std::string&>()); },
          kMessageSourceActorName, ""};
}

openapi::Rule SnapshotId() {
  static const std::regex* const kRe = new std::regex(kSnapshotIdPattern);
  return {[](const json& self) {
            const auto& s = self.get_ref<const std::string&>();
            return Matches(self, *kRe) && !std::string_view(s).ends_with(kPartialSnapshotSuffix);
          },
          kMessageSourceSnapshotId, ""};
}

openapi::Rule SourceNeedsGvisor() { return GvisorOnly("source", kMessageSourceNeedsGvisor); }

openapi::Rule GvisorOnly(const char* field, const char* message) {
  const std::string key = field;
  return {[key](const json& self) {
            return !self.contains(key) || self.value("runtime", "gvisor") == "gvisor";
          },
          message, key};
}

openapi::Rule RuntimeGvisor(const char* message) {
  return {[](const json& self) { return self.value("runtime", "gvisor") == "gvisor"; }, message,
          "runtime"};
}

openapi::Rule Absent(const char* field, const char* message) {
  const std::string key = field;
  return {[key](const json& self) { return !self.contains(key); }, message, key};
}

openapi::TransitionRule SourceImmutable() {
  return {[](const json& self, const json& old_self) {
            const bool set_once = self.contains("templateRef") && !old_self.contains("source");
            return SameOptionalField(self, old_self, "source") || set_once;
          },
          kMessageImmutableSource, "source"};
}

openapi::TransitionRule FieldImmutable(const char* field, const char* message) {
  const std::string key = field;
  return {[key](const json& self, const json& old_self) {
            return SameOptionalField(self, old_self, key);
          },
          message, key};
}

openapi::Rule TemplateRefName() {
  return {[](const json& self) { return IsDnsSubdomain(self.get_ref<const std::string&>()); },
          kMessageTemplateRefName, ""};
}

openapi::Rule SourceIsNotSelf() {
  return {[](const json& self) {
            const json* name = FindPath(self, {"metadata", "name"});
            const json* source = FindPath(self, {"spec", "source", "actorName"});
            return name == nullptr || source == nullptr || *source != *name;
          },
          kMessageSourceIsSelf, "spec.source.actorName"};
}

openapi::Rule WorkerHeldRef() {
  return {[](const json& self) {
            return (self.value("phase", "") == "Held") == self.contains("actorRef");
          },
          kMessageWorkerHeldRef, ""};
}

openapi::TransitionRule Immutable(const char* message) {
  return {[](const json& self, const json& old_self) { return self == old_self; }, message, ""};
}

}  // namespace stasis::api::cel
