#include "snapshots/snapshot_names.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <random>

#include "base/names.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

using snapshot_reason::kInvalidName;

constexpr size_t kMaxSnapshotIdLength = 128;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

bool IsSnapshotId(std::string_view s) {
  if (s.empty() || s.size() > kMaxSnapshotIdLength || IsPartialName(s)) return false;
  if (!std::isalnum(static_cast<unsigned char>(s.front()))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

bool IsPartialName(std::string_view file_name) { return EndsWith(file_name, kPartialSuffix); }

Status CheckNames(const std::string& ns, const std::string& name) {
  if (!IsDnsLabel(ns)) {
    return Status(Code::kInvalidArgument, "invalid namespace \"" + ns + "\" for a snapshot path",
                  kInvalidName);
  }
  if (!IsDnsSubdomain(name)) {
    return Status(Code::kInvalidArgument, "invalid actor name \"" + name + "\" for a snapshot path",
                  kInvalidName);
  }
  return OkStatus();
}

Status CheckNames(const std::string& ns, const std::string& name, const std::string& id) {
  if (Status s = CheckNames(ns, name); !s.ok()) return s;
  if (!IsSnapshotId(id)) {
    return Status(Code::kInvalidArgument, "invalid snapshot id \"" + id + "\"", kInvalidName);
  }
  return OkStatus();
}

std::filesystem::path ActorDir(const std::string& root, const std::string& ns,
                               const std::string& name) {
  return std::filesystem::path(root) / ns / name;
}

std::filesystem::path SnapshotDir(const std::string& root, const std::string& ns,
                                  const std::string& name, const std::string& id) {
  return ActorDir(root, ns, name) / id;
}

std::filesystem::path PartialDir(const std::string& root, const std::string& ns,
                                 const std::string& name, const std::string& id) {
  return ActorDir(root, ns, name) / (id + kPartialSuffix);
}

std::string NewSnapshotId() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  static thread_local std::mt19937 rng{std::random_device{}()};
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, "%06x", static_cast<unsigned>(rng() & 0xffffff));
  return std::string(stamp) + "-" + suffix;
}

}  // namespace stasis
