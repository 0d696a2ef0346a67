// The names that become snapshot paths, and the paths they become. A snapshot of actor
// <ns>/<name> with id <id> lives at <root>/<ns>/<name>/<id>/, and is written as
// <root>/<ns>/<name>/<id>.partial/ until it is complete.
// Invariant: nothing becomes a path component before it is checked — the namespace as a DNS
// label, the name as a DNS subdomain (base/names.h), the id by the id rules below — so no
// path built here escapes its root, and no id names a partial directory.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "base/status.h"

namespace stasis {

inline constexpr char kPartialSuffix[] = ".partial";

// A snapshot id: letters, digits, '-', '_' and '.', starting with a letter or digit, at most
// 128 characters, and never ending in ".partial" (that would alias a partial directory).
bool IsSnapshotId(std::string_view s);
bool IsPartialName(std::string_view file_name);

// kInvalidArgument "invalid_name" unless `ns`, `name` (and `id`) are safe path components.
Status CheckNames(const std::string& ns, const std::string& name);
Status CheckNames(const std::string& ns, const std::string& name, const std::string& id);

// <root>/<ns>/<name>, <root>/<ns>/<name>/<id>, <root>/<ns>/<name>/<id>.partial. The caller has
// checked the names.
std::filesystem::path ActorDir(const std::string& root, const std::string& ns,
                               const std::string& name);
std::filesystem::path SnapshotDir(const std::string& root, const std::string& ns,
                                  const std::string& name, const std::string& id);
std::filesystem::path PartialDir(const std::string& root, const std::string& ns,
                                 const std::string& name, const std::string& id);

// A new snapshot id: sortable by time, unique on the node: "20261202T150102Z-3f9a1c".
std::string NewSnapshotId();

}  // namespace stasis
